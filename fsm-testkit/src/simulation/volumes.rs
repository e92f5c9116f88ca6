//! The PersistentVolume controller's decisions for static volumes, as
//! kube-controller-manager 1.20 makes them: which claim gets which volume
//! and what is written when it does. Both ways of simulating (in the
//! embedded server and through a client) plan here and only carry out the
//! [`Step`]s.
//!
//! - A volume that is free (no `spec.claimRef`) or only reserved for a
//!   claim (a `claimRef` without `uid`) becomes `Available`; a bound volume
//!   whose claim is gone becomes `Released` (reclaim policy `Retain`).
//! - A claim that is not bound yet (no `pv.kubernetes.io/bind-completed`)
//!   gets the volume [`best_volume`] picks: one reserved for it, else the
//!   smallest `Available` one of its class whose access modes cover the
//!   claim's, whose capacity covers the request and whose labels its
//!   `spec.selector` selects (among the volumes with the fewest access
//!   modes first, as the controller's index searches). A claim naming its
//!   volume (`spec.volumeName`) gets that one if it satisfies the claim.
//! - With a class whose `volumeBindingMode` is `WaitForFirstConsumer`,
//!   only a volume reserved for the claim binds at once (as the controller
//!   does); any other waits until a Pod of the claim's namespace mounts the
//!   claim. On a cluster the scheduler then picks a node and binds; here
//!   the simulation stands in for the scheduler (there are no nodes).
//! - Binding is the controller's four writes, in its order: the volume's
//!   `spec.claimRef` (a full reference: kind, namespace, name, uid,
//!   apiVersion, resourceVersion) and `pv.kubernetes.io/bound-by-controller`
//!   when the volume was not reserved for the claim; the volume's
//!   `status.phase: Bound`; the claim's `spec.volumeName` and annotations
//!   `pv.kubernetes.io/bind-completed` (and `bound-by-controller` when it
//!   named no volume); the claim's status (`phase: Bound`, the volume's
//!   `accessModes` and `capacity`).

use serde_json::{Map, Value, json};

use crate::quantity;
use crate::validation::pod::selector_matches;

/// Set on a volume or claim whose binding the controller made.
pub(super) const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// Set on a claim once its binding is complete.
pub(super) const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The class of a volume or claim written the old way.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// Which of the two kinds a step writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Object {
    Volume,
    Claim,
}

/// One write: `edit` applied to the object as it is when written, if it
/// still has `uid`; `status` says whether it goes to the status
/// subresource.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Step {
    pub object: Object,
    /// Empty for a volume.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub status: bool,
    pub edit: Edit,
}

/// What a step changes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Edit {
    /// A volume's `status.phase`: `Available` (free or reserved) or
    /// `Released` (bound, its claim gone).
    VolumePhase(&'static str),
    /// A volume's `status.phase: Bound`, once its `claimRef` names the
    /// claim of this uid.
    VolumeBound { claim_uid: String },
    /// A volume's `spec.claimRef`, and its `bound-by-controller`
    /// annotation when the controller chose it.
    ClaimRef {
        reference: Value,
        by_controller: bool,
    },
    /// A claim's `spec.volumeName` and annotations.
    VolumeName { volume: String, by_controller: bool },
    /// A claim's status once bound to `volume`.
    ClaimBound {
        volume: String,
        access_modes: Value,
        capacity: Value,
    },
}

impl Edit {
    /// Whether the edit still fits `current`, the object as it is when
    /// written: another writer (a test, a real controller) may have bound
    /// it otherwise since the plan was made. A binding stops at the first
    /// step that no longer fits.
    pub(super) fn fits(&self, current: &Value) -> bool {
        let reference = &current["spec"]["claimRef"];
        let ref_uid = text(reference, "/uid");
        let named = text(current, "/spec/volumeName");
        match self {
            Edit::VolumePhase("Released") => !ref_uid.is_empty(),
            Edit::VolumePhase(_) => ref_uid.is_empty(),
            Edit::VolumeBound { claim_uid } => ref_uid == claim_uid,
            Edit::ClaimRef { reference: to, .. } => {
                !reference.is_object()
                    || (text(reference, "/name") == text(to, "/name")
                        && text(reference, "/namespace") == text(to, "/namespace")
                        && (ref_uid.is_empty() || ref_uid == text(to, "/uid")))
            }
            Edit::VolumeName { volume, .. } => named.is_empty() || named == volume,
            Edit::ClaimBound { volume, .. } => named == volume,
        }
    }

