//! Whether this process may still act for the objects it reconciles.
//!
//! With several replicas and leader election, a replica that lost the
//! leadership without noticing — paused by a long stall, a frozen VM, a
//! partition — may wake up with handlers to run from before. The engine
//! asks its [`Authority`] before it runs any user code and after every
//! checkpoint, so that such a process stops before it acts. The check is
//! local (a monotonic deadline, for a Lease) and so narrows the window
//! rather than closing it: a pause between the check and an external call
//! still lets the call through. Closing it needs the external system's
//! help, such as an idempotency key (see the semantics guide).

/// Tells the engine whether this process may still act.
///
/// `fsm_kube::leader::Leadership` implements it over a Lease; a process
/// that runs alone needs none.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use fsm_core::{Authority, AuthorityLost};
///
/// /// An authority a test (or an embedding runtime) switches off.
/// struct Switch(AtomicBool);
///
/// impl Authority for Switch {
///     fn check(&self) -> Result<(), AuthorityLost> {
///         if self.0.load(Ordering::Acquire) {
///             Ok(())
///         } else {
///             Err(AuthorityLost::new("switched off"))
///         }
///     }
/// }
///
/// let switch = Switch(AtomicBool::new(true));
/// assert!(switch.check().is_ok());
/// switch.0.store(false, Ordering::Release);
/// assert_eq!(
///     switch.check().unwrap_err().to_string(),
///     "this process may no longer act for its objects: switched off"
/// );
/// ```
pub trait Authority: Send + Sync + 'static {
    /// `Ok` while this process may act.
    ///
    /// # Errors
    /// [`AuthorityLost`], with the reason.
    fn check(&self) -> Result<(), AuthorityLost>;
}

/// This process may no longer act for its objects (for example, its Lease
/// may have expired). Nothing more is run or checkpointed; another process
/// takes over.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this process may no longer act for its objects: {reason}")]
pub struct AuthorityLost {
    reason: String,
}

impl AuthorityLost {
    /// Lost for `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        AuthorityLost {
            reason: reason.into(),
        }
    }

    /// Why.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl crate::classify::Classify for AuthorityLost {}
