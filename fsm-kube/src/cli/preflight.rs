//! `preflight`: before an upgrade (or a rollback), every stored record of
//! the operator's kind, read from where its store keeps it, and what this
//! build of the machine would make of it: run it as it is, load a renamed
//! state, migrate it, or leave it alone (written by a newer build, or
//! unreadable). Nothing is written.
//!
//! [`fetch`] does the I/O (list requests only); [`Preflight::judge`],
//! [`Preflight::render_text`] and [`Preflight::render_json`] are pure.
//!
//! ```
//! use fsm_kube::cli::preflight::{Preflight, StoredRecord, Verdict};
//! use fsm_kube::records::Location;
//! use fsm_kube::fsm_core::RawRecord;
//! # use fsm_kube::prelude::*;
//! # #[derive(OperatorFsm, Clone, Debug, Serialize, Deserialize)]
//! # #[fsm(resource = (), version = 2)]
//! # enum Job {
//! #     #[fsm(initial, handler = work, next(Done), renamed_from = "Begin")]
//! #     Start,
//! #     #[fsm(final)]
//! #     Done,
//! #     #[fsm(failed)]
//! #     Failed,
//! # }
//! # async fn work(_: &mut Step<'_, Job>) -> Result<Transition<Job>, std::convert::Infallible> {
//! #     Ok(Transition::next(Job::Done))
//! # }
//!
//! let stored = |name: &str, state: &str, version: u32| StoredRecord {
//!     location: Location {
//!         kind: "Job".into(),
//!         namespace: Some("default".into()),
//!         name: name.into(),
//!         record: ".status.fsm".into(),
//!     },
//!     raw: RawRecord::Json(serde_json::json!({
//!         "schemaVersion": 1, "machineVersion": version,
//!         "state": state, "enteredAt": "2026-01-01T00:00:00Z",
//!     })),
//!     owner_gone: false,
//! };
//! let report = Preflight::judge::<Job>(
//!     vec![stored("a", "Start", 2), stored("b", "Begin", 1), stored("c", "Start", 3)],
//!     0,
//! );
//! assert_eq!(report.records[0].verdict, Verdict::Runs { writes_back: false });
//! assert!(matches!(report.records[1].verdict, Verdict::Renamed { .. }));
//! assert_eq!(report.records[2].verdict, Verdict::Newer { version: 3, supported: 2 });
//! assert_eq!(report.cannot_run(), 1);
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fsm_core::{Fsm, RawRecord, RecordCompatibility};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, CustomResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::api_versions::ApiVersions;
use super::{CrdArgs, Error, Operator, OutputFormat, PreflightArgs, StoreKind};
use crate::KubeResource;
use crate::records::record_view::Location;
use crate::records::{ReadError, ResourceInfo};
use crate::store::{
    MANAGED_BY_LABEL, OWNER_LABEL, RecordObjectKind, RecordPlace, belongs_to, legacy_belongs_to,
    legacy_record_object_name, record_object_name,
};

/// A record as stored, with where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRecord {
    /// The object and where its record is.
    pub location: Location,
    /// The record as stored.
    pub raw: RawRecord,
    /// The record object outlived its object (garbage collection removes
    /// it): no replica will run it, so it does not count against an
    /// upgrade.
    pub owner_gone: bool,
}

/// What this build of the machine makes of a stored record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "verdict",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Verdict {
    /// Runs as it is stored; `writes_back` when the record is written back
    /// once first, stamped with this build's machine version.
    Runs {
        /// Whether the record is written back before it runs.
        writes_back: bool,
    },
    /// Its state is stored under a former name and loads as the state
    /// renamed from it (the record is written back once).
    Renamed {
        /// The stored name.
        from: String,
        /// The state it loads as.
        to: String,
    },
    /// Written by an older machine version; the machine's migration maps
    /// it (the migrated record is written back once).
    Migrates {
        /// The record's machine version.
        from_version: u32,
        /// The stored state.
        from_state: String,
        /// The state it becomes.
        to_state: String,
        /// This build's machine version.
        to_version: u32,
    },
    /// Written by a newer machine version: this build leaves it untouched
    /// (a rollback or a rolling update would stall the object).
    Newer {
        /// The record's machine version.
        version: u32,
        /// This build's machine version.
        supported: u32,
    },
    /// This build cannot read it (see the reason): the object would stop
    /// with a `CorruptRecord` condition.
    Unreadable {
        /// What is wrong.
        reason: String,
    },
}

