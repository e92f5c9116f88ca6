//! The context a handler runs in: the object, the operator's context, time,
//! attempt bookkeeping, and checkpoints.

use std::time::Duration;

use crate::{
    authority::Authority, authority::AuthorityLost, clock::Clock, clock::Timestamp,
    extensions::Extensions, fsm::Fsm, future::BoxFuture,
};

/// Why a checkpoint could not be committed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Checkpoints replace the data of the current state; another variant
    /// was given.
    #[error("a checkpoint must stay in state {current}, not move to {given}")]
    WrongState {
        /// The state the handler runs in.
        current: &'static str,
        /// The state given to `checkpoint`.
        given: &'static str,
    },
    /// Checkpoints are only possible in handlers, not in compensation or
    /// cleanup.
    #[error("checkpoints are only possible inside a state handler")]
    Unavailable,
    /// Someone else changed the record since it was loaded; the handler
    /// should stop (the reconcile is retried with fresh data).
    #[error("the record changed since it was loaded; the step will be retried")]
    Conflict,
    /// The state could not be encoded.
    #[error("the checkpointed state could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The store failed.
    #[error("the checkpoint could not be stored")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// This process may no longer act (its Lease expired, say): the
    /// handler must stop before the call the checkpoint prepared. Checked
    /// before the write and again after it.
    #[error(transparent)]
    AuthorityLost(#[from] AuthorityLost),
}

impl crate::classify::Classify for CheckpointError {}

/// Fields of the object's `status` that a step publishes with its commit
/// (see [`Step::publish_status`]): top-level keys of the status, as JSON.
pub type StatusFields = serde_json::Map<String, serde_json::Value>;

/// Why status fields could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The fields did not serialize to a JSON object (a map of status
    /// fields).
    #[error("published status must be a JSON object of status fields, not {0}")]
    NotAnObject(&'static str),
    /// The fields could not be serialized.
    #[error("the published status could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The field belongs to the runtime: the record (`fsm`) or the
    /// conditions it maintains.
    #[error("status field `{0}` belongs to the runtime and cannot be published")]
    Reserved(String),
}

impl crate::classify::Classify for PublishError {
    fn class(&self) -> crate::classify::ErrorClass {
        // The same fields fail the same way on every attempt.
        crate::classify::ErrorClass::Permanent
    }
}

/// Status keys the runtime writes itself.
pub const RESERVED_STATUS_FIELDS: [&str; 2] = ["fsm", "conditions"];

/// Commits new data for the current state while a handler runs.
///
/// The engine implements it over its store; the [`Harness`](crate::Harness)
/// records checkpoints for assertions.
pub trait Checkpointer<S>: Send {
    /// Commits `state` (same variant, new data) as the current state.
    fn checkpoint(&mut self, state: S) -> BoxFuture<'_, Result<(), CheckpointError>>;
}

/// What a handler, compensation or cleanup function is given.
///
/// # Guarantees
/// A handler runs at least once per attempt: a crash between the handler's
/// side effects and the commit of its transition runs it again. Handlers
/// must therefore be idempotent; for a non-idempotent call, record the
/// intent first with [`Step::checkpoint`] and make the call with that id.
pub struct Step<'a, S: Fsm> {
    pub(crate) resource: &'a S::Resource,
    pub(crate) context: &'a S::Context,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) state: &'static str,
    pub(crate) attempt: u32,
    pub(crate) entered_at: Timestamp,
    pub(crate) spec_snapshot: Option<&'a serde_json::Value>,
    pub(crate) checkpointer: Option<&'a mut dyn Checkpointer<S>>,
    pub(crate) authority: Option<&'a dyn Authority>,
    pub(crate) published: Option<StatusFields>,
    pub(crate) extensions: Option<&'a Extensions>,
}

impl<'a, S: Fsm> Step<'a, S> {
    /// A step for running a handler directly (tests, custom runtimes).
    /// Checkpoints fail with [`CheckpointError::Unavailable`] unless a
    /// checkpointer is attached with [`Step::with_checkpointer`].
    pub fn new(
        resource: &'a S::Resource,
        context: &'a S::Context,
        clock: &'a dyn Clock,
        state: &'static str,
    ) -> Self {
        Step {
            resource,
            context,
            clock,
            state,
            attempt: 0,
            entered_at: clock.now(),
            spec_snapshot: None,
            checkpointer: None,
            authority: None,
            published: None,
            extensions: None,
        }
    }

    /// Sets the attempt number and entry time the handler sees.
    pub fn with_attempt(mut self, attempt: u32, entered_at: Timestamp) -> Self {
        self.attempt = attempt;
        self.entered_at = entered_at;
        self
    }

    /// Sets the spec the workflow started from, as
    /// [`Step::spec_snapshot`] returns it (machines with `snapshot_spec`).
    pub fn with_spec_snapshot(mut self, spec: Option<&'a serde_json::Value>) -> Self {
        self.spec_snapshot = spec;
        self
    }

