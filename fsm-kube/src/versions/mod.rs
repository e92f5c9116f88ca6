//! Several versions of the resource, and conversion between them (hub
//! and spoke): [`Versions`], re-exported at the crate root.

mod carry;
mod crd;
mod error;
mod options;
mod registry;
mod review;
mod spoke;

pub use crd::WebhookTarget;
pub use error::{ConversionError, VersionsError};
pub use options::VersionOptions;
pub use registry::Versions;
pub use review::ReviewOutcome;
#[cfg(feature = "cli")]
pub(crate) use spoke::Spoke;

#[cfg(test)]
pub(crate) mod tests;
