//! The demo's long-lived object: the Shop `corner`, from the second act
//! on, lives through what months of a shop's life bring, in seconds. Each
//! step waits (bounded) for the operator before the next:
//!
//! 1. an upgrade v1 → v2;
//! 2. an on-call engineer pauses it (a `pause` command), asks for v3
//!    meanwhile (nothing runs), and resumes it: v3 is rolled out;
//! 3. v4's migration script is broken: the upgrade fails and only it is
//!    rolled back (the shop keeps serving v3, resting in `Failed`);
//! 4. the script is fixed and a `retry` command recovers the shop: v4;
//! 5. a stray `approve` while nothing awaits approval is refused (the
//!    record's command log says why); then upgrades require approval, v5
//!    waits in `AwaitingApproval` until a release manager's
//!    `signal approve`.
//!
//! Commands go the way `kubectl fsm` sends them: the object's
//! `operator-fsm.io/commands` annotation ([`send_command`]).

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use operator_fsm::core::{CommandAction, StateRecord};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

use super::observe::{Kind, read_record};
use crate::shop::{Migrations, SendCommandError, Shop, send_command};

/// The demo's shop.
pub const SHOP: &str = "corner";

/// The version the story ends with.
pub const LAST_VERSION: u32 = 5;

/// The version whose migration script is broken until the story fixes it.
pub const BROKEN_VERSION: u32 = 4;

/// Why the story stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum StoryError {
    /// The Kubernetes API failed.
    #[error("the Kubernetes API failed")]
    Kube(#[from] kube::Error),
    /// A command could not be sent.
    #[error(transparent)]
    Command(#[from] SendCommandError),
    /// The shop did not get where the story waits for in time.
    #[error("timed out waiting until the shop {0}")]
    TimedOut(String),
}

/// The story of one shop: where it is, and where it says what happens.
pub struct ShopStory {
    client: Client,
    namespace: String,
    migrations: Arc<Migrations>,
    lines: UnboundedSender<String>,
    deadline: Instant,
}

/// Whether `record` rests in `Serving { version }`.
fn serving(record: &StateRecord, version: u32) -> bool {
    record.state == "Serving"
        && record.data == Some(json!({ "version": version }))
        && !record.is_unwinding()
        && record.next_attempt_at.is_none()
}

impl ShopStory {
    /// A story for the shop in `namespace`, whose operator's migrations are
    /// `migrations`, telling `lines`, given up at `deadline`.
    pub fn new(
        client: Client,
        namespace: &str,
        migrations: Arc<Migrations>,
        lines: UnboundedSender<String>,
        deadline: Instant,
    ) -> Self {
        ShopStory {
            client,
            namespace: namespace.to_owned(),
            migrations,
            lines,
            deadline,
        }
    }

    fn say(&self, line: impl Into<String>) {
        // The demo may have stopped listening (timed out): nothing to say.
        let _ = self.lines.send(line.into());
    }

    fn shops(&self) -> Api<Shop> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn edit(&self, spec: serde_json::Value) -> Result<(), StoryError> {
        self.shops()
            .patch(
                SHOP,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "spec": spec })),
            )
            .await?;
        Ok(())
    }

    async fn send(&self, action: CommandAction, by: &str) -> Result<u64, StoryError> {
        Ok(send_command(&self.shops(), SHOP, action, by).await?)
    }

    /// Waits until the shop's record satisfies `until`.
    async fn wait(
        &self,
        what: &str,
        until: impl Fn(&StateRecord) -> bool,
    ) -> Result<StateRecord, StoryError> {
        loop {
            let record = read_record(&self.client, &self.namespace, Kind::Shop, SHOP).await?;
            if let Some(record) = record.filter(|r| until(r)) {
                return Ok(record);
            }
            if Instant::now() >= self.deadline {
                return Err(StoryError::TimedOut(what.to_owned()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Tells the story, step by step.
    ///
    /// # Errors
    /// [`StoryError`] when the API fails or the shop does not get where a
    /// step waits for before the deadline.
    pub async fn tell(self) -> Result<(), StoryError> {
        let shop = format!("shop/{SHOP}");
        self.wait("serves v1", |r| serving(r, 1)).await?;

        self.edit(json!({"version": 2})).await?;
        self.say(format!("{shop}: version 1 → 2"));
        self.wait("serves v2", |r| serving(r, 2)).await?;

        let seq = self.send(CommandAction::Pause, "on-call").await?;
        self.wait("is paused", |r| r.paused.is_some()).await?;
        self.say(format!("{shop}: paused by on-call (command {seq})"));
        self.edit(json!({"version": 3})).await?;
        tokio::time::sleep(Duration::from_millis(800)).await;
        let paused = self.wait("stays paused", |r| r.paused.is_some()).await?;
        self.say(format!(
            "{shop}: version 2 → 3 asked for while paused: still {} after 0.8s, nothing ran",
            paused.state
        ));
        let seq = self.send(CommandAction::Resume, "on-call").await?;
        self.say(format!("{shop}: resumed by on-call (command {seq})"));
        self.wait("serves v3", |r| serving(r, 3)).await?;

        self.edit(json!({"version": BROKEN_VERSION})).await?;
        self.say(format!(
            "{shop}: version 3 → {BROKEN_VERSION}, whose migration script is broken"
        ));
        let failed = self
            .wait("fails", |r| r.state == "Failed" && !r.is_unwinding())
            .await?;
        self.say(format!(
            "{shop}: Failed ({}); only that upgrade was rolled back",
            failed.last_error.as_deref().unwrap_or("no reason")
        ));
        self.migrations.fix(BROKEN_VERSION);
        let seq = self.send(CommandAction::Retry, "on-call").await?;
        self.say(format!(
            "{shop}: migration script fixed; retried by on-call (command {seq})"
        ));
        self.wait("serves v4", |r| serving(r, BROKEN_VERSION))
            .await?;

        let seq = self
            .send(CommandAction::Signal("approve".into()), "intern")
            .await?;
        let refused = self
            .wait("logs the stray approval", |r| r.command_seq >= seq)
            .await?;
        let reason = refused
            .commands
            .iter()
            .find(|c| c.seq == seq)
            .and_then(|c| c.refused.clone())
            .unwrap_or_else(|| "applied".to_owned());
        self.say(format!(
            "{shop}: signal approve by intern (command {seq}) refused: {reason}"
        ));
        self.edit(json!({"version": LAST_VERSION, "requireApproval": true}))
            .await?;
        self.say(format!("{shop}: version 4 → 5, approval required"));
        self.wait("awaits approval", |r| r.state == "AwaitingApproval")
            .await?;
        let seq = self
            .send(CommandAction::Signal("approve".into()), "release-manager")
            .await?;
        self.say(format!(
            "{shop}: AwaitingApproval; signal approve by release-manager (command {seq})"
        ));
        self.wait("serves v5", |r| serving(r, 5)).await?;
        self.say(format!("{shop}: serves v5"));
        Ok(())
    }
}