    /// Applies the change to `object`.
    pub(super) fn apply(&self, object: &mut Value) {
        match self {
            Edit::VolumePhase(phase) => object["status"] = json!({ "phase": phase }),
            Edit::VolumeBound { .. } => object["status"] = json!({"phase": "Bound"}),
            Edit::ClaimRef {
                reference,
                by_controller,
            } => {
                object["spec"]["claimRef"] = reference.clone();
                if *by_controller {
                    annotate(object, BOUND_BY_CONTROLLER);
                }
            }
            Edit::VolumeName {
                volume,
                by_controller,
            } => {
                object["spec"]["volumeName"] = json!(volume);
                if *by_controller {
                    annotate(object, BOUND_BY_CONTROLLER);
                }
                annotate(object, BIND_COMPLETED);
            }
            Edit::ClaimBound {
                access_modes,
                capacity,
                ..
            } => {
                object["status"] = json!({"phase": "Bound", "accessModes": access_modes,
                                          "capacity": capacity});
            }
        }
    }
}

/// Sets the annotation `key: "yes"` unless it is there already.
fn annotate(object: &mut Value, key: &str) {
    let meta = &mut object["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = Value::Object(Map::new());
    }
    if let Some(annotations) = meta["annotations"].as_object_mut() {
        annotations
            .entry(key)
            .or_insert_with(|| Value::String("yes".into()));
    }
}

/// What the controller sees: every volume, the claims and Pods it looks
/// after, and the storage classes.
#[derive(Debug, Default)]
pub(super) struct World<'a> {
    pub volumes: Vec<&'a Value>,
    pub claims: Vec<&'a Value>,
    pub classes: Vec<&'a Value>,
    pub pods: Vec<&'a Value>,
}

fn text<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

fn namespace(object: &Value) -> &str {
    text(object, "/metadata/namespace")
}

fn uid(object: &Value) -> &str {
    text(object, "/metadata/uid")
}

fn deleting(object: &Value) -> bool {
    object["metadata"].get("deletionTimestamp").is_some()
}

/// The class of a volume or claim: `spec.storageClassName`, else the beta
/// annotation, else "".
fn class(object: &Value) -> &str {
    match object["spec"]["storageClassName"].as_str() {
        Some(class) => class,
        None => text(object, &format!("/metadata/annotations/{BETA_CLASS}")),
    }
}

fn volume_mode(object: &Value) -> &str {
    object["spec"]["volumeMode"]
        .as_str()
        .unwrap_or("Filesystem")
}

