//! The controller's watch of the operator's resource: caches that keep
//! objects without their `managedFields`, and a watch that survives
//! objects that do not decode as the resource type, reporting each on the
//! object instead of failing the whole list.
//!
//! | function | cache | objects that do not decode |
//! | --- | --- | --- |
//! | [`lean_controller`]`(api, config)` | lean | left out, reported with [`DecodeReporter::new`]'s defaults |
//! | [`DecodeReporter::lean_controller`]`(api, config)` | lean | left out, reported by that reporter |
//! | [`DecodeReporter::controller`]`(api, config)` | full | left out, reported by that reporter |
//! | `kube::runtime::Controller::new(api, config)` | full | stop the whole watch (kube's behaviour) |
//!
//! Take the reporter from the reconciler
//! ([`FsmReconciler::decode_reporter`](crate::FsmReconciler::decode_reporter))
//! so that it writes as the reconciler does.
//!
//! # Lean caches
//! A `kube::runtime::Controller` keeps every watched object in its
//! reflector's store for as long as the object exists. The API server adds
//! `managedFields` to each object: one entry per field manager, with the
//! set of fields it owns, often the largest part of a small custom
//! resource's metadata. The runtime never reads them on the objects it
//! reconciles (the status store patches with a `resourceVersion`
//! precondition, not server-side apply), so an operator can drop them as
//! they arrive, with [`lean_controller`] (or
//! [`DecodeReporter::lean_controller`]) or, for the command line's
//! operators, [`RunContext::lean_controller`](crate::cli::RunContext::lean_controller).
//!
//! ## What it changes
//! - The objects the reconciler receives have `managed_fields: None`.
//!   A handler that reads them (to find who set a field) must use
//!   `Controller::new` instead, or read the object from the API.
//! - The size check before a status commit no longer counts the
//!   `managedFields` bytes of the object; the server still refuses an
//!   object over its limit, and that refusal is reported the same way.
//! - Dependents' watch caches are separate and keep their `managedFields`,
//!   which the dependents' diff needs.
//!
//! The lean controller also survives objects that do not decode as the
//! resource type (below): they are left out and reported, the others
//! reconciled.
//!
//! # Objects that do not decode
//! `kube::runtime::Controller::new` lists and watches the typed resource:
//! one stored object whose spec no longer fits the Rust type (a field
//! whose type changed in an upgrade, a schema loosened and restored, an
//! object written around the schema) makes the whole typed list fail, so
//! no object of the kind is reconciled, the bad one is told nothing, and
//! kube's client logs the whole list response at every retry.
//!
//! The controllers of this module ([`DecodeReporter::controller`],
//! [`DecodeReporter::lean_controller`], [`lean_controller`]) watch the
//! kind as [`DynamicObject`](kube::api::DynamicObject)s (any JSON object with
//! metadata decodes) and decode each object into the typed resource
//! themselves
//! ([`Controller::for_stream`](kube::runtime::Controller::for_stream)):
//!
//! - an object that decodes goes to the controller's cache and queue as
//!   with `Controller::new`;
//! - one that does not is left out of the cache (a copy from before it
//!   stopped decoding is removed, so that no reconcile acts on a spec the
//!   object no longer has), and reported by a [`DecodeReporter`]: one log
//!   line, a `Degraded` condition (reason
//!   [`UNDECODABLE_REASON`](crate::conditions::UNDECODABLE_REASON)) naming
//!   the field the decoding failed on, and one Warning event, once per
//!   object, generation and error;
//! - once it decodes again it is reconciled, and the reconciler's next
//!   write of the conditions replaces the report.
//!
//! [`lean_controller`] and the command line's
//! [`RunContext::lean_controller`](crate::cli::RunContext::lean_controller)
//! and [`RunContext::controller`](crate::cli::RunContext::controller) are
//! built this way; a bare `Controller::new` is not (switch to
//! [`FsmReconciler::decode_reporter`](crate::FsmReconciler::decode_reporter)`().controller(api, config)`).
//!
//! ```
//! # use std::sync::{Arc, Mutex};
//! # use std::time::Duration;
//! use futures::StreamExt;
//! use kube::api::{Api, ApiResource, DynamicObject, PostParams};
//! use kube::runtime::{controller::Action, watcher};
//! use kube::{CustomResource, CustomResourceExt, ResourceExt};
//! use serde_json::json;
//!
//! #[derive(CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! #[kube(group = "example.io", version = "v1", kind = "Knob", namespaced, status = "KnobStatus")]
//! pub struct KnobSpec { size: u32 }
//! #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! pub struct KnobStatus {
//!     conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let cluster = fsm_testkit::TestCluster::embedded();
//! // A schema that lets any spec through, as one loosened in an upgrade.
//! let mut crd = serde_json::to_value(Knob::crd()).unwrap();
//! crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
//!     json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
//! cluster.install_crd(&serde_json::from_value(crd).unwrap()).await.unwrap();
//! let client = cluster.client();
//! let raw: Api<DynamicObject> =
//!     Api::namespaced_with(client.clone(), "default", &ApiResource::erase::<Knob>(&()));
//! for (name, size) in [("bad", json!("three")), ("good", json!(3))] {
//!     let knob = json!({ "apiVersion": "example.io/v1", "kind": "Knob",
//!                        "metadata": { "name": name }, "spec": { "size": size } });
//!     raw.create(&PostParams::default(), &serde_json::from_value(knob).unwrap()).await.unwrap();
//! }
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let reporter = fsm_kube::watch::DecodeReporter::new(client.clone());
//! let knobs = Api::<Knob>::namespaced(client.clone(), "default");
//! let running = tokio::spawn(
//!     reporter
//!         .controller(knobs, watcher::Config::default())
//!         .run(
//!             |knob: Arc<Knob>, seen: Arc<Mutex<Vec<String>>>| async move {
//!                 seen.lock().unwrap().push(knob.name_any());
//!                 Ok::<_, kube::Error>(Action::await_change())
//!             },
//!             |_, _, _| Action::await_change(),
//!             seen.clone(),
//!         )
//!         .for_each(|_| async {}),
//! );
//! // The good Knob is reconciled; the bad one is not, and says why.
//! let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
//! let message = loop {
//!     let bad = raw.get("bad").await.unwrap();
//!     let reconciled = seen.lock().unwrap().len() == 1;
//!     if let Some(message) = bad.data["status"]["conditions"][0]["message"].as_str()
//!         && reconciled
//!     {
//!         break message.to_owned();
//!     }
//!     assert!(tokio::time::Instant::now() < deadline, "no report: {bad:?}");
//!     tokio::time::sleep(Duration::from_millis(20)).await;
//! };
//! assert!(message.contains("spec.size: invalid type: string, expected u32"), "{message}");
//! assert_eq!(*seen.lock().unwrap(), ["good"]);
//! running.abort();
//! # });
//! ```
//!
//! ## What the report says
//! The condition's message names the path of the field (`spec.size`) and
//! serde's message, at most [`MESSAGE_LIMIT`] bytes. serde quotes the
//! offending value (`invalid type: string "three", expected u32`); the
//! reporter withholds it (`invalid type: string, expected u32`) unless
//! [`DecodeReporter::quote_values`] allows it, which the reporters built
//! from a reconciler or a `RunContext` do only when the machine has no
//! sensitive state.
//!
//! ## What it costs
//! Each watch event is decoded twice: from JSON into a `DynamicObject`,
//! then from that into the resource (no second parse of the text). The
//! reporter keeps one entry per object that does not decode.

mod decoding;
mod lean;

pub use decoding::{DecodeReporter, MESSAGE_LIMIT};
pub use lean::{lean_controller, strip_managed_fields};
