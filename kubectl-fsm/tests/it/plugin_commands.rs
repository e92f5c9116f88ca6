//! `kubectl fsm pause|resume|retry|goto|signal`, run by the real `kubectl`
//! against the embedded API server or the real kube-apiserver
//! (`FSM_REAL_APISERVER_KUBECONFIG`): what lands in the object's
//! `operator-fsm.io/commands` annotation, numbered after what the record
//! took, pruned, never lost to a concurrent sender; what is refused
//! without a write; what `--wait` and a 403 print.
//!
//! No operator runs here: a command "taken" is simulated by writing the
//! record's `commandSeq` (and its `commands` log) where the status store
//! keeps it, `.status.fsm` of the Chore, as the engine commits it.

use std::process::{Output, Stdio};

use fsm_core::{Command, CommandAction, SCHEMA_VERSION};
use fsm_kube::records::COMMANDS_ANNOTATION;
use fsm_testkit::TestCluster;
use fsm_testkit::faults::Fault;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::plugin::{Chore, Env, create_chore, env, env_on, eventually, kubectl, ok};

/// The commands chore `name` carries, in order.
async fn annotation(env: &Env, name: &str) -> Vec<Command> {
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let chore = api.get(name).await.unwrap();
    chore
        .annotations()
        .get(COMMANDS_ANNOTATION)
        .map(|text| Command::parse_list(text).unwrap())
        .unwrap_or_default()
}

fn seqs(commands: &[Command]) -> Vec<u64> {
    commands.iter().map(|c| c.seq).collect()
}

/// Writes chore `name`'s record as the status store does, at `.status.fsm`,
/// having taken the commands up to `command_seq`, with `extra` fields
/// (`commands`, `paused`).
async fn take(env: &Env, name: &str, command_seq: u64, extra: Value) {
    let mut record = json!({
        "schemaVersion": SCHEMA_VERSION,
        "state": "Pending",
        "enteredAt": "2026-01-01T00:00:00Z",
        "commandSeq": command_seq,
    });
    if let (Some(record), Some(extra)) = (record.as_object_mut(), extra.as_object()) {
        record.extend(extra.clone());
    }
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"fsm": record}})),
    )
    .await
    .unwrap();
}

