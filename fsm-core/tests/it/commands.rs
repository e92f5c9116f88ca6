//! A person's commands (pause, resume, retry, goto, signal), through the
//! harness as `kubectl fsm` sends them: each taken once, in order, applied
//! or refused with a reason, and recorded; and a ready state that reports
//! it cannot converge without leaving (`Transition::degraded`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsm_core::prelude::*;
use fsm_core::{CommandAction, Effect, Harness};

/// What the handlers meet, and a log of every call.
#[derive(Default)]
struct World {
    build_fails: Mutex<Option<ErrorClass>>,
    conflict: Mutex<bool>,
    log: Mutex<Vec<String>>,
}

impl World {
    fn note(&self, line: &str) {
        self.log.lock().unwrap().push(line.to_owned());
    }
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
    fn fail_builds(&self, class: Option<ErrorClass>) {
        *self.build_fails.lock().unwrap() = class;
    }
}

#[derive(Debug, thiserror::Error)]
#[error("build broke")]
struct Trouble(ErrorClass);

impl Classify for Trouble {
    fn class(&self) -> ErrorClass {
        self.0
    }
}

/// A release: built, approved by a person, then served.
#[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[fsm(resource = (), context = Arc<World>, error = Trouble, on_spec_change = continue)]
#[fsm(retry(max_attempts = 3, initial = "30s", jitter = none))]
enum Release {
    #[fsm(
        initial,
        handler = build,
        compensate = unbuild,
        timeout = "10m",
        next(AwaitingApproval)
    )]
    Building,
    #[fsm(
        handler = await_approval,
        timeout = "1h",
        on_signal(approve = Serving, reject = Rejected)
    )]
    AwaitingApproval,
    #[fsm(ready, handler = serve, next(Building))]
    Serving,
    #[fsm(failed)]
    Rejected,
}

async fn build(cx: &mut Step<'_, Release>) -> Result<Transition<Release>, Trouble> {
    cx.context().note("build");
    if let Some(class) = *cx.context().build_fails.lock().unwrap() {
        return Err(Trouble(class));
    }
    Ok(Transition::next(Release::AwaitingApproval))
}

async fn unbuild(cx: &mut Step<'_, Release>) -> Result<(), Trouble> {
    cx.context().note("unbuild");
    Ok(())
}

async fn await_approval(cx: &mut Step<'_, Release>) -> Result<Transition<Release>, Trouble> {
    cx.context().note("wait");
    Ok(Transition::stay())
}

async fn serve(cx: &mut Step<'_, Release>) -> Result<Transition<Release>, Trouble> {
    cx.context().note("serve");
    if *cx.context().conflict.lock().unwrap() {
        return Ok(Transition::degraded("Deployment web: field conflict"));
    }
    Ok(Transition::stay())
}

fn harness() -> (Harness<Release>, Arc<World>) {
    let world = Arc::new(World::default());
    (Harness::new((), world.clone()), world)
}

/// Reconciles `n` times.
async fn reconcile(harness: &Harness<Release>, n: usize) {
    for _ in 0..n {
        harness.reconcile().await.expect("a reconcile");
    }
}

/// The harness, waiting for approval.
async fn waiting() -> (Harness<Release>, Arc<World>) {
    let (harness, world) = harness();
    reconcile(&harness, 2).await;
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));
    world.take_log();
    (harness, world)
}

fn last_command(harness: &Harness<Release>) -> fsm_core::CommandEntry {
    harness
        .record()
        .and_then(|r| r.commands.last().cloned())
        .expect("a command in the log")
}

