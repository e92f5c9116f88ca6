//! `shop`: an object that lives for months. A [`Shop`] runs one version of
//! its app; every change of `spec.version` is an upgrade, and upgrades keep
//! coming long after the first run came to rest.
//!
//! # The machine
//! [`ShopState`]: `Provisioning` creates the schema (a ConfigMap standing
//! for the database schema) and the app (a Deployment), or adopts the ones
//! running. `Serving { version }` is `ready`. A new version is a small
//! saga: `Migrating { from, to }` migrates the schema (compensation:
//! revert it), `Rolling { from, to }` rolls the app (compensation: roll it
//! back), and `Serving { version: to }` closes the saga's scope. With
//! `requireApproval` the upgrade first waits in `AwaitingApproval` for a
//! person's `signal approve` (or `reject`). Both objects are dependents
//! ([`desired`]): every state converges the whole set at the versions of
//! its point in the upgrade.
//!
//! # What a long life needs, and where it is
//! - **A failure undoes only the work that failed.** Reaching `Serving`
//!   closes the scope (`ready`), so a broken migration to v3 after a
//!   finished v1→v2 upgrade reverts v3's schema and leaves v2 running;
//!   the record's trail stays at two closed entries however many upgrades
//!   follow.
//! - **Failed is not a dead end.** `on_failed_spec_change = restart`: a
//!   spec change (reverting `version`) restarts a failed shop, and so does
//!   a person's `retry` command. `Provisioning` then adopts the running
//!   app, and `Serving` starts the upgrade again if the spec still asks
//!   for it.
//! - **People step in through commands**, which the engine takes once
//!   each, in order, and logs in the record (`commands`): `pause` (nothing
//!   runs, not even a spec change, until `resume`), `resume`, `retry`,
//!   `goto STATE`, `signal NAME`. `kubectl fsm pause|resume|retry|goto|signal`
//!   writes them into the object's `operator-fsm.io/commands` annotation;
//!   [`send_command`] does the same from Rust. A command the state cannot
//!   take (an `approve` while nothing awaits approval) is refused, with the
//!   reason in the log and an event.
//!
//! # Degraded, or an error?
//! A handler's error counts an attempt; when the state's attempts run out
//! the workflow fails and its open scope is undone. That is right for a
//! *step of a workflow*: a migration that cannot finish must be rolled
//! back. It is wrong for a `ready` state that keeps its dependents
//! converged: the shop *is* serving, and a person who took a field of its
//! Deployment over with `kubectl apply --server-side --force-conflicts`
//! would otherwise make it fail in seconds. `Serving` therefore reports a
//! convergence it cannot reach with [`Transition::degraded`]: it stays,
//! the object shows `Degraded` with the reason, and the handler tries
//! again on the state's backoff without spending attempts, until the
//! conflict is gone (the next successful pass clears it). Use an error for
//! what the workflow must undo or give up on; `degraded` for what a
//! resting object must keep trying to reach.
//!
//! # Running it
//! [`run_in`] runs the operator (record in the Shop's status, dependents
//! applied by field manager [`FIELD_MANAGER`]); the demo runs it with the
//! others (`cargo run -p examples --bin demo`). The migrations are a fake
//! ([`Migrations`]) whose versions can be broken and fixed.

mod crd;
mod desired;
mod machine;
mod migrations;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};
use operator_fsm::core::{Command, CommandAction, CommandListError};
use operator_fsm::dependents::{DependentsRuntime, owns_dependents};
use operator_fsm::records::COMMANDS_ANNOTATION;
use operator_fsm::{FsmReconciler, ReconcilerOptions, StatusStore};

use crate::support::scoped_api;

pub use crd::{Shop, ShopSpec, ShopStatus};
pub use desired::{IMAGE_REPOSITORY, VERSION_ANNOTATION, desired, image, kinds, schema_name};
pub use machine::{ShopContext, ShopError, ShopState};
pub use migrations::{MigrationFailed, Migrations};

