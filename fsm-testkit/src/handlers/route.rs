//! Request paths: what a path names (a discovery document or a resource).

/// A resource path: `/api/v1/namespaces/ns/configmaps/name/status` and the like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace segment, if the path has one.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub resource: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource (`status`), if any.
    pub subresource: Option<String>,
}

/// What a request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/`: the paths the server serves.
    Root,
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez`, and their named checks
    /// (`/healthz/ping`).
    Health,
    /// `/api`.
    Api,
    /// `/apis`.
    ApiGroups,
    /// `/apis/{group}`.
    ApiGroup(String),
    /// `/api/v1`, `/apis/{group}/{version}`.
    ResourceList(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
    OpenApiDocument(String, String),
    /// A resource or one of its objects.
    Resource(ResourcePath),
    /// Nothing served here, below `/api` or `/version`: a `Status`
    /// NotFound.
    Unknown,
    /// Nothing served here, anywhere else: a 404 with the root's paths.
    Unlisted,
}

/// Parses a request path (without query).
#[must_use]
pub fn parse(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [] => Route::Root,
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez"] => Route::Health,
        ["healthz" | "readyz" | "livez", check]
            if crate::discovery::HEALTH_CHECKS.contains(check) =>
        {
            Route::Health
        }
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", "api", v] => Route::OpenApiDocument(String::new(), (*v).into()),
        ["openapi", "v3", "apis", g, v] => Route::OpenApiDocument((*g).into(), (*v).into()),
        ["api"] => Route::Api,
        ["api", v] => Route::ResourceList(String::new(), (*v).into()),
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis"] => Route::ApiGroups,
        ["apis", g] => Route::ApiGroup((*g).into()),
        ["apis", g, v] => Route::ResourceList((*g).into(), (*v).into()),
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        ["version", ..] => Route::Unknown,
        _ => Route::Unlisted,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let (namespace, rest) = match rest {
        ["namespaces", ns, res, tail @ ..] if !matches!(*res, "status" | "finalize") => {
            (Some((*ns).to_string()), [&[*res][..], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let owned = |s: Option<&&str>| s.map(|x| (*x).to_string());
    match rest.as_slice() {
        [res] | [res, _] | [res, _, _] => Route::Resource(ResourcePath {
            group: group.into(),
            version: version.into(),
            namespace,
            resource: (*res).into(),
            name: owned(rest.get(1)),
            subresource: owned(rest.get(2)),
        }),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(g: &str, ns: Option<&str>, r: &str, n: Option<&str>, s: Option<&str>) -> Route {
        Route::Resource(ResourcePath {
            group: g.into(),
            version: "v1".into(),
            namespace: ns.map(String::from),
            resource: r.into(),
            name: n.map(String::from),
            subresource: s.map(String::from),
        })
    }

    #[test]
    fn paths() {
        assert_eq!(parse("/api"), Route::Api);
        assert_eq!(
            parse("/api/v1"),
            Route::ResourceList(String::new(), "v1".into())
        );
        assert_eq!(parse("/apis/apps"), Route::ApiGroup("apps".into()));
        assert_eq!(
            parse("/api/v1/namespaces"),
            rp("", None, "namespaces", None, None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/x"),
            rp("", None, "namespaces", Some("x"), None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/x/status"),
            rp("", None, "namespaces", Some("x"), Some("status"))
        );
        assert_eq!(
            parse("/api/v1/namespaces/ns/configmaps"),
            rp("", Some("ns"), "configmaps", None, None)
        );
        assert_eq!(
            parse("/apis/apps/v1/namespaces/ns/deployments/web/status"),
            rp(
                "apps",
                Some("ns"),
                "deployments",
                Some("web"),
                Some("status")
            )
        );
        assert_eq!(
            parse("/apis/apps/v1/deployments"),
            rp("apps", None, "deployments", None, None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/ns/configmaps/a/b/c"),
            Route::Unknown
        );
        assert_eq!(parse("/nothing"), Route::Unlisted);
        assert_eq!(parse("/healthz/nothing"), Route::Unlisted);
        assert_eq!(parse("/healthz/ping"), Route::Health);
        assert_eq!(parse("/version/x"), Route::Unknown);
        assert_eq!(parse("/"), Route::Root);
        assert_eq!(
            parse("/openapi/v3/apis/apps/v1"),
            Route::OpenApiDocument("apps".into(), "v1".into())
        );
        assert_eq!(parse("/openapi/v2"), Route::OpenApiV2);
    }
}