fn access_modes(object: &Value) -> Vec<&str> {
    let mut modes: Vec<&str> = object["spec"]["accessModes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    modes.sort_unstable();
    modes.dedup();
    modes
}

fn capacity(volume: &Value) -> &str {
    text(volume, "/spec/capacity/storage")
}

fn request(claim: &Value) -> &str {
    match text(claim, "/spec/resources/requests/storage") {
        "" => "0",
        request => request,
    }
}

/// Whether the volume's `claimRef` names the claim (and its uid, if any).
fn reserved_for(volume: &Value, claim: &Value) -> bool {
    let reference = &volume["spec"]["claimRef"];
    if !reference.is_object() {
        return false;
    }
    let ref_uid = text(reference, "/uid");
    text(reference, "/name") == name(claim)
        && text(reference, "/namespace") == namespace(claim)
        && (ref_uid.is_empty() || ref_uid == uid(claim))
}

/// Whether the claim's class makes binding wait for a Pod: a class named
/// and found whose `volumeBindingMode` is `WaitForFirstConsumer`.
fn waits_for_consumer(claim: &Value, classes: &[&Value]) -> bool {
    let wanted = class(claim);
    !wanted.is_empty()
        && classes.iter().any(|c| {
            name(c) == wanted && c["volumeBindingMode"].as_str() == Some("WaitForFirstConsumer")
        })
}

/// Whether a Pod (not being deleted) of the claim's namespace mounts it.
fn has_consumer(claim: &Value, pods: &[&Value]) -> bool {
    pods.iter().any(|pod| {
        namespace(pod) == namespace(claim)
            && !deleting(pod)
            && pod["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|v| v["persistentVolumeClaim"]["claimName"].as_str() == Some(name(claim)))
    })
}

/// Whether the volume is at least as large as the claim's request.
fn large_enough(volume: &Value, claim: &Value) -> bool {
    quantity::compare(capacity(volume), request(claim)).is_some_and(|o| o.is_ge())
}

/// The volume the controller binds an unbound claim naming no volume to,
/// as `findByClaim` then `FindMatchingVolume` choose it: the volumes are
/// searched by access-mode set, the sets covering the claim's modes with
/// the fewest modes first; in a set, a volume reserved for the claim wins,
/// else the smallest fitting `Available` one. `delay` (binding waits for
/// a consumer that is not there) leaves only reserved volumes.
pub(super) fn best_volume<'v>(
    claim: &Value,
    volumes: &[&'v Value],
    delay: bool,
    taken: &[String],
) -> Option<&'v Value> {
    let wanted = access_modes(claim);
    let mut sets: Vec<Vec<&str>> = volumes
        .iter()
        .map(|v| access_modes(v))
        .filter(|modes| wanted.iter().all(|m| modes.contains(m)))
        .collect();
    sets.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    sets.dedup();
    let selector = &claim["spec"]["selector"];
    for set in sets {
        let mut smallest: Option<&Value> = None;
        for &volume in volumes.iter().filter(|v| access_modes(v) == set) {
            if taken.iter().any(|t| t == name(volume))
                || (volume["spec"]["claimRef"].is_object() && !reserved_for(volume, claim))
                || !large_enough(volume, claim)
                || volume_mode(volume) != volume_mode(claim)
                || deleting(volume)
            {
                continue;
            }
            if reserved_for(volume, claim) {
                return Some(volume);
            }
            if delay
                || volume["status"]["phase"].as_str() != Some("Available")
                || (selector.is_object()
                    && !selector_matches(selector, &volume["metadata"]["labels"]))
                || class(volume) != class(claim)
            {
                continue;
            }
            let smaller = smallest.is_none_or(|s| {
                quantity::compare(capacity(s), capacity(volume)).is_some_and(|o| o.is_gt())
            });
            if smaller {
                smallest = Some(volume);
            }
        }
        if smallest.is_some() {
            return smallest;
        }
    }
    None
}

/// Whether the volume a claim names satisfies it (`checkVolumeSatisfyClaim`):
/// capacity, class, access modes and volume mode.
fn satisfies(volume: &Value, claim: &Value) -> bool {
    let modes = access_modes(volume);
    large_enough(volume, claim)
        && class(volume) == class(claim)
        && access_modes(claim).iter().all(|m| modes.contains(m))
        && volume_mode(volume) == volume_mode(claim)
}

/// The controller's reference to a claim, as `GetReference` makes it.
fn reference(claim: &Value) -> Value {
    json!({"kind": "PersistentVolumeClaim", "namespace": namespace(claim), "name": name(claim),
           "uid": uid(claim), "apiVersion": "v1",
           "resourceVersion": text(claim, "/metadata/resourceVersion")})
}

fn step(object: Object, target: &Value, status: bool, edit: Edit) -> Step {
    Step {
        object,
        namespace: namespace(target).to_owned(),
        name: name(target).to_owned(),
        uid: uid(target).to_owned(),
        status,
        edit,
    }
}

/// The four writes binding `claim` to `volume`.
fn bind(volume: &Value, claim: &Value) -> Vec<Step> {
    let claim_names_it = text(claim, "/spec/volumeName") == name(volume);
    vec![
        step(
            Object::Volume,
            volume,
            false,
            Edit::ClaimRef {
                reference: reference(claim),
                by_controller: !reserved_for(volume, claim),
            },
        ),
        step(
            Object::Volume,
            volume,
            true,
            Edit::VolumeBound {
                claim_uid: uid(claim).to_owned(),
            },
        ),
        step(
            Object::Claim,
            claim,
            false,
            Edit::VolumeName {
                volume: name(volume).to_owned(),
                by_controller: !claim_names_it,
            },
        ),
        step(
            Object::Claim,
            claim,
            true,
            Edit::ClaimBound {
                volume: name(volume).to_owned(),
                access_modes: volume["spec"]["accessModes"].clone(),
                capacity: volume["spec"]["capacity"].clone(),
            },
        ),
    ]
}

/// What the controller writes about `world` as it is now, in groups made
/// in order (a binding's four steps, or one change of phase): nothing when
/// everything is settled. Planning again after the writes land plans
/// nothing more (a volume made `Available` is bound on the next round).
pub(super) fn plan(world: &World<'_>) -> Vec<Vec<Step>> {
    let mut steps = Vec::new();
    let claim_of = |volume: &Value| {
        let reference = &volume["spec"]["claimRef"];
        world.claims.iter().copied().find(|c| {
            name(c) == text(reference, "/name") && namespace(c) == text(reference, "/namespace")
        })
    };
    for &volume in &world.volumes {
        if deleting(volume) {
            continue;
        }
        let phase = volume["status"]["phase"].as_str().unwrap_or("");
        let reference = &volume["spec"]["claimRef"];
        let ref_uid = text(reference, "/uid");
        if !reference.is_object() || ref_uid.is_empty() {
            if phase != "Available" {
                steps.push(vec![step(
                    Object::Volume,
                    volume,
                    true,
                    Edit::VolumePhase("Available"),
                )]);
            }
        } else if claim_of(volume).is_none_or(|c| uid(c) != ref_uid) {
            let retain = volume["spec"]["persistentVolumeReclaimPolicy"]
                .as_str()
                .is_none_or(|p| p == "Retain");
            if retain && !matches!(phase, "Released" | "Failed") {
                steps.push(vec![step(
                    Object::Volume,
                    volume,
                    true,
                    Edit::VolumePhase("Released"),
                )]);
            }
        }
    }
    let mut taken: Vec<String> = Vec::new();
    for &claim in &world.claims {
        let annotated = claim["metadata"]["annotations"]
            .get(BIND_COMPLETED)
            .is_some();
        if annotated || deleting(claim) {
            continue;
        }
        let named = text(claim, "/spec/volumeName");
        let volume = if named.is_empty() {
            let delay =
                waits_for_consumer(claim, &world.classes) && !has_consumer(claim, &world.pods);
            best_volume(claim, &world.volumes, delay, &taken)
        } else {
            world.volumes.iter().copied().find(|v| {
                name(v) == named
                    && !taken.iter().any(|t| t == named)
                    && (!v["spec"]["claimRef"].is_object() || reserved_for(v, claim))
                    && satisfies(v, claim)
            })
        };
        if let Some(volume) = volume {
            taken.push(name(volume).to_owned());
            steps.push(bind(volume, claim));
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(name: &str, size: &str, modes: &[&str], class: &str) -> Value {
        json!({"metadata": {"name": name, "uid": format!("pv-{name}")},
               "spec": {"capacity": {"storage": size}, "accessModes": modes,
                        "storageClassName": class, "persistentVolumeReclaimPolicy": "Retain"},
               "status": {"phase": "Available"}})
    }

    fn claim(name: &str, size: &str, modes: &[&str], class: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("pvc-{name}"),
                            "resourceVersion": "7"},
               "spec": {"accessModes": modes, "storageClassName": class,
                        "resources": {"requests": {"storage": size}}},
               "status": {"phase": "Pending"}})
    }

    fn best<'v>(claim: &Value, volumes: &[&'v Value]) -> Option<&'v str> {
        best_volume(claim, volumes, false, &[]).map(name)
    }

    const RWO: &[&str] = &["ReadWriteOnce"];

    /// The plan's steps, groups run together.
    fn steps_of(world: &World<'_>) -> Vec<Step> {
        plan(world).into_iter().flatten().collect()
    }

    #[test]
    fn a_binding_is_one_group_and_stops_where_another_writer_bound_otherwise() {
        let v = volume("small", "1Gi", RWO, "");
        let c = claim("c", "500Mi", RWO, "");
        let groups = plan(&World {
            volumes: vec![&v],
            claims: vec![&c],
            ..World::default()
        });
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [4]);
        let [claim_ref, bound, volume_name, claim_bound] = &groups[0][..] else {
            panic!("four steps: {groups:?}");
        };
        assert!(claim_ref.edit.fits(&v));
        let mut taken = v.clone();
        taken["spec"]["claimRef"] = json!({"namespace": "ns", "name": "other", "uid": "u2"});
        assert!(
            !claim_ref.edit.fits(&taken),
            "bound to another claim meanwhile"
        );
        assert!(!bound.edit.fits(&taken));
        let mut mine = v.clone();
        claim_ref.edit.apply(&mut mine);
        assert!(bound.edit.fits(&mine));
        assert!(volume_name.edit.fits(&c));
        let mut elsewhere = c.clone();
        elsewhere["spec"]["volumeName"] = json!("big");
        assert!(!volume_name.edit.fits(&elsewhere));
        assert!(!claim_bound.edit.fits(&c), "not bound to the volume yet");
        let mut named = c.clone();
        volume_name.edit.apply(&mut named);
        assert!(claim_bound.edit.fits(&named));
        assert!(
            !Edit::VolumePhase("Available").fits(&mine),
            "bound meanwhile"
        );
        assert!(Edit::VolumePhase("Released").fits(&mine));
    }

    #[test]
    fn the_smallest_volume_that_fits_wins() {
        let (small, mid, big) = (
            volume("small", "500Mi", RWO, ""),
            volume("mid", "1Gi", RWO, ""),
            volume("big", "5Gi", RWO, ""),
        );
        let c = claim("c", "600Mi", RWO, "");
        assert_eq!(best(&c, &[&big, &small, &mid]), Some("mid"));
        assert_eq!(
            best(&claim("c", "1Gi", RWO, ""), &[&big, &mid]),
            Some("mid")
        );
        assert_eq!(best(&claim("c", "6Gi", RWO, ""), &[&big, &mid]), None);
        assert_eq!(
            best_volume(&c, &[&big, &mid], false, &["mid".into()]).map(name),
            Some("big"),
            "a volume taken this round is not offered again"
        );
    }

    #[test]
    fn access_modes_class_selector_phase_and_mode_must_match() {
        let c = claim("c", "1Gi", &["ReadWriteMany"], "fast");
        let rwo = volume("rwo", "1Gi", RWO, "fast");
        let other_class = volume("other", "1Gi", &["ReadWriteMany"], "slow");
        assert_eq!(best(&c, &[&rwo, &other_class]), None);
        let mut pending = volume("pending", "1Gi", &["ReadWriteMany"], "fast");
        pending["status"]["phase"] = json!("Pending");
        assert_eq!(best(&c, &[&pending]), None, "only Available volumes");
        let mut block = volume("block", "1Gi", &["ReadWriteMany"], "fast");
        block["spec"]["volumeMode"] = json!("Block");
        assert_eq!(best(&c, &[&block]), None, "volume modes differ");
        let mut labelled = volume("labelled", "2Gi", &["ReadWriteMany"], "fast");
        labelled["metadata"]["labels"] = json!({"tier": "gold"});
        let plain = volume("plain", "1Gi", &["ReadWriteMany"], "fast");
        let mut picky = c.clone();
        picky["spec"]["selector"] = json!({"matchLabels": {"tier": "gold"}});
        assert_eq!(best(&picky, &[&plain, &labelled]), Some("labelled"));
        picky["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]});
        assert_eq!(best(&picky, &[&plain, &labelled]), Some("plain"));
    }

    #[test]
    fn fewer_access_modes_come_first_then_size() {
        let c = claim("c", "1Gi", RWO, "");
        let exact_big = volume("exact-big", "5Gi", RWO, "");
        let wider_small = volume("wider-small", "1Gi", &["ReadWriteOnce", "ReadOnlyMany"], "");
        assert_eq!(best(&c, &[&wider_small, &exact_big]), Some("exact-big"));
        assert_eq!(best(&c, &[&wider_small]), Some("wider-small"));
    }

    #[test]
    fn a_reserved_volume_wins_and_others_reservations_are_respected() {
        let c = claim("c", "1Gi", RWO, "");
        let small = volume("small", "1Gi", RWO, "");
        let mut reserved = volume("reserved", "3Gi", RWO, "other-class");
        reserved["spec"]["claimRef"] = json!({"namespace": "ns", "name": "c"});
        reserved["status"]["phase"] = json!("Pending");
        assert_eq!(best(&c, &[&small, &reserved]), Some("reserved"));
        let mut elsewhere = volume("elsewhere", "1Gi", RWO, "");
        elsewhere["spec"]["claimRef"] = json!({"namespace": "ns", "name": "d"});
        assert_eq!(best(&c, &[&elsewhere]), None);
        let mut old = reserved.clone();
        old["spec"]["claimRef"]["uid"] = json!("an-older-claim");
        assert_eq!(
            best(&c, &[&old]),
            None,
            "reserved for a claim of that name before"
        );
        assert_eq!(
            best_volume(&c, &[&small, &reserved], true, &[]).map(name),
            Some("reserved"),
            "waiting for a consumer still binds a reserved volume"
        );
        assert_eq!(best_volume(&c, &[&small], true, &[]), None);
    }

    #[test]
    fn binding_writes_what_the_controller_writes() {
        let v = volume("small", "1Gi", RWO, "");
        let c = claim("c", "500Mi", RWO, "");
        let steps = steps_of(&World {
            volumes: vec![&v],
            claims: vec![&c],
            ..World::default()
        });
        assert_eq!(steps.len(), 4, "{steps:?}");
        let (mut pv, mut pvc) = (v.clone(), c.clone());
        for s in &steps {
            match s.object {
                Object::Volume => s.edit.apply(&mut pv),
                Object::Claim => s.edit.apply(&mut pvc),
            }
        }
        assert_eq!(
            pv["spec"]["claimRef"],
            json!({"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "c",
                   "uid": "pvc-c", "apiVersion": "v1", "resourceVersion": "7"})
        );
        assert_eq!(
            pv["metadata"]["annotations"],
            json!({BOUND_BY_CONTROLLER: "yes"})
        );
        assert_eq!(pv["status"], json!({"phase": "Bound"}));
        assert_eq!(pvc["spec"]["volumeName"], "small");
        assert_eq!(
            pvc["metadata"]["annotations"],
            json!({BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"})
        );
        assert_eq!(
            pvc["status"],
            json!({"phase": "Bound", "accessModes": RWO, "capacity": {"storage": "1Gi"}})
        );
        assert_eq!(
            steps
                .iter()
                .map(|s| (s.object, s.status))
                .collect::<Vec<_>>(),
            [
                (Object::Volume, false),
                (Object::Volume, true),
                (Object::Claim, false),
                (Object::Claim, true)
            ]
        );
        let settled = steps_of(&World {
            volumes: vec![&pv],
            claims: vec![&pvc],
            ..World::default()
        });
        assert_eq!(settled, [], "nothing more once bound");
    }

    #[test]
    fn a_reserved_volume_is_not_marked_bound_by_the_controller() {
        let mut v = volume("pre", "2Gi", RWO, "");
        v["spec"]["claimRef"] = json!({"namespace": "ns", "name": "c"});
        let c = claim("c", "1Gi", RWO, "");
        let steps = steps_of(&World {
            volumes: vec![&v],
            claims: vec![&c],
            ..World::default()
        });
        assert!(matches!(
            steps.first().map(|s| &s.edit),
            Some(Edit::ClaimRef {
                by_controller: false,
                ..
            })
        ));
        assert!(matches!(
            steps.get(2).map(|s| &s.edit),
            Some(Edit::VolumeName {
                by_controller: true,
                ..
            })
        ));
    }

    #[test]
    fn a_claim_naming_its_volume_gets_it_if_it_satisfies_the_claim() {
        let small = volume("small", "1Gi", RWO, "");
        let big = volume("big", "5Gi", RWO, "");
        let mut c = claim("c", "2Gi", RWO, "");
        c["spec"]["volumeName"] = json!("big");
        let steps = steps_of(&World {
            volumes: vec![&small, &big],
            claims: vec![&c],
            ..World::default()
        });
        assert_eq!(steps.first().map(|s| s.name.as_str()), Some("big"));
        assert!(matches!(
            steps.get(2).map(|s| &s.edit),
            Some(Edit::VolumeName {
                by_controller: false,
                ..
            })
        ));
        c["spec"]["volumeName"] = json!("small");
        let world = World {
            volumes: vec![&small, &big],
            claims: vec![&c],
            ..World::default()
        };
        assert_eq!(steps_of(&world), [], "too small: the claim stays Pending");
    }

    #[test]
    fn volumes_become_available_and_released() {
        let mut new = volume("new", "1Gi", RWO, "");
        new["status"] = json!({"phase": "Pending"});
        let mut reserved = new.clone();
        reserved["metadata"]["name"] = json!("reserved");
        reserved["spec"]["claimRef"] = json!({"namespace": "ns", "name": "gone"});
        let mut orphan = volume("orphan", "1Gi", RWO, "");
        orphan["spec"]["claimRef"] = json!({"namespace": "ns", "name": "gone", "uid": "u"});
        orphan["status"] = json!({"phase": "Bound"});
        let mut deleted = orphan.clone();
        deleted["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
        let steps = steps_of(&World {
            volumes: vec![&new, &reserved, &orphan, &deleted],
            ..World::default()
        });
        let phases: Vec<_> = steps
            .iter()
            .map(|s| (s.name.as_str(), s.edit.clone()))
            .collect();
        assert_eq!(
            phases,
            [
                ("new", Edit::VolumePhase("Available")),
                ("reserved", Edit::VolumePhase("Available")),
                ("orphan", Edit::VolumePhase("Released")),
            ]
        );
    }

    #[test]
    fn wait_for_first_consumer_binds_once_a_pod_mounts_the_claim() {
        let class =
            json!({"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"});
        let v = volume("v", "1Gi", RWO, "local");
        let c = claim("c", "1Gi", RWO, "local");
        let mut world = World {
            volumes: vec![&v],
            claims: vec![&c],
            classes: vec![&class],
            pods: Vec::new(),
        };
        assert_eq!(steps_of(&world), [], "no consumer yet");
        let elsewhere = json!({"metadata": {"name": "p", "namespace": "other"},
            "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}});
        world.pods = vec![&elsewhere];
        assert_eq!(steps_of(&world), [], "a Pod of another namespace");
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}});
        world.pods = vec![&pod];
        assert_eq!(steps_of(&world).len(), 4);
        let immediate = json!({"metadata": {"name": "local"}, "volumeBindingMode": "Immediate"});
        world.classes = vec![&immediate];
        world.pods = Vec::new();
        assert_eq!(steps_of(&world).len(), 4, "Immediate binds without a Pod");
    }

    #[test]
    fn two_claims_never_get_the_same_volume() {
        let v = volume("only", "1Gi", RWO, "");
        let (a, b) = (claim("a", "1Gi", RWO, ""), claim("b", "1Gi", RWO, ""));
        let steps = steps_of(&World {
            volumes: vec![&v],
            claims: vec![&a, &b],
            ..World::default()
        });
        let claims: Vec<_> = steps
            .iter()
            .filter(|s| s.object == Object::Claim)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(claims, ["a", "a"]);
    }
}