impl Verdict {
    /// The verdict of machine `F` on `raw`, decided without running
    /// anything ([`RawRecord::upgrade`]).
    pub fn of<F: Fsm>(raw: &RawRecord) -> Self {
        let to_version = F::machine().version();
        match raw.upgrade::<F>() {
            Ok(upgraded) => match upgraded.compatibility {
                RecordCompatibility::Current => Verdict::Runs {
                    writes_back: upgraded.changed,
                },
                RecordCompatibility::Renamed { from, to } => Verdict::Renamed {
                    from,
                    to: to.to_owned(),
                },
                RecordCompatibility::Migrates {
                    from_version,
                    from_state,
                    to_state,
                } => Verdict::Migrates {
                    from_version,
                    from_state,
                    to_state: to_state.to_owned(),
                    to_version,
                },
                RecordCompatibility::Newer { version, supported } => {
                    Verdict::Newer { version, supported }
                }
                RecordCompatibility::Unreadable { reason } => Verdict::Unreadable {
                    reason: reason.to_string(),
                },
            },
            Err(fsm_core::DecodeError::NewerMachine { found, supported }) => Verdict::Newer {
                version: found,
                supported,
            },
            Err(reason) => Verdict::Unreadable {
                reason: reason.to_string(),
            },
        }
    }

    /// Whether this build runs the object (possibly after renaming or
    /// migrating its record).
    pub fn can_run(&self) -> bool {
        matches!(
            self,
            Verdict::Runs { .. } | Verdict::Renamed { .. } | Verdict::Migrates { .. }
        )
    }

    /// The verdict for a person.
    fn describe(&self) -> String {
        match self {
            Verdict::Runs { writes_back: false } => "runs".to_owned(),
            Verdict::Runs { writes_back: true } => {
                "runs (written back once with this build's version)".to_owned()
            }
            Verdict::Renamed { from, to } => format!("renamed: {from} loads as {to}"),
            Verdict::Migrates {
                from_version,
                from_state,
                to_state,
                to_version,
            } => format!("migrates: {from_state} (v{from_version}) → {to_state} (v{to_version})"),
            Verdict::Newer { version, supported } => format!(
                "CANNOT RUN: written by version {version}, newer than this build's {supported}; \
                 left untouched"
            ),
            Verdict::Unreadable { reason } => format!("CANNOT RUN: {reason}"),
        }
    }
}

/// One stored record, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Judged {
    /// The object and where its record is.
    pub object: Location,
    /// The current state's name as stored (`None` when unreadable).
    pub stored_state: Option<String>,
    /// The machine version that wrote the record (`None` when unreadable).
    pub stored_version: Option<u32>,
    /// What this build makes of it.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// See [`StoredRecord::owner_gone`].
    pub owner_gone: bool,
}

/// What `preflight` found: every stored record, judged by this build.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    /// The machine's name.
    pub machine: &'static str,
    /// This build's machine version.
    pub machine_version: u32,
    /// The records, in the order read.
    pub records: Vec<Judged>,
    /// Objects without a record yet: they start in the initial state.
    pub without_record: usize,
    /// The resource's API versions: those objects may be stored at,
    /// against this build's CRD (`None` when not checked, see
    /// [`api_versions_unchecked`](Self::api_versions_unchecked)).
    pub api_versions: Option<ApiVersions>,
    /// Why the API versions were not checked (the CRD is not installed,
    /// or may not be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_versions_unchecked: Option<String>,
}

