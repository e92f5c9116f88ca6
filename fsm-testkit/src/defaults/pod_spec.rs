//! The defaults of a pod spec, shared by a Pod and by every kind with a
//! pod template (Deployment, StatefulSet, Job; DaemonSet, ReplicaSet and
//! CronJob take the same): 1.20's `SetDefaults_PodSpec`, `_Container`,
//! `_Probe`, `_HTTPGetAction`, the volume sources' and `_ObjectFieldSelector`,
//! and the `serviceAccount` alias its conversion keeps equal to
//! `serviceAccountName`.

use serde_json::{Map, Value, json};

use super::{child, items_of, set_absent};

/// The file a container's termination message is read from by default.
const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The permission bits of files projected into a volume (0644).
const DEFAULT_MODE: i64 = 0o644;
/// A projected service account token's lifetime, in seconds.
const TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// Defaults the pod template `template` (`spec.template` of a workload):
/// its metadata as the real server encodes it (`creationTimestamp: null`)
/// and its pod spec.
pub(crate) fn pod_template(template: &mut Value) {
    let Some(template) = template.as_object_mut() else {
        return;
    };
    if let Some(meta) = child(template, "metadata") {
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(spec) = child(template, "spec") {
        pod_spec(spec);
    }
}

/// Defaults a pod spec.
pub(crate) fn pod_spec(spec: &mut Map<String, Value>) {
    set_absent(
        spec,
        &[
            ("dnsPolicy", json!("ClusterFirst")),
            ("restartPolicy", json!("Always")),
            ("securityContext", json!({})),
            ("terminationGracePeriodSeconds", json!(30)),
            ("schedulerName", json!("default-scheduler")),
        ],
    );
    service_account_alias(spec);
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    for list in ["containers", "initContainers"] {
        for c in items_of(spec, list) {
            container(c, host_network);
        }
    }
    for v in items_of(spec, "volumes") {
        volume(v);
    }
}

/// `serviceAccount`, the deprecated alias, and `serviceAccountName` name
/// the same account: the name when given, else the alias.
fn service_account_alias(spec: &mut Map<String, Value>) {
    let named = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let account =
        named(spec.get("serviceAccountName")).or_else(|| named(spec.get("serviceAccount")));
    if let Some(account) = account {
        spec.insert("serviceAccountName".into(), json!(account));
        spec.insert("serviceAccount".into(), json!(account));
    }
}

/// Defaults a container (or an init container).
fn container(c: &mut Map<String, Value>, host_network: bool) {
    let pull = image_pull_policy(c.get("image").and_then(Value::as_str).unwrap_or_default());
    set_absent(
        c,
        &[
            ("imagePullPolicy", json!(pull)),
            ("terminationMessagePath", json!(TERMINATION_MESSAGE_PATH)),
            ("terminationMessagePolicy", json!("File")),
            ("resources", json!({})),
        ],
    );
    for port in items_of(c, "ports") {
        set_absent(port, &[("protocol", json!("TCP"))]);
        if host_network
            && port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
            && let Some(container_port) = port.get("containerPort").cloned()
        {
            port.insert("hostPort".into(), container_port);
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_absent(
                p,
                &[
                    ("timeoutSeconds", json!(1)),
                    ("periodSeconds", json!(10)),
                    ("successThreshold", json!(1)),
                    ("failureThreshold", json!(3)),
                ],
            );
            http_get(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(hook).and_then(Value::as_object_mut) {
                http_get(h);
            }
        }
    }
    for env in items_of(c, "env") {
        if let Some(value_from) = env.get_mut("valueFrom").and_then(Value::as_object_mut) {
            field_ref(value_from);
        }
    }
}

/// A handler's `httpGet`: path `/`, scheme `HTTP`.
fn http_get(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        set_absent(get, &[("path", json!("/")), ("scheme", json!("HTTP"))]);
    }
}

/// A `fieldRef` below `holder`: apiVersion `v1`; a `resourceFieldRef`:
/// divisor `"0"` (a `Quantity`, which Go's `omitempty` never omits).
fn field_ref(holder: &mut Map<String, Value>) {
    if let Some(r) = holder.get_mut("fieldRef").and_then(Value::as_object_mut) {
        set_absent(r, &[("apiVersion", json!("v1"))]);
    }
    if let Some(r) = holder
        .get_mut("resourceFieldRef")
        .and_then(Value::as_object_mut)
    {
        set_absent(r, &[("divisor", json!("0"))]);
    }
}

/// Defaults a volume: an `emptyDir` when it names no source, and its
/// source's defaults.
fn volume(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
            set_absent(s, &[("defaultMode", json!(DEFAULT_MODE))]);
        }
    }
    if let Some(host_path) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        set_absent(host_path, &[("type", json!(""))]);
    }
    if let Some(downward) = v.get_mut("downwardAPI").and_then(Value::as_object_mut) {
        items_of(downward, "items").for_each(field_ref);
    }
    if let Some(projected) = v.get_mut("projected").and_then(Value::as_object_mut) {
        for source in items_of(projected, "sources") {
            if let Some(downward) = source.get_mut("downwardAPI").and_then(Value::as_object_mut) {
                items_of(downward, "items").for_each(field_ref);
            }
            if let Some(token) = source
                .get_mut("serviceAccountToken")
                .and_then(Value::as_object_mut)
            {
                set_absent(
                    token,
                    &[("expirationSeconds", json!(TOKEN_EXPIRATION_SECONDS))],
                );
            }
        }
    }
}

/// The pull policy of `image` by default: `Always` for the tag `latest`
/// (what a reference with neither tag nor digest means), else
/// `IfNotPresent` (a digest without a tag, an image 1.20 cannot parse).
fn image_pull_policy(image: &str) -> &'static str {
    if image_tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// The tag of an image reference: what follows `:` in its last path
/// component; `latest` when it has neither tag nor digest; `None` when
/// it has a digest only, or cannot be a reference (empty, upper case).
fn image_tag(image: &str) -> Option<String> {
    if image.is_empty()
        || image
            .chars()
            .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag.to_string()),
        None if digest.is_some() => None,
        None => Some("latest".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        for (image, policy) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.19", "IfNotPresent"),
            ("localhost:5000/nginx", "Always"),
            ("localhost:5000/nginx:2", "IfNotPresent"),
            ("busybox@sha256:abc", "IfNotPresent"),
            ("busybox:latest@sha256:abc", "Always"),
            ("", "IfNotPresent"),
        ] {
            assert_eq!(image_pull_policy(image), policy, "{image}");
        }
    }

    #[test]
    fn a_template_gets_the_pod_spec_defaults_once() {
        let mut t = json!({"spec": {
            "serviceAccount": "robot",
            "containers": [{"name": "c", "image": "nginx:1",
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"port": 80}},
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "v"}, {"name": "h", "hostPath": {"path": "/x"}},
                {"name": "s", "secret": {"secretName": "s"}}]
        }});
        pod_template(&mut t);
        let once = t.clone();
        pod_template(&mut t);
        assert_eq!(t, once, "defaulting twice changes nothing");
        assert_eq!(t["metadata"], json!({"creationTimestamp": null}));
        let spec = &t["spec"];
        assert_eq!(spec["serviceAccountName"], "robot");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["hostPath"]["type"], "");
        assert_eq!(spec["volumes"][2]["secret"]["defaultMode"], 420);
    }

    #[test]
    fn host_network_ports_are_host_ports() {
        let mut t = json!({"spec": {"hostNetwork": true,
            "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 53}]}]}});
        pod_template(&mut t);
        assert_eq!(t["spec"]["containers"][0]["ports"][0]["hostPort"], 53);
    }
}
