//! Which resource a command names, and what its operator published about
//! its machine on the CRD.
//!
//! [`matches()`] and [`from_crd`] are pure; [`resolve`] lists the CRDs.

use fsm_kube::cli::ResourceInfo;
use fsm_kube::records::PublishedMachine;
use fsm_kube::records::Watched;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, ResourceExt};

use crate::error::Error;

/// A resource managed by an operator-fsm operator, and its machine.
pub type Target = Watched;

/// Whether `name` names `crd`, as kubectl resolves names: its plural,
/// singular, kind or a short name (case-insensitive), alone or followed by
/// `.` and the group; or the CRD's own name.
pub fn matches(crd: &CustomResourceDefinition, name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let names = &crd.spec.names;
    let (bare, group) = match name.split_once('.') {
        Some((bare, group)) => (bare, Some(group)),
        None => (name.as_str(), None),
    };
    if group.is_some_and(|g| g != crd.spec.group.to_ascii_lowercase()) {
        return false;
    }
    let mut candidates = vec![
        names.plural.to_ascii_lowercase(),
        names.kind.to_ascii_lowercase(),
    ];
    candidates.extend(names.singular.iter().map(|s| s.to_ascii_lowercase()));
    candidates.extend(
        names
            .short_names
            .iter()
            .flatten()
            .map(|s| s.to_ascii_lowercase()),
    );
    candidates.iter().any(|c| c == bare)
}

/// The target `crd` describes.
///
/// # Errors
/// [`Error::NotPublished`] without the annotation,
/// [`Error::BadPublication`] when it does not parse,
/// [`Error::NoVersion`] when the CRD serves no version.
pub fn from_crd(crd: &CustomResourceDefinition) -> Result<Target, Error> {
    let crd_name = crd.name_any();
    let machine = PublishedMachine::from_crd(crd)
        .map_err(|error| Error::BadPublication {
            crd: crd_name.clone(),
            error,
        })?
        .ok_or_else(|| Error::NotPublished(crd_name.clone()))?;
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage && v.served)
        .or_else(|| crd.spec.versions.iter().find(|v| v.served))
        .ok_or(Error::NoVersion(crd_name))?;
    Ok(Target {
        resource: ResourceInfo {
            group: crd.spec.group.clone(),
            version: version.name.clone(),
            kind: crd.spec.names.kind.clone(),
            plural: crd.spec.names.plural.clone(),
            namespaced: crd.spec.scope == "Namespaced",
        },
        machine,
    })
}

/// The target `name` names, from the server's CRDs.
///
/// # Errors
/// [`Error::UnknownResource`], [`Error::AmbiguousResource`], those of
/// [`from_crd`], [`Error::Forbidden`] when the CRDs may not be listed, and
/// [`Error::Kube`].
pub async fn resolve(client: &Client, name: &str) -> Result<Target, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let list = crds.list(&Default::default()).await.map_err(|e| {
        Error::from_request(
            e,
            "list",
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
        )
    })?;
    let found: Vec<&CustomResourceDefinition> =
        list.items.iter().filter(|crd| matches(crd, name)).collect();
    match found.as_slice() {
        [] => Err(Error::UnknownResource(name.to_owned())),
        [crd] => from_crd(crd),
        several => Err(Error::AmbiguousResource {
            name: name.to_owned(),
            candidates: several.iter().map(|c| c.name_any()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
        CustomResourceDefinitionVersion,
    };

    use super::*;

    fn crd() -> CustomResourceDefinition {
        CustomResourceDefinition {
            metadata: kube::api::ObjectMeta {
                name: Some("databases.example.io".into()),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: "example.io".into(),
                names: CustomResourceDefinitionNames {
                    kind: "Database".into(),
                    plural: "databases".into(),
                    singular: Some("database".into()),
                    short_names: Some(vec!["db".into()]),
                    ..Default::default()
                },
                scope: "Namespaced".into(),
                versions: vec![
                    CustomResourceDefinitionVersion {
                        name: "v1beta1".into(),
                        served: true,
                        storage: false,
                        ..Default::default()
                    },
                    CustomResourceDefinitionVersion {
                        name: "v1".into(),
                        served: true,
                        storage: true,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn names_match_as_kubectl_resolves_them() {
        let crd = crd();
        for name in [
            "databases",
            "database",
            "Database",
            "db",
            "databases.example.io",
            "DB",
        ] {
            assert!(matches(&crd, name), "{name}");
        }
        for name in ["dbs", "databases.other.io", "data"] {
            assert!(!matches(&crd, name), "{name}");
        }
    }

    #[test]
    fn a_crd_without_the_annotation_is_refused_with_the_fix() {
        let error = from_crd(&crd()).unwrap_err();
        assert!(matches!(error, Error::NotPublished(_)), "{error:?}");
        assert!(error.to_string().contains("`crd` command"), "{error}");
    }

    #[test]
    fn the_storage_version_is_read() {
        use fsm_core::{Machine, StateMeta};
        use fsm_kube::cli::StoreKind;
        static STATES: [StateMeta; 1] = [StateMeta::new("Ready").initial().final_state()];
        let mut crd = crd();
        let published = PublishedMachine {
            store: StoreKind::Secret,
            graph: Machine::new("DbState", &STATES).graph(),
        };
        published.annotate(&mut crd).unwrap();
        let target = from_crd(&crd).unwrap();
        assert_eq!(target.resource.version, "v1");
        assert_eq!(target.resource.plural, "databases");
        assert!(target.resource.namespaced);
        assert_eq!(target.machine, published);
    }
}
