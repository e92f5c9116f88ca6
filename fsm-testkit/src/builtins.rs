//! The built-in kinds: one table, one entry per kind ([`table`]). An
//! entry says how the kind is served (group, version, kind, plural, scope,
//! subresources, names and columns: its [`ResourceDef`]), its k8s-openapi
//! type (typed decoding and OpenAPI read it), and what its writes do
//! beyond what every kind's do ([`KindRules`]: defaults, validation,
//! whether a PUT creates), each rule a function of the kind's own module.
//!
//! The registry ([`registry`]), the typed decoder (`typed`), OpenAPI
//! (`openapi`) and the admission chain (`cluster::admission`) all read this
//! table: serving another kind is one entry here, plus a module of its own
//! if it has rules of its own.

use std::borrow::Cow;
use std::sync::OnceLock;

use k8s_openapi::schemars::{self, JsonSchema, SchemaGenerator};
use serde_json::Value;

use crate::resources::{CORE_FIELD_LABELS, EVENTS_FIELD_LABELS, NameRule, Registry, ResourceDef};
use crate::status::{ApiError, Cause};
use crate::{controller_revisions, defaults, events, immutable, kind_defaults, kinds};
use crate::{limits, rbac, validation, webhook_configurations};

/// A built-in kind: how it is served, its type, its rules.
pub struct BuiltinKind {
    /// How the kind is served.
    pub def: ResourceDef,
    /// Its k8s-openapi type; `None`: served without a schema (bodies are
    /// not decoded against a type, OpenAPI does not list it).
    pub schema: Option<KindType>,
    /// What its writes do beyond every kind's.
    pub rules: KindRules,
}

/// A kind's k8s-openapi type, as the schemas read from it.
#[derive(Clone, Copy)]
pub struct KindType {
    /// The type's JSON Schema, with the definitions its `$ref`s name under
    /// `$defs` (what typed decoding walks).
    pub root_schema: fn() -> Value,
    /// Adds the type's schema, and those it uses, to a generator; returns
    /// its definition name (`io.k8s.api.core.v1.ConfigMap`).
    pub add_to: fn(&mut SchemaGenerator) -> Cow<'static, str>,
}

impl KindType {
    /// The schemas of `T`.
    #[must_use]
    pub fn of<T: JsonSchema>() -> Self {
        Self {
            root_schema: root_schema_of::<T>,
            add_to: add_schema_of::<T>,
        }
    }
}

fn root_schema_of<T: JsonSchema>() -> Value {
    let root = schemars::generate::SchemaSettings::default()
        .into_generator()
        .into_root_schema_for::<T>();
    serde_json::to_value(root).unwrap_or_default()
}

fn add_schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Cow<'static, str> {
    generator.subschema_for::<T>();
    T::schema_name()
}

/// An object a kind's validation looks at.
#[derive(Debug, Clone, Copy)]
pub struct Written<'a> {
    /// The resource written.
    pub def: &'a ResourceDef,
    /// The namespace on the URL.
    pub ns: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object as it would be stored.
    pub object: &'a Value,
    /// The stored object an update replaces; `None` for a create.
    pub old: Option<&'a Value>,
}

/// Converts a body of the kind to its stored form.
pub type Convert = fn(&ResourceDef, Value) -> Result<Value, ApiError>;
/// Checks a body of the kind.
pub type CheckBody = fn(&ResourceDef, &Value) -> Result<(), ApiError>;
/// Validates an object of the kind as it would be written.
pub type Validate = fn(&Written<'_>) -> Result<(), ApiError>;
/// Checks the size of the object named (`&str`) as it would be stored.
pub type CheckSize = fn(&ResourceDef, &str, &Value) -> Result<(), ApiError>;

/// A metadata check a kind's update validation runs (core validation's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaCheck {
    /// `ValidateObjectMetaUpdate`: labels, annotations, owner references,
    /// finalizer names.
    Update,
    /// `ValidateObjectMeta`, the kind's create validation run again on
    /// the new object: all of those and the finalizers' qualified names.
    Full,
}

