//! The web view's access check (`WebView::require_kubernetes_access`,
//! `run --view-auth kubernetes`), on the embedded server or the real
//! kube-apiserver: bearer tokens of ServiceAccounts made for the test, one
//! allowed by a Role to list widgets in the view's namespace and one
//! allowed nothing, reviewed by the server (TokenReview,
//! SubjectAccessReview) as the view asks.

use std::net::SocketAddr;

use fsm_kube::cli::StoreKind;
use fsm_kube::records::Watched;
use fsm_kube::view::web::WebView;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::common::http::{Answer, get_with};
use crate::common::*;

/// `GET path` with `token` as the bearer token, if any.
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Host", "localhost")];
    if let Some(value) = &authorization {
        headers.push(("Authorization", value.as_str()));
    }
    get_with(addr, path, &headers).await
}

async fn serve(view: WebView) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        view.serve(listener).await.unwrap();
    });
    (addr, task)
}

/// Creates the ServiceAccount `name` in the test's namespace and returns
/// its token, from the Secret the token controller makes for it.
async fn service_account_token(env: &Env, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &env.ns);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.ns);
    eventually("the ServiceAccount's token", || async {
        let account = accounts.get(name).await.ok()?;
        for reference in account.secrets.iter().flatten() {
            let secret = secrets.get(reference.name.as_deref()?).await.ok()?;
            if let Some(token) = secret.data.as_ref().and_then(|d| d.get("token")) {
                return String::from_utf8(token.0.clone()).ok();
            }
        }
        None
    })
    .await
}

/// A Role listing widgets in the test's namespace, bound to `account`.
async fn allow_listing_widgets(env: &Env, account: &str) {
    let roles: Api<Role> = Api::namespaced(env.client.clone(), &env.ns);
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    };
    let role = Role {
        metadata: meta("widget-reader"),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["test.operator-fsm.io".into()]),
            resources: Some(vec!["widgets".into()]),
            verbs: vec!["list".into()],
            ..PolicyRule::default()
        }]),
    };
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(env.client.clone(), &env.ns);
    let binding = RoleBinding {
        metadata: meta("widget-reader"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "widget-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.to_owned(),
            namespace: Some(env.ns.clone()),
            ..Subject::default()
        }]),
    };
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn view(env: &Env, namespace: Option<String>) -> WebView {
    WebView::new(
        env.client.clone(),
        vec![Watched::of::<WidgetState>(StoreKind::Status)],
        namespace,
    )
    .require_kubernetes_access()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_token_allowed_to_list_what_the_view_shows_is_let_in() {
    let env = env().await;
    create_widget(&env, "w", WidgetSpec::colored("red")).await;
    let reader = service_account_token(&env, "reader").await;
    let stranger = service_account_token(&env, "stranger").await;
    allow_listing_widgets(&env, "reader").await;
    let (addr, task) = serve(view(&env, Some(env.ns.clone()))).await;
    let ns = &env.ns;

    // No token, a token of nobody: 401, saying how to authenticate.
    for token in [None, Some("not-a-token-of-this-cluster")] {
        let answer = get(addr, "/", token).await;
        assert_eq!(answer.status, 401, "{token:?}: {}", answer.body);
        assert_eq!(
            answer.headers.get("www-authenticate").map(String::as_str),
            Some("Bearer realm=\"operator-fsm view\""),
        );
        // The security headers are on refusals too.
        assert_eq!(
            answer.headers.get("x-frame-options").map(String::as_str),
            Some("DENY")
        );
    }
    // Authenticated, not allowed: 403 naming who and what is missing.
    let refused = get(addr, "/api/objects", Some(&stranger)).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        refused.body.trim(),
        format!(
            "system:serviceaccount:{ns}:stranger may not list widgets.test.operator-fsm.io in namespace {ns}"
        )
    );
    assert!(!refused.body.contains("\"name\":\"w\""));

    // Allowed: every kind of page.
    let before = env.embedded().map(|s| s.request_log().records().len());
    for path in [
        "/".to_owned(),
        "/api/objects".to_owned(),
        format!("/objects/Widget/{ns}/w"),
        "/assets/view.css".to_owned(),
    ] {
        let answer = get(addr, &path, Some(&reader)).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    }
    eventually("the widget in the reader's list", || async {
        get(addr, "/api/objects", Some(&reader))
            .await
            .body
            .contains("\"name\":\"w\"")
            .then_some(())
    })
    .await;
    // One review per token while its verdict is kept, not one per request.
    if let (Some(server), Some(before)) = (env.embedded(), before) {
        let reviews: Vec<String> = server.request_log().records()[before..]
            .iter()
            .filter(|r| r.resource == "tokenreviews" || r.resource == "subjectaccessreviews")
            .map(|r| r.resource.clone())
            .collect();
        assert_eq!(
            reviews,
            ["tokenreviews", "subjectaccessreviews"],
            "the reader's pages were reviewed once"
        );
    }
    task.abort();

    // A view of every namespace needs listing in every namespace: the
    // reader's Role in one namespace is not enough.
    let (addr, task) = serve(view(&env, None)).await;
    let refused = get(addr, "/", Some(&reader)).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("in every namespace"),
        "{}",
        refused.body
    );
    task.abort();
}