#[tokio::test]
async fn a_signal_moves_a_waiting_state_on_and_the_history_says_who_asked() {
    let (mut harness, _) = waiting().await;
    let seq = harness.signal("approve");
    let report = harness.reconcile().await.unwrap();
    assert_eq!(harness.state(), Some(Release::Serving));
    assert!(report.effects.contains(&Effect::CommandApplied {
        seq,
        command: "signal approve".into(),
        by: Some("harness".into()),
    }));
    let record = harness.record().unwrap();
    assert_eq!(record.command_seq, seq);
    let entered = record.history.last().unwrap();
    assert_eq!(entered.to, "Serving");
    assert_eq!(
        entered.reason.as_deref(),
        Some("signal approve (command 1 by harness)")
    );
    assert!(last_command(&harness).applied());
}

#[tokio::test]
async fn a_command_is_taken_once_however_often_the_object_is_seen() {
    let (mut harness, world) = waiting().await;
    harness.signal("approve");
    reconcile(&harness, 5).await;
    let record = harness.record().unwrap();
    assert_eq!(record.commands.len(), 1, "{:?}", record.commands);
    let entries = record.history.iter().filter(|h| h.to == "Serving").count();
    assert_eq!(entries, 1);
    assert!(world.take_log().iter().all(|l| l == "serve"));
}

#[tokio::test]
async fn a_command_lost_to_a_crash_before_its_write_is_taken_after() {
    let (mut harness, _) = waiting().await;
    harness.signal("approve");
    harness.crash_at_next_write();
    assert!(harness.reconcile().await.is_err(), "the write fails");
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));
    assert_eq!(harness.record().unwrap().command_seq, 0);
    reconcile(&harness, 3).await;
    let record = harness.record().unwrap();
    assert_eq!(record.state, "Serving");
    assert_eq!(record.commands.len(), 1);
}

#[tokio::test]
async fn a_signal_the_state_does_not_take_is_refused_with_what_it_takes() {
    let (mut harness, _) = waiting().await;
    let seq = harness.signal("ship");
    let report = harness.reconcile().await.unwrap();
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));
    let refused = last_command(&harness);
    let reason = refused.refused.clone().expect("refused");
    assert_eq!(
        reason,
        "AwaitingApproval takes no signal 'ship'; it takes: approve, reject"
    );
    assert!(report.effects.iter().any(|e| matches!(
        e,
        Effect::CommandRefused { seq: s, reason: r, .. } if *s == seq && *r == reason
    )));
    assert_eq!(
        harness.record().unwrap().command_seq,
        seq,
        "taken: not again"
    );

    // A state without signals says so.
    harness.signal("approve");
    reconcile(&harness, 2).await;
    harness.signal("approve");
    harness.reconcile().await.unwrap();
    assert_eq!(
        last_command(&harness).refused.as_deref(),
        Some("Serving takes no signals (asked for 'approve')")
    );
}

#[tokio::test]
async fn a_signal_into_the_failed_state_undoes_the_open_scope() {
    let (mut harness, world) = waiting().await;
    harness.signal("reject");
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, Release::Rejected);
    assert_eq!(world.take_log(), ["unbuild"]);
    assert_eq!(
        settled.record.last_error.as_deref(),
        Some("signal reject (command 1 by harness)")
    );
}

#[tokio::test]
async fn pause_stops_handlers_and_timeouts_and_resume_does_not_count_the_pause() {
    let (mut harness, world) = waiting().await;
    harness.send(CommandAction::Pause);
    harness.reconcile().await.unwrap();
    let paused = harness.record().unwrap().paused.expect("paused");
    assert_eq!(paused.by.as_deref(), Some("harness"));

    // Two hours paused: the 1 h timeout does not fire, no handler runs.
    for _ in 0..8 {
        harness.advance(Duration::from_secs(15 * 60));
        let report = harness.reconcile().await.unwrap();
        assert_eq!(report.commits, 0, "a paused object writes nothing");
        assert_eq!(report.requeue, None);
    }
    assert!(world.take_log().is_empty(), "no handler ran while paused");
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));

    // A spec change waits for the resume.
    let generation = harness.bump_generation();
    harness.reconcile().await.unwrap();
    assert_ne!(
        harness.record().unwrap().observed_generation,
        Some(generation)
    );

    harness.send(CommandAction::Resume);
    reconcile(&harness, 3).await;
    let record = harness.record().unwrap();
    assert_eq!(record.paused, None);
    assert_eq!(record.state, "AwaitingApproval", "the pause did not count");
    assert_eq!(record.observed_generation, Some(generation));
    assert!(world.take_log().contains(&"wait".to_owned()));

    // Without the pause, the timeout fires after the rest of its hour.
    harness.advance(Duration::from_secs(61 * 60));
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, Release::Rejected);
}

