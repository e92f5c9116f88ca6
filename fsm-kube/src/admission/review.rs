//! Answering an `AdmissionReview` (`admission.k8s.io/v1`) for the
//! machine's resource: the object's state read from its record, the
//! change judged by [`judge_admission`](super::judge_admission).

use std::marker::PhantomData;

use fsm_core::Fsm;
use kube::Client;
use kube::api::DynamicObject;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, Operation as KubeOperation,
};
use serde_json::Value;

use super::rules::{AdmissionChange, AdmissionOperation, judge_admission};
use crate::KubeResource;
use crate::records::record_view::{location, read_record};
use crate::records::{ReadError, ResourceInfo};
use crate::store::StoreKind;

/// The validating admission webhook of machine `F`'s resource: the rules
/// its states declare (`immutable`, `grow_only`, `refuse_delete`) and
/// `.status.fsm` written by the operator only.
///
/// ```
/// # mod my { use fsm_kube::prelude::*; use kube::CustomResource;
/// #   #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
/// #   #[kube(group = "example.io", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
/// #   pub struct DatabaseSpec { pub storage_gi: u32 }
/// #   #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// #   pub struct DatabaseStatus { pub fsm: Option<FsmStatus> }
/// #   #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
/// #   #[fsm(resource = Database)]
/// #   pub enum DbState {
/// #       #[fsm(initial, ready, final, grow_only("spec.storageGi"))]
/// #       Serving,
/// #       #[fsm(failed)]
/// #       Failed,
/// #   }
/// # }
/// # use my::DbState;
/// use fsm_kube::Admission;
/// use fsm_kube::store::StoreKind;
/// use kube::core::admission::AdmissionReview;
/// use kube::api::DynamicObject;
///
/// # async fn demo() {
/// let admission = Admission::<DbState>::new(StoreKind::Status)
///     .operator_user("system:serviceaccount:ops:db-operator");
/// let record = serde_json::json!({
///     "schemaVersion": 1, "state": "Serving", "enteredAt": "2026-01-01T00:00:00Z",
/// });
/// let object = |size: u32| serde_json::json!({
///     "apiVersion": "example.io/v1", "kind": "Database",
///     "metadata": {"name": "orders", "namespace": "shop", "uid": "u1"},
///     "spec": {"storageGi": size},
///     "status": {"fsm": record},
/// });
/// let review: AdmissionReview<DynamicObject> = serde_json::from_value(serde_json::json!({
///     "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
///     "request": {
///         "uid": "r1",
///         "kind": {"group": "example.io", "version": "v1", "kind": "Database"},
///         "resource": {"group": "example.io", "version": "v1", "resource": "databases"},
///         "name": "orders", "namespace": "shop", "operation": "UPDATE",
///         "userInfo": {"username": "alice"},
///         "object": object(10), "oldObject": object(20),
///     },
/// })).unwrap();
/// let answer = admission.review(review).await;
/// let response = answer.response.unwrap();
/// assert!(!response.allowed);
/// assert_eq!(response.result.code, 422);
/// assert!(response.result.message.contains("spec.storageGi may not shrink"));
/// # }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(demo());
/// ```
pub struct Admission<F> {
    store: StoreKind,
    operators: Vec<String>,
    client: Option<Client>,
    machine: PhantomData<fn() -> F>,
}

