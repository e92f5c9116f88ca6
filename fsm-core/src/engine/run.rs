//! The middle phase of a reconcile: run what the plan calls for (a handler,
//! a compensation, the cleanup, or nothing) and have the [`Decider`] say
//! what came of it.

use tracing::Instrument;

use crate::engine::apply::InFlight;
use crate::engine::describe::describe_error;
use crate::engine::{Decider, Decision, Outcome, Plan, ReconcileError, UnwindResult};
use crate::fsm::{CheckpointError, Checkpointer, StatusFields};
use crate::record::StateRecord;
use crate::store::{Commit, ObjectKey, StateStore, StoreError, Version};
use crate::{
    authority::AuthorityLost, classify::Classify, clock::Timestamp, fsm::Fsm, fsm::Step,
    future::BoxFuture,
};

impl<S: Fsm> InFlight<'_, S> {
    /// Runs what `planned` calls for and decides, at `now` (or, after user
    /// code, at the time it finished). `None` ends the reconcile: there is
    /// no record to decide about.
    ///
    /// # Errors
    /// [`ReconcileError`]: lost authority, a checkpoint conflict, a store
    /// failure, a record that no longer decodes, or a machine bug.
    pub(super) async fn run(
        &mut self,
        planned: Plan,
        now: Timestamp,
    ) -> Result<Option<Decision>, ReconcileError> {
        let engine = self.engine;
        let decider = engine.decider(now);
        self.unwinding = matches!(
            planned,
            Plan::Compensate | Plan::Cleanup | Plan::FinishUnwind
        );
        let Some(mut current) = self.record.take() else {
            // Without a record, the plan is to start or to release.
            return Ok(match planned {
                Plan::Start => Some(decider.start::<S>(self.observed)?),
                Plan::Release => {
                    self.release_unrecorded();
                    None
                }
                _ => None,
            });
        };
        let decision = match planned {
            Plan::Start => decider.start::<S>(self.observed)?,
            Plan::Release => decider.release(current),
            Plan::BeginDeletion => decider.begin_deletion(current),
            Plan::Compensate => {
                let result = self.compensate(&current).await?;
                self.after_user_code(decider).after_compensation::<S>(
                    current,
                    result,
                    self.observed,
                )?
            }
            Plan::Cleanup => {
                let result = self.cleanup(&current).await?;
                self.after_user_code(decider).after_cleanup(current, result)
            }
            Plan::FinishUnwind => {
                decider.end_unwind::<S>(current, Vec::new(), true, self.observed)?
            }
            Plan::SpecChanged(generation) => {
                decider.spec_changed::<S>(current, generation, self.observed)?
            }
            Plan::TimedOut => decider.timed_out(current)?,
            Plan::Backoff(wait) => Decision::unchanged(current, Some(wait), Vec::new()),
            Plan::Rest | Plan::Paused => Decision::unchanged(current, None, Vec::new()),
            Plan::Command(command) => decider.command::<S>(current, &command, self.observed)?,
            Plan::RunHandler => {
                let outcome = self.handle(&mut current).await?;
                self.after_user_code(decider)
                    .after_handler::<S>(current, outcome)?
            }
        };
        Ok(Some(decision))
    }

    /// The decider for what user code's result leads to, at the time it
    /// finished: a retry's backoff, an entry time and a history entry
    /// count from then, not from before a long (or timed-out) call.
    fn after_user_code<'d>(&self, decider: Decider<'d>) -> Decider<'d> {
        Decider {
            now: self.engine.clock.now(),
            ..decider
        }
    }

    /// Fails with [`ReconcileError::AuthorityLost`] when the authority says
    /// this process may no longer act.
    fn ensure_authority(&self) -> Result<(), AuthorityLost> {
        self.engine
            .authority
            .as_deref()
            .map_or(Ok(()), crate::authority::Authority::check)
    }

    /// After user code failed: when the authority is gone meanwhile, the
    /// failure is not this process's to record.
    fn failed_without_authority(&self) -> Result<(), ReconcileError> {
        self.ensure_authority().map_err(|lost| {
            tracing::info!(
                machine = S::machine().name(),
                reason = lost.reason(),
                "authority lost during a step; nothing is recorded"
            );
            ReconcileError::AuthorityLost(lost)
        })
    }

    /// The context user code runs in, for state `name`.
    fn step<'s>(
        &'s self,
        name: &'static str,
        attempt: u32,
        entered_at: Timestamp,
        spec_snapshot: Option<&'s serde_json::Value>,
    ) -> Step<'s, S> {
        let step = Step::new(
            self.resource,
            self.context,
            self.engine.clock.as_ref(),
            name,
        )
        .with_attempt(attempt, entered_at)
        .with_spec_snapshot(spec_snapshot)
        .with_extensions(&self.engine.extensions);
        match self.engine.authority.as_deref() {
            Some(authority) => step.with_authority(authority),
            None => step,
        }
    }

    /// Runs the current state's handler under its attempt timeout, with a
    /// checkpointer over the store; its checkpoints update `record`.
    async fn handle(&mut self, record: &mut StateRecord) -> Result<Outcome<S>, ReconcileError> {
        self.ensure_authority()?;
        let state: S = record.current::<S>().map_err(ReconcileError::Corrupt)?;
        let name = state.state_name();
        let attempt_timeout = S::machine()
            .state(&record.state)
            .and_then(crate::machine::StateMeta::handler_timeout);
        let (attempt, entered_at) = (record.attempt, record.entered_at);
        let spec_snapshot = record.spec_snapshot.clone();
        let mut version = self.version.take();
        let mut checkpointer = StoreCheckpointer {
            store: self.store,
            key: &self.observed.key,
            record,
            version: &mut version,
            commits: 0,
            conflicted: false,
        };
        let span = tracing::debug_span!("handler", machine = S::machine().name(), state = name, object = %self.observed.key);
        let clock = self.engine.clock.as_ref();
        let mut step = self
            .step(name, attempt, entered_at, spec_snapshot.as_ref())
            .with_checkpointer(&mut checkpointer);
        let call = state.handle(&mut step).instrument(span);
        let result = match attempt_timeout {
            // Timed on the engine's clock, so that a manual clock's
            // attempt timeout elapses in virtual time. The handler is
            // polled first: one finishing as time runs out still counts.
            Some(limit) => {
                let expired = clock.sleep(limit);
                tokio::select! {
                    biased;
                    result = call => Ok(result),
                    () = expired => Err(limit),
                }
            }
            None => Ok(call.await),
        };
        let published = step.take_published();
        drop(step);
        let (commits, conflicted) = (checkpointer.commits, checkpointer.conflicted);
        self.version = version;
        self.publish(published);
        self.report.commits += commits;
        for _ in 0..commits {
            self.report
                .effects
                .push(crate::engine::Effect::Checkpointed {
                    state: name.to_owned(),
                });
        }
        if conflicted {
            return Err(ReconcileError::Conflict);
        }
        // A transition the handler returned is committed even so (the
        // commit is conditional); a failure is the next leader's to see.
        if !matches!(result, Ok(Ok(_))) {
            self.failed_without_authority()?;
        }
        Ok(match result {
            Err(limit) => Outcome::AttemptTimedOut(limit),
            Ok(Ok(transition)) => Outcome::Transition(transition),
            Ok(Err(error)) => Outcome::Error {
                message: describe_error(&error),
                class: error.class(),
            },
        })
    }

    /// Runs the compensation of the next state on the trail
    /// ([`StateRecord::next_compensation`]).
    async fn compensate(&mut self, record: &StateRecord) -> Result<UnwindResult, ReconcileError> {
        self.ensure_authority()?;
        let Some(entry) = record.next_compensation() else {
            return Ok(UnwindResult::Done);
        };
        let state = match S::from_parts(&entry.state, entry.data.as_ref()) {
            Ok(state) => state,
            Err(e) => {
                let message = format!(
                    "stored data of {} does not fit the variant: {}",
                    entry.state,
                    crate::record::data_error::<S>(&entry.state, &e)
                );
                return self.unwound(permanent(message), None);
            }
        };
        let name = state.state_name();
        let attempt = record.compensation.as_ref().map_or(0, |u| u.attempt);
        let mut step = self.step(
            name,
            attempt,
            entry.entered_at,
            record.spec_snapshot.as_ref(),
        );
        let span = tracing::debug_span!("compensate", machine = S::machine().name(), state = name);
        let result = unwind_result(state.compensate(&mut step).instrument(span).await);
        let published = step.take_published();
        self.unwound(result, published)
    }

    /// Runs the machine's cleanup with the current state.
    async fn cleanup(&mut self, record: &StateRecord) -> Result<UnwindResult, ReconcileError> {
        self.ensure_authority()?;
        let state: S = match record.current::<S>() {
            Ok(state) => state,
            Err(e) => return self.unwound(permanent(e.to_string()), None),
        };
        let name = state.state_name();
        let attempt = record.compensation.as_ref().map_or(0, |u| u.attempt);
        let mut step = self.step(
            name,
            attempt,
            record.entered_at,
            record.spec_snapshot.as_ref(),
        );
        let span = tracing::debug_span!("cleanup", machine = S::machine().name(), state = name);
        let result = unwind_result(state.cleanup(&mut step).instrument(span).await);
        let published = step.take_published();
        self.unwound(result, published)
    }

    /// Keeps what a compensation or cleanup published, and refuses to
    /// record its failure when the authority was lost meanwhile.
    fn unwound(
        &mut self,
        result: UnwindResult,
        published: Option<StatusFields>,
    ) -> Result<UnwindResult, ReconcileError> {
        self.publish(published);
        if matches!(result, UnwindResult::Error { .. }) {
            self.failed_without_authority()?;
        }
        Ok(result)
    }
}