impl Preflight {
    /// Judges `stored` with machine `F`. `without_record` counts the
    /// objects that have no record yet.
    pub fn judge<F: Fsm>(stored: Vec<StoredRecord>, without_record: usize) -> Self {
        let records = stored
            .into_iter()
            .map(|stored| {
                let verdict = Verdict::of::<F>(&stored.raw);
                let (stored_state, stored_version) = stored_fields(&stored.raw);
                Judged {
                    object: stored.location,
                    stored_state,
                    stored_version,
                    verdict,
                    owner_gone: stored.owner_gone,
                }
            })
            .collect();
        Preflight {
            machine: F::machine().name(),
            machine_version: F::machine().version(),
            records,
            without_record,
            api_versions: None,
            api_versions_unchecked: None,
        }
    }

    /// Whether this build may be rolled out: it can run every record of
    /// an existing object, and its CRD keeps every version objects may be
    /// stored at.
    pub fn allows_upgrade(&self) -> bool {
        self.all_can_run()
            && self
                .api_versions
                .as_ref()
                .is_none_or(ApiVersions::allows_this_build)
    }

    /// How many records of existing objects this build cannot run: the
    /// upgrade (or rollback) would stall them.
    pub fn cannot_run(&self) -> usize {
        self.records
            .iter()
            .filter(|r| !r.owner_gone && !r.verdict.can_run())
            .count()
    }

    /// Whether this build can run every record of an existing object.
    pub fn all_can_run(&self) -> bool {
        self.cannot_run() == 0
    }

    /// A table for a person, a summary line last:
    ///
    /// ```text
    /// OBJECT             RECORD        STORED              VERDICT
    /// Widget shop/a      .status.fsm   Ready v1            runs (written back once with this build's version)
    /// Widget shop/b      .status.fsm   Provisioning v1     renamed: Provisioning loads as Starting
    /// Widget shop/c      .status.fsm   Starting v3         CANNOT RUN: written by version 3, newer than this build's 2; left untouched
    /// WidgetState version 2: 3 records, 2 can run, 1 cannot.
    /// ```
    pub fn render_text(&self) -> String {
        let rows: Vec<[String; 4]> = self
            .records
            .iter()
            .map(|r| {
                let object = match &r.object.namespace {
                    Some(ns) => format!("{} {ns}/{}", r.object.kind, r.object.name),
                    None => format!("{} {}", r.object.kind, r.object.name),
                };
                let stored = match (&r.stored_state, r.stored_version) {
                    (Some(state), Some(version)) => format!("{state} v{version}"),
                    (Some(state), None) => state.clone(),
                    (None, _) => "?".to_owned(),
                };
                let mut verdict = r.verdict.describe();
                if r.owner_gone {
                    verdict.push_str(" [object gone: garbage collection removes the record]");
                }
                [object, r.object.record.clone(), stored, verdict]
            })
            .collect();
        let header = [
            "OBJECT".to_owned(),
            "RECORD".to_owned(),
            "STORED".to_owned(),
            "VERDICT".to_owned(),
        ];
        let mut widths = [0; 3];
        for row in std::iter::once(&header).chain(&rows) {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&rows) {
            for (width, cell) in widths.iter().zip(row) {
                let _ = write!(out, "{cell:<width$}  ");
            }
            let _ = writeln!(out, "{}", row[3]);
        }
        let total = self.records.iter().filter(|r| !r.owner_gone).count();
        let cannot = self.cannot_run();
        let _ = write!(
            out,
            "{} version {}: {total} record(s), {} can run, {cannot} cannot",
            self.machine,
            self.machine_version,
            total - cannot
        );
        if self.without_record > 0 {
            let _ = write!(
                out,
                "; {} object(s) without a record yet",
                self.without_record
            );
        }
        out.push_str(".\n");
        match (&self.api_versions, &self.api_versions_unchecked) {
            (Some(versions), _) => out.push_str(&versions.describe()),
            (None, Some(reason)) => {
                let _ = writeln!(out, "API versions not checked: {reason}.");
            }
            (None, None) => {}
        }
        out
    }