#[tokio::test]
async fn pause_and_resume_refuse_what_would_change_nothing() {
    let (mut harness, _) = waiting().await;
    harness.send(CommandAction::Resume);
    harness.reconcile().await.unwrap();
    assert_eq!(
        last_command(&harness).refused.as_deref(),
        Some("not paused")
    );
    harness.send(CommandAction::Pause);
    harness.send(CommandAction::Pause);
    reconcile(&harness, 2).await;
    let record = harness.record().unwrap();
    assert_eq!(record.commands.len(), 3);
    assert_eq!(
        record.commands[2].refused.as_deref(),
        Some("already paused")
    );
    assert_eq!(
        record.paused.map(|p| p.seq),
        Some(2),
        "the first pause holds"
    );
    // While paused, a signal waits for nothing: it is refused.
    harness.signal("approve");
    harness.reconcile().await.unwrap();
    assert_eq!(
        last_command(&harness).refused.as_deref(),
        Some("paused: resume first")
    );
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));
}

#[tokio::test]
async fn deletion_proceeds_while_paused() {
    let (mut harness, world) = waiting().await;
    harness.send(CommandAction::Pause);
    harness.reconcile().await.unwrap();
    harness.mark_deleting();
    let settled = harness.run_until_settled().await.unwrap();
    assert!(settled.released);
    assert!(world.take_log().is_empty());
}

#[tokio::test]
async fn retry_runs_a_waiting_attempt_now_with_its_attempts_counted_afresh() {
    let (mut harness, world) = harness();
    world.fail_builds(Some(ErrorClass::Retryable { retry_after: None }));
    harness.reconcile().await.unwrap();
    harness.advance(Duration::from_secs(30));
    harness.reconcile().await.unwrap();
    let record = harness.record().unwrap();
    assert_eq!(record.attempt, 2);
    assert!(record.next_attempt_at.is_some(), "waiting 30 s or more");
    world.take_log();

    world.fail_builds(None);
    harness.send(CommandAction::Retry);
    reconcile(&harness, 2).await;
    assert_eq!(world.take_log(), ["build"], "ran at once, no time passed");
    assert_eq!(harness.state(), Some(Release::AwaitingApproval));
}

#[tokio::test]
async fn retry_starts_a_failed_object_again_and_refuses_nothing_to_retry() {
    let (mut harness, world) = harness();
    world.fail_builds(Some(ErrorClass::Permanent));
    let settled = harness.run_until_settled().await.unwrap();
    assert_eq!(settled.state, Release::Rejected);

    world.fail_builds(None);
    harness.send(CommandAction::Retry);
    reconcile(&harness, 2).await;
    let record = harness.record().unwrap();
    assert_eq!(record.state, "AwaitingApproval");
    let restarted = record
        .history
        .iter()
        .find(|h| h.to == "Building" && h.from.as_deref() == Some("Rejected"))
        .expect("started again from Rejected");
    assert_eq!(
        restarted.reason.as_deref(),
        Some("retry (command 1 by harness)")
    );
}