/// Runs `kubectl ARGS`, whatever its exit status.
async fn run(env: &Env, args: &[&str]) -> Output {
    kubectl(env, args).output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The user of the test kubeconfig's current context: who a command is
/// from without `--by`.
fn kubeconfig_user(env: &Env) -> String {
    let config = kube::config::Kubeconfig::read_from(&env.kubeconfig).unwrap();
    let current = config.current_context.unwrap();
    let context = config.contexts.iter().find(|c| c.name == current).unwrap();
    context.context.as_ref().unwrap().user.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_numbered_after_what_was_taken_and_taken_ones_pruned() {
    let env = env().await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.as_str();

    // No record yet: the first command is number 1, with who and when.
    let before = jiff::Timestamp::now();
    let out = ok(
        &env,
        &["fsm", "pause", "chores/c1", "-n", ns, "--by", "alice"],
    )
    .await;
    assert_eq!(
        out,
        format!(
            "command 1 (pause) sent to {ns}/c1; the operator applies it on its next reconcile\n"
        )
    );
    let list = annotation(&env, "c1").await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].seq, 1);
    assert_eq!(list[0].action, CommandAction::Pause);
    assert_eq!(list[0].by.as_deref(), Some("alice"));
    let at = list[0].at.expect("the time it was asked");
    // The server's and this machine's clocks are one: a second's slack.
    assert!(
        at >= before
            .checked_sub(jiff::SignedDuration::from_secs(1))
            .unwrap(),
        "{at} {before}"
    );

    // Pending 1: the next is 2, both kept; without --by, the context's user.
    let out = ok(&env, &["fsm", "retry", "chores", "c1", "-n", ns]).await;
    assert!(out.starts_with("command 2 (retry) sent to"), "{out}");
    let list = annotation(&env, "c1").await;
    assert_eq!(seqs(&list), [1, 2]);
    assert_eq!(list[1].by.as_deref(), Some(kubeconfig_user(&env).as_str()));

    // The operator took 1 and 2: they are pruned, the next is 3.
    take(&env, "c1", 2, json!({})).await;
    let out = ok(&env, &["fsm", "resume", "chores/c1", "-n", ns]).await;
    assert!(out.starts_with("command 3 (resume) sent to"), "{out}");
    let list = annotation(&env, "c1").await;
    assert_eq!(seqs(&list), [3]);
    assert_eq!(list[0].action, CommandAction::Resume);

    // The record is ahead of the annotation (someone removed it): the
    // number follows the record, never one the operator would skip.
    take(&env, "c1", 7, json!({})).await;
    let out = ok(
        &env,
        &[
            "fsm", "goto", "chores", "c1", "Done", "-n", ns, "--by", "bob",
        ],
    )
    .await;
    assert!(out.starts_with("command 8 (goto Done) sent to"), "{out}");
    let list = annotation(&env, "c1").await;
    assert_eq!(seqs(&list), [8]);
    assert_eq!(list[0].action, CommandAction::Goto("Done".into()));

    // A signal is the operator's to judge: it is sent.
    let out = ok(
        &env,
        &[
            "fsm",
            "signal",
            "chores/c1",
            "approve",
            "-n",
            ns,
            "-o",
            "json",
        ],
    )
    .await;
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], "sent");
    assert_eq!(report["command"]["seq"], 9);
    assert_eq!(report["command"]["command"], "signal");
    assert_eq!(report["command"]["arg"], "approve");
    assert_eq!(seqs(&annotation(&env, "c1").await), [8, 9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_pause_the_commands_taken_and_those_pending() {
    let env = env().await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.as_str();
    ok(
        &env,
        &["fsm", "pause", "chores/c1", "-n", ns, "--by", "alice"],
    )
    .await;
    ok(
        &env,
        &[
            "fsm",
            "goto",
            "chores/c1",
            "Pending",
            "-n",
            ns,
            "--by",
            "alice",
        ],
    )
    .await;
    ok(
        &env,
        &["fsm", "retry", "chores/c1", "-n", ns, "--by", "bob"],
    )
    .await;
    // The operator took 1 (applied: paused) and 2 (refused); 3 is pending.
    take(
        &env,
        "c1",
        2,
        json!({
            "paused": {"seq": 1, "by": "alice", "at": "2026-01-01T00:01:00Z"},
            "commands": [
                {"seq": 1, "command": "pause", "by": "alice", "at": "2026-01-01T00:01:00Z"},
                {"seq": 2, "command": "goto Pending", "by": "alice",
                 "at": "2026-01-01T00:01:00Z", "refused": "paused: resume first"},
            ],
        }),
    )
    .await;
    let text = ok(&env, &["fsm", "describe", "chores", "c1", "-n", ns]).await;
    assert!(
        text.contains(
            "Paused:       since 2026-01-01T00:01:00Z (" // how long ago varies
        ),
        "{text}"
    );
    assert!(
        text.contains(" by alice, command #1; nothing runs until resume\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "Commands:     taken up to #2\n  \
             #1   2026-01-01T00:01:00Z  pause by alice: applied\n  \
             #2   2026-01-01T00:01:00Z  goto Pending by alice: refused: paused: resume first\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Pending commands:\n  #3   retry by bob, sent "),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_senders_all_land_with_distinct_numbers() {
    let env = env().await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.clone();
    // Four people at once: each read-modify-write that loses the race
    // (409) reads again and takes the next number.
    let senders: Vec<_> = (0..4)
        .map(|i| {
            let by = format!("person-{i}");
            kubectl(&env, &["fsm", "retry", "chores/c1", "-n", &ns, "--by", &by])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for sender in senders {
        let output = sender.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
    let list = annotation(&env, "c1").await;
    assert_eq!(seqs(&list), [1, 2, 3, 4]);
    let mut who: Vec<&str> = list.iter().filter_map(|c| c.by.as_deref()).collect();
    who.sort_unstable();
    assert_eq!(who, ["person-0", "person-1", "person-2", "person-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goto_that_cannot_be_valid_is_refused_without_a_write() {
    let env = env().await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.as_str();
    let api: Api<Chore> = Api::namespaced(env.client.clone(), &env.ns);
    let version = api.get("c1").await.unwrap().resource_version();

    let output = run(&env, &["fsm", "goto", "chores/c1", "Nowhere", "-n", ns]).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "error: nothing was sent to {ns}/c1\n  caused by: machine ChoreState has no state \"Nowhere\" \
             (its states: Pending, Running, Done, Failed)"
        )),
        "{stderr}"
    );
    let output = run(&env, &["fsm", "goto", "chores", "c1", "Failed", "-n", ns]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("Failed is a failed state"),
        "{}",
        text(&output.stderr)
    );
    // A resource alone names no object.
    let output = run(&env, &["fsm", "goto", "chores", "Done", "-n", ns]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("names no object"),
        "{}",
        text(&output.stderr)
    );

    let chore = api.get("c1").await.unwrap();
    assert_eq!(chore.resource_version(), version, "nothing was written");
    assert!(!chore.annotations().contains_key(COMMANDS_ANNOTATION));

    // A missing object is named.
    let output = run(&env, &["fsm", "pause", "chores/nope", "-n", ns]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains(&format!("Chore {ns}/nope: not found")),
        "{}",
        text(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_times_out_clearly_without_an_operator_and_reports_a_refusal() {
    let env = env().await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.as_str();

    // No operator: the command stays pending, the wait ends with exit 1.
    let started = std::time::Instant::now();
    let output = run(&env, &["fsm", "pause", "chores/c1", "-n", ns, "--wait=2s"]).await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(2));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stdout).starts_with("command 1 (pause) sent to"),
        "{}",
        text(&output.stdout)
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "command 1 (pause) to {ns}/c1 was not taken within 2s: the record has taken commands up to #0. \
             Is the operator running?"
        )),
        "{stderr}"
    );
    assert_eq!(seqs(&annotation(&env, "c1").await), [1], "still pending");

    // An "operator" that takes command 2 and refuses it while the plugin
    // waits: exit 1 with the reason.
    let waiting = kubectl(&env, &["fsm", "pause", "chores/c1", "-n", ns, "--wait=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("command 2 in the annotation", || async {
        (seqs(&annotation(&env, "c1").await) == [1, 2]).then_some(())
    })
    .await;
    take(
        &env,
        "c1",
        2,
        json!({
            "paused": {"seq": 1, "at": "2026-01-01T00:01:00Z"},
            "commands": [
                {"seq": 1, "command": "pause", "at": "2026-01-01T00:01:00Z"},
                {"seq": 2, "command": "pause", "at": "2026-01-01T00:01:00Z",
                 "refused": "already paused"},
            ],
        }),
    )
    .await;
    let output = waiting.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "command 2 (pause) to {ns}/c1 was refused: already paused"
        )),
        "{stderr}"
    );

    // Applied: exit 0, said so.
    let waiting = kubectl(
        &env,
        &["fsm", "resume", "chores/c1", "-n", ns, "--wait=60s"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    eventually("command 3 in the annotation", || async {
        (seqs(&annotation(&env, "c1").await) == [3]).then_some(())
    })
    .await;
    take(
        &env,
        "c1",
        3,
        json!({"commands": [{"seq": 3, "command": "resume", "at": "2026-01-01T00:02:00Z"}]}),
    )
    .await;
    let output = waiting.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    assert!(
        text(&output.stdout).ends_with(&format!("command 3 (resume) applied to {ns}/c1\n")),
        "{}",
        text(&output.stdout)
    );
}

/// The real server of `scripts/real-apiserver` authorizes every request
/// (`--authorization-mode=AlwaysAllow`) and the embedded one enforces no
/// RBAC: the 403 and the conflict are injected, on the embedded server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_patch_names_the_verb_and_resource_and_a_conflict_is_retried() {
    let env = env_on(TestCluster::embedded()).await;
    create_chore(&env, "c1", &[]).await;
    let ns = env.ns.as_str();
    let server = env.cluster().embedded_server().unwrap();

    // The write lost a race once: read again, renumber, write.
    let conflict = server
        .faults()
        .add(Fault::error(409).verb("patch").resource("chores").times(1));
    let out = ok(&env, &["fsm", "pause", "chores/c1", "-n", ns]).await;
    assert!(out.starts_with("command 1 (pause) sent to"), "{out}");
    assert_eq!(conflict.hits(), 1);
    assert_eq!(seqs(&annotation(&env, "c1").await), [1]);

    let forbidden = server.faults().add(
        Fault::error(403)
            .verb("patch")
            .resource("chores")
            .message(&format!(
                "chores.plugin.operator-fsm.io \"c1\" is forbidden: User \"dev\" cannot patch \
                 resource \"chores\" in API group \"plugin.operator-fsm.io\" in the namespace \"{ns}\""
            )),
    );
    let output = run(&env, &["fsm", "retry", "chores/c1", "-n", ns]).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "error: forbidden: you may not patch chores.plugin.operator-fsm.io in namespace {ns}: "
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "(`kubectl auth can-i patch chores.plugin.operator-fsm.io -n {ns}` checks; \
             sending commands needs get and patch on the custom resource)"
        )),
        "{stderr}"
    );
    assert!(forbidden.hits() >= 1);
    assert_eq!(seqs(&annotation(&env, "c1").await), [1], "nothing written");
}

