//! Claims bound to static PersistentVolumes: on the real server by
//! kube-controller-manager's `persistentvolume-binder`, on the embedded
//! one by `fsm_testkit`'s simulation ([`Scene::simulate_claim_binding`]).
//! What both write is compared: the volume's `claimRef`, phase and
//! annotations, the claim's `volumeName`, annotations and status, and
//! their tables.
//!
//! Volumes are cluster-scoped: their names carry the run's token and they
//! are deleted when the scene closes, even after a failure. The
//! controller's Events (`FailedBinding` for the claim nothing fits) are
//! not compared: the simulation writes none.

use integration_tests::scene::eventually;
use integration_tests::{Fallible, Scene};
use serde_json::{Value, json};

use super::kinds::remove;
use super::lists::{mask_ages, table_summary};

const VOLUMES: &str = "/api/v1/persistentvolumes";

/// Why a real server may never bind: started before its controller-manager
/// ran the binder.
pub const BINDER_HINT: &str = "kube-controller-manager must run persistentvolume-binder, as \
    scripts/real-apiserver/start does since issue 32: restart a server started before";

/// What binding decides about an object: its name, annotations and
/// finalizers, spec and status.
fn shape(object: &Value) -> Value {
    let meta = &object["metadata"];
    json!({"name": meta["name"], "annotations": meta["annotations"],
           "finalizers": meta["finalizers"], "spec": object["spec"], "status": object["status"]})
}

/// The Table of `path`, ages masked.
async fn table(s: &Scene, path: &str) -> Fallible<Value> {
    let reply = s.get_table(path).await?.expect(200)?;
    let summary = table_summary(&reply.body);
    Ok(json!({"columns": summary["columns"], "rows": mask_ages(&summary["rows"])}))
}

/// The object at `path` once its `status.phase` is `phase` (at most 30 s).
async fn phase(s: &Scene, path: &str, phase: &str) -> Fallible<Value> {
    let what = format!("{path} to be {phase} (on a real server, {BINDER_HINT})");
    eventually(&what, 30, async || {
        let reply = s.get(path).await?.expect(200)?;
        Ok((reply.body["status"]["phase"] == phase).then_some(reply.body))
    })
    .await
}

/// Three claims bound (the smallest volume that fits, the volume a
/// selector picks, a volume reserved by its `claimRef`), one left
/// `Pending` (no volume fits), and a bound volume `Released` when its
/// claim goes.
pub async fn volumes_bind_claims(s: &mut Scene) -> Fallible {
    s.simulate_claim_binding();
    let volume = |name: &str, size: &str, extra: Value| {
        let mut body = json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "", "hostPath": {"path": format!("/data/{name}")}}});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                match (body.get_mut(key), value) {
                    (Some(Value::Object(into)), Value::Object(from)) => {
                        into.extend(from.clone());
                    }
                    _ => {
                        body.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        body
    };
    let ns = s.ns.clone();
    let names = ["small", "big", "gold", "reserved"].map(|n| format!("{ns}-{n}"));
    let [small, big, gold, reserved] = names.clone();
    let bodies = [
        volume(&small, "1Gi", json!({})),
        volume(&big, "5Gi", json!({})),
        volume(
            &gold,
            "3Gi",
            json!({"metadata": {"labels": {"tier": "gold"}}}),
        ),
        volume(
            &reserved,
            "2Gi",
            json!({"spec": {"claimRef": {"namespace": ns, "name": "wants-reserved"}}}),
        ),
    ];
    for name in &names {
        s.delete_at_close(format!("{VOLUMES}/{name}"));
    }
    for body in bodies {
        s.post(VOLUMES, body).await?.expect(201)?;
    }
    for (name, short) in names.iter().zip(["small", "big", "gold", "reserved"]) {
        let available = phase(s, &format!("{VOLUMES}/{name}"), "Available").await?;
        s.record(format!("volume {short} available"), shape(&available));
    }

    let claims = s.core("persistentvolumeclaims");
    let claim = |name: &str, size: &str, extra: Value| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "resources": {"requests": {"storage": size}}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": name}, "spec": spec})
    };
    let bodies = [
        claim("fits", "500Mi", json!({})),
        claim(
            "picky",
            "1Gi",
            json!({"selector": {"matchLabels": {"tier": "gold"}}}),
        ),
        claim("wants-reserved", "1Gi", json!({})),
        claim("huge", "50Gi", json!({})),
    ];
    for body in bodies {
        s.post(&claims, body).await?.expect(201)?;
    }
    for (claim, volume) in [
        ("fits", &small),
        ("picky", &gold),
        ("wants-reserved", &reserved),
    ] {
        let bound = phase(s, &format!("{claims}/{claim}"), "Bound").await?;
        assert_eq!(bound["spec"]["volumeName"], json!(volume), "{claim}");
        s.record(format!("claim {claim} bound"), shape(&bound));
        let path = format!("{VOLUMES}/{volume}");
        let volume = phase(s, &path, "Bound").await?;
        assert_eq!(
            volume["spec"]["claimRef"]["uid"], bound["metadata"]["uid"],
            "{claim}"
        );
        s.record(format!("volume of {claim}"), shape(&volume));
        let volume_table = table(s, &path).await?;
        s.record(format!("volume table of {claim}"), volume_table);
    }
    // The controller had its chance at the claim nothing fits.
    let huge = s.get(&format!("{claims}/huge")).await?.expect(200)?;
    s.record("claim huge pending", shape(&huge.body));
    let big_left = s.get(&format!("{VOLUMES}/{big}")).await?.expect(200)?;
    s.record("the big volume is left", shape(&big_left.body));
    let claim_table = table(s, &claims).await?;
    s.record("claim table", claim_table);

    remove(s, &format!("{claims}/fits")).await?;
    let released = phase(s, &format!("{VOLUMES}/{small}"), "Released").await?;
    s.record("a volume whose claim is gone", shape(&released));

    for claim in ["picky", "wants-reserved", "huge"] {
        remove(s, &format!("{claims}/{claim}")).await?;
    }
    // The volumes go when the scene closes (Scene::delete_at_close).
    Ok(())
}