#[tokio::test]
async fn goto_moves_to_a_declared_or_visited_state_and_refuses_others() {
    let (mut harness, _) = waiting().await;
    harness.signal("approve");
    harness.reconcile().await.unwrap();

    // Declared by Serving.
    harness.send(CommandAction::Goto("Building".into()));
    harness.reconcile().await.unwrap();
    assert!(last_command(&harness).applied());
    assert_eq!(harness.state(), Some(Release::Building));

    for (target, refusal) in [
        ("Nowhere", "machine Release has no state Nowhere".to_owned()),
        (
            "Rejected",
            "Rejected is a failed state: goto moves to a state the workflow can go on from"
                .to_owned(),
        ),
    ] {
        harness.send(CommandAction::Goto(target.into()));
        harness.reconcile().await.unwrap();
        assert_eq!(last_command(&harness).refused, Some(refusal), "{target}");
    }

    // Visited before: back to Serving.
    harness.send(CommandAction::Goto("Serving".into()));
    harness.reconcile().await.unwrap();
    assert!(last_command(&harness).applied());
    assert_eq!(harness.state(), Some(Release::Serving));
}

#[tokio::test]
async fn goto_refuses_a_state_never_visited_nor_declared() {
    let (mut harness, world) = harness();
    world.fail_builds(Some(ErrorClass::Retryable { retry_after: None }));
    harness.reconcile().await.unwrap();
    harness.send(CommandAction::Pause);
    harness.send(CommandAction::Goto("Serving".into()));
    reconcile(&harness, 2).await;
    assert_eq!(
        last_command(&harness).refused.as_deref(),
        Some(
            "Serving is neither a declared target of Building, a state this object has been in, \
             nor the initial state"
        )
    );
}

#[tokio::test]
async fn unknown_commands_are_refused_naming_the_known_ones() {
    let (mut harness, _) = waiting().await;
    harness.send(CommandAction::Unknown("explode".into()));
    harness.reconcile().await.unwrap();
    assert_eq!(
        last_command(&harness).refused.as_deref(),
        Some(
            "unknown command 'explode': the commands are pause, resume, retry, goto STATE and \
             signal NAME"
        )
    );
}

