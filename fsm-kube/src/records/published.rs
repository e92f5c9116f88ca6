//! What the `crd` command publishes on the CRD for tools that do not have
//! the machine's Rust type (`kubectl fsm`, dashboards): the machine's
//! diagram and the store its records are in, as the annotation
//! [`MACHINE_ANNOTATION`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::{Deserialize, Serialize};

use crate::store::StoreKind;
use fsm_core::MachineGraph;

/// The CRD annotation holding a [`PublishedMachine`] as JSON.
pub const MACHINE_ANNOTATION: &str = "operator-fsm.io/machine";

/// What an operator publishes about its machine on its CRD: where the
/// records are and the diagram.
///
/// ```
/// use fsm_kube::cli::StoreKind;
/// use fsm_kube::records::PublishedMachine;
/// use fsm_kube::fsm_core::{Machine, StateMeta};
///
/// static STATES: [StateMeta; 1] = [StateMeta::new("Ready").initial().final_state()];
/// let published = PublishedMachine {
///     store: StoreKind::ConfigMap,
///     graph: Machine::new("Job", &STATES).graph(),
/// };
/// let json = serde_json::to_string(&published).unwrap();
/// assert!(json.starts_with(r#"{"store":"config-map","machine":"Job","#));
/// assert_eq!(serde_json::from_str::<PublishedMachine>(&json).unwrap(), published);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedMachine {
    /// The store the operator keeps its records in.
    pub store: StoreKind,
    /// The machine's diagram (its name, states and arrows).
    #[serde(flatten)]
    pub graph: MachineGraph,
}

impl PublishedMachine {
    /// The machine published on `crd`, if any.
    ///
    /// # Errors
    /// The annotation is there but does not parse.
    pub fn from_crd(crd: &CustomResourceDefinition) -> Result<Option<Self>, serde_json::Error> {
        crd.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MACHINE_ANNOTATION))
            .map(|json| serde_json::from_str(json))
            .transpose()
    }

    /// Sets the annotation on `crd`.
    ///
    /// # Errors
    /// Serialization failed (not expected).
    pub fn annotate(&self, crd: &mut CustomResourceDefinition) -> Result<(), serde_json::Error> {
        let json = serde_json::to_string(self)?;
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(MACHINE_ANNOTATION.to_owned(), json);
        Ok(())
    }
}
