//! An embedded, in-memory Kubernetes API server for testing operators.
//!
//! [`ApiServer`] serves the Kubernetes API from memory: discovery, the
//! built-in kinds operators touch (Namespace, ConfigMap, Secret, Service,
//! Pod, Event, ServiceAccount, Deployment, StatefulSet, Job, Ingress, Lease, the RBAC
//! kinds), custom resources
//! registered by creating a `CustomResourceDefinition`, get/list/watch with
//! selectors, paging and bookmarks, create/update/patch/delete with the
//! real server's rules (resourceVersion conflicts, the status subresource,
//! `generation`, finalizers), and errors as `Status` objects.
//!
//! Use it in-process through [`ApiServer::client`] (a `kube::Client` over a
//! tower service, no socket), or over HTTP on loopback with
//! [`ApiServer::serve_http`], which writes a kubeconfig that `kubectl` and
//! `kube::Config` accept. The `fsm-apiserver` binary runs it standalone.
//!
//! # With kubectl
//!
//! `kubectl` (tested with 1.32) works against [`ApiServer::serve_http`] or
//! the binary: `apply -f`, `create -f`, `get` (server-side tables, with a
//! CRD's printer columns, `priority > 0` ones only with `-o wide`),
//! `describe` (with the object's Events), `get -o json|yaml|jsonpath`, `get --watch`,
//! `api-resources`, `api-versions`, `patch --type merge`, `label`,
//! `delete`, `explain` (custom kinds, every served version, and the
//! built-in kinds, with their descriptions). Discovery is served aggregated
//! (`apidiscovery.k8s.io/v2`) to clients that ask for it and in the legacy
//! form to others. OpenAPI v3 (`/openapi/v3`) and v2 (`/openapi/v2`, JSON)
//! carry the kinds' schemas ([`openapi`]) and declare `fieldValidation`, so
//! `apply` validates through the server: unknown fields are refused under
//! `--validate=strict`/`true` as on a real server (`Warn`, the default for
//! other clients, sends `Warning` headers; either way they are dropped).
//!
//! # Caveats
//!
//! - Bodies are JSON only: `kubectl create configmap …` and other
//!   generator subcommands send protobuf and get `415`; use `-f` files.
//! - Patches: merge, JSON (with `test`), strategic merge (built-in kinds;
//!   the lists merged by key are listed in [`patch::strategic`]) and
//!   server-side apply with `managedFields` and conflicts; apply
//!   configurations must be JSON (as kube and kubectl send them), and
//!   custom resources' lists merge by key under apply only when their CRD
//!   says `x-kubernetes-list-type: map` (see [`patch::apply`]).
//! - Custom resources are pruned and validated by their CRD's structural
//!   schema ([`schema`]: types, `enum`, `required`, bounds; not `pattern`,
//!   `format`, CEL or defaults). `fieldValidation` checks the body of a
//!   create, update, merge or strategic merge patch against the kind's
//!   published schema (see [`openapi::unknown_fields`]); JSON patches and
//!   apply patches are not checked. No conversion between versions, no
//!   authentication.
//! - Controllers: the namespace controller (a deleted namespace is
//!   `Terminating`, refusing new content, then emptied and removed after
//!   [`ServerConfig::namespace_controller_delay`]), the CRD controller (a
//!   CRD is established at once; deleting it deletes its objects at once),
//!   and the garbage collector (owner references, `propagationPolicy`
//!   `Background`, `Foreground`, `Orphan`, from a `DeleteOptions` body or
//!   query parameters; it runs within the request that removes an owner,
//!   and sweeps dangling owner references shortly after a write).
//! - Built-in kinds are decoded against their k8s-openapi types
//!   ([`typed`]): a wrong JSON type is 400, unknown fields are dropped. Workload controllers only when asked
//!   ([`ApiServer::simulate`], see [`simulation`]).
//! - Faults (errors, latency, dropped watches, `410 Gone`) can be injected
//!   at run time with [`ApiServer::faults`], or over HTTP under
//!   `/testkit/faults` (see [`faults`]).
//! - Pods are deleted without a grace period (no kubelet).
//! - Core `v1` and `events.k8s.io/v1` Events are one storage, each API
//!   with its field names (see [`events`]), so `kubectl describe` lists
//!   the events kube's `Recorder` writes.
//! - RBAC kinds (`rbac.authorization.k8s.io/v1`) and ServiceAccounts are
//!   stored, validated and served, not enforced: every request is allowed
//!   (see [`rbac`]).
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
pub mod debug;
pub mod discovery;
pub mod events;
pub mod faults;
pub mod formats;
pub mod handlers;
pub mod kinds;
pub mod kubeconfig;
pub mod limits;
pub mod log;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod simulation;
pub mod status;
pub mod store;
pub mod table;
pub mod test_cluster;
pub mod typed;
pub mod validation;
pub mod watch;

pub use log::{RequestLog, RequestRecord};
pub use server::{ApiServer, HttpServer, ServeError, ServerConfig};
pub use status::ApiError;
pub use test_cluster::{Backend, ClusterError, REAL_APISERVER_ENV, TestCluster};