    /// The report as pretty JSON.
    ///
    /// # Errors
    /// Serialization failed (not expected).
    pub fn render_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|mut s| {
            s.push('\n');
            s
        })
    }
}

/// The stored state's name and machine version, read leniently from what
/// may not decode (a record without a machine version was written by
/// version 1).
fn stored_fields(raw: &RawRecord) -> (Option<String>, Option<u32>) {
    let value = match raw {
        RawRecord::Json(value) => value.clone(),
        RawRecord::Decoded(_) => raw.as_json(),
        RawRecord::Text(text) => match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(_) => return (None, None),
        },
    };
    let state = value
        .get("state")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let version = match value.get("machineVersion") {
        None if value.is_object() => Some(1),
        None => None,
        Some(v) => v.as_u64().and_then(|v| u32::try_from(v).ok()),
    };
    (state, version)
}

/// What [`fetch`] read.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched {
    /// Every record found, objects' first, then those whose object is gone.
    pub records: Vec<StoredRecord>,
    /// Objects without a record yet.
    pub without_record: usize,
}

/// Reads every record of `resource`'s objects (in `namespace`, or all
/// namespaces) that `store` keeps, for machine `machine`, as the stores
/// read them (see [`crate::records::record_view::fetch`]): `.status.fsm` of each
/// object, or its ConfigMap or Secret (the legacy `<name>-fsm` too); record
/// objects whose object is gone are listed with
/// [`owner_gone`](StoredRecord::owner_gone). List requests only.
///
/// # Errors
/// [`ReadError::MemoryStore`] for the ephemeral store,
/// [`ReadError::ClusterScopedObjectStore`] for an object store of a
/// cluster-scoped resource, [`Error::Kube`] for the API's errors.
pub async fn fetch(
    client: &Client,
    resource: &ResourceInfo,
    machine: &str,
    store: StoreKind,
    namespace: Option<&str>,
) -> Result<Fetched, Error> {
    let place = store.place();
    match place {
        RecordPlace::Memory => return Err(ReadError::MemoryStore.into()),
        RecordPlace::Object(_) if !resource.namespaced => {
            return Err(ReadError::ClusterScopedObjectStore.into());
        }
        RecordPlace::Object(_) | RecordPlace::Status => {}
    }
    let namespace = namespace.filter(|_| resource.namespaced);
    let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
    let api_resource = ApiResource::from_gvk_with_plural(&gvk, &resource.plural);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &api_resource),
        None => Api::all_with(client.clone(), &api_resource),
    };
    let objects = list_all(&api, ListParams::default()).await?;
    match place {
        RecordPlace::Status => Ok(from_status(resource, &objects)),
        RecordPlace::Object(kind) => {
            from_record_objects(client, kind, resource, machine, namespace, &objects).await
        }
        RecordPlace::Memory => Err(ReadError::MemoryStore.into()),
    }
}

/// Every object of a list, page after page.
async fn list_all<K>(api: &Api<K>, params: ListParams) -> Result<Vec<K>, Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut all = Vec::new();
    let mut params = params.limit(500);
    loop {
        let page = api.list(&params).await.map_err(Error::Kube)?;
        all.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(all),
        }
    }
}

fn location(resource: &ResourceInfo, object: &DynamicObject, record: String) -> Location {
    Location {
        kind: resource.kind.clone(),
        namespace: object.metadata.namespace.clone(),
        name: object.metadata.name.clone().unwrap_or_default(),
        record,
    }
}

