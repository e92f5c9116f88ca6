//! What the printing subcommands print: `crd`, `rbac`, `diagram` and
//! `status`.

use clap::Args;
use fsm_core::Fsm;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Client, CustomResourceExt};

use super::printer_columns::add_printer_columns;
use super::rbac::{self, RbacScope};
use super::{CrdArgs, DiagramFormat, Error, Operator, OutputFormat, RbacArgs, StatusArgs};
use crate::KubeResource;
use crate::records::PublishedMachine;
use crate::records::ResourceInfo;
use crate::records::{ReadError, record_view};
use crate::store::RecordPlace;
use crate::versions::WebhookTarget;

impl<F, A> Operator<F, A>
where
    F: Fsm,
    F::Resource: KubeResource + CustomResourceExt,
    A: Args + Clone + Send + Sync + 'static,
{
    /// What `rbac` prints.
    ///
    /// # Errors
    /// A declared rule is refused.
    pub fn rbac(&self, args: &RbacArgs) -> Result<String, Error> {
        let mut description = self.description();
        if let Some(name) = &args.name {
            description.name.clone_from(name);
        }
        let scope = RbacScope {
            namespace: args.namespace.clone(),
            lease_namespace: args.leader_elect.then(|| {
                args.lease_namespace
                    .clone()
                    .or_else(|| args.namespace.clone())
                    .unwrap_or_else(|| "default".to_owned())
            }),
            lease_name: args.lease_name.clone(),
        };
        let mut objects = rbac::manifests(&description, &scope)?;
        if args.view {
            objects = rbac::with_view_rules(objects, &description);
        }
        if args.view_access {
            objects.push(rbac::view_access_role(&description));
        }
        if args.shards {
            let lease_namespace = args
                .lease_namespace
                .clone()
                .or_else(|| args.namespace.clone())
                .unwrap_or_else(|| "default".to_owned());
            objects.push(rbac::sharding_role(&description, &lease_namespace));
        }
        let yaml = rbac::to_yaml(&objects).map_err(Error::Yaml)?;
        let mut caveats = Vec::new();
        let watches_all_namespaces = matches!(self.store.place(), RecordPlace::Object(_));
        if args.namespace.is_some() && watches_all_namespaces {
            caveats.push(format!(
                "the {:?} store watches its record objects in all namespaces unless it\n\
                 is built with ObjectStore::namespaced(client, NS), as RunContext::reconciler\n\
                 does under `run --namespace NS`; built with ::new, it needs a ClusterRole\n\
                 (no --namespace), which a Role does not replace.",
                self.store
            ));
        }
        caveats.extend(rbac::caveats(&objects));
        Ok(format!("{}{yaml}", rbac::caveat_comments(&caveats)))
    }

    /// What `crd` prints: the CRD of the resource with the machine
    /// published on it ([`PublishedMachine`]), and with `--printer-columns`
    /// the state columns ([`add_printer_columns`]); with other versions
    /// ([`served_version`](Operator::served_version)), every version and
    /// the conversion webhook at `--webhook-url`.
    ///
    /// # Errors
    /// As [`crd_definition`](Self::crd_definition).
    pub fn crd(&self, args: &CrdArgs) -> Result<String, Error> {
        crd_yaml(&self.crd_definition(args)?)
    }

    /// The definition [`crd`](Self::crd) prints, as an object: for a
    /// program that installs it itself (the examples' demo, a test) and
    /// must install exactly what `crd` prints, so that `kubectl fsm` finds
    /// the published machine on it.
    ///
    /// ```
    /// use fsm_kube::cli::{CrdArgs, Operator, StoreKind};
    /// use fsm_kube::records::PublishedMachine;
    /// # use fsm_kube::prelude::*;
    /// # use kube::CustomResource;
    /// # #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
    /// # #[kube(group = "example.com", version = "v1", kind = "Job", namespaced, status = "JobStatus")]
    /// # pub struct JobSpec {}
    /// # #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
    /// # pub struct JobStatus { fsm: Option<FsmStatus> }
    /// # #[derive(Debug, thiserror::Error)]
    /// # #[error("never")]
    /// # pub struct Never;
    /// # impl Classify for Never {}
    /// # #[derive(OperatorFsm, Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// # #[fsm(resource = Job, error = Never)]
    /// # pub enum JobState {
    /// #     #[fsm(initial, ready, final)]
    /// #     Done,
    /// #     #[fsm(failed)]
    /// #     Failed,
    /// # }
    /// let crd = Operator::<JobState>::new("job-operator", StoreKind::Status)
    ///     .crd_definition(&CrdArgs { printer_columns: true, ..CrdArgs::default() })?;
    /// let published = PublishedMachine::from_crd(&crd)?.expect("published");
    /// assert_eq!(published.store, StoreKind::Status);
    /// let columns = crd.spec.versions[0].additional_printer_columns.as_ref();
    /// assert_eq!(columns.map(Vec::len), Some(4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// With other versions ([`served_version`](Operator::served_version)):
    /// one entry per version ([`Versions::crd`](crate::Versions::crd)),
    /// printer columns on each, and `spec.conversion` calling the webhook
    /// at `--webhook-url`, trusting `--webhook-ca-file`.
    ///
    /// # Errors
    /// [`Error::PrinterColumnsNeedStatusStore`]; [`Error::Versions`];
    /// [`Error::ConversionWebhookNeeded`] for several versions without
    /// `--webhook-url`, [`Error::NoConversion`] for one version with it;
    /// [`Error::WebhookCa`].
    pub fn crd_definition(&self, args: &CrdArgs) -> Result<CustomResourceDefinition, Error> {
        let mut crd = self.crd_without_conversion(args)?;
        let versions = self.versions();
        match (&args.webhook_url, &args.webhook_ca_file) {
            (Some(url), Some(ca)) => {
                if !versions.has_spokes() {
                    return Err(Error::NoConversion {
                        version: versions.hub_api_version(),
                    });
                }
                let pem = std::fs::read(ca).map_err(|source| Error::WebhookCa {
                    path: ca.clone(),
                    source,
                })?;
                WebhookTarget::Url(url.clone()).set_on(&mut crd, &pem);
            }
            _ if versions.has_spokes() => {
                return Err(Error::ConversionWebhookNeeded {
                    versions: versions.api_versions().join(", "),
                });
            }
            _ => {}
        }
        Ok(crd)
    }

    /// [`crd_definition`](Self::crd_definition) without `spec.conversion`,
    /// which `manifests` points at the webhook's Service.
    pub(super) fn crd_without_conversion(
        &self,
        args: &CrdArgs,
    ) -> Result<CustomResourceDefinition, Error> {
        let mut crd = self.versions().crd()?;
        PublishedMachine {
            store: self.store,
            graph: F::machine().graph(),
        }
        .annotate(&mut crd)
        .map_err(Error::Json)?;
        if args.printer_columns {
            add_printer_columns(&mut crd, self.store)?;
        }
        Ok(crd)
    }

    /// What `status` prints for `args` (text or JSON), read through
    /// `client`.
    ///
    /// # Errors
    /// See [`record_view::fetch`]; a record that does not decode is
    /// [`ReadError::CorruptRecord`].
    pub async fn status(&self, client: &Client, args: &StatusArgs) -> Result<String, Error> {
        let resource = ResourceInfo::of::<F::Resource>();
        let (raw, location) = record_view::fetch(
            client,
            &resource,
            F::machine().name(),
            self.store,
            args.namespace.as_deref(),
            &args.name,
        )
        .await?;
        let record = record_view::decode::<F>(&raw).map_err(|error| ReadError::CorruptRecord {
            location: Box::new(location.clone()),
            error,
        })?;
        match args.output {
            OutputFormat::Text => Ok(record_view::render_text(
                &location,
                &record,
                jiff::Timestamp::now(),
            )),
            OutputFormat::Json => record_view::render_json(&record).map_err(Error::Json),
        }
    }
}

/// What `crd` prints: the CRD as YAML, a document of its own.
///
/// # Errors
/// Serialization failed (not expected).
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, Error> {
    let yaml = serde_yaml_ng::to_string(crd).map_err(Error::Yaml)?;
    Ok(format!("---\n{yaml}"))
}

/// What `diagram` prints: [`Fsm::mermaid`], [`Fsm::dot`], or the
/// machine's graph drawn as a standalone SVG document
/// ([`MachineGraph::svg`](fsm_core::MachineGraph::svg), the layered
/// layout the web view and `kubectl fsm diagram -o svg` draw too).
pub fn diagram<F: Fsm>(format: DiagramFormat) -> String {
    match format {
        DiagramFormat::Mermaid => F::mermaid(),
        DiagramFormat::Dot => F::dot(),
        DiagramFormat::Svg => F::machine().graph().svg(None),
    }
}
