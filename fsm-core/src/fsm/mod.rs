//! The `Fsm` trait: what the derive generates, and what a hand-written
//! machine implements.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::classify::Classify;
use crate::future::BoxFuture;
use crate::machine::Machine;
use crate::migration::{Migrated, MigrationError, OldRecord};
use crate::transition::Transition;

mod step;

pub use step::{
    CheckpointError, Checkpointer, PublishError, RESERVED_STATUS_FIELDS, StatusFields, Step,
};

/// A state machine: an enum whose variants are the states, with handlers,
/// compensations and a static [`Machine`] description.
///
/// `#[derive(OperatorFsm)]` implements it; it can also be implemented by
/// hand, as below.
///
/// # State encoding
/// A state is stored as its variant name plus, for a variant with fields,
/// the fields as JSON. The default [`Fsm::to_parts`] and [`Fsm::from_parts`]
/// rely on serde's default (externally tagged) enum representation; a
/// machine that uses another representation overrides both.
///
/// ```
/// use fsm_core::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
/// enum Light { Off, On { brightness: u8 }, Broken }
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("bulb error")]
/// struct BulbError;
/// impl Classify for BulbError {}
///
/// static STATES: [StateMeta; 3] = [
///     StateMeta::new("Off").initial().with_handler().next(&["On"]),
///     StateMeta::new("On").with_handler().with_data().ready().next(&["Off"]),
///     StateMeta::new("Broken").failed(),
/// ];
/// static MACHINE: Machine = Machine::new("Light", &STATES);
///
/// impl Fsm for Light {
///     type Resource = u8; // the wanted brightness
///     type Context = ();
///     type Error = BulbError;
///
///     fn machine() -> &'static Machine { &MACHINE }
///     fn state_name(&self) -> &'static str {
///         match self { Light::Off => "Off", Light::On { .. } => "On", Light::Broken => "Broken" }
///     }
///     fn unit_state(name: &str) -> Option<Self> {
///         match name { "Off" => Some(Light::Off), "Broken" => Some(Light::Broken), _ => None }
///     }
///     fn handle<'a>(&'a self, cx: &'a mut Step<'_, Self>)
///         -> BoxFuture<'a, Result<Transition<Self>, BulbError>> {
///         Box::pin(async move {
///             let wanted = *cx.resource();
///             Ok(match self {
///                 Light::Off if wanted > 0 => Transition::next(Light::On { brightness: wanted }),
///                 Light::On { brightness } if *brightness != wanted => Transition::next(Light::Off),
///                 _ => Transition::stay(),
///             })
///         })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let settled = Harness::<Light>::new(7, ()).run_until_settled().await.unwrap();
/// assert_eq!(settled.state, Light::On { brightness: 7 });
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a state machine",
    note = "add `#[derive(OperatorFsm)]` to the state enum, or implement `fsm_core::Fsm` by hand"
)]
pub trait Fsm: Sized + Clone + Send + Sync + StoredState + 'static {
    /// The object the machine runs for (a `kube::Resource` in an operator).
    type Resource: Send + Sync + 'static;
    /// The operator's shared context, given to every handler.
    type Context: Send + Sync + 'static;
    /// The handlers' error type.
    type Error: std::error::Error + Classify + Send + Sync + 'static;

    /// The static description of the machine.
    fn machine() -> &'static Machine;

    /// The name of this state's variant, as in [`Machine::states`].
    fn state_name(&self) -> &'static str;

    /// Builds the unit variant named `name`; `None` for an unknown name or a
    /// variant with fields. The engine builds failed, timeout, exhaustion
    /// and `goto` targets with it.
    fn unit_state(name: &str) -> Option<Self>;

    /// The state a new workflow starts in: the initial state, with its
    /// starting data when it carries some (the derive gives every field its
    /// `Default`), so that its handler can `checkpoint` before a
    /// non-idempotent call. `None` when the machine cannot build it.
    ///
    /// The default builds the initial state with [`Fsm::unit_state`]; a
    /// hand-written machine whose initial state carries data overrides it.
    fn initial_state() -> Option<Self> {
        Self::machine()
            .initial_state()
            .and_then(|s| Self::unit_state(s.name()))
    }

    /// Runs this state's handler.
    fn handle<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<Transition<Self>, Self::Error>>;

    /// Runs this state's compensation (rollback). The default does nothing,
    /// for states without one.
    fn compensate<'a>(
        &'a self,
        cx: &'a mut Step<'_, Self>,
    ) -> BoxFuture<'a, Result<(), Self::Error>> {
        let _ = cx;
        Box::pin(async { Ok(()) })
    }

    /// Runs the machine's `cleanup` when the object is deleted. `self` is
    /// the state the machine was in when deletion began, with its data (the
    /// initial state, as [`Fsm::initial_state`] builds it, when the object
    /// has no record). The default does nothing.
    fn cleanup<'a>(&'a self, cx: &'a mut Step<'_, Self>) -> BoxFuture<'a, Result<(), Self::Error>> {
        let _ = cx;
        Box::pin(async { Ok(()) })
    }

    /// Maps a state stored by an older version of the machine (see
    /// [`Machine::versioned`]) to a state of this build: for states removed
    /// or split, and data whose meaning changed. Asked, without running
    /// anything, about the current state and each compensable state on the
    /// trail of every record whose machine version is older than this
    /// build's; the migrated record is committed before the machine acts on
    /// it (see `docs/upgrading.md`).
    ///
    /// Return [`Migrated::Keep`] for what needs no migration (renames are
    /// applied after, fields added with `#[serde(default)]` take their
    /// default), or [`MigrationError`] for a record that cannot be
    /// migrated: it is then left untouched and reported unreadable. The
    /// default keeps everything. `#[derive(OperatorFsm)]` calls the
    /// function named by `#[fsm(migrate = path)]`.
    ///
    /// ```
    /// use fsm_core::{Migrated, MigrationError, OldRecord};
    /// # #[derive(Debug, PartialEq)]
    /// # enum Db { Provisioning, Ready { id: String } }
    ///
    /// // Version 2 removed `Seeding { id }`: its objects are ready.
    /// fn migrate(old: OldRecord<'_>) -> Result<Migrated<Db>, MigrationError> {
    ///     match (old.version, old.state) {
    ///         (1, "Seeding") => {
    ///             let id = old.data.and_then(|d| d["id"].as_str())
    ///                 .ok_or_else(|| MigrationError::new("Seeding without an id"))?;
    ///             Ok(Migrated::To(Db::Ready { id: id.to_owned() }))
    ///         }
    ///         _ => Ok(Migrated::Keep),
    ///     }
    /// }
    /// # let data = serde_json::json!({"id": "db-1"});
    /// # let old = OldRecord { state: "Seeding", data: Some(&data), version: 1 };
    /// # assert_eq!(migrate(old), Ok(Migrated::To(Db::Ready { id: "db-1".into() })));
    /// ```
    ///
    /// # Errors
    /// [`MigrationError`], saying why the record cannot be migrated.
    fn migrate(old: OldRecord<'_>) -> Result<Migrated<Self>, MigrationError> {
        let _ = old;
        Ok(Migrated::Keep)
    }

    /// The machine's diagram in Mermaid (see [`Machine::mermaid`]).
    fn mermaid() -> String {
        Self::machine().mermaid()
    }

    /// The machine's diagram in Graphviz DOT (see [`Machine::dot`]).
    fn dot() -> String {
        Self::machine().dot()
    }

    /// Splits the state into its variant name and its data (`None` for a
    /// unit variant), as stored in the record.
    ///
    /// # Errors
    /// The state's data could not be serialized.
    fn to_parts(&self) -> Result<(&'static str, Option<Value>), serde_json::Error> {
        Ok((self.state_name(), self.variant_data()?))
    }

    /// Rebuilds a state from its variant name and data.
    ///
    /// # Errors
    /// The data does not fit the variant.
    fn from_parts(name: &str, data: Option<&Value>) -> Result<Self, serde_json::Error> {
        Self::from_variant(name, data)
    }
}

