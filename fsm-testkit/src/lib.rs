//! An embedded, in-memory Kubernetes API server for testing operators.
//!
//! [`ApiServer`] serves the Kubernetes API from memory: discovery, the
//! built-in kinds operators touch (Namespace, ConfigMap, Secret, Service,
//! Pod, Event (core and `events.k8s.io`), ServiceAccount, Deployment,
//! StatefulSet, Job, Ingress, NetworkPolicy, PodDisruptionBudget, Lease,
//! CustomResourceDefinition, the RBAC kinds, and the create-only
//! TokenReview and SubjectAccessReview; the table with each kind's version,
//! subresources and simulation is the guide's `docs/served-kinds.md`),
//! custom resources
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
//! carry the kinds' schemas and declare `fieldValidation`, so
//! `apply` validates through the server: unknown fields are refused under
//! `--validate=strict`/`true` as on a real server (`Warn`, the default for
//! other clients, sends `Warning` headers; either way they are dropped).
//!
//! # Caveats
//!
//! - Bodies are JSON, YAML or Kubernetes protobuf (the built-in kinds; a
//!   custom resource's protobuf body is refused as the real server refuses
//!   it), so `kubectl create configmap …` and the other generator
//!   subcommands, which send protobuf, work; answers are JSON unless
//!   protobuf is all a client accepts ([`protobuf`]).
//! - Patches: merge, JSON (with `test`), strategic merge (built-in kinds)
//!   and server-side apply with `managedFields` and conflicts, lists
//!   merging as the built-in types' OpenAPI extensions say (read from
//!   kube-apiserver 1.20: merge keys, list-map keys, sets, atomic maps,
//!   the real server's element order) and as a CRD's
//!   `x-kubernetes-list-type` says; apply configurations are YAML or JSON.
//! - Custom resources are pruned and validated by their CRD's structural
//!   schema (types, `enum`, `required`, bounds; not `pattern`,
//!   `format`, CEL or defaults). `fieldValidation` checks the body of a
//!   create, update, merge or strategic merge patch against the kind's
//!   published schema; JSON patches and
//!   apply patches are not checked. No authentication.
//! - Several versions of a CRD: each served at its path, stored at the
//!   storage version; `conversion.strategy: Webhook` calls the CRD's
//!   conversion webhook as 1.20 does, and the webhooks of
//!   `MutatingWebhookConfiguration`s and `ValidatingWebhookConfiguration`s
//!   are called on the writes they match; see docs/testing.md.
//! - Controllers: the namespace controller (a deleted namespace is
//!   `Terminating`, refusing new content, then emptied and removed after
//!   [`ServerConfig::namespace_controller_delay`]), the CRD controller (a
//!   CRD is established at once; deleting it deletes its objects at once),
//!   and the garbage collector (owner references, `propagationPolicy`
//!   `Background`, `Foreground`, `Orphan`, from a `DeleteOptions` body or
//!   query parameters; it runs within the request that removes an owner,
//!   and sweeps dangling owner references shortly after a write).
//! - Built-in kinds are decoded against their k8s-openapi types: a wrong
//!   JSON type is 400, unknown fields are dropped. Workload controllers only when asked
//!   ([`ApiServer::simulate`], see [`simulation`]).
//! - Faults (errors, latency, dropped watches, `410 Gone`) can be injected
//!   at run time with [`ApiServer::faults`], or over HTTP under
//!   `/testkit/faults` (see [`faults`]).
//! - Pods are deleted without a grace period (no kubelet).
//! - Core `v1` and `events.k8s.io/v1` Events are one storage, each API
//!   with its field names, so `kubectl describe` lists
//!   the events kube's `Recorder` writes.
//! - RBAC kinds (`rbac.authorization.k8s.io/v1`) and ServiceAccounts are
//!   stored, validated and served, not enforced: every request is allowed.
//!   They can be asked about, as of a 1.20 cluster: each ServiceAccount
//!   gets a token Secret (the token controller), `TokenReview` reviews its
//!   token, and `SubjectAccessReview` evaluates the stored RBAC objects
//!   (without the real server's bootstrap roles or ClusterRole
//!   aggregation); both are create-only.
//!
//! # Public API
//!
//! - [`ApiServer`] (with [`ServerConfig`]), and [`HttpServer`] /
//!   [`ServeError`] for serving it over HTTP;
//! - [`RequestLog`] and its [`RequestRecord`]s: what clients asked;
//! - [`ApiError`] (with [`Cause`] and [`Subject`]): a failed request as the
//!   server answers it, which the [`cluster`] returns;
//! - [`TestCluster`]: the same tests against this server or a real one
//!   (named by [`REAL_APISERVER_ENV`]);
//! - modules for what has more to it: [`faults`] (fault injection),
//!   [`simulation`] (workload controllers), [`debug`] (the request log over
//!   HTTP), [`protobuf`] (the Kubernetes protobuf codec, for clients that
//!   speak it), [`cluster`] (the stored objects, for tests that act without
//!   a request, see [`ApiServer::cluster`]).
//!
//! Everything else is internal.
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