/// The field manager of the operator's applies.
pub const FIELD_MANAGER: &str = "shop-operator";

/// Runs the [`ShopState`] machine for the Shops of `namespace` (every
/// namespace when `None`), its record in each Shop's status, until the
/// future is dropped.
pub async fn run_in(
    client: Client,
    namespace: Option<String>,
    ctx: ShopContext,
    options: ReconcilerOptions,
) {
    let fsm = FsmReconciler::<ShopState>::builder(client.clone(), StatusStore::new())
        .options(options)
        .dependents(runtime(client.clone(), &ctx))
        .build();
    controller(&client, fsm.dependents(), namespace.as_deref())
        .run(fsm.reconcile(), fsm.error_policy(), Arc::new(ctx))
        .for_each(|_| async {})
        .await;
}

/// The dependents runtime: field manager [`FIELD_MANAGER`], looking again
/// at a pending rollout after the context's `poll`.
pub fn runtime(client: Client, ctx: &ShopContext) -> DependentsRuntime {
    DependentsRuntime::new(client)
        .field_manager(FIELD_MANAGER)
        .pending_requeue(ctx.poll)
}

/// A controller of Shops woken by changes of their schema and app.
fn controller(
    client: &Client,
    runtime: &DependentsRuntime,
    namespace: Option<&str>,
) -> Controller<Shop> {
    // The cache keeps the Shops without their managedFields.
    let shops = operator_fsm::watch::lean_controller(
        scoped_api::<Shop>(client.clone(), namespace),
        watcher::Config::default(),
    );
    owns_dependents(shops, runtime, namespace, kinds())
}

/// Why [`send_command`] could not send.
#[derive(Debug, thiserror::Error)]
pub enum SendCommandError {
    /// Reading or patching the Shop failed (after a few conflicts, too).
    #[error("the Kubernetes API failed")]
    Kube(#[from] kube::Error),
    /// The Shop carries a command list that is not valid: a person must
    /// fix or remove the annotation first (the operator ignores it).
    #[error("the Shop's command list cannot be read")]
    Unreadable(#[from] CommandListError),
}

/// How often [`send_command`] reads the Shop again after a conflict.
const SEND_ATTEMPTS: u32 = 5;

/// Sends a person's command to Shop `name`, as `kubectl fsm` does: the
/// commands the machine has not taken yet stay, those it has are pruned,
/// and `action` is appended with the next sequence number, by a merge
/// patch of the `operator-fsm.io/commands` annotation conditional on the
/// Shop's `resourceVersion` (read again after a conflict). Returns the
/// command's sequence number; the record's `commands` log says whether it
/// was applied or refused once the operator took it.
///
/// # Errors
/// [`SendCommandError`].
pub async fn send_command(
    shops: &Api<Shop>,
    name: &str,
    action: CommandAction,
    by: &str,
) -> Result<u64, SendCommandError> {
    let mut attempt = 1;
    loop {
        let shop = shops.get(name).await?;
        let taken = shop
            .status
            .as_ref()
            .and_then(|s| s.fsm.as_ref())
            .and_then(|f| f.record::<ShopState>().ok())
            .map_or(0, |r| r.command_seq);
        let mut commands: Vec<Command> = operator_fsm::records::read_commands(&shop.metadata)?
            .into_iter()
            .filter(|c| c.seq > taken)
            .collect();
        let seq = commands.iter().map(|c| c.seq).max().unwrap_or(0).max(taken) + 1;
        let mut command = Command::new(seq, action.clone()).by(by);
        command.at = Some(jiff::Timestamp::now());
        commands.push(command);
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": shop.resource_version(),
            "annotations": {COMMANDS_ANNOTATION: Command::list_to_text(&commands)},
        }});
        match shops
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(shop = name, seq, command = %action, by, "command sent");
                return Ok(seq);
            }
            Err(kube::Error::Api(status)) if status.is_conflict() && attempt < SEND_ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
