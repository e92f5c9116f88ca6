//! The deprecated watch paths (`/api/v1/watch/namespaces/ns/configmaps`,
//! `/apis/apps/v1/watch/deployments/web`), which kube-apiserver still
//! serves: a GET there is a watch of the path without `watch/`, a named
//! one a watch of the collection selecting that name.

use http::Uri;
use http::request::Parts;

/// Rewrites a GET on a legacy watch path into the watch it stands for
/// (`?watch=true`, and `fieldSelector=metadata.name=NAME` for a named
/// path); other requests are left alone.
pub(super) fn rewrite(parts: &mut Parts) {
    if parts.method != http::Method::GET {
        return;
    }
    let Some((path, name)) = unwatched(parts.uri.path()) else {
        return;
    };
    let mut query: Vec<String> = parts
        .uri
        .query()
        .filter(|q| !q.is_empty())
        .map(|q| vec![q.to_string()])
        .unwrap_or_default();
    query.push("watch=true".into());
    if let Some(name) = name {
        query.push(format!("fieldSelector=metadata.name%3D{name}"));
    }
    if let Ok(uri) = format!("{path}?{}", query.join("&")).parse::<Uri>() {
        parts.uri = uri;
    }
}

/// The collection path a legacy watch path stands for, and the object
/// name it named, if any; `None` for any other path.
fn unwatched(path: &str) -> Option<(String, Option<String>)> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (prefix, rest) = match segs.as_slice() {
        ["api", v, "watch", rest @ ..] => (vec!["api", *v], rest),
        ["apis", g, v, "watch", rest @ ..] => (vec!["apis", *g, *v], rest),
        _ => return None,
    };
    let (collection, name): (Vec<&str>, Option<&str>) = match rest {
        ["namespaces", ns, res] => (vec!["namespaces", ns, res], None),
        ["namespaces", ns, res, name] => (vec!["namespaces", ns, res], Some(*name)),
        // A watch of namespaces by name, or of any cluster-scoped kind.
        [res, name] => (vec![*res], Some(*name)),
        [res] => (vec![*res], None),
        _ => return None,
    };
    let path = format!("/{}/{}", prefix.join("/"), collection.join("/"));
    Some((path, name.map(String::from)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_watch_paths_name_their_watch() {
        assert_eq!(
            unwatched("/api/v1/watch/namespaces/default/configmaps"),
            Some(("/api/v1/namespaces/default/configmaps".into(), None))
        );
        assert_eq!(
            unwatched("/apis/apps/v1/watch/namespaces/default/deployments/web"),
            Some((
                "/apis/apps/v1/namespaces/default/deployments".into(),
                Some("web".into())
            ))
        );
        assert_eq!(
            unwatched("/api/v1/watch/namespaces/default"),
            Some(("/api/v1/namespaces".into(), Some("default".into())))
        );
        assert_eq!(
            unwatched("/api/v1/watch/pods"),
            Some(("/api/v1/pods".into(), None))
        );
        assert_eq!(unwatched("/api/v1/namespaces/default/configmaps"), None);
        assert_eq!(unwatched("/api/v1/watch/a/b/c/d/e"), None);
    }

    #[test]
    fn a_get_is_rewritten_with_its_query_kept() {
        let (mut parts, ()) =
            http::Request::get("/api/v1/watch/namespaces/default/configmaps/one?timeoutSeconds=5")
                .body(())
                .unwrap()
                .into_parts();
        rewrite(&mut parts);
        assert_eq!(
            parts.uri.to_string(),
            "/api/v1/namespaces/default/configmaps?timeoutSeconds=5&watch=true&fieldSelector=metadata.name%3Done"
        );
    }
}
