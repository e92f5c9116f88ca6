"""The benchmark workflow written with kopf, as a kopf user would.

Each step is a creation handler (kopf runs them in order and persists its
progress between them); the API work goes through the official
`kubernetes` client, as in kopf's documentation. Run with:

    KUBECONFIG=... python -m kopf run --standalone --namespace default operator.py
"""

import kopf
import kubernetes
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "bench.operator-fsm.io", "v1", "benchapps"
ANNOTATION = "bench.operator-fsm.io/configured"
# The embedded API server applies merge patches only (no strategic merge,
# which the kubernetes client would pick for a dict body).
MERGE = "application/merge-patch+json"


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_):
    # The Rust operators publish no events either.
    settings.posting.enabled = False
    kubernetes.config.load_kube_config()


def owner(body):
    return {
        "apiVersion": body["apiVersion"],
        "kind": body["kind"],
        "name": body["metadata"]["name"],
        "uid": body["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def ignore_exists(call):
    try:
        call()
    except ApiException as e:
        if e.status != 409:
            raise


@kopf.on.create(GROUP, VERSION, PLURAL, id="config")
def create_config(body, spec, name, namespace, patch, **_):
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "ownerReferences": [owner(body)]},
        "data": {"image": spec["image"]},
    }
    core = kubernetes.client.CoreV1Api()
    ignore_exists(lambda: core.create_namespaced_config_map(namespace, cm))
    patch.status["phase"] = "CreatingDeployment"


@kopf.on.create(GROUP, VERSION, PLURAL, id="deployment")
def create_deployment(body, spec, name, namespace, patch, **_):
    labels = {"app": name}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [owner(body)]},
        "spec": {
            "replicas": spec["replicas"],
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": spec["image"]}]},
            },
        },
    }
    apps = kubernetes.client.AppsV1Api()
    ignore_exists(lambda: apps.create_namespaced_deployment(namespace, deployment))
    patch.status["phase"] = "WaitingReady"


def rolled_out(d):
    want = d.spec.replicas if d.spec.replicas is not None else 1
    s = d.status
    return (
        s is not None
        and (s.observed_generation or 0) >= (d.metadata.generation or 0)
        and (s.updated_replicas or 0) >= want
        and (s.ready_replicas or 0) >= want
    )


@kopf.on.create(GROUP, VERSION, PLURAL, id="wait")
def wait_ready(name, namespace, patch, **_):
    apps = kubernetes.client.AppsV1Api()
    if not rolled_out(apps.read_namespaced_deployment(name, namespace)):
        raise kopf.TemporaryError("the deployment is not rolled out yet", delay=0.5)
    patch.status["phase"] = "Annotating"


@kopf.on.create(GROUP, VERSION, PLURAL, id="annotate")
def annotate(name, namespace, patch, **_):
    apps = kubernetes.client.AppsV1Api()
    body = {"metadata": {"annotations": {ANNOTATION: "true"}}}
    apps.patch_namespaced_deployment(name, namespace, body, _content_type=MERGE)
    patch.status["phase"] = "Ready"