// Module map, from the bottom up: a module uses only modules listed
// before it (the workspace's `tests/tests/module_graph.rs` fails on a
// cycle).
//
// 1. Leaves: `status` (errors as `Status` documents, built in one place),
//    `log` (the request log), `time`, `base64`, `formats`, `kubeconfig`, `quantity`
//    (`resource.Quantity`'s canonical form).
// 2. `faults`: the fault model, what to inject into which requests
//    (→ log, status). `resources`: the kinds served and their registry.
//    `patch`: the patch types (→ status). `protobuf`: the codec (→ base64).
// 3. The kinds' rules, each over `resources`: `store`, `validation`,
//    `crd`, `limits`, `discovery`, `events` (→ validation), `rbac`
//    (→ validation), `schema` (→ store), `kinds` (the kinds' defaults),
//    `selectors` (→ events), `table` (→ events); `reviews` (the review
//    resources' paths and bodies), `authn` (ServiceAccount tokens,
//    TokenReview → store, reviews) and `authz` (RBAC evaluation,
//    SubjectAccessReview → store, reviews). Then `builtins`: the table of
//    the built-in kinds, one entry per kind with its type and rules
//    (→ kinds, events, rbac, validation, limits), which `typed` (decoding
//    against the kinds' types) and `openapi` (→ store) read.
// 4. `cluster`: the verbs on the store, the namespace, CRD and token
//    controllers, garbage collection (→ the kinds' rules, authn).
// 5. `watch` (→ cluster, selectors, table); `state`: what every request
//    shares (→ cluster, faults, log).
// 6. `handlers`: HTTP, the API's request pipeline and the fault API
//    (→ state, watch, …); `simulation`: the workload controllers
//    (→ state, cluster).
// 7. `server`: `ApiServer` (→ handlers, simulation, state).
// 8. `debug` and `test_cluster` (→ server).
//
// The crate root only declares the modules and re-exports the public API.

mod authn;
mod authz;
mod base64;
mod builtins;
pub mod cluster;
mod controller_revisions;
mod crd;
mod crd_conversion;
mod crd_rules;
mod crd_storage;
mod cron_schedule;
mod custom_metadata;
pub mod debug;
mod defaults;
mod discovery;
mod events;
pub mod faults;
mod formats;
mod handlers;
mod immutable;
mod kind_defaults;
mod kinds;
mod kubeconfig;
mod label_syntax;
mod limits;
mod local_reviews;
mod log;
mod openapi;
mod patch;
pub mod protobuf;
mod quantity;
mod rbac;
mod resources;
mod reviews;
mod schema;
mod selectors;
mod self_reviews;
mod server;
pub mod simulation;
mod state;
mod status;
mod store;
mod table;
mod table_cells;
mod test_cluster;
mod time;
mod typed;
mod validation;
mod watch;
mod webhook_configurations;
mod webhooks;

pub use discovery::KUBERNETES_MINOR;
pub use log::{RequestLog, RequestRecord};
pub use server::{ApiServer, HttpServer, ServeError};
pub use state::ServerConfig;
pub use status::{ApiError, Cause, Subject};
pub use test_cluster::{Backend, ClusterError, REAL_APISERVER_ENV, TestCluster};

/// Internals that the crate's integration tests, the workspace's benchmark
/// driver and the conformance suite reach for (parsers fuzzed on their own,
/// the watch machinery, how a request is described). Not a stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::base64::decode as base64_decode;
    pub use crate::base64::encode as base64;
    pub use crate::handlers::{describe, route};
    pub use crate::selectors::{FieldSelector, LabelRequirement, LabelSelector};
    pub use crate::watch::{Watch, WatchRequest};

    /// The patch types and their parsers.
    pub mod patch {
        pub use crate::patch::{PatchType, apply_patch, json, merge, strategic};
        pub use crate::resources::ResourceDef;

        /// The built-in kind named `kind` (the first of that name in the
        /// kinds' table), for patching an object of it.
        #[must_use]
        pub fn builtin(kind: &str) -> Option<&'static ResourceDef> {
            crate::builtins::table()
                .iter()
                .find(|k| k.def.kind == kind)
                .map(|k| &k.def)
        }

        /// A custom resource's definition (`example.io/v1` `Widget`), for
        /// patching an object of a CRD's kind.
        #[must_use]
        pub fn custom() -> ResourceDef {
            let mut def = ResourceDef::builtin("example.io", "v1", "Widget", "widgets", true);
            def.custom = true;
            def
        }
    }
}
