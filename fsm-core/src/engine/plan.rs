//! The first half of a reconcile's decision: given the record and what is
//! observed of the object, what runs now.

use std::time::Duration;

use crate::clock::until;
use crate::engine::Observed;
use crate::record::StateRecord;
use crate::{clock::Timestamp, machine::Machine, machine::OnDelete};

/// What a reconcile does, decided before anything runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// No record: enter the initial state. Also when the object is being
    /// deleted and the machine has a `cleanup`: its first handler may have
    /// acted before its commit was lost, so the cleanup runs, with the
    /// initial state.
    Start,
    /// The object is being deleted and unwinding must begin.
    BeginDeletion,
    /// The object is gone for the machine: delete the record, release the
    /// finalizer.
    Release,
    /// Run the compensation of the most recently entered compensable state.
    Compensate,
    /// Unwinding has no compensation left: run `cleanup` (deletion only).
    Cleanup,
    /// Unwinding has nothing left: rest in the failed state (or release).
    FinishUnwind,
    /// Take a person's command: the first the object carries that is
    /// numbered above the record's `command_seq`.
    Command(crate::command::Command),
    /// The object is paused: nothing runs, no timeout fires, no spec change
    /// is taken, until a `resume` command.
    Paused,
    /// The spec changed since the machine last acted.
    SpecChanged(i64),
    /// The state's total time ran out.
    TimedOut,
    /// A retry is scheduled later: wait this long, run nothing.
    Backoff(Duration),
    /// A final or failed state: nothing runs.
    Rest,
    /// Run the state's handler.
    RunHandler,
}

/// Decides what runs now. Pure: the same inputs give the same plan.
pub fn plan(
    machine: &Machine,
    record: Option<&StateRecord>,
    observed: &Observed,
    now: Timestamp,
) -> Plan {
    let Some(record) = record else {
        return if observed.deleting && !machine.has_cleanup() {
            Plan::Release
        } else {
            Plan::Start
        };
    };
    let unwinding = record.compensation.as_ref().filter(|u| u.is_active());
    if observed.deleting {
        let Some(unwind) = unwinding.filter(|u| u.target.is_none()) else {
            return if machine.needs_finalizer() {
                Plan::BeginDeletion
            } else {
                Plan::Release
            };
        };
        if let Some(at) = unwind.next_attempt_at.filter(|at| *at > now) {
            return Plan::Backoff(until(now, at));
        }
        return if matches!(machine.delete_policy(), OnDelete::Compensate)
            && record.next_compensation().is_some()
        {
            Plan::Compensate
        } else if machine.has_cleanup() {
            Plan::Cleanup
        } else {
            Plan::Release
        };
    }
    if let Some(command) = observed
        .commands
        .iter()
        .find(|c| c.seq > record.command_seq)
    {
        return Plan::Command(command.clone());
    }
    if record.paused.is_some() {
        return Plan::Paused;
    }
    if let Some(unwind) = unwinding {
        if let Some(at) = unwind.next_attempt_at.filter(|at| *at > now) {
            return Plan::Backoff(until(now, at));
        }
        return if record.next_compensation().is_none() {
            Plan::FinishUnwind
        } else {
            Plan::Compensate
        };
    }
    if let Some(generation) = observed.generation
        && record
            .observed_generation
            .is_some_and(|seen| seen != generation)
    {
        return Plan::SpecChanged(generation);
    }
    let Some(state) = machine.state(&record.state) else {
        // Decoding checked the name; a record edited in memory is at rest.
        return Plan::Rest;
    };
    if state.is_resting() {
        return Plan::Rest;
    }
    if let Some(timeout) = state.state_timeout()
        && now >= crate::clock::add(record.entered_at, timeout)
    {
        return Plan::TimedOut;
    }
    if let Some(at) = record.next_attempt_at.filter(|at| *at > now) {
        return Plan::Backoff(until(now, at));
    }
    Plan::RunHandler
}

#[cfg(test)]
mod tests {
    //! `plan`, case by case: what runs for each record and observation, in
    //! the order of docs/semantics.md (deletion, compensation, spec change,
    //! rest, state timeout, backoff, handler).

    use std::time::Duration;

    use super::*;
    use crate::ObjectKey;
    use crate::clock::add;
    use crate::record::{SCHEMA_VERSION, TrailEntry, Unwind};
    use crate::{StateMeta, machine::Machine, machine::OnDelete};

    static STATES: [StateMeta; 4] = [
        StateMeta::new("Start")
            .initial()
            .with_handler()
            .next(&["Work"]),
        StateMeta::new("Work")
            .with_handler()
            .with_compensation()
            .timeout(Duration::from_secs(600))
            .next(&["Done"]),
        StateMeta::new("Done").final_state(),
        StateMeta::new("Failed").failed(),
    ];
    /// No finalizer: deletion is none of the machine's business.
    static BARE: Machine = Machine::new("Bare", &STATES);
    /// A cleanup, and no compensation on deletion.
    static CLEANS: Machine = Machine::new("Cleans", &STATES).with_cleanup();
    /// Compensation on deletion, then a cleanup.
    static UNDOES: Machine = Machine::new("Undoes", &STATES)
        .on_delete(OnDelete::Compensate)
        .with_cleanup();
    /// Compensation on deletion, and no cleanup.
    static UNDOES_ONLY: Machine =
        Machine::new("UndoesOnly", &STATES).on_delete(OnDelete::Compensate);

