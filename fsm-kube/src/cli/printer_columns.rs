//! `crd --printer-columns`: the state of each object in `kubectl get`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};

use super::Error;
use crate::store::{RecordPlace, StoreKind};

/// Adds `State`, `Attempt` and `In-State` (the time in the state) printer
/// columns to every version of `crd`, read from `.status.fsm`, and `Age`
/// (which a CRD with printer columns no longer shows by itself).
///
/// # Errors
/// [`Error::PrinterColumnsNeedStatusStore`] for another store: its
/// records are not on the object, where printer columns read.
pub fn add_printer_columns(
    crd: &mut CustomResourceDefinition,
    store: StoreKind,
) -> Result<(), Error> {
    if store.place() != RecordPlace::Status {
        return Err(Error::PrinterColumnsNeedStatusStore(store));
    }
    let column =
        |name: &str, kind: &str, path: &str, description: &str| CustomResourceColumnDefinition {
            name: name.to_owned(),
            type_: kind.to_owned(),
            json_path: path.to_owned(),
            description: Some(description.to_owned()),
            ..CustomResourceColumnDefinition::default()
        };
    let columns = [
        column(
            "State",
            "string",
            ".status.fsm.state",
            "The machine's current state",
        ),
        column(
            "Attempt",
            "integer",
            ".status.fsm.attempt",
            "The attempt of the current state's handler",
        ),
        column(
            "In-State",
            "date",
            ".status.fsm.enteredAt",
            "When the current state was entered",
        ),
        column(
            "Age",
            "date",
            ".metadata.creationTimestamp",
            "When the object was created",
        ),
    ];
    for version in &mut crd.spec.versions {
        let existing = version
            .additional_printer_columns
            .get_or_insert_with(Vec::new);
        for column in &columns {
            if !existing.iter().any(|c| c.name == column.name) {
                existing.push(column.clone());
            }
        }
    }
    Ok(())
}
