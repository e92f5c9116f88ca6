//! The lifecycle of a dependent's objects, against the embedded API server
//! or the real kube-apiserver named by `FSM_REAL_APISERVER_KUBECONFIG`:
//! create-only objects (a generated password kept across converges and
//! restarts, readiness of the live object, no write once converged),
//! kept objects released instead of deleted (on prune, on teardown, and
//! surviving their former owner's garbage collection), and one object
//! per attempt.

use crate::common;

use std::collections::BTreeMap;

use crate::dependents::{cm, configmaps, log_position, owner, writes_since};
use common::*;
use fsm_kube::dependents::{
    Dependent, DependentState, DependentsRuntime, DesiredSet, KEEP_ANNOTATION, TeardownState,
    converge, teardown,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

/// The Secret a handler would build with a freshly generated password.
fn password_secret(password: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some("db-password".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "password".to_owned(),
            ByteString(password.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

fn runtime(env: &Env) -> DependentsRuntime {
    DependentsRuntime::new(env.client.clone()).field_manager("lifecycle-test")
}

fn owner_uids(object: &impl Resource) -> Vec<String> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_password_is_created_once_and_kept_across_converges_and_restarts() {
    let env = env().await;
    let owner = owner(&env, "password").await;
    // What a handler writes: a new password each time, no GET of its own.
    let set = |password: &str| {
        DesiredSet::builder()
            .dependent(Dependent::new("password", &password_secret(password)).create_only())
            .dependent(
                Dependent::new("app", &cm("app", &[("uses", "db-password")]))
                    .depends_on(["password"]),
            )
            .build()
            .unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    let password = || async {
        let secret = secrets.get("db-password").await.unwrap();
        let bytes = secret.data.as_ref().unwrap()["password"].0.clone();
        (
            String::from_utf8(bytes).unwrap(),
            secret.metadata.resource_version.clone().unwrap(),
            owner_uids(&secret),
        )
    };

    let first = converge(&runtime(&env), &owner, &set("first"))
        .await
        .unwrap();
    assert!(first.is_ready(), "{}", first.summary());
    let (created, version, owners) = password().await;
    assert_eq!(created, "first");
    assert_eq!(owners, [owner.uid().unwrap()]);

    // The same runtime, then a new one (an operator restart): the live
    // password wins, and nothing is written.
    let rt = runtime(&env);
    for (runtime, fresh) in [(rt.clone(), "second"), (runtime(&env), "third")] {
        let since = log_position(&env);
        let again = converge(&runtime, &owner, &set(fresh)).await.unwrap();
        assert!(again.is_ready(), "{}", again.summary());
        assert!(again.applied.is_empty(), "{:?}", again.applied);
        assert_eq!(again.unchanged, 2);
        assert_eq!(writes_since(&env, since), Vec::<String>::new());
        assert_eq!(
            password().await,
            (created.clone(), version.clone(), owners.clone())
        );
    }

    // Deleted by someone: created again, with the password of the day.
    secrets
        .delete("db-password", &Default::default())
        .await
        .unwrap();
    eventually("the password secret gone", || async {
        secrets
            .get_opt("db-password")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let recreated = converge(&rt, &owner, &set("fourth")).await.unwrap();
    assert_eq!(
        recreated.applied,
        [format!("Secret {}/db-password", env.ns)]
    );
    assert_eq!(password().await.0, "fourth");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_only_dependent_is_judged_on_the_live_object_and_holds_nothing_pending() {
    let env = env().await;
    let owner = owner(&env, "live-ready").await;
    let rt = runtime(&env);
    let set = |flag: &str| {
        DesiredSet::builder()
            .dependent(
                Dependent::new("seed", &cm("seed", &[("ready", flag)]))
                    .create_only()
                    .ready(|live: &Value| live.pointer("/data/ready") == Some(&json!("yes"))),
            )
            .dependent(Dependent::new("after", &cm("after", &[])).depends_on(["seed"]))
            .build()
            .unwrap()
    };
    let created = converge(&rt, &owner, &set("no")).await.unwrap();
    assert_eq!(
        created.state("seed"),
        Some(&DependentState::NotReady("not ready yet".into()))
    );
    assert_eq!(
        created.state("after"),
        Some(&DependentState::Waiting(vec!["seed".into()]))
    );
    // The desired object says ready, the live one does not: the live one
    // is what counts, and it is not rewritten.
    let desired_only = converge(&rt, &owner, &set("yes")).await.unwrap();
    assert!(
        desired_only.applied.is_empty(),
        "{:?}",
        desired_only.applied
    );
    assert!(!desired_only.is_ready(), "{}", desired_only.summary());

    // Someone makes the live object ready: what waits on it goes ahead,
    // in the same converge (a precondition would have held it pending).
    configmaps(&env)
        .patch(
            "seed",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"ready": "yes"}})),
        )
        .await
        .unwrap();
    let ready = converge(&rt, &owner, &set("no")).await.unwrap();
    assert_eq!(ready.state("seed"), Some(&DependentState::Ready));
    assert_eq!(ready.state("after"), Some(&DependentState::Ready));
    assert!(ready.is_ready(), "{}", ready.summary());
    assert_eq!(ready.applied, [format!("ConfigMap {}/after", env.ns)]);
    let seed = configmaps(&env).get("seed").await.unwrap();
    assert_eq!(seed.data.unwrap()["ready"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_only_object_someone_else_owns_is_taken_over_only_when_adopted() {
    let env = env().await;
    let owner = owner(&env, "adopt-once").await;
    let rt = runtime(&env);
    configmaps(&env)
        .create(&PostParams::default(), &cm("found", &[("v", "theirs")]))
        .await
        .unwrap();
    let set = |adopt: bool| {
        let dependent = Dependent::new("found", &cm("found", &[("v", "ours")])).create_only();
        let dependent = if adopt { dependent.adopt() } else { dependent };
        DesiredSet::builder().dependent(dependent).build().unwrap()
    };
    let refused = converge(&rt, &owner, &set(false)).await.unwrap();
    assert!(
        matches!(refused.state("found"), Some(DependentState::Failed(why)) if why.message().contains("not owned")),
        "{}",
        refused.summary()
    );
    let adopted = converge(&rt, &owner, &set(true)).await.unwrap();
    assert!(adopted.is_ready(), "{}", adopted.summary());
    let found = configmaps(&env).get("found").await.unwrap();
    assert_eq!(owner_uids(&found), [owner.uid().unwrap()]);
    assert_eq!(found.labels()["operator-fsm.io/dependent"], "found");
    assert_eq!(found.data.unwrap()["v"], "theirs", "content is left alone");
    let since = log_position(&env);
    let again = converge(&rt, &owner, &set(true)).await.unwrap();
    assert!(again.applied.is_empty(), "{:?}", again.applied);
    assert_eq!(writes_since(&env, since), Vec::<String>::new());
}

/// Whether `object` is released: no reference to `owner`, none of the
/// dependents' labels, no keep annotation.
fn released(object: &ConfigMap, owner: &Widget) {
    let uid = owner.uid().unwrap();
    assert!(!owner_uids(object).contains(&uid), "{:?}", object.metadata);
    for label in [
        "operator-fsm.io/dependent",
        "operator-fsm.io/owner-uid",
        "app.kubernetes.io/managed-by",
    ] {
        assert!(!object.labels().contains_key(label), "{label}");
    }
    assert!(!object.annotations().contains_key(KEEP_ANNOTATION));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_dependent_is_released_on_prune_and_survives_its_former_owners_deletion() {
    let env = env().await;
    let owner = owner(&env, "keeper").await;
    let rt = runtime(&env);
    let full = DesiredSet::builder()
        .dependent(Dependent::new("kept", &cm("kept", &[("v", "1")])).keep_on_prune())
        .dependent(Dependent::new("inactive", &cm("inactive", &[])).keep_on_prune())
        .dependent(Dependent::new("pruned", &cm("pruned", &[])))
        .dependent(Dependent::new("witness", &cm("witness", &[])))
        .build()
        .unwrap();
    assert!(converge(&rt, &owner, &full).await.unwrap().is_ready());
    let kept = configmaps(&env).get("kept").await.unwrap();
    assert_eq!(kept.annotations()[KEEP_ANNOTATION], "orphan");
    assert_eq!(owner_uids(&kept), [owner.uid().unwrap()]);

    // `kept` and `pruned` leave the set, `inactive` turns inactive.
    let smaller = DesiredSet::builder()
        .dependent(
            Dependent::new("inactive", &cm("inactive", &[]))
                .keep_on_prune()
                .when(false),
        )
        .dependent(Dependent::new("witness", &cm("witness", &[])))
        .build()
        .unwrap();
    let pruning = converge(&rt, &owner, &smaller).await.unwrap();
    let ns = &env.ns;
    assert_eq!(pruning.pruned, [format!("ConfigMap {ns}/pruned")]);
    let mut orphaned = pruning.orphaned.clone();
    orphaned.sort();
    assert_eq!(
        orphaned,
        [
            format!("ConfigMap {ns}/inactive"),
            format!("ConfigMap {ns}/kept")
        ]
    );
    for name in ["kept", "inactive"] {
        released(&configmaps(&env).get(name).await.unwrap(), &owner);
    }
    // A released object is no longer the owner's: the next converge of a
    // new shape (a new runtime lists) leaves it alone.
    let relisted = converge(&runtime(&env), &owner, &smaller).await.unwrap();
    assert!(relisted.pruned.is_empty() && relisted.orphaned.is_empty());

    // The owner goes without a teardown: the garbage collector deletes
    // the witness (still owned) and leaves the released objects.
    Api::<Widget>::namespaced(env.client.clone(), ns)
        .delete("keeper", &Default::default())
        .await
        .unwrap();
    eventually("the garbage collector deletes the witness", || async {
        configmaps(&env)
            .get_opt("witness")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let survivor = configmaps(&env).get("kept").await.unwrap();
    assert_eq!(survivor.uid(), kept.uid());
    assert_eq!(survivor.data.unwrap()["v"], "1");
    assert!(
        configmaps(&env)
            .get_opt("inactive")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_releases_a_kept_dependent_and_deletes_the_others() {
    let env = env().await;
    let owner = owner(&env, "teardown-keep").await;
    let rt = runtime(&env);
    let set = DesiredSet::builder()
        .dependent(Dependent::new("data", &cm("data", &[])).keep_on_prune())
        .dependent(Dependent::new("app", &cm("app", &[])).depends_on(["data"]))
        .build()
        .unwrap();
    assert!(converge(&rt, &owner, &set).await.unwrap().is_ready());
    let ns = &env.ns;
    let first = teardown(&rt, &owner, &set).await.unwrap();
    assert_eq!(first.deleted, [format!("ConfigMap {ns}/app")]);
    let mut done = first;
    for _ in 0..20 {
        if done.is_done() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        done = teardown(&rt, &owner, &set).await.unwrap();
    }
    assert!(done.is_done(), "{:?}", done.dependents);
    assert_eq!(done.state("data"), Some(&TeardownState::Gone));
    assert_eq!(done.orphaned, [format!("ConfigMap {ns}/data")]);
    released(&configmaps(&env).get("data").await.unwrap(), &owner);
    assert!(configmaps(&env).get_opt("app").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_gets_its_own_object_and_earlier_ones_stay_until_the_dependent_goes() {
    let env = env().await;
    let owner = owner(&env, "attempts").await;
    let rt = runtime(&env);
    let set = |attempt: u32, content: &str| {
        DesiredSet::builder()
            .dependent(Dependent::per_attempt(
                "run",
                &cm("run", &[("content", content)]),
                attempt,
            ))
            .build()
            .unwrap()
    };
    let ns = &env.ns;
    let first = converge(&rt, &owner, &set(0, "a")).await.unwrap();
    assert_eq!(first.applied, [format!("ConfigMap {ns}/run-0")]);
    // The same attempt again, with other content: only read.
    let since = log_position(&env);
    let again = converge(&rt, &owner, &set(0, "b")).await.unwrap();
    assert!(again.applied.is_empty(), "{:?}", again.applied);
    assert_eq!(writes_since(&env, since), Vec::<String>::new());
    // The next attempt: a new object; the earlier one stays, owned.
    let second = converge(&rt, &owner, &set(1, "c")).await.unwrap();
    assert_eq!(second.applied, [format!("ConfigMap {ns}/run-1")]);
    assert!(second.pruned.is_empty(), "{:?}", second.pruned);
    assert_eq!(
        configmaps(&env).get("run-1").await.unwrap().data.unwrap()["content"],
        "c"
    );
    let earlier = configmaps(&env).get("run-0").await.unwrap();
    assert_eq!(earlier.data.as_ref().unwrap()["content"], "a");
    assert_eq!(owner_uids(&earlier), [owner.uid().unwrap()]);
    // The dependent leaves the set: every attempt's object is pruned.
    let empty = DesiredSet::builder()
        .prunes([fsm_kube::dependents::DependentKind::of::<ConfigMap>()])
        .build()
        .unwrap();
    let mut gone = converge(&rt, &owner, &empty).await.unwrap().pruned;
    gone.sort();
    assert_eq!(
        gone,
        [
            format!("ConfigMap {ns}/run-0"),
            format!("ConfigMap {ns}/run-1")
        ]
    );
}