    fn t0() -> Timestamp {
        "2026-06-01T00:00:00Z".parse().unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A record in `state`, entered at `t0`, which has seen generation 1.
    fn in_state(state: &str) -> StateRecord {
        StateRecord {
            schema_version: SCHEMA_VERSION,
            machine_version: 1,
            state: state.to_owned(),
            data: None,
            entered_at: t0(),
            attempt: 0,
            failures_without_attempt: 0,
            next_attempt_at: None,
            last_error: None,
            observed_generation: Some(1),
            transitions: 1,
            history: Vec::new(),
            trail: Vec::new(),
            compensation: None,
            spec_snapshot: None,
            command_seq: 0,
            paused: None,
            commands: Vec::new(),
            degraded: None,
        }
    }

    /// `record` with `Work` on its compensation trail.
    fn entered_work(mut record: StateRecord) -> StateRecord {
        record.trail.push(TrailEntry {
            state: "Work".to_owned(),
            data: None,
            entered_at: t0(),
            closed: false,
        });
        record
    }

    /// `record` unwinding towards `target` (`None`: for deletion).
    fn unwinding(mut record: StateRecord, target: Option<&str>) -> StateRecord {
        record.compensation = Some(Unwind {
            reason: "why".to_owned(),
            target: target.map(str::to_owned),
            restart: false,
            attempt: 0,
            next_attempt_at: None,
            failures: Vec::new(),
            started_at: t0(),
            finished_at: None,
        });
        record
    }

    /// `record` whose unwinding step is to be tried again at `t0 + after`.
    fn unwind_retry_after(mut record: StateRecord, after: Duration) -> StateRecord {
        if let Some(unwind) = record.compensation.as_mut() {
            unwind.next_attempt_at = Some(add(t0(), after));
        }
        record
    }

    /// `record` whose handler is to be tried again at `t0 + after`.
    fn retry_after(mut record: StateRecord, after: Duration) -> StateRecord {
        record.next_attempt_at = Some(add(t0(), after));
        record
    }

    /// `record` with an unwinding that is over.
    fn unwound(record: StateRecord) -> StateRecord {
        let mut record = unwinding(record, Some("Failed"));
        if let Some(unwind) = record.compensation.as_mut() {
            unwind.finished_at = Some(t0());
        }
        record
    }

    fn without_generation(mut record: StateRecord) -> StateRecord {
        record.observed_generation = None;
        record
    }

    struct Case {
        name: &'static str,
        machine: &'static Machine,
        record: Option<StateRecord>,
        deleting: bool,
        generation: Option<i64>,
        /// How long after `t0` the plan is made.
        later: Duration,
        expected: Plan,
    }

    fn case(name: &'static str, machine: &'static Machine, record: Option<StateRecord>) -> Case {
        Case {
            name,
            machine,
            record,
            deleting: false,
            generation: Some(1),
            later: Duration::ZERO,
            expected: Plan::Rest,
        }
    }

    impl Case {
        fn deleting(mut self) -> Self {
            self.deleting = true;
            self
        }
        fn generation(mut self, generation: Option<i64>) -> Self {
            self.generation = generation;
            self
        }
        fn later(mut self, later: Duration) -> Self {
            self.later = later;
            self
        }
        fn expect(mut self, expected: Plan) -> Self {
            self.expected = expected;
            self
        }
    }

    fn cases() -> Vec<Case> {
        let work = || in_state("Work");
        vec![
            // No record.
            case("no record: start", &BARE, None).expect(Plan::Start),
            case(
                "no record, deleted, no cleanup: release",
                &UNDOES_ONLY,
                None,
            )
            .deleting()
            .expect(Plan::Release),
            case(
                "no record, deleted, a cleanup: start, to clean up",
                &CLEANS,
                None,
            )
            .deleting()
            .expect(Plan::Start),
            // Deletion.
            case("deleted, no finalizer: release", &BARE, Some(work()))
                .deleting()
                .expect(Plan::Release),
            case("deleted, a cleanup: begin deletion", &CLEANS, Some(work()))
                .deleting()
                .expect(Plan::BeginDeletion),
            case(
                "deleted while a failure unwinds: deletion takes over",
                &UNDOES,
                Some(unwinding(entered_work(work()), Some("Failed"))),
            )
            .deleting()
            .expect(Plan::BeginDeletion),
            case(
                "deleted after an unwinding ended: begin deletion",
                &CLEANS,
                Some(unwound(work())),
            )
            .deleting()
            .expect(Plan::BeginDeletion),
            case(
                "deletion unwinding, compensation on delete: compensate",
                &UNDOES,
                Some(unwinding(entered_work(work()), None)),
            )
            .deleting()
            .expect(Plan::Compensate),
            case(
                "deletion unwinding, trail done: cleanup",
                &UNDOES,
                Some(unwinding(work(), None)),
            )
            .deleting()
            .expect(Plan::Cleanup),
            case(
                "deletion unwinding, no compensation on delete: cleanup",
                &CLEANS,
                Some(unwinding(entered_work(work()), None)),
            )
            .deleting()
            .expect(Plan::Cleanup),
            case(
                "deletion unwinding, trail done, no cleanup: release",
                &UNDOES_ONLY,
                Some(unwinding(work(), None)),
            )
            .deleting()
            .expect(Plan::Release),
            case(
                "deletion unwinding, retry scheduled: back off",
                &UNDOES,
                Some(unwind_retry_after(
                    unwinding(entered_work(work()), None),
                    secs(30),
                )),
            )
            .deleting()
            .later(secs(10))
            .expect(Plan::Backoff(secs(20))),
            case(
                "deletion unwinding, retry due: compensate",
                &UNDOES,
                Some(unwind_retry_after(
                    unwinding(entered_work(work()), None),
                    secs(30),
                )),
            )
            .deleting()
            .later(secs(30))
            .expect(Plan::Compensate),
            // Compensation after a failure.
            case(
                "failure unwinding: compensate",
                &BARE,
                Some(unwinding(entered_work(work()), Some("Failed"))),
            )
            .expect(Plan::Compensate),
            case(
                "failure unwinding, trail done: finish",
                &BARE,
                Some(unwinding(work(), Some("Failed"))),
            )
            .expect(Plan::FinishUnwind),
            case(
                "failure unwinding, retry scheduled: back off",
                &BARE,
                Some(unwind_retry_after(
                    unwinding(entered_work(work()), Some("Failed")),
                    secs(30),
                )),
            )
            .expect(Plan::Backoff(secs(30))),
            case(
                "failure unwinding, spec changed: the change waits",
                &BARE,
                Some(unwinding(entered_work(work()), Some("Failed"))),
            )
            .generation(Some(2))
            .expect(Plan::Compensate),
            case(
                "failure unwinding, state timeout passed: compensate",
                &BARE,
                Some(unwinding(entered_work(work()), Some("Failed"))),
            )
            .later(secs(3_600))
            .expect(Plan::Compensate),
            // Spec change.
            case("generation changed: spec change", &BARE, Some(work()))
                .generation(Some(2))
                .expect(Plan::SpecChanged(2)),
            case(
                "generation changed in a final state: spec change",
                &BARE,
                Some(in_state("Done")),
            )
            .generation(Some(2))
            .expect(Plan::SpecChanged(2)),
            case(
                "generation changed after an unwinding ended: spec change",
                &BARE,
                Some(unwound(in_state("Failed"))),
            )
            .generation(Some(2))
            .expect(Plan::SpecChanged(2)),
            case(
                "no generation seen yet: no spec change",
                &BARE,
                Some(without_generation(work())),
            )
            .generation(Some(2))
            .expect(Plan::RunHandler),
            case(
                "object without generation: no spec change",
                &BARE,
                Some(work()),
            )
            .generation(None)
            .expect(Plan::RunHandler),
            // Rest.
            case("final state: rest", &BARE, Some(in_state("Done"))).expect(Plan::Rest),
            case("failed state: rest", &BARE, Some(in_state("Failed"))).expect(Plan::Rest),
            case("unknown state: rest", &BARE, Some(in_state("Gone"))).expect(Plan::Rest),
            // State timeout.
            case("state timeout reached: timed out", &BARE, Some(work()))
                .later(secs(600))
                .expect(Plan::TimedOut),
            case(
                "state timeout passed during a backoff: timed out",
                &BARE,
                Some(retry_after(work(), secs(3_600))),
            )
            .later(secs(601))
            .expect(Plan::TimedOut),
            case("just before the state timeout: run", &BARE, Some(work()))
                .later(secs(599))
                .expect(Plan::RunHandler),
            case(
                "no state timeout: run however long",
                &BARE,
                Some(in_state("Start")),
            )
            .later(secs(86_400))
            .expect(Plan::RunHandler),
            // Backoff and handler.
            case(
                "retry scheduled: back off for the rest",
                &BARE,
                Some(retry_after(work(), secs(30))),
            )
            .later(secs(5))
            .expect(Plan::Backoff(secs(25))),
            case("retry due: run", &BARE, Some(retry_after(work(), secs(30))))
                .later(secs(30))
                .expect(Plan::RunHandler),
            case("unwinding ended: run", &BARE, Some(unwound(work()))).expect(Plan::RunHandler),
            case("nothing pending: run", &CLEANS, Some(work())).expect(Plan::RunHandler),
        ]
    }

    #[test]
    fn each_record_and_observation_plans_what_the_rules_say() {
        for case in cases() {
            let observed = Observed {
                commands: Vec::new(),
                key: ObjectKey::namespaced("ns", "o"),
                generation: case.generation,
                deleting: case.deleting,
                spec: None,
            };
            let now = add(t0(), case.later);
            let planned = plan(case.machine, case.record.as_ref(), &observed, now);
            assert_eq!(planned, case.expected, "{}", case.name);
        }
    }
}