/// A failure that retrying cannot fix (stored data that does not decode).
fn permanent(message: String) -> UnwindResult {
    UnwindResult::Error {
        message,
        class: crate::classify::ErrorClass::Permanent,
    }
}

fn unwind_result<E: std::error::Error + Classify>(result: Result<(), E>) -> UnwindResult {
    match result {
        Ok(()) => UnwindResult::Done,
        Err(e) => UnwindResult::Error {
            message: describe_error(&e),
            class: e.class(),
        },
    }
}

/// Commits checkpoints of the current state through the store.
struct StoreCheckpointer<'a> {
    store: &'a dyn StateStore,
    key: &'a ObjectKey,
    record: &'a mut StateRecord,
    version: &'a mut Option<Version>,
    commits: u32,
    conflicted: bool,
}

impl<S: Fsm> Checkpointer<S> for StoreCheckpointer<'_> {
    fn checkpoint(&mut self, state: S) -> BoxFuture<'_, Result<(), CheckpointError>> {
        Box::pin(async move {
            if self.conflicted {
                return Err(CheckpointError::Conflict);
            }
            let (name, data) = state.to_parts().map_err(CheckpointError::Encode)?;
            let mut next = self.record.clone();
            if let Some(entry) = next
                .trail
                .last_mut()
                .filter(|e| e.state == name && e.entered_at == next.entered_at)
            {
                entry.data = data.clone();
            }
            next.data = data;
            match self
                .store
                .save(self.key, Commit::new(&next, self.version.as_ref()))
                .await
            {
                Ok(version) => {
                    *self.record = next;
                    *self.version = Some(version);
                    self.commits += 1;
                    Ok(())
                }
                Err(StoreError::Conflict) => {
                    self.conflicted = true;
                    Err(CheckpointError::Conflict)
                }
                Err(e) => Err(CheckpointError::Store(Box::new(e))),
            }
        })
    }
}
