//! `migrate-storage`: every object of the resource rewritten at the
//! storage version, then the old versions removed from the CRD's
//! `status.storedVersions`, so that a later build may drop them.
//!
//! The API server keeps an object at the storage version of the day it
//! was last written, and the API does not say which version that was; so
//! every object is written back as it was read (a replace conditional on
//! its resourceVersion, which the server stores re-encoded at today's
//! storage version). An object written by anyone since it was listed
//! (a conflict) is already at the storage version; one deleted since is
//! gone. Only when every object is accounted for are the old versions
//! removed from `storedVersions`; any other failure leaves them. Objects
//! stored at a version other than the storage one are converted when
//! read: with a conversion webhook, the operator serving it must be
//! running.

use std::fmt::Write as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::TypeMeta;
use kube::{Api, Client, CustomResourceExt};
use serde::Serialize;

use super::api_versions::storage_of;
use super::{Error, Operator};
use crate::KubeResource;
use fsm_core::Fsm;

/// How many objects one list request reads.
const PAGE: u32 = 500;

/// What `migrate-storage` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// The CRD's name.
    pub crd: String,
    /// The storage version every object is now at.
    pub storage_version: String,
    /// `status.storedVersions` before.
    pub stored_before: Vec<String>,
    /// `status.storedVersions` after (unchanged with `--dry-run`).
    pub stored_after: Vec<String>,
    /// Objects written back at the storage version.
    pub rewritten: usize,
    /// Objects someone else wrote after they were listed (so already at
    /// the storage version).
    pub written_since: usize,
    /// Objects deleted after they were listed.
    pub gone: usize,
    /// Whether nothing was written (`--dry-run`).
    pub dry_run: bool,
}

impl Migration {
    /// A few lines for a person.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let verb = if self.dry_run {
            "would rewrite"
        } else {
            "rewrote"
        };
        let _ = writeln!(
            out,
            "{}: storage version {}; {verb} {} object(s) ({} written by others since listed, {} gone)",
            self.crd, self.storage_version, self.rewritten, self.written_since, self.gone
        );
        let before = self.stored_before.join(", ");
        if self.dry_run {
            let _ = writeln!(
                out,
                "storedVersions: {before} (dry run: would become {})",
                self.storage_version
            );
        } else if self.stored_before == self.stored_after {
            let _ = writeln!(out, "storedVersions: {before} (unchanged)");
        } else {
            let _ = writeln!(
                out,
                "storedVersions: {before} -> {}",
                self.stored_after.join(", ")
            );
        }
        out
    }
}

/// Rewrites every object of the kind `crd_name` defines at its storage
/// version, then sets its `status.storedVersions` to the storage version
/// alone. With `dry_run`, only counts.
///
/// # Errors
/// [`Error::Migration`] when the CRD is missing, has no storage version,
/// or its storage version changed during the run; [`Error::Kube`] for a
/// failed request other than a conflict or a not-found of an object.
/// `storedVersions` is left as it was on every error.
pub async fn migrate_storage(
    client: &Client,
    crd_name: &str,
    dry_run: bool,
) -> Result<Migration, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get_opt(crd_name)
        .await
        .map_err(Error::Kube)?
        .ok_or_else(|| Error::Migration {
            crd: crd_name.to_owned(),
            reason: "the CRD is not installed".to_owned(),
        })?;
    let storage = storage_of(&crd).ok_or_else(|| Error::Migration {
        crd: crd_name.to_owned(),
        reason: "the CRD has no storage version".to_owned(),
    })?;
    let stored_before = crd
        .status
        .as_ref()
        .and_then(|status| status.stored_versions.clone())
        .unwrap_or_default();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&crd.spec.group, &storage, &crd.spec.names.kind),
        &crd.spec.names.plural,
    );
    let mut migration = Migration {
        crd: crd_name.to_owned(),
        storage_version: storage.clone(),
        stored_before: stored_before.clone(),
        stored_after: stored_before,
        dry_run,
        ..Migration::default()
    };
    rewrite_all(client, &resource, dry_run, &mut migration).await?;
    if dry_run || migration.stored_before == [storage.clone()] {
        return Ok(migration);
    }
    // The storage version must still be the one every object was written
    // at, or the old versions are not gone.
    let now = crds.get(crd_name).await.map_err(Error::Kube)?;
    if storage_of(&now).as_deref() != Some(storage.as_str()) {
        return Err(Error::Migration {
            crd: crd_name.to_owned(),
            reason: format!(
                "the storage version changed from {storage} to {} during the run; run it again",
                storage_of(&now).unwrap_or_default()
            ),
        });
    }
    let patch = serde_json::json!({ "status": { "storedVersions": [storage] } });
    crds.patch_status(crd_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::Kube)?;
    migration.stored_after = vec![storage];
    Ok(migration)
}

/// Writes every object of `resource` back as listed, page by page.
async fn rewrite_all(
    client: &Client,
    resource: &ApiResource,
    dry_run: bool,
    migration: &mut Migration,
) -> Result<(), Error> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = all.list(&params).await.map_err(Error::Kube)?;
        for mut object in page.items {
            if dry_run {
                migration.rewritten += 1;
                continue;
            }
            object.types = Some(TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            });
            let name = object.metadata.name.clone().unwrap_or_default();
            let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
                None => Api::all_with(client.clone(), resource),
            };
            match api.replace(&name, &PostParams::default(), &object).await {
                Ok(_) => migration.rewritten += 1,
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    migration.written_since += 1;
                }
                Err(kube::Error::Api(status)) if status.code == 404 => migration.gone += 1,
                Err(error) => return Err(Error::Kube(error)),
            }
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: clap::Args + Clone + Send + Sync + 'static,
{
    /// Runs `migrate-storage` for the operator's resource and writes what
    /// it did to `out`.
    ///
    /// # Errors
    /// See [`migrate_storage`].
    pub(super) async fn migrate_storage_command(
        &self,
        args: &super::MigrateStorageArgs,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<(), Error> {
        let client = super::connect(&args.connect).await?;
        let migration = migrate_storage(&client, F::Resource::crd_name(), args.dry_run).await?;
        let text = match args.output {
            super::OutputFormat::Text => migration.render_text(),
            super::OutputFormat::Json => {
                let mut json = serde_json::to_string_pretty(&migration).map_err(Error::Json)?;
                json.push('\n');
                json
            }
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_says_what_changed() {
        let migration = Migration {
            crd: "databases.example.io".into(),
            storage_version: "v1".into(),
            stored_before: vec!["v1alpha1".into(), "v1".into()],
            stored_after: vec!["v1".into()],
            rewritten: 3,
            written_since: 1,
            gone: 0,
            dry_run: false,
        };
        let text = migration.render_text();
        assert!(
            text.contains("rewrote 3 object(s) (1 written by others"),
            "{text}"
        );
        assert!(
            text.contains("storedVersions: v1alpha1, v1 -> v1"),
            "{text}"
        );
        let dry = Migration {
            dry_run: true,
            stored_after: migration.stored_before.clone(),
            ..migration
        };
        assert!(dry.render_text().contains("would rewrite 3"));
        assert!(dry.render_text().contains("dry run: would become v1"));
    }
}