    /// Attaches the checkpointer that [`Step::checkpoint`] commits through.
    pub fn with_checkpointer(mut self, checkpointer: &'a mut dyn Checkpointer<S>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// Attaches the authority that [`Step::ensure_authority`] and
    /// [`Step::checkpoint`] consult.
    pub fn with_authority(mut self, authority: &'a dyn Authority) -> Self {
        self.authority = Some(authority);
        self
    }

    /// Attaches the extensions that [`Step::extension`] reads.
    pub fn with_extensions(mut self, extensions: &'a Extensions) -> Self {
        self.extensions = Some(extensions);
        self
    }

    /// The extension of type `T` the runtime installed
    /// ([`Engine::with_extension`](crate::Engine::with_extension),
    /// [`Harness::with_extension`](crate::Harness::with_extension)), if
    /// any: how a runtime gives handlers what fsm-core knows nothing of.
    pub fn extension<T: std::any::Any + Send + Sync>(&self) -> Option<&'a T> {
        self.extensions.and_then(Extensions::get::<T>)
    }

    /// `Ok` while this process may still act for the object: call it right
    /// before a call that must not happen twice. Without leader election
    /// (no [`Authority`]) it is always `Ok`.
    ///
    /// # Errors
    /// [`AuthorityLost`]: stop; another replica took over, and the engine
    /// commits nothing more for this attempt.
    pub fn ensure_authority(&self) -> Result<(), AuthorityLost> {
        self.authority.map_or(Ok(()), Authority::check)
    }

    /// The object being reconciled.
    pub fn resource(&self) -> &'a S::Resource {
        self.resource
    }

    /// The operator's shared context (clients, configuration).
    pub fn context(&self) -> &'a S::Context {
        self.context
    }

    /// The current time, from the engine's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The name of the state being handled.
    pub fn state_name(&self) -> &'static str {
        self.state
    }

    /// How many attempts of this state failed before this one (0 on the
    /// first attempt).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// When the machine entered the current state.
    pub fn entered_at(&self) -> Timestamp {
        self.entered_at
    }

    /// How long the machine has been in the current state.
    pub fn time_in_state(&self) -> Duration {
        crate::clock::until(self.entered_at, self.now())
    }

    /// The spec the workflow started from, when the machine snapshots it.
    pub fn spec_snapshot(&self) -> Option<&'a serde_json::Value> {
        self.spec_snapshot
    }

    /// Publishes fields of the object's `status` (an output, a URL, a
    /// count) **in the same write** as the step's commit, so that one step
    /// stays one write and the handler never writes its own object.
    ///
    /// `fields` must serialize to a JSON object; its keys are top-level
    /// status fields, written as a JSON merge patch (a `null` value removes
    /// a field). Several calls in one step merge key by key, the later
    /// winning. The
    /// fields are written whatever the handler returns (a transition, a
    /// wait or an error), with the record, by every store that keeps an
    /// object: the status store in its one status patch, the ConfigMap and
    /// Secret stores with the conditions they write to the object's
    /// status. In-memory stores keep them for tests
    /// ([`EphemeralStore::status`](crate::EphemeralStore::status)). A
    /// step that publishes what the object already shows writes nothing
    /// more.
    ///
    /// ```
    /// # use fsm_core::{Step, ManualClock, Fsm};
    /// # fn demo<S: Fsm>(cx: &mut Step<'_, S>) -> Result<(), fsm_core::PublishError> {
    /// cx.publish_status(serde_json::json!({ "endpoint": "db-1.internal:5432" }))?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`PublishError`]: not an object, not serializable, or a field the
    /// runtime owns (`fsm`, `conditions`). Permanent: the same fields fail
    /// the same way again.
    pub fn publish_status(&mut self, fields: impl serde::Serialize) -> Result<(), PublishError> {
        let value = serde_json::to_value(fields).map_err(PublishError::Encode)?;
        let serde_json::Value::Object(fields) = value else {
            return Err(PublishError::NotAnObject(json_kind(&value)));
        };
        if let Some(reserved) = fields
            .keys()
            .find(|k| RESERVED_STATUS_FIELDS.contains(&k.as_str()))
        {
            return Err(PublishError::Reserved(reserved.clone()));
        }
        let published = self.published.get_or_insert_with(StatusFields::new);
        for (key, value) in fields {
            published.insert(key, value);
        }
        Ok(())
    }

    /// The status fields published so far in this step (tests of a
    /// handler run by hand).
    pub fn published_status(&self) -> Option<&StatusFields> {
        self.published.as_ref()
    }

    /// Takes the status fields published in this step, for the commit.
    pub(crate) fn take_published(&mut self) -> Option<StatusFields> {
        self.published.take()
    }

    /// Commits new data for the current state before the handler goes on,
    /// typically the id of a request it is about to make, so that a crash
    /// after the request finds the id.
    ///
    /// # Errors
    /// [`CheckpointError`]: the state is another variant, the step has no
    /// checkpointer (compensation, cleanup), or the store refused the write.
    /// A conflict means the record moved on: return the error.
    /// [`CheckpointError::AuthorityLost`] (checked before the write and
    /// after it, with leader election) means another replica may be acting
    /// for the object: return the error before making the call.
    pub async fn checkpoint(&mut self, state: S) -> Result<(), CheckpointError> {
        let given = state.state_name();
        if given != self.state {
            return Err(CheckpointError::WrongState {
                current: self.state,
                given,
            });
        }
        let Some(checkpointer) = self.checkpointer.as_deref_mut() else {
            return Err(CheckpointError::Unavailable);
        };
        if let Some(authority) = self.authority {
            authority.check()?;
        }
        checkpointer.checkpoint(state).await?;
        // The write may have taken long enough for the Lease to expire: the
        // call the checkpoint prepared must then not be made.
        self.ensure_authority()?;
        Ok(())
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