/// The metadata checks of most kinds' update validation.
const UPDATE: &[MetaCheck] = &[MetaCheck::Update];
/// An update validation that validates the new object as on create, after
/// the update's checks (ConfigMaps, Services, Pods).
const UPDATE_THEN_FULL: &[MetaCheck] = &[MetaCheck::Update, MetaCheck::Full];
/// An update validation that validates the new object as on create, then
/// the update's checks (the workloads but Deployments).
const FULL_THEN_UPDATE: &[MetaCheck] = &[MetaCheck::Full, MetaCheck::Update];

/// What a kind's writes do beyond every kind's, in the order the
/// admission chain asks. `None`: nothing.
#[derive(Clone, Copy)]
pub struct KindRules {
    /// Converts a body to its stored form (Events of either API are
    /// stored as core Events).
    pub to_storage: Option<Convert>,
    /// Refuses a body the real server's decoder refuses (400).
    pub check_decoded: Option<CheckBody>,
    /// The causes found in the kind's fields, reported with the
    /// metadata's.
    pub field_causes: Option<fn(&ResourceDef, &Value) -> Vec<Cause>>,
    /// Validates the object as written, before the kind's defaults.
    pub validate_written: Option<Validate>,
    /// The defaults of a new object; the number is the count of creates
    /// (a Service's cluster IP is taken from it).
    pub on_create: Option<fn(&mut Value, u64)>,
    /// The defaults of every write.
    pub on_write: Option<fn(&ResourceDef, &mut Value)>,
    /// What an update changes given the stored object (`&Value`), after
    /// the defaults of every write (a Service's cluster IPs following its
    /// `clusterIP`, what its new type does not use wiped).
    pub on_update: Option<fn(&mut Value, &Value)>,
    /// What a write that is not a dry run allocates, given the stored
    /// object of an update; the number is a count of writes (a Service's
    /// cluster IP and node ports).
    pub allocate: Option<fn(&mut Value, Option<&Value>, u64)>,
    /// The causes of what an update from the stored object (the first
    /// `&Value`) to the new one changes that may not change (`field is
    /// immutable`), reported before the kind's validation.
    pub immutable: Option<fn(&Value, &Value) -> Vec<Cause>>,
    /// Whether the kind's update validation (not its storage) refuses an
    /// update whose body has no `metadata.resourceVersion`, with the
    /// causes of [`immutable`](Self::immutable) (a Service on 1.20, whose
    /// storage does not fill it in for an unconditional update).
    pub validates_resource_version: bool,
    /// Validates the defaulted object.
    pub validate: Option<Validate>,
    /// The causes of a write of the status subresource, given the stored
    /// object (the second `&Value`): what the kind's status update
    /// validation refuses.
    pub status_causes: Option<fn(&Value, &Value) -> Vec<Cause>>,
    /// How many times the kind's update validation checks the fields of the
    /// new object (2 for the workloads but Deployments, and claims: they
    /// validate it as on create, then for the update), each time listing
    /// their causes.
    pub update_field_checks: u8,
    /// Whether a change of the annotations bumps `metadata.generation` as
    /// a change of the spec does (a Deployment: 1.20 copies them to its
    /// ReplicaSets).
    pub annotations_bump_generation: bool,
    /// Whether the kind's update validation lists what may not change
    /// before the causes of its fields (a ConfigMap, a Secret, a Service),
    /// not after them (a Deployment, a Job), when an update has both.
    pub immutable_first: bool,
    /// What a write of the status subresource keeps of the stored
    /// object's metadata: `None`, all of it (a custom resource); else the
    /// fields named (a Deployment's labels), the rest as written, as the
    /// kind's status strategy prepares the update.
    pub status_keeps_metadata: Option<&'static [&'static str]>,
    /// The metadata checks of the kind's update validation, in its order,
    /// after those every update gets (each check's causes are listed
    /// again, as by 1.20).
    pub update_metadata: &'static [MetaCheck],
    /// Refuses an object over the kind's size limit (its data).
    pub check_size: Option<CheckSize>,
    /// Whether a PUT of an absent object creates it (the real server's
    /// `AllowCreateOnUpdate`).
    pub creates_on_update: bool,
    /// Whether a PUT without `metadata.resourceVersion` is an
    /// unconditional update (the real strategies' `AllowUnconditionalUpdate`).
    pub unconditional_update: bool,
    /// The resource part of the kind's etcd keys on the real server, as
    /// its storage errors name them, when it is not the plural.
    pub etcd_resource: Option<&'static str>,
}