/// A state enum that can be stored: one that implements serde's
/// `Serialize` and `Deserialize`. It is implemented for every such type,
/// so there is nothing to implement: derive serde's traits.
///
/// [`Fsm`] requires serde through this trait rather than naming serde's
/// traits, so that a state enum that lacks a serde derive gets one error
/// that says so, instead of one per missing trait and use. Generic code
/// that serializes a state itself bounds it with `S: Fsm + Serialize`.
#[diagnostic::on_unimplemented(
    message = "the state enum `{Self}` must derive `Serialize` and `Deserialize`",
    label = "add `Serialize, Deserialize` to the derives of `{Self}`",
    note = "a machine's states are stored as JSON in its record: \
            `#[derive(OperatorFsm, Clone, Serialize, Deserialize)]` \
            (both from `fsm_core::prelude` or `serde`)"
)]
pub trait StoredState: Sized {
    /// The data of this state's variant: `None` for a unit variant, else
    /// its fields as JSON (what [`Fsm::to_parts`] stores by default).
    ///
    /// # Errors
    /// The data cannot be represented as JSON, or the type does not
    /// serialize as an externally tagged enum variant.
    fn variant_data(&self) -> Result<Option<Value>, serde_json::Error>;

    /// Rebuilds a state from its variant name and data (what
    /// [`Fsm::from_parts`] does by default).
    ///
    /// # Errors
    /// The data does not fit the variant, or there is no such variant.
    fn from_variant(name: &str, data: Option<&Value>) -> Result<Self, serde_json::Error>;
}

#[diagnostic::do_not_recommend]
impl<T: Serialize + DeserializeOwned> StoredState for T {
    fn variant_data(&self) -> Result<Option<Value>, serde_json::Error> {
        crate::parts::data_of(self)
    }

    fn from_variant(name: &str, data: Option<&Value>) -> Result<Self, serde_json::Error> {
        crate::parts::from_parts(name, data)
    }
}

/// The starting value of a field of a data-carrying initial state: its
/// `Default`. The derive builds the initial state through this trait, so
/// that a field without `Default` is reported on the field, with why.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `Default`, so the initial state cannot be entered with it",
    label = "a field of the initial state needs `Default`",
    note = "the engine enters the initial state with every field's `Default` (e.g. `request_id: Option<String>` starts as `None`); derive or implement `Default` for `{Self}`, or move this data to a later state"
)]
pub trait InitialField: Sized {
    /// The field's starting value.
    fn initial() -> Self;
}

impl<T: Default> InitialField for T {
    fn initial() -> Self {
        T::default()
    }
}
