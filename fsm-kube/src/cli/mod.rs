//! The operator's command line: `run`, `crd`, `rbac`, `manifests`,
//! `diagram`, `status`, `preflight` and `migrate-storage`, for any
//! operator binary in a few lines.
//!
//! `crd` publishes the machine's diagram and store on the CRD
//! ([`published`]), where `kubectl fsm` reads them.
//!
//! ```no_run
//! # mod my { use fsm_kube::prelude::*; use kube::CustomResource;
//! #   #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! #   #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
//! #   pub struct DatabaseSpec { pub size: u32 }
//! #   #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
//! #   pub struct DatabaseStatus { pub fsm: Option<FsmStatus> }
//! #   #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
//! #   #[fsm(resource = Database)]
//! #   pub enum DbState { #[fsm(initial, final, ready)] Ready, #[fsm(failed)] Failed }
//! # }
//! # use my::{Database, DbState};
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use fsm_kube::cli::{Operator, Rule, RunContext, StoreKind};
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     Operator::<DbState>::new("db-operator", StoreKind::Status)
//!         .rule(Rule::new("apps", "deployments", ["get", "list", "watch", "create", "patch"]))
//!         .main(|run: RunContext<DbState>| async move {
//!             // The store `Operator::new` names, the metrics `--metrics-addr`
//!             // serves and, under `--leader-elect`, the hold on the Lease.
//!             let fsm = run.reconciler();
//!             // Survives objects that do not decode (fsm_kube::watch).
//!             run.controller::<Database>()
//!                 .run(fsm.reconcile(), fsm.error_policy(), Arc::new(()))
//!                 .for_each(|_| async {})
//!                 .await;
//!         })
//!         .await
//! }
//! ```
//!
//! ```text
//! $ db-operator crd --printer-columns | kubectl apply -f -
//! $ db-operator crd --webhook-url https://10.0.0.5:9443/convert --webhook-ca-file ca.crt  # several versions, run outside the cluster
//! $ db-operator rbac --leader-elect --lease-namespace ops | kubectl apply -f -
//! $ db-operator diagram --format svg > db.svg   # or --format dot | dot -Tsvg
//! $ db-operator status orders -n shop
//! $ db-operator manifests --image example.io/db-operator:0.1.0 -n ops | kubectl apply -f -
//! $ db-operator preflight            # before an upgrade: exit status 3 if a record cannot run
//! $ db-operator migrate-storage      # every object rewritten at the storage version
//! $ db-operator run --leader-elect --http-addr 0.0.0.0:8080
//! $ db-operator run --webhook-addr 0.0.0.0:9443 --webhook-cert-dir /certs   # the conversion webhook
//! ```
//!
//! An operator serving several versions of its resource declares each
//! with [`Operator::served_version`] (the machine's resource is the hub;
//! [`crate::Versions`]); `crd`, `manifests` and `run` then wire and serve
//! the conversion webhook.
//!
//! An operator adds flags of its own to `run` with
//! [`Operator::with_args`]; [`RunContext::args`] holds them parsed.
//!
//! What each subcommand prints is computed by pure functions that can be
//! called (and tested) without the command line: [`crd_yaml`],
//! [`rbac::manifests`], [`deploy_manifests`], [`diagram`],
//! [`record_view::decode`](crate::records::record_view::decode),
//! [`record_view::render_text`](crate::records::record_view::render_text)
//! and [`preflight::Preflight::judge`]. The clap layer ([`Cli`]) only
//! parses.

mod api_versions;
mod args;
mod commands;
mod connect;
mod context;
mod error;
pub mod manifests;
pub mod migrate_storage;
mod operator;
pub mod preflight;
mod printer_columns;
pub mod rbac;
mod readiness;
mod run;
mod sharded;
mod view;

pub use crate::records::ResourceInfo;
pub use crate::store::StoreKind;
pub use api_versions::ApiVersions;
pub use args::{
    Cli, Command, ConnectArgs, CrdArgs, DiagramArgs, DiagramFormat, LeaderArgs, MigrateStorageArgs,
    OutputFormat, PreflightArgs, RbacArgs, RunArgs, ShardArgs, StatusArgs, ViewAuth, ViewGuardArgs,
    WebhookArgs,
};
pub use commands::{crd_yaml, diagram};
pub use connect::connect;
pub use context::{RunContext, RunOutcome};
pub use error::{BoxError, Error};
pub use manifests::{
    AdmissionMode, ManifestsArgs, PdbApiVersion, deploy_manifests, deploy_manifests_with_webhook,
};
pub use operator::Operator;
pub use printer_columns::add_printer_columns;
pub use rbac::{InvalidRule, OperatorDescription, RbacObject, RbacScope, Rule};