impl KindRules {
    /// A built-in kind with no rules of its own.
    pub const NONE: Self = Self {
        to_storage: None,
        check_decoded: None,
        field_causes: None,
        validate_written: None,
        on_create: None,
        on_write: None,
        on_update: None,
        allocate: None,
        immutable: None,
        validates_resource_version: false,
        validate: None,
        status_causes: None,
        update_field_checks: 1,
        annotations_bump_generation: false,
        immutable_first: false,
        status_keeps_metadata: Some(&[]),
        update_metadata: UPDATE,
        check_size: None,
        creates_on_update: false,
        unconditional_update: true,
        etcd_resource: None,
    };

    /// A custom resource: updates must carry a resourceVersion.
    pub const CUSTOM: Self = Self {
        unconditional_update: false,
        status_keeps_metadata: None,
        ..Self::NONE
    };

    /// Either Events API: stored as core Events.
    const EVENT: Self = Self {
        to_storage: Some(events::to_storage),
        validate_written: Some(|w| events::validate(w.def, w.ns, w.name, w.object, w.old)),
        creates_on_update: true,
        ..Self::NONE
    };

    /// The RBAC kinds.
    const RBAC: Self = Self {
        on_write: Some(rbac::default),
        validate: Some(|w| rbac::validate(w.def, w.name, w.object, w.old)),
        creates_on_update: true,
        update_metadata: &[MetaCheck::Full, MetaCheck::Full, MetaCheck::Update],
        update_field_checks: 2,
        ..Self::NONE
    };
}

/// The built-in kinds, in the order they are registered (discovery lists
/// groups in that order).
#[must_use]
pub fn table() -> &'static [BuiltinKind] {
    static TABLE: OnceLock<Vec<BuiltinKind>> = OnceLock::new();
    TABLE.get_or_init(entries)
}

/// A registry serving every built-in kind.
#[must_use]
pub fn registry() -> Registry {
    let mut r = Registry::default();
    for kind in table() {
        r.insert(kind.def.clone(), false);
    }
    r
}

/// The table's entry of `def`'s kind, if it is a built-in one.
#[must_use]
pub fn find(def: &ResourceDef) -> Option<&'static BuiltinKind> {
    if def.custom {
        return None;
    }
    table().iter().find(|k| {
        k.def.group == def.group && k.def.version == def.version && k.def.plural == def.plural
    })
}

/// The rules of `def`'s kind.
#[must_use]
pub fn rules_of(def: &ResourceDef) -> &'static KindRules {
    if def.custom {
        return &KindRules::CUSTOM;
    }
    find(def).map_or(&KindRules::NONE, |k| &k.rules)
}