/// The records in `.status.fsm` of `objects`.
fn from_status(resource: &ResourceInfo, objects: &[DynamicObject]) -> Fetched {
    let mut fetched = Fetched {
        records: Vec::new(),
        without_record: 0,
    };
    for object in objects {
        let record = object
            .data
            .get("status")
            .and_then(|s| s.get("fsm"))
            .filter(|v| !v.is_null());
        match record {
            Some(value) => fetched.records.push(StoredRecord {
                location: location(resource, object, ".status.fsm".to_owned()),
                raw: RawRecord::Json(value.clone()),
                owner_gone: false,
            }),
            None => fetched.without_record += 1,
        }
    }
    fetched
}

/// The records `objects` keep in record objects of kind `O`, and the
/// record objects of machine `machine` on the kind whose object is gone.
async fn from_record_objects(
    client: &Client,
    kind: RecordObjectKind,
    resource: &ResourceInfo,
    machine: &str,
    namespace: Option<&str>,
    objects: &[DynamicObject],
) -> Result<Fetched, Error> {
    let api = kind.api(client.clone(), namespace);
    let selector = format!("{}={}", MANAGED_BY_LABEL.0, MANAGED_BY_LABEL.1);
    let mut record_objects: BTreeMap<(String, String), DynamicObject> =
        list_all(&api, ListParams::default().labels(&selector))
            .await?
            .into_iter()
            .map(|o| {
                let key = (
                    o.metadata.namespace.clone().unwrap_or_default(),
                    o.metadata.name.clone().unwrap_or_default(),
                );
                (key, o)
            })
            .collect();
    let kind_name = kind.kind();
    let mut fetched = Fetched {
        records: Vec::new(),
        without_record: 0,
    };
    for object in objects {
        let ns = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let own = (
            ns.clone(),
            record_object_name(&name, &resource.group, &resource.kind, machine),
        );
        let legacy = (ns.clone(), legacy_record_object_name(&name));
        let found = if record_objects
            .get(&own)
            .is_some_and(|o| belongs_to(&o.metadata, &uid))
        {
            record_objects.remove(&own)
        } else if record_objects
            .get(&legacy)
            .is_some_and(|o| legacy_belongs_to(&o.metadata, &uid, &resource.group, &resource.kind))
        {
            record_objects.remove(&legacy)
        } else {
            None
        };
        match found
            .as_ref()
            .and_then(|o| kind.raw_record(o).map(|raw| (o, raw)))
        {
            Some((record_object, raw)) => fetched.records.push(StoredRecord {
                location: location(
                    resource,
                    object,
                    format!(
                        "{kind_name} {ns}/{}",
                        record_object.metadata.name.as_deref().unwrap_or_default()
                    ),
                ),
                raw,
                owner_gone: false,
            }),
            None => fetched.without_record += 1,
        }
    }
    // What is left of this machine on this kind has no object (any more).
    let suffix = record_object_name("", &resource.group, &resource.kind, machine);
    for ((ns, name), record_object) in record_objects {
        let meta = &record_object.metadata;
        let legacy_of_kind = name.ends_with("-fsm")
            && meta.owner_references.iter().flatten().any(|r| {
                r.kind == resource.kind
                    && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == resource.group
            });
        if !name.ends_with(&suffix) && !legacy_of_kind {
            continue;
        }
        let Some(raw) = kind.raw_record(&record_object) else {
            continue;
        };
        let owner = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER_LABEL))
            .cloned()
            .unwrap_or_else(|| name.clone());
        fetched.records.push(StoredRecord {
            location: Location {
                kind: resource.kind.clone(),
                namespace: Some(ns.clone()),
                name: owner,
                record: format!("{kind_name} {ns}/{name}"),
            },
            raw,
            owner_gone: true,
        });
    }
    Ok(fetched)
}

