//! The proof's workload: an `Order` custom resource and a five-step machine
//! (`Pending → Reserving → Charging → Shipping → Notifying → Done`) whose
//! `Charging` step makes a **non-idempotent call** (a charge in the
//! [ledger](super::ledger)) guarded the documented way: the request id is
//! checkpointed first, and a later attempt looks the id up before calling
//! (docs/semantics.md, "Making a non-idempotent call safe").
//!
//! Every handler reports its start and end to the ledger, tagged with the
//! replica it runs in, so the harness can check that no object was handled
//! by two replicas at overlapping times.

use std::future::Future;
use std::time::Duration;

use fsm_kube::prelude::*;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;

use super::ledger::{Event, LedgerClient, LedgerError};

/// The operator's name: its Leases' prefix and its shard labels' suffix.
pub const OPERATOR: &str = "shard-proof";

/// The states of a finished workflow's history, in order: the initial
/// entry, then the five transitions.
pub const PATH: [(Option<&str>, &str); 6] = [
    (None, "Pending"),
    (Some("Pending"), "Reserving"),
    (Some("Reserving"), "Charging"),
    (Some("Charging"), "Shipping"),
    (Some("Shipping"), "Notifying"),
    (Some("Notifying"), "Done"),
];

/// Transitions per workflow (the initial entry not counted).
pub const TRANSITIONS: usize = PATH.len() - 1;

/// The final state.
pub const DONE: &str = "Done";

/// An order; its spec only names what is bought.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "proof.operator-fsm.io",
    version = "v1",
    kind = "Order",
    namespaced,
    status = "OrderStatus"
)]
pub struct OrderSpec {
    /// What is bought.
    pub item: String,
}

/// The status: operator-fsm's record and conditions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OrderStatus {
    /// operator-fsm's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsm: Option<FsmStatus>,
    /// operator-fsm's conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
}

impl Order {
    /// The record, when the status holds a readable one.
    #[must_use]
    pub fn record(&self) -> Option<fsm_kube::fsm_core::StateRecord> {
        let fsm = self.status.as_ref()?.fsm.as_ref()?;
        serde_json::from_value(fsm.to_value()).ok()
    }
}

/// What the handlers share: the ledger, this replica's name, and how long
/// each step "works" (a sleep between its start and end reports).
#[derive(Clone, Debug)]
pub struct ProofContext {
    /// The harness's ledger.
    pub ledger: LedgerClient,
    /// This replica's name (its shard Lease's name).
    pub replica: String,
    /// How long each handler works.
    pub work: Duration,
}

/// Why a step failed: the ledger could not be reached, or the checkpoint
/// failed. Both are retried.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// The ledger call failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The request id could not be committed.
    #[error(transparent)]
    Checkpoint(#[from] fsm_kube::fsm_core::CheckpointError),
    /// This replica may no longer act for the object.
    #[error(transparent)]
    AuthorityLost(#[from] fsm_kube::fsm_core::AuthorityLost),
}
impl Classify for ProofError {}

/// The machine.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = Order, context = ProofContext, error = ProofError)]
pub enum OrderState {
    /// Just created.
    #[fsm(initial, handler = pending, next(Reserving))]
    Pending,
    /// Stock is reserved.
    #[fsm(handler = reserving, next(Charging))]
    Reserving,
    /// The customer is charged: the non-idempotent call.
    #[fsm(handler = charging, next(Shipping))]
    Charging {
        /// The charge's request id, committed before the call.
        request_id: Option<String>,
    },
    /// The parcel is shipped.
    #[fsm(handler = shipping, next(Notifying))]
    Shipping,
    /// The customer is told.
    #[fsm(handler = notifying, next(Done))]
    Notifying,
    /// Finished.
    #[fsm(ready, final)]
    Done,
    /// Not reached by this workload (no handler fails for good).
    #[fsm(failed)]
    Failed,
}

type Out = Result<Transition<OrderState>, ProofError>;

/// Runs `body` between a start and an end report. The end is reported
/// whatever `body` returns (an error too); when the handler's future is
/// dropped before it finishes (its controller stopped: the replica's hold
/// on its Lease lapsed, or it is shutting down), a `Cancelled` report is
/// sent from a task of its own, timed at the drop. Only a killed process
/// leaves an interval open.
async fn reported<F>(context: &ProofContext, object: &str, state: &str, body: F) -> Out
where
    F: Future<Output = Out>,
{
    // Armed before the start report: a drop while it is on the wire must
    // report too (the ledger may have recorded it).
    let mut guard = CancelGuard {
        context: Some((context.clone(), object.to_owned(), state.to_owned())),
    };
    context
        .ledger
        .report(Event::Begin, object, state, &context.replica)
        .await?;
    let out = body.await;
    let ended = context
        .ledger
        .report(Event::End, object, state, &context.replica)
        .await;
    // Disarmed only now: a drop while the end report is on the wire must
    // report too (a cancellation after an end is ignored by the checks).
    guard.context = None;
    let next = out?;
    ended?;
    Ok(next)
}

/// Reports `Cancelled` when dropped armed (the handler's future was dropped
/// before its body finished).
struct CancelGuard {
    context: Option<(ProofContext, String, String)>,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some((context, object, state)) = self.context.take() else {
            return;
        };
        let at_us = super::ledger::now_us();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = context
                    .ledger
                    .report_at(Event::Cancelled, &object, &state, &context.replica, at_us)
                    .await;
            });
        }
    }
}