impl<F> Admission<F>
where
    F: Fsm,
    F::Resource: KubeResource + kube::CustomResourceExt,
{
    /// The webhook of an operator keeping its records in `store`.
    pub fn new(store: StoreKind) -> Self {
        Admission {
            store,
            operators: Vec::new(),
            client: None,
            machine: PhantomData,
        }
    }

    /// A user name the operator writes as (its ServiceAccount,
    /// `system:serviceaccount:NS:NAME`): its writes to `.status.fsm` are
    /// allowed, everyone else's refused. Without any, `.status.fsm` is
    /// not guarded (the webhook cannot tell the operator's writes from
    /// others').
    #[must_use]
    pub fn operator_user(mut self, user: impl Into<String>) -> Self {
        self.operators.push(user.into());
        self
    }

    /// The client that reads records kept beside the objects (the
    /// ConfigMap and Secret stores); without it, objects of those stores
    /// are judged without a state (only `.status.fsm` is guarded).
    #[must_use]
    pub fn client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The answer to `review`.
    pub async fn review(
        &self,
        review: AdmissionReview<DynamicObject>,
    ) -> AdmissionReview<DynamicObject> {
        let request: AdmissionRequest<DynamicObject> = match review.try_into() {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(%error, "an admission review without a request");
                return AdmissionResponse::invalid(error).into_review();
            }
        };
        self.answer(&request).await.into_review()
    }

    async fn answer(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let response = AdmissionResponse::from(request);
        let operation = match request.operation {
            KubeOperation::Create => AdmissionOperation::Create,
            KubeOperation::Update => AdmissionOperation::Update,
            KubeOperation::Delete => AdmissionOperation::Delete,
            KubeOperation::Connect => return response,
        };
        let state = match self.state(request.old_object.as_ref()).await {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!(
                    name = %request.name,
                    namespace = ?request.namespace,
                    error = %error,
                    "admission: the object's record cannot be read"
                );
                return refused(
                    response,
                    500,
                    "InternalError",
                    format!("the record of {} cannot be read: {error}", request.name),
                );
            }
        };
        let old = request.old_object.as_ref().and_then(as_json);
        let new = request.object.as_ref().and_then(as_json);
        let user = request.user_info.username.as_deref().unwrap_or("");
        let change = AdmissionChange {
            operation,
            subresource: request.sub_resource.as_deref(),
            kind: &request.kind.kind,
            namespace: request.namespace.as_deref(),
            name: &request.name,
            user,
            by_operator: self.operators.is_empty()
                || self.operators.iter().any(|operator| operator == user),
            state: state.as_deref(),
            old: old.as_ref(),
            new: new.as_ref(),
        };
        match judge_admission(F::machine(), &change) {
            Ok(()) => response,
            Err(refusal) => {
                tracing::info!(
                    name = %request.name,
                    namespace = ?request.namespace,
                    user,
                    message = %refusal.message,
                    "admission: refused"
                );
                refused(response, refusal.code, refusal.reason, refusal.message)
            }
        }
    }

    /// The current state of `object` (the object as it was), from its
    /// record; `None` without a record, or where it cannot be read here.
    async fn state(&self, object: Option<&DynamicObject>) -> Result<Option<String>, ReadError> {
        let Some(object) = object else {
            return Ok(None);
        };
        let raw = match (self.store, &self.client) {
            (StoreKind::Status, _) => object
                .data
                .pointer("/status/fsm")
                .filter(|record| !record.is_null())
                .map(|record| fsm_core::RawRecord::Json(record.clone())),
            (StoreKind::Ephemeral, _) | (_, None) => None,
            (_, Some(client)) => {
                let resource = ResourceInfo::of::<F::Resource>();
                let name = object.metadata.name.clone().unwrap_or_default();
                let place = location(
                    client,
                    &resource,
                    F::machine().name(),
                    self.store,
                    object.metadata.namespace.as_deref(),
                    &name,
                )?;
                match read_record(
                    client,
                    &resource,
                    F::machine().name(),
                    self.store,
                    place,
                    object,
                )
                .await
                {
                    Ok((raw, _)) => Some(raw),
                    Err(ReadError::NoRecord(_)) => None,
                    Err(error) => return Err(error),
                }
            }
        };
        // A record this build cannot read has no state to guard: the
        // operator reports it on the object.
        Ok(raw
            .and_then(|raw| raw.decode::<F>().ok())
            .map(|record| record.state))
    }
}

fn as_json(object: &DynamicObject) -> Option<Value> {
    serde_json::to_value(object).ok()
}

fn refused(
    response: AdmissionResponse,
    code: u16,
    reason: &str,
    message: String,
) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.code = code;
    response.result.reason = reason.to_owned();
    response
}