/// The API versions check of `preflight`: the cluster's CRD named as
/// `build`'s, judged against it, with the objects of the kind counted (in
/// `namespace`, or all). `Ok(Err(reason))` when it cannot be checked: the
/// CRD is not installed, or reading it is forbidden.
///
/// # Errors
/// Any other failed request.
async fn api_versions(
    client: &Client,
    build: &CustomResourceDefinition,
    namespace: Option<&str>,
) -> Result<Result<ApiVersions, String>, Error> {
    let name = build.metadata.name.clone().unwrap_or_default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let cluster = match crds.get_opt(&name).await {
        Ok(Some(crd)) => crd,
        Ok(None) => return Ok(Err(format!("the CRD {name} is not installed"))),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Ok(Err(format!(
                "reading the CRD {name} is forbidden ({})",
                status.message
            )));
        }
        Err(error) => return Err(Error::Kube(error)),
    };
    let Some(storage) = super::api_versions::storage_of(&cluster) else {
        return Ok(Err(format!("the CRD {name} has no storage version")));
    };
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&cluster.spec.group, &storage, &cluster.spec.names.kind),
        &cluster.spec.names.plural,
    );
    let objects: Api<DynamicObject> = match namespace {
        Some(ns) if cluster.spec.scope == "Namespaced" => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    };
    let listed = objects
        .list_metadata(&ListParams::default())
        .await
        .map_err(Error::Kube)?;
    Ok(Ok(ApiVersions::judge(&cluster, build, listed.items.len())))
}

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: clap::Args + Clone + Send + Sync + 'static,
{
    /// What `preflight` finds, read through `client`: every stored record
    /// of the operator's kind in its store, judged by this build.
    ///
    /// # Errors
    /// See [`fetch`].
    pub async fn preflight(
        &self,
        client: &Client,
        args: &PreflightArgs,
    ) -> Result<Preflight, Error> {
        let fetched = fetch(
            client,
            &ResourceInfo::of::<F::Resource>(),
            F::machine().name(),
            self.store,
            args.namespace.as_deref(),
        )
        .await?;
        let mut report = Preflight::judge::<F>(fetched.records, fetched.without_record);
        let build = self.crd_definition(&CrdArgs::default())?;
        match api_versions(client, &build, args.namespace.as_deref()).await? {
            Ok(versions) => report.api_versions = Some(versions),
            Err(reason) => report.api_versions_unchecked = Some(reason),
        }
        Ok(report)
    }

    /// Runs `preflight` and writes its report to `out`.
    ///
    /// # Errors
    /// [`Error::CannotRun`] (after the report is written) when a record of
    /// an existing object cannot be run by this build; the errors of
    /// [`fetch`].
    pub(super) async fn preflight_command(
        &self,
        args: &PreflightArgs,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<(), Error> {
        let client = super::connect(&args.connect).await?;
        let report = self.preflight(&client, args).await?;
        let text = match args.output {
            OutputFormat::Text => report.render_text(),
            OutputFormat::Json => report.render_json().map_err(Error::Json)?,
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(Error::Output)?;
        if let Some(versions) = report.api_versions.as_ref()
            && !versions.allows_this_build()
        {
            return Err(Error::StoredVersionsDropped {
                crd: versions.crd.clone(),
                versions: versions.dropped_while_stored.clone(),
            });
        }
        match report.cannot_run() {
            0 => Ok(()),
            cannot => Err(Error::CannotRun {
                cannot,
                machine: report.machine,
                version: report.machine_version,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_fields_are_read_from_what_does_not_decode() {
        let raw = RawRecord::Text(r#"{"state": "Gone", "machineVersion": 4}"#.to_owned());
        assert_eq!(stored_fields(&raw), (Some("Gone".to_owned()), Some(4)));
        let raw = RawRecord::Json(serde_json::json!({"state": "Old"}));
        assert_eq!(stored_fields(&raw), (Some("Old".to_owned()), Some(1)));
        assert_eq!(
            stored_fields(&RawRecord::Text("{oops".to_owned())),
            (None, None)
        );
    }
}