#[tokio::test]
async fn the_command_log_keeps_the_newest_ten() {
    let (mut harness, _) = waiting().await;
    for _ in 0..12 {
        harness.signal("ship");
    }
    reconcile(&harness, 12).await;
    let record = harness.record().unwrap();
    assert_eq!(record.command_seq, 12);
    let seqs: Vec<u64> = record.commands.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (3..=12).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_degraded_ready_state_stays_backs_off_and_recovers() {
    let (mut harness, world) = waiting().await;
    harness.signal("approve");
    reconcile(&harness, 2).await;
    world.take_log();

    *world.conflict.lock().unwrap() = true;
    let mut delays = Vec::new();
    let mut commits = Vec::new();
    for _ in 0..5 {
        let report = harness.reconcile().await.unwrap();
        let delay = report.requeue.expect("a retry");
        delays.push(delay);
        commits.push(report.commits);
        harness.advance(delay);
    }
    let record = harness.record().unwrap();
    assert_eq!(record.state, "Serving", "it never left");
    let degraded = record.degraded.expect("degraded");
    assert_eq!(degraded.reason, "Deployment web: field conflict");
    assert_eq!(record.attempt, 0, "no attempt spent");
    assert_eq!(record.next_attempt_at, None, "at rest, in its ready state");
    // Each wait about as long as the time degraded so far, within the
    // policy (30 s initial, factor 2, no jitter).
    assert_eq!(
        delays,
        [30, 30, 60, 120, 240].map(Duration::from_secs),
        "the backoff grows with the time degraded"
    );
    assert_eq!(commits, [1, 0, 0, 0, 0], "written once, when it began");

    *world.conflict.lock().unwrap() = false;
    let report = harness.reconcile().await.unwrap();
    assert!(report.effects.contains(&Effect::Recovered {
        state: "Serving".into()
    }));
    assert_eq!(harness.record().unwrap().degraded, None);
    // Converged again, it writes nothing more.
    harness.advance(Duration::from_secs(60));
    assert_eq!(harness.reconcile().await.unwrap().commits, 0);
}

mod properties {
    //! Whatever commands arrive, in whatever order, whatever crashes the
    //! writes suffer: every command is taken once, in order, and a paused
    //! object runs nothing.

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Act {
        Send(CommandAction),
        Reconcile,
        CrashedReconcile,
        Advance(u64),
    }

    fn any_action() -> impl Strategy<Value = CommandAction> {
        const STATES: [&str; 5] = [
            "Building",
            "AwaitingApproval",
            "Serving",
            "Rejected",
            "Nowhere",
        ];
        const SIGNALS: [&str; 3] = ["approve", "reject", "ship"];
        prop_oneof![
            3 => Just(CommandAction::Pause),
            3 => Just(CommandAction::Resume),
            2 => Just(CommandAction::Retry),
            2 => proptest::sample::select(&STATES[..]).prop_map(|s| CommandAction::Goto(s.into())),
            3 => proptest::sample::select(&SIGNALS[..]).prop_map(|s| CommandAction::Signal(s.into())),
            1 => Just(CommandAction::Unknown("explode".into())),
        ]
    }

    fn any_act() -> impl Strategy<Value = Act> {
        prop_oneof![
            3 => any_action().prop_map(Act::Send),
            5 => Just(Act::Reconcile),
            1 => Just(Act::CrashedReconcile),
            1 => (1u64..4000).prop_map(Act::Advance),
        ]
    }

    /// A reconcile, which may meet the crash a reconcile that wrote nothing
    /// left armed.
    async fn survive(harness: &Harness<Release>) {
        if let Err(e) = harness.reconcile().await {
            let text = format!("{e:?}");
            assert!(text.contains("crashed the operator"), "{text}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn commands_are_taken_once_in_order_and_pauses_hold(
            acts in proptest::collection::vec(any_act(), 0..60),
            fails in any::<bool>(),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (mut harness, world) = harness();
                if fails {
                    world.fail_builds(Some(ErrorClass::Retryable { retry_after: None }));
                }
                let mut sent = 0u64;
                let mut seen = 0u64;
                for act in acts {
                    let before = harness.record();
                    let paused_with_nothing_pending = before
                        .as_ref()
                        .is_some_and(|r| r.paused.is_some() && r.command_seq == sent);
                    world.take_log();
                    match act {
                        Act::Send(action) => {
                            sent = harness.send(action);
                            continue;
                        }
                        Act::Advance(secs) => {
                            harness.advance(Duration::from_secs(secs));
                            continue;
                        }
                        Act::Reconcile => survive(&harness).await,
                        Act::CrashedReconcile => {
                            harness.crash_at_next_write();
                            let _ = harness.reconcile().await;
                        }
                    }
                    let Some(after) = harness.record() else { continue };
                    prop_assert!(after.command_seq >= seen, "the number went back");
                    prop_assert!(after.command_seq <= sent);
                    seen = after.command_seq;
                    let seqs: Vec<u64> = after.commands.iter().map(|c| c.seq).collect();
                    let first = seqs.first().copied().unwrap_or(1);
                    let contiguous: Vec<u64> = (first..first + seqs.len() as u64).collect();
                    prop_assert_eq!(&seqs, &contiguous, "each taken once, in order");
                    prop_assert_eq!(seqs.last().copied().unwrap_or(0), after.command_seq);
                    prop_assert!(after.commands.iter().all(|c| c.refused.as_ref().is_none_or(|r| !r.is_empty())));
                    if paused_with_nothing_pending {
                        prop_assert!(world.take_log().is_empty(), "a handler ran while paused");
                        prop_assert_eq!(
                            before.map(|b| b.history),
                            Some(after.history),
                            "a transition while paused"
                        );
                    }
                }
                // Given the chance, every command is taken.
                for _ in 0..(sent + 5) {
                    survive(&harness).await;
                }
                if sent > 0 {
                    prop_assert_eq!(harness.record().map(|r| r.command_seq), Some(sent));
                }
                Ok(())
            })?;
        }
    }
}