/// With the operator running, end to end: a chore whose first attempt
/// failed waits an hour for the next; once its cause is fixed,
/// `kubectl fsm retry --wait` runs it at once and reports the command
/// applied; `pause --wait` holds a running chore (it stays put); a signal
/// it does not take comes back refused, with the operator's reason, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_operator_running_commands_come_back_applied_or_refused() {
    let env = env().await;
    let ns = env.ns.as_str();
    let _operator = crate::plugin::run_controller::<crate::plugin::ChoreState>(
        &env,
        fsm_kube::StatusStore::default(),
    );
    create_chore(&env, "stuck", &["fail"]).await;
    crate::plugin::wait_for_state(&env, "stuck", "Pending", 1).await;
    let api: Api<Chore> = Api::namespaced(env.client.clone(), ns);
    api.patch(
        "stuck",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": {"fail": null}}})),
    )
    .await
    .unwrap();
    let out = ok(
        &env,
        &["fsm", "retry", "chores/stuck", "-n", ns, "--wait=60s"],
    )
    .await;
    assert!(
        out.contains("command 1 (retry)") && out.contains("applied"),
        "{out}"
    );
    crate::plugin::wait_for_state(&env, "stuck", "Done", 0).await;

    create_chore(&env, "held", &["hold"]).await;
    crate::plugin::wait_for_state(&env, "held", "Running", 0).await;
    let out = ok(
        &env,
        &["fsm", "pause", "chores/held", "-n", ns, "--wait=60s"],
    )
    .await;
    assert!(out.contains("applied"), "{out}");
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": {"hold": null}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let held = crate::plugin::wait_for_state(&env, "held", "Running", 0).await;
    assert!(held["paused"].is_object(), "{held}");

    let output = kubectl(
        &env,
        &[
            "fsm",
            "signal",
            "chores/held",
            "approve",
            "-n",
            ns,
            "--wait=60s",
        ],
    )
    .output()
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        said.contains("refused") && said.contains("paused: resume first"),
        "{said}"
    );

    let out = ok(
        &env,
        &["fsm", "resume", "chores/held", "-n", ns, "--wait=60s"],
    )
    .await;
    assert!(out.contains("applied"), "{out}");
    crate::plugin::wait_for_state(&env, "held", "Done", 0).await;
}