/// A plain step: work, then move to `next`.
async fn plain(context: &ProofContext, object: String, state: &str, next: OrderState) -> Out {
    reported(context, &object, state, async move {
        tokio::time::sleep(context.work).await;
        Ok(Transition::next(next))
    })
    .await
}

/// The context, the object's name and the state of `cx`, taken before any
/// await (a `Step` is not shared across threads).
fn parts<'a>(cx: &Step<'a, OrderState>) -> (&'a ProofContext, String, &'static str) {
    (cx.context(), cx.resource().name_any(), cx.state_name())
}

async fn pending(cx: &mut Step<'_, OrderState>) -> Out {
    let (context, object, state) = parts(cx);
    plain(context, object, state, OrderState::Reserving).await
}

async fn reserving(cx: &mut Step<'_, OrderState>) -> Out {
    let (context, object, state) = parts(cx);
    plain(
        context,
        object,
        state,
        OrderState::Charging { request_id: None },
    )
    .await
}

async fn shipping(cx: &mut Step<'_, OrderState>) -> Out {
    let (context, object, state) = parts(cx);
    plain(context, object, state, OrderState::Notifying).await
}

async fn notifying(cx: &mut Step<'_, OrderState>) -> Out {
    let (context, object, state) = parts(cx);
    plain(context, object, state, OrderState::Done).await
}

/// The charge: commit the request id, then call; a later attempt asks the
/// ledger what became of the committed id before calling again.
async fn charging(cx: &mut Step<'_, OrderState>, request_id: &Option<String>) -> Out {
    let context = cx.context();
    let object = cx.resource().name_any();
    reported(
        context,
        &object,
        "Charging",
        charge(cx, &object, request_id),
    )
    .await
}

async fn charge(cx: &mut Step<'_, OrderState>, object: &str, request_id: &Option<String>) -> Out {
    let context = cx.context();
    let request_id = match request_id {
        // A previous attempt committed its intent: did the call happen?
        Some(id) => {
            if context.ledger.find_charge(id).await? {
                return Ok(Transition::next(OrderState::Shipping));
            }
            id.clone()
        }
        // First attempt: commit the intent before calling.
        None => {
            let id = format!(
                "{}-{}",
                cx.resource().uid().unwrap_or_else(|| object.to_owned()),
                cx.entered_at().as_microsecond()
            );
            cx.checkpoint(OrderState::Charging {
                request_id: Some(id.clone()),
            })
            .await?;
            id
        }
    };
    tokio::time::sleep(context.work).await;
    // Right before the call: this replica still acts for the object.
    cx.ensure_authority()?;
    context
        .ledger
        .charge(object, &request_id, &context.replica)
        .await?;
    Ok(Transition::next(OrderState::Shipping))
}
