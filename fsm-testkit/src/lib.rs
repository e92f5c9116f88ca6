//! An embedded, in-memory Kubernetes API server for testing operators.
//!
//! [`ApiServer`] serves the Kubernetes API from memory: discovery, the
//! built-in kinds operators touch (Namespace, ConfigMap, Secret, Service,
//! Pod, Event, Deployment, StatefulSet, Job, Lease), custom resources
//! registered by creating a `CustomResourceDefinition`, get/list/watch with
//! selectors, paging and bookmarks, create/update/merge-patch/delete with the
//! real server's rules (resourceVersion conflicts, the status subresource,
//! `generation`, finalizers), and errors as `Status` objects.
//!
//! Use it in-process through [`ApiServer::client`] (a `kube::Client` over a
//! tower service, no socket), or over HTTP on loopback with
//! [`ApiServer::serve_http`], which writes a kubeconfig that `kubectl` and
//! `kube::Config` accept. The `fsm-apiserver` binary runs it standalone.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube::Error> {
//! use fsm_testkit::ApiServer;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, ListParams};
//!
//! let server = ApiServer::new();
//! let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
//! let list = cms.list(&ListParams::default().labels("app=web")).await?;
//! assert!(list.items.is_empty());
//! # Ok(()) }
//! ```

pub mod cluster;
pub mod crd;
pub mod discovery;
pub mod handlers;
pub mod kinds;
pub mod kubeconfig;
pub mod log;
pub mod openapi;
pub mod patch;
pub mod resources;
pub mod selectors;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

pub use log::{RequestLog, RequestRecord};
pub use server::{ApiServer, HttpServer, ServeError, ServerConfig};
pub use status::ApiError;
