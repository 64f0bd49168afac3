"""Drives plimsoll-sim with the official Kubernetes Python client, as a user's script would.

Usage: conformance.py KUBECONFIG CRD_DIR [CONTROL_URL]

KUBECONFIG is the kubeconfig the sim wrote (it carries the sim's CA: TLS is verified).
CRD_DIR holds Plimsoll's generated CRDs (deploy/crds). CONTROL_URL is the sim's control API
(`/sim/v1`, used to compact the watch log for the 410 check); without it that check is skipped
(a real cluster compacts on its own schedule).

Prints one line per check ("ok <name>" or "FAIL <name>: why") and exits 1 naming the first
failing check. Every check runs in its own namespace-scoped objects, in one namespace that is
deleted at the end.
"""

import glob
import sys
import time
import traceback
import urllib.request

import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError

NS = "py-conformance"
HPAP_GROUP = "autoscaling.plimsoll.dev"
HPAP_VERSION = "v1alpha1"
HPAP_PLURAL = "horizontalpodautoscalerpluses"
# A CRD of the test's own with a scale subresource (Plimsoll's HPA+ has none, as an HPA has none).
WIDGET_GROUP = "conformance.plimsoll.dev"
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets." + WIDGET_GROUP},
    "spec": {
        "group": WIDGET_GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer"}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {"replicas": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


class CheckFailed(Exception):
    """A check's assertion did not hold."""


def expect(cond, what):
    if not cond:
        raise CheckFailed(what)


def expect_status(status, fn, *args, **kwargs):
    """Calls fn and expects it to raise an ApiException with this HTTP status."""
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        expect(e.status == status, f"expected HTTP {status}, got {e.status}: {e.body}")
        return e
    raise CheckFailed(f"expected HTTP {status}, the call succeeded")


def eventually(what, fn, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise CheckFailed(f"timed out waiting for {what}")


def meta(name, labels=None):
    return client.V1ObjectMeta(name=name, namespace=NS, labels=labels)


def configmap(name, data, labels=None):
    return client.V1ConfigMap(metadata=meta(name, labels), data=data)


class Conformance:
    def __init__(self, kubeconfig, crd_dir, control_url):
        config.load_kube_config(config_file=kubeconfig)
        self.api = client.ApiClient()
        cfg = self.api.configuration
        expect(cfg.verify_ssl, "the kubeconfig's client verifies TLS")
        expect(cfg.ssl_ca_cert, "the kubeconfig carries the sim's CA")
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ext = client.ApiextensionsV1Api(self.api)
        self.crd_dir = crd_dir
        self.control_url = control_url

    # ----- set-up -------------------------------------------------------------------------

    def check_namespace_created(self):
        ns = self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
        expect(ns.metadata.uid, "a uid is assigned")
        expect(ns.status.phase == "Active", f"phase Active, got {ns.status.phase}")

    def check_crds_installed(self):
        files = sorted(glob.glob(f"{self.crd_dir}/*.yaml"))
        expect(files, f"CRDs found in {self.crd_dir}")
        docs = [WIDGET_CRD]
        for path in files:
            with open(path, encoding="utf-8") as f:
                docs.extend(d for d in yaml.safe_load_all(f) if d)
        for doc in docs:
            self.ext.create_custom_resource_definition(doc)
        for doc in docs:
            name = doc["metadata"]["name"]

            def established(name=name):
                crd = self.ext.read_custom_resource_definition(name)
                conds = (crd.status and crd.status.conditions) or []
                return any(c.type == "Established" and c.status == "True" for c in conds)

            eventually(f"CRD {name} Established", established)

    # ----- CRUD, lists --------------------------------------------------------------------

    def check_configmap_crud(self):
        created = self.core.create_namespaced_config_map(NS, configmap("crud", {"a": "1"}))
        expect(created.metadata.resource_version, "create returns a resourceVersion")
        got = self.core.read_namespaced_config_map("crud", NS)
        expect(got.data == {"a": "1"}, f"read back the data, got {got.data}")
        got.data["b"] = "2"
        replaced = self.core.replace_namespaced_config_map("crud", NS, got)
        expect(replaced.data == {"a": "1", "b": "2"}, f"replace, got {replaced.data}")
        expect(
            int(replaced.metadata.resource_version) > int(created.metadata.resource_version),
            "resourceVersion grows on update",
        )
        patched = self.core.patch_namespaced_config_map("crud", NS, {"data": {"c": "3"}})
        expect(patched.data == {"a": "1", "b": "2", "c": "3"}, f"patch, got {patched.data}")
        self.core.delete_namespaced_config_map("crud", NS)
        expect_status(404, self.core.read_namespaced_config_map, "crud", NS)

    def check_conflicts(self):
        first = self.core.create_namespaced_config_map(NS, configmap("conflict", {"v": "1"}))
        e = expect_status(
            409,
            self.core.create_namespaced_config_map,
            NS,
            configmap("conflict", {"v": "again"}),
        )
        expect("AlreadyExists" in e.body, f"reason AlreadyExists: {e.body}")
        fresh = self.core.read_namespaced_config_map("conflict", NS)
        fresh.data = {"v": "2"}
        self.core.replace_namespaced_config_map("conflict", NS, fresh)
        first.data = {"v": "stale"}
        e = expect_status(409, self.core.replace_namespaced_config_map, "conflict", NS, first)
        expect("Conflict" in e.body, f"reason Conflict: {e.body}")
        kept = self.core.read_namespaced_config_map("conflict", NS)
        expect(kept.data == {"v": "2"}, f"the stale update changed nothing, got {kept.data}")

    def check_list_selectors_and_pages(self):
        for i in range(5):
            self.core.create_namespaced_config_map(
                NS, configmap(f"page-{i}", {"i": str(i)}, {"suite": "pages"})
            )
        self.core.create_namespaced_config_map(
            NS, configmap("page-other", {}, {"suite": "other"})
        )
        seen = []
        token = None
        pages = 0
        while True:
            kwargs = {"label_selector": "suite=pages", "limit": 2}
            if token:
                kwargs["_continue"] = token
            page = self.core.list_namespaced_config_map(NS, **kwargs)
            pages += 1
            expect(len(page.items) <= 2, f"limit 2 honoured, got {len(page.items)}")
            seen.extend(cm.metadata.name for cm in page.items)
            token = page.metadata._continue
            if not token:
                break
            expect(pages < 10, "the continue tokens end")
        expect(pages == 3, f"5 items in pages of 2 make 3 pages, got {pages}")
        expect(
            sorted(seen) == [f"page-{i}" for i in range(5)],
            f"every selected item once, got {seen}",
        )
        sel = self.core.list_namespaced_config_map(NS, label_selector="suite in (other)")
        expect([c.metadata.name for c in sel.items] == ["page-other"], "set-based selector")
        neg = self.core.list_namespaced_config_map(NS, label_selector="suite,suite!=pages")
        expect([c.metadata.name for c in neg.items] == ["page-other"], "!= selector")

    def check_deployment_crud(self):
        labels = {"app": "py-web"}
        dep = client.V1Deployment(
            metadata=meta("py-web", labels),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="web", image="registry.example/web:1")]
                    ),
                ),
            ),
        )
        created = self.apps.create_namespaced_deployment(NS, dep)
        expect(created.metadata.generation == 1, "generation 1 on create")
        expect(
            created.spec.strategy.type == "RollingUpdate",
            "defaults applied (strategy RollingUpdate)",
        )
        patched = self.apps.patch_namespaced_deployment(
            "py-web", NS, {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}}
        )
        expect(patched.metadata.generation == 2, "generation bumps on a spec change")

        def available():
            d = self.apps.read_namespaced_deployment("py-web", NS)
            return d.status and d.status.ready_replicas == 1 and d

        eventually("py-web 1 ready replica", available)

    def check_custom_resource_crud(self):
        body = {
            "apiVersion": f"{HPAP_GROUP}/{HPAP_VERSION}",
            "kind": "HorizontalPodAutoscalerPlus",
            "metadata": {"name": "py-web", "labels": {"suite": "cr"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "py-web"},
                "minReplicas": 1,
                "maxReplicas": 5,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 60},
                        },
                    }
                ],
            },
        }
        args = (HPAP_GROUP, HPAP_VERSION, NS, HPAP_PLURAL)
        created = self.custom.create_namespaced_custom_object(*args, body)
        expect(created["metadata"].get("uid"), "a uid is assigned")
        got = self.custom.get_namespaced_custom_object(*args, "py-web")
        expect(got["spec"]["maxReplicas"] == 5, f"read back, got {got['spec']}")
        listed = self.custom.list_namespaced_custom_object(*args, label_selector="suite=cr")
        expect(
            [o["metadata"]["name"] for o in listed["items"]] == ["py-web"],
            "listed by label",
        )
        patched = self.custom.patch_namespaced_custom_object(
            *args, "py-web", {"spec": {"maxReplicas": 7}}
        )
        expect(patched["spec"]["maxReplicas"] == 7, "merge patch")
        expect(patched["spec"]["minReplicas"] == 1, "merge patch keeps the other fields")
        got = self.custom.get_namespaced_custom_object(*args, "py-web")
        stale = dict(got)
        got["spec"]["maxReplicas"] = 8
        replaced = self.custom.replace_namespaced_custom_object(*args, "py-web", got)
        expect(replaced["spec"]["maxReplicas"] == 8, "replace")
        stale["spec"] = dict(stale["spec"], maxReplicas=9)
        expect_status(409, self.custom.replace_namespaced_custom_object, *args, "py-web", stale)
        self.custom.delete_namespaced_custom_object(*args, "py-web")
        expect_status(404, self.custom.get_namespaced_custom_object, *args, "py-web")

    def check_service_cluster_ip(self):
        def service(name):
            return client.V1Service(
                metadata=meta(name),
                spec=client.V1ServiceSpec(
                    selector={"app": name},
                    ports=[client.V1ServicePort(port=80, target_port=8080)],
                ),
            )

        first = self.core.create_namespaced_service(NS, service("svc-a"))
        second = self.core.create_namespaced_service(NS, service("svc-b"))
        ips = [first.spec.cluster_ip, second.spec.cluster_ip]
        expect(all(ip and ip.startswith("10.") for ip in ips), f"cluster IPs allocated: {ips}")
        expect(ips[0] != ips[1], f"distinct cluster IPs: {ips}")
        expect(first.spec.cluster_ips == [ips[0]], f"clusterIPs: {first.spec.cluster_ips}")
        expect(first.spec.type == "ClusterIP", f"type ClusterIP, got {first.spec.type}")
        patched = self.core.patch_namespaced_service("svc-a", NS, {"metadata": {"labels": {"x": "1"}}})
        expect(patched.spec.cluster_ip == ips[0], "the cluster IP survives an update")

    # ----- watch --------------------------------------------------------------------------

    def check_watch_from_resource_version(self):
        rv = self.core.list_namespaced_config_map(NS).metadata.resource_version
        self.core.create_namespaced_config_map(NS, configmap("watched", {"n": "1"}, {"w": "1"}))
        self.core.patch_namespaced_config_map("watched", NS, {"data": {"n": "2"}})
        self.core.delete_namespaced_config_map("watched", NS)
        w = watch.Watch()
        events = []
        for ev in w.stream(
            self.core.list_namespaced_config_map,
            NS,
            label_selector="w=1",
            resource_version=rv,
            timeout_seconds=5,
        ):
            events.append((ev["type"], ev["object"].data, ev["object"].metadata.resource_version))
            if len(events) == 3:
                w.stop()
        types = [e[0] for e in events]
        expect(types == ["ADDED", "MODIFIED", "DELETED"], f"events in order, got {types}")
        expect(events[1][1] == {"n": "2"}, f"MODIFIED carries the new data, got {events[1][1]}")
        rvs = [int(e[2]) for e in events]
        expect(rvs == sorted(rvs) and rvs[0] > int(rv), f"resourceVersions grow: {rvs}")

    def check_watch_bookmarks(self):
        rv = self.core.list_namespaced_config_map(NS).metadata.resource_version
        w = watch.Watch()
        bookmark = None
        for ev in w.stream(
            self.core.list_namespaced_config_map,
            NS,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=10,
        ):
            if ev["type"] == "BOOKMARK":
                bookmark = ev["raw_object"]
                w.stop()
        expect(bookmark is not None, "a BOOKMARK arrives within 10 s")
        expect(bookmark.get("kind") == "ConfigMap", f"bookmark kind ConfigMap: {bookmark}")
        brv = bookmark["metadata"]["resourceVersion"]
        expect(int(brv) >= int(rv), f"bookmark resourceVersion {brv} >= {rv}")
        expect(w.resource_version == brv, "the client resumes from the bookmark")

    def check_watch_gone(self):
        if not self.control_url:
            print("skip watch_gone: no control URL to compact the watch log")
            return
        old = self.core.list_namespaced_config_map(NS).metadata.resource_version
        self.core.create_namespaced_config_map(NS, configmap("after-compaction", {}))
        req = urllib.request.Request(f"{self.control_url}/sim/v1/compact", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            expect(resp.status == 200, f"compact answered {resp.status}")
        e = expect_status(
            410,
            lambda: list(
                watch.Watch().stream(
                    self.core.list_namespaced_config_map,
                    NS,
                    resource_version=old,
                    timeout_seconds=5,
                )
            ),
        )
        expect("Expired" in str(e.reason) or "Gone" in str(e.reason), f"reason: {e.reason}")
        # The recovery the client's docs prescribe: list, then watch from the list's version.
        fresh = self.core.list_namespaced_config_map(NS).metadata.resource_version
        self.core.create_namespaced_config_map(NS, configmap("after-relist", {}, {"relist": "1"}))
        w = watch.Watch()
        names = []
        for ev in w.stream(
            self.core.list_namespaced_config_map,
            NS,
            label_selector="relist=1",
            resource_version=fresh,
            timeout_seconds=5,
        ):
            names.append((ev["type"], ev["object"].metadata.name))
            w.stop()
        expect(names == [("ADDED", "after-relist")], f"watch after relist: {names}")

    # ----- server-side apply --------------------------------------------------------------

    def check_server_side_apply(self):
        dyn = DynamicClient(self.api)
        cms = dyn.resources.get(api_version="v1", kind="ConfigMap")

        def applied(data):
            return {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "ssa", "namespace": NS},
                "data": data,
            }

        out = cms.server_side_apply(body=applied({"a": "1"}), field_manager="manager-a")
        expect(out.data.a == "1", "apply creates the object")
        out = cms.server_side_apply(body=applied({"a": "1", "b": "2"}), field_manager="manager-a")
        expect(dict(out.data) == {"a": "1", "b": "2"}, f"apply updates, got {out.data}")
        # Another manager that applies the same value shares the field: no conflict.
        cms.server_side_apply(body=applied({"b": "2"}), field_manager="manager-b")
        try:
            cms.server_side_apply(body=applied({"a": "other"}), field_manager="manager-b")
            raise CheckFailed("a second manager changing manager-a's field must conflict")
        except ConflictError as e:
            expect(e.status == 409, f"409, got {e.status}")
            expect("manager-a" in str(e.body), f"the conflict names the owner: {e.body}")
            expect(".data.a" in str(e.body), f"the conflict names the field: {e.body}")
        kept = self.core.read_namespaced_config_map("ssa", NS)
        expect(kept.data["a"] == "1", "the refused apply changed nothing")
        out = cms.server_side_apply(
            body=applied({"a": "other"}), field_manager="manager-b", force_conflicts=True
        )
        expect(out.data.a == "other", "force takes the field")
        managers = {
            m.manager: m.operation for m in (out.metadata.managedFields or [])
        }
        expect(
            managers.get("manager-a") == "Apply" and managers.get("manager-b") == "Apply",
            f"managedFields lists both appliers: {managers}",
        )
        # manager-a lost .data.a: applying its old value again now conflicts with manager-b.
        try:
            cms.server_side_apply(body=applied({"a": "1", "b": "2"}), field_manager="manager-a")
            raise CheckFailed("manager-a lost .data.a to a forced apply")
        except ConflictError as e:
            expect("manager-b" in str(e.body), f"the conflict names the new owner: {e.body}")

    # ----- scale --------------------------------------------------------------------------

    def check_deployment_scale(self):
        scale = self.apps.read_namespaced_deployment_scale("py-web", NS)
        expect(scale.spec.replicas == 1, f"scale spec.replicas 1, got {scale.spec.replicas}")
        expect(scale.status.selector == "app=py-web", f"selector, got {scale.status.selector}")
        out = self.apps.patch_namespaced_deployment_scale("py-web", NS, {"spec": {"replicas": 3}})
        expect(out.spec.replicas == 3, "patched scale")
        dep = self.apps.read_namespaced_deployment("py-web", NS)
        expect(dep.spec.replicas == 3, f"the deployment follows, got {dep.spec.replicas}")

        def three_ready():
            d = self.apps.read_namespaced_deployment_scale("py-web", NS)
            return d.status.replicas == 3

        eventually("scale status.replicas 3", three_ready)

    def check_custom_resource_scale(self):
        args = (WIDGET_GROUP, "v1", NS, "widgets")
        self.custom.create_namespaced_custom_object(
            *args,
            {
                "apiVersion": f"{WIDGET_GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"replicas": 2},
            },
        )
        scale = self.custom.get_namespaced_custom_object_scale(*args, "w1")
        expect(scale["kind"] == "Scale", f"kind Scale, got {scale.get('kind')}")
        expect(scale["apiVersion"] == "autoscaling/v1", f"autoscaling/v1, got {scale}")
        expect(scale["spec"]["replicas"] == 2, f"spec.replicas 2, got {scale['spec']}")
        self.custom.patch_namespaced_custom_object_scale(*args, "w1", {"spec": {"replicas": 4}})
        w1 = self.custom.get_namespaced_custom_object(*args, "w1")
        expect(w1["spec"]["replicas"] == 4, f"the object follows its scale, got {w1['spec']}")

    # ----- eviction -----------------------------------------------------------------------

    def pod(self, name, labels):
        return client.V1Pod(
            metadata=meta(name, labels),
            spec=client.V1PodSpec(
                containers=[client.V1Container(name="c", image="registry.example/c:1")]
            ),
        )

    def ready(self, name):
        def is_ready():
            p = self.core.read_namespaced_pod(name, NS)
            conds = (p.status and p.status.conditions) or []
            return any(c.type == "Ready" and c.status == "True" for c in conds)

        eventually(f"pod {name} Ready", is_ready)

    def evict(self, name):
        return self.core.create_namespaced_pod_eviction(
            name, NS, client.V1Eviction(metadata=meta(name))
        )

    def check_eviction(self):
        self.core.create_namespaced_pod(NS, self.pod("free", {"app": "free"}))
        self.core.create_namespaced_pod(NS, self.pod("guarded", {"app": "guarded"}))
        self.ready("free")
        self.ready("guarded")
        self.policy.create_namespaced_pod_disruption_budget(
            NS,
            client.V1PodDisruptionBudget(
                metadata=meta("guarded"),
                spec=client.V1PodDisruptionBudgetSpec(
                    min_available=1,
                    selector=client.V1LabelSelector(match_labels={"app": "guarded"}),
                ),
            ),
        )
        self.evict("free")

        def gone_or_terminating():
            try:
                p = self.core.read_namespaced_pod("free", NS)
            except ApiException as e:
                return e.status == 404
            return p.metadata.deletion_timestamp is not None

        eventually("the evicted pod is deleted", gone_or_terminating)
        e = expect_status(429, self.evict, "guarded")
        expect("disruption budget" in e.body, f"the refusal names the budget: {e.body}")
        pod = self.core.read_namespaced_pod("guarded", NS)
        expect(pod.metadata.deletion_timestamp is None, "the guarded pod stays")

    # ----- tear-down ----------------------------------------------------------------------

    def check_namespace_deleted(self):
        self.core.delete_namespace(NS)
        for name in ["widgets." + WIDGET_GROUP]:
            self.ext.delete_custom_resource_definition(name)


CHECKS = [
    "namespace_created",
    "crds_installed",
    "configmap_crud",
    "conflicts",
    "list_selectors_and_pages",
    "deployment_crud",
    "service_cluster_ip",
    "custom_resource_crud",
    "watch_from_resource_version",
    "watch_bookmarks",
    "watch_gone",
    "server_side_apply",
    "deployment_scale",
    "custom_resource_scale",
    "eviction",
    "namespace_deleted",
]


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    control = sys.argv[3] if len(sys.argv) > 3 else None
    suite = Conformance(sys.argv[1], sys.argv[2], control)
    failed = []
    for name in CHECKS:
        try:
            getattr(suite, f"check_{name}")()
            print(f"ok {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported by check name
            detail = str(e) if isinstance(e, CheckFailed) else traceback.format_exc()
            print(f"FAIL {name}: {detail}", flush=True)
            failed.append(name)
    if failed:
        print(f"failed checks: {', '.join(failed)}")
        return 1
    print(f"{len(CHECKS)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