#[allow(clippy::too_many_lines)]
fn entries() -> Vec<BuiltinKind> {
    use k8s_openapi::api::admissionregistration::v1 as adm;
    use k8s_openapi::api::{
        apps, autoscaling, batch, coordination, core, events as ev, networking, rbac as rb, storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    let d = ResourceDef::builtin;
    let kind = |def: ResourceDef, schema: Option<KindType>, rules: KindRules| BuiltinKind {
        def,
        schema,
        rules,
    };
    vec![
        kind(
            d("", "v1", "Namespace", "namespaces", false)
                .with_status()
                .short(&["ns"])
                .fields(&["status.phase"])
                .column("Status", "string", ".status.phase")
                .names(NameRule::Label)
                .returns_deleted(),
            Some(KindType::of::<core::v1::Namespace>()),
            KindRules {
                on_create: Some(kinds::namespace_defaults),
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "ConfigMap", "configmaps", true)
                .short(&["cm"])
                .column("Data", "count", ".data,.binaryData"),
            Some(KindType::of::<core::v1::ConfigMap>()),
            KindRules {
                immutable: Some(immutable::config_map),
                immutable_first: true,
                check_size: Some(limits::check_config_map_size),
                field_causes: Some(validation::data::config_map_causes),
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "Secret", "secrets", true)
                .fields(&["type"])
                .column("Type", "string", ".type")
                .column("Data", "count", ".data"),
            Some(KindType::of::<core::v1::Secret>()),
            KindRules {
                on_write: Some(kinds::secret_defaults),
                field_causes: Some(validation::data::secret_causes),
                immutable: Some(immutable::secret),
                immutable_first: true,
                check_size: Some(limits::check_secret_size),
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "Service", "services", true)
                .with_status()
                .short(&["svc"])
                .all()
                .column("Type", "string", ".spec.type")
                .column("Cluster-IP", "string", ".spec.clusterIP")
                .column("External-IP", "externalIPs", ".spec")
                .column("Port(s)", "ports", ".spec.ports")
                .column("Selector", "selector", ".spec.selector")
                .names(NameRule::Label1035)
                .returns_deleted(),
            Some(KindType::of::<core::v1::Service>()),
            KindRules {
                field_causes: Some(validation::service::service_causes),
                status_causes: Some(validation::load_balancer::status_causes),
                on_create: Some(defaults::service::on_create),
                on_write: Some(defaults::service::on_write),
                on_update: Some(defaults::service::on_update),
                allocate: Some(defaults::service::allocate),
                immutable: Some(immutable::service),
                immutable_first: true,
                validates_resource_version: true,
                creates_on_update: true,
                etcd_resource: Some("services/specs"),
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        // Stored only (no endpoints controller): a webhook's
        // `clientConfig.service` is resolved through them.
        kind(
            d("", "v1", "Endpoints", "endpoints", true).short(&["ep"]),
            Some(KindType::of::<core::v1::Endpoints>()),
            KindRules {
                creates_on_update: true,
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "Pod", "pods", true)
                .returns_deleted()
                .with_status()
                .with_generation()
                .short(&["po"])
                .all()
                .fields(&["spec.nodeName", "spec.restartPolicy", "status.phase"])
                .column("Ready", "podReady", "")
                .column("Status", "podStatus", "")
                .column("Restarts", "podRestarts", "")
                .column("IP", "orNone", ".status.podIP")
                .column("Node", "orNone", ".spec.nodeName")
                .column("Nominated Node", "orNone", ".status.nominatedNodeName")
                .column("Readiness Gates", "readinessGates", ""),
            Some(KindType::of::<core::v1::Pod>()),
            KindRules {
                field_causes: Some(validation::pod::pod_causes),
                immutable: Some(immutable::pod::pod),
                status_keeps_metadata: Some(&["ownerReferences"]),
                on_create: Some(defaults::pod::on_create),
                on_write: Some(defaults::pod::on_write),
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "Event", "events", true)
                .short(&["ev"])
                .fields(&CORE_FIELD_LABELS),
            Some(KindType::of::<core::v1::Event>()),
            KindRules::EVENT,
        ),
        kind(
            d("events.k8s.io", "v1", "Event", "events", true)
                .stored_as("", "v1")
                .short(&["ev"])
                .fields(&EVENTS_FIELD_LABELS.map(|(label, _)| label)),
            Some(KindType::of::<ev::v1::Event>()),
            KindRules::EVENT,
        ),
        kind(
            d("apps", "v1", "Deployment", "deployments", true)
                .scalable()
                .with_status()
                .with_generation()
                .short(&["deploy"])
                .all()
                .column("Ready", "ratio", ".status.readyReplicas,.spec.replicas")
                .column("Up-to-date", "int0", ".status.updatedReplicas")
                .column("Available", "int0", ".status.availableReplicas")
                .column("Containers", "containers", ".spec.template.spec.containers")
                .column("Images", "images", ".spec.template.spec.containers")
                .column("Selector", "selector", ".spec.selector"),
            Some(KindType::of::<apps::v1::Deployment>()),
            KindRules {
                field_causes: Some(validation::workloads::deployment_causes),
                status_causes: Some(validation::workload_status::deployment),
                status_keeps_metadata: Some(&["labels"]),
                annotations_bump_generation: true,
                on_write: Some(defaults::apps::deployment),
                immutable: Some(immutable::deployment),
                ..KindRules::NONE
            },
        ),
        kind(
            d("apps", "v1", "StatefulSet", "statefulsets", true)
                .scalable()
                .with_status()
                .with_generation()
                .short(&["sts"])
                .all()
                .column("Ready", "ratio", ".status.readyReplicas,.spec.replicas")
                .column("Containers", "containers", ".spec.template.spec.containers")
                .column("Images", "images", ".spec.template.spec.containers"),
            Some(KindType::of::<apps::v1::StatefulSet>()),
            KindRules {
                field_causes: Some(validation::workloads::stateful_set_causes),
                update_field_checks: 2,
                status_causes: Some(validation::workload_status::stateful_set),
                on_write: Some(defaults::apps::stateful_set),
                immutable: Some(immutable::stateful_set),
                update_metadata: FULL_THEN_UPDATE,
                ..KindRules::NONE
            },
        ),
        // Served as v1 and stored as v1beta1 by the 1.20 server.
        kind(
            d("networking.k8s.io", "v1", "Ingress", "ingresses", true)
                .stored_as("networking.k8s.io", "v1beta1")
                .with_status()
                .with_generation()
                .short(&["ing"])
                .column("Class", "ingressClass", ".spec.ingressClassName")
                .column("Hosts", "ingressHosts", ".spec.rules")
                .column("Address", "loadBalancer", ".status.loadBalancer")
                .column("Ports", "ingressPorts", ".spec.tls"),
            Some(KindType::of::<networking::v1::Ingress>()),
            KindRules {
                on_create: Some(kinds::ingress_defaults),
                field_causes: Some(validation::ingress::ingress_causes),
                status_causes: Some(validation::load_balancer::status_causes),
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            d("batch", "v1", "Job", "jobs", true)
                .with_status()
                .with_generation()
                .all()
                .column("Succeeded", "integer", ".status.succeeded"),
            Some(KindType::of::<batch::v1::Job>()),
            KindRules {
                field_causes: Some(validation::workloads::job_causes),
                update_field_checks: 2,
                status_causes: Some(validation::workload_status::job),
                on_create: Some(defaults::batch::job_create),
                on_write: Some(defaults::batch::job),
                immutable: Some(immutable::job),
                update_metadata: FULL_THEN_UPDATE,
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "ServiceAccount", "serviceaccounts", true)
                .short(&["sa"])
                .column("Secrets", "count", ".secrets"),
            Some(KindType::of::<core::v1::ServiceAccount>()),
            KindRules {
                update_metadata: UPDATE_THEN_FULL,
                ..KindRules::NONE
            },
        ),
        kind(
            role(d(rbac::GROUP, "v1", "Role", "roles", true)),
            Some(KindType::of::<rb::v1::Role>()),
            KindRules::RBAC,
        ),
        kind(
            role(d(rbac::GROUP, "v1", "ClusterRole", "clusterroles", false)),
            Some(KindType::of::<rb::v1::ClusterRole>()),
            KindRules::RBAC,
        ),
        kind(
            binding(d(rbac::GROUP, "v1", "RoleBinding", "rolebindings", true)),
            Some(KindType::of::<rb::v1::RoleBinding>()),
            KindRules::RBAC,
        ),
        kind(
            binding(d(
                rbac::GROUP,
                "v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
                false,
            )),
            Some(KindType::of::<rb::v1::ClusterRoleBinding>()),
            KindRules::RBAC,
        ),
        kind(
            d("coordination.k8s.io", "v1", "Lease", "leases", true).column(
                "Holder",
                "string",
                ".spec.holderIdentity",
            ),
            Some(KindType::of::<coordination::v1::Lease>()),
            KindRules {
                check_decoded: Some(validation::check_lease_times),
                field_causes: Some(validation::lease_causes),
                creates_on_update: true,
                unconditional_update: false,
                update_metadata: &[],
                ..KindRules::NONE
            },
        ),
        // 1.20 keeps no generation of its autoscalers.
        kind(
            d(
                "autoscaling",
                "v1",
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers",
                true,
            )
            .with_status()
            .short(&["hpa"]),
            Some(KindType::of::<autoscaling::v1::HorizontalPodAutoscaler>()),
            KindRules {
                field_causes: Some(validation::autoscaler::causes),
                on_write: Some(validation::autoscaler::defaults),
                ..KindRules::NONE
            },
        ),
        // What an operator's deploy manifests include (`manifests`).
        pod_disruption_budget(d(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
        )),
        // The only version 1.20 serves (policy/v1 came with 1.21): the same
        // objects.
        pod_disruption_budget(
            d(
                "policy",
                "v1beta1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            )
            .stored_as("policy", "v1"),
        ),
        // What `manifests --view-expose` includes.
        kind(
            d(
                "networking.k8s.io",
                "v1",
                "NetworkPolicy",
                "networkpolicies",
                true,
            )
            .with_generation()
            .short(&["netpol"]),
            None,
            KindRules {
                field_causes: Some(validation::network_policy::network_policy_causes),
                on_write: Some(defaults::other::network_policy),
                update_metadata: FULL_THEN_UPDATE,
                ..KindRules::NONE
            },
        ),
        // Issue 32: claims and the volumes they bind to.
        kind(
            d(
                "",
                "v1",
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                true,
            )
            .with_status()
            .short(&["pvc"])
            .column("Status", "phase", ".status.phase")
            .column("Volume", "text", ".spec.volumeName")
            .column("Capacity", "claimCapacity", "")
            .column("Access Modes", "claimAccessModes", "")
            .column("StorageClass", "storageClass", "")
            .column("VolumeMode", "volumeMode", ".spec.volumeMode"),
            Some(KindType::of::<core::v1::PersistentVolumeClaim>()),
            KindRules {
                field_causes: Some(validation::claim::claim_causes),
                update_field_checks: 2,
                on_create: Some(kind_defaults::protect_claim),
                on_write: Some(kind_defaults::claim),
                immutable: Some(validation::claim::claim_immutable),
                update_metadata: &[MetaCheck::Full, MetaCheck::Update, MetaCheck::Full],
                ..KindRules::NONE
            },
        ),
        kind(
            d("", "v1", "PersistentVolume", "persistentvolumes", false)
                .with_status()
                .short(&["pv"])
                .column("Capacity", "quantity", ".spec.capacity.storage")
                .column("Access Modes", "accessModes", ".spec.accessModes")
                .column(
                    "Reclaim Policy",
                    "text",
                    ".spec.persistentVolumeReclaimPolicy",
                )
                .column("Status", "phase", ".status.phase")
                .column("Claim", "claimRef", ".spec.claimRef")
                .column("StorageClass", "storageClass", "")
                .column("Reason", "text", ".status.reason")
                .column("VolumeMode", "volumeMode", ".spec.volumeMode"),
            Some(KindType::of::<core::v1::PersistentVolume>()),
            KindRules {
                on_create: Some(kind_defaults::protect_volume),
                on_write: Some(kind_defaults::volume),
                ..KindRules::NONE
            },
        ),
        kind(
            d("apps", "v1", "DaemonSet", "daemonsets", true)
                .with_status()
                .with_generation()
                .short(&["ds"])
                .all()
                .column("Desired", "integer0", ".status.desiredNumberScheduled")
                .column("Current", "integer0", ".status.currentNumberScheduled")
                .column("Ready", "integer0", ".status.numberReady")
                .column("Up-to-date", "integer0", ".status.updatedNumberScheduled")
                .column("Available", "integer0", ".status.numberAvailable")
                .column(
                    "Node Selector",
                    "labels",
                    ".spec.template.spec.nodeSelector",
                )
                .column("Containers", "containers", ".spec.template.spec.containers")
                .column("Images", "images", ".spec.template.spec.containers")
                .column("Selector", "selector", ".spec.selector"),
            Some(KindType::of::<apps::v1::DaemonSet>()),
            KindRules {
                check_decoded: Some(defaults::apps::check_daemon_set),
                field_causes: Some(validation::replicated::daemon_set_causes),
                update_field_checks: 2,
                status_causes: Some(validation::workload_status::daemon_set),
                on_create: Some(defaults::apps::daemon_set_create),
                on_write: Some(kind_defaults::daemon_set),
                on_update: Some(defaults::apps::daemon_set_update),
                immutable: Some(immutable::daemon_set),
                update_metadata: FULL_THEN_UPDATE,
                ..KindRules::NONE
            },
        ),
        kind(
            d("apps", "v1", "ReplicaSet", "replicasets", true)
                .scalable()
                .with_status()
                .with_generation()
                .short(&["rs"])
                .all()
                .column("Desired", "integer0", ".spec.replicas")
                .column("Current", "integer0", ".status.replicas")
                .column("Ready", "integer0", ".status.readyReplicas")
                .column("Containers", "containers", ".spec.template.spec.containers")
                .column("Images", "images", ".spec.template.spec.containers")
                .column("Selector", "selector", ".spec.selector"),
            Some(KindType::of::<apps::v1::ReplicaSet>()),
            KindRules {
                field_causes: Some(validation::replicated::replica_set_causes),
                update_field_checks: 2,
                status_causes: Some(validation::workload_status::replica_set),
                on_write: Some(kind_defaults::replica_set),
                immutable: Some(immutable::replica_set),
                update_metadata: FULL_THEN_UPDATE,
                ..KindRules::NONE
            },
        ),
        kind(
            d(
                "apps",
                "v1",
                "ControllerRevision",
                "controllerrevisions",
                true,
            )
            .column("Controller", "controller", "")
            .column("Revision", "string", ".revision"),
            Some(KindType::of::<apps::v1::ControllerRevision>()),
            KindRules {
                validate: Some(|w| controller_revisions::validate(w.def, w.name, w.object, w.old)),
                ..KindRules::NONE
            },
        ),
        // batch/v1 is the CronJob of the API served (1.34); batch/v1beta1,
        // the same objects, is the only one 1.20 serves.
        cron_job(d("batch", "v1", "CronJob", "cronjobs", true).with_generation()),
        // 1.20 keeps no generation of its CronJobs.
        cron_job(d("batch", "v1beta1", "CronJob", "cronjobs", true).stored_as("batch", "v1")),
        kind(
            d(
                "storage.k8s.io",
                "v1",
                "StorageClass",
                "storageclasses",
                false,
            )
            .short(&["sc"])
            .column("Provisioner", "string", ".provisioner")
            .column("ReclaimPolicy", "text", ".reclaimPolicy")
            .column("VolumeBindingMode", "text", ".volumeBindingMode")
            .column("AllowVolumeExpansion", "bool", ".allowVolumeExpansion"),
            Some(KindType::of::<storage::v1::StorageClass>()),
            KindRules {
                on_write: Some(kind_defaults::storage_class),
                ..KindRules::NONE
            },
        ),
        kind(
            d(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
                false,
            )
            .column("Webhooks", "integer", ".webhooks[*]"),
            Some(KindType::of::<adm::ValidatingWebhookConfiguration>()),
            KindRules {
                on_write: Some(webhook_configurations::defaults),
                validate: Some(|w| webhook_configurations::validate(w.def, w.name, w.object)),
                // 1.20's strategy: no create on PUT, updates need a resourceVersion.
                unconditional_update: false,
                ..KindRules::NONE
            },
        ),
        kind(
            d(
                "admissionregistration.k8s.io",
                "v1",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
                false,
            )
            .column("Webhooks", "integer", ".webhooks[*]"),
            Some(KindType::of::<adm::MutatingWebhookConfiguration>()),
            KindRules {
                on_write: Some(webhook_configurations::defaults),
                validate: Some(|w| webhook_configurations::validate(w.def, w.name, w.object)),
                // 1.20's strategy: no create on PUT, updates need a resourceVersion.
                unconditional_update: false,
                ..KindRules::NONE
            },
        ),
        kind(
            d(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
            )
            .with_status()
            .with_generation()
            .short(&["crd", "crds"])
            .column("Created At", "string", ".metadata.creationTimestamp")
            .without_age(),
            Some(KindType::of::<apiext::CustomResourceDefinition>()),
            KindRules {
                unconditional_update: false,
                etcd_resource: Some("apiextensions.k8s.io/customresourcedefinitions"),
                ..KindRules::NONE
            },
        ),
    ]
}

/// A PodDisruptionBudget at `def`'s version: its column, defaults and
/// validation (both versions alike on 1.20's terms); served without a
/// schema.
fn pod_disruption_budget(def: ResourceDef) -> BuiltinKind {
    BuiltinKind {
        def: def
            .with_status()
            .with_generation()
            .short(&["pdb"])
            .column("Min Available", "intOrPercentOrNA", ".spec.minAvailable")
            .column(
                "Max Unavailable",
                "intOrPercentOrNA",
                ".spec.maxUnavailable",
            )
            .column(
                "Allowed Disruptions",
                "integer0",
                ".status.disruptionsAllowed",
            ),
        schema: None,
        rules: KindRules {
            field_causes: Some(validation::policy::pdb_causes),
            on_write: Some(defaults::other::pod_disruption_budget),
            ..KindRules::NONE
        },
    }
}

/// A CronJob at `def`'s version: the 1.20 printer's columns, its one
/// field selector (`status.successful`, accepted and never matched, as by
/// 1.20), its defaults; both versions have the batch/v1 type.
fn cron_job(def: ResourceDef) -> BuiltinKind {
    use k8s_openapi::api::batch;
    BuiltinKind {
        def: def
            .with_status()
            .short(&["cj"])
            .all()
            .fields(&["status.successful"])
            .column("Schedule", "string", ".spec.schedule")
            .column("Suspend", "boolPtr", ".spec.suspend")
            .column("Active", "countInt", ".status.active")
            .column("Last Schedule", "ageOrNone", ".status.lastScheduleTime")
            .column(
                "Containers",
                "containers",
                ".spec.jobTemplate.spec.template.spec.containers",
            )
            .column(
                "Images",
                "images",
                ".spec.jobTemplate.spec.template.spec.containers",
            )
            .column("Selector", "selector", ".spec.jobTemplate.spec.selector"),
        schema: Some(KindType::of::<batch::v1::CronJob>()),
        rules: KindRules {
            on_write: Some(kind_defaults::cron_job),
            field_causes: Some(validation::cron_job::cron_job_causes),
            ..KindRules::NONE
        },
    }
}

/// A role of `rbac.authorization.k8s.io/v1`: names are path segments;
/// tables print its creation time instead of an age.
fn role(def: ResourceDef) -> ResourceDef {
    def.names(NameRule::PathSegment)
        .column("Created At", "timestamp", ".metadata.creationTimestamp")
        .without_age()
}

/// A binding of `rbac.authorization.k8s.io/v1`: names are path segments;
/// its columns are its role, then (after AGE, with `-o wide`) its subjects
/// by kind.
fn binding(def: ResourceDef) -> ResourceDef {
    let mut def = def
        .names(NameRule::PathSegment)
        .column("Role", "roleRef", ".roleRef");
    for (name, kind) in [
        ("Users", "User"),
        ("Groups", "Group"),
        ("ServiceAccounts", "ServiceAccount"),
    ] {
        def = def.column(name, &format!("subjects:{kind}"), ".subjects");
        if let Some(c) = def.printer_columns.last_mut() {
            c.priority = 1;
        }
    }
    def
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_served_once_with_its_rules() {
        let r = registry();
        for kind in table() {
            let served = r
                .get(&kind.def.group, &kind.def.version, &kind.def.plural)
                .expect("served");
            assert_eq!(*served, kind.def);
            assert!(std::ptr::eq(rules_of(&served), &kind.rules));
        }
        assert_eq!(table().len(), 33);
    }

    #[test]
    fn puts_create_the_kinds_the_real_server_creates_on_update() {
        let creating: Vec<(&str, &str)> = table()
            .iter()
            .filter(|k| k.rules.creates_on_update)
            .map(|k| (k.def.group.as_str(), k.def.plural.as_str()))
            .collect();
        assert_eq!(
            creating,
            [
                ("", "services"),
                ("", "endpoints"),
                ("", "events"),
                ("events.k8s.io", "events"),
                (rbac::GROUP, "roles"),
                (rbac::GROUP, "clusterroles"),
                (rbac::GROUP, "rolebindings"),
                (rbac::GROUP, "clusterrolebindings"),
                ("coordination.k8s.io", "leases"),
            ]
        );
    }
}
