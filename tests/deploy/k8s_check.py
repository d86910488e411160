#!/usr/bin/env python3
"""deploy_k8s: render deploy/k8s like `kubectl kustomize` would (resources lists followed, namespace set; nothing
else of Kustomize is used there, and anything else is refused so this renderer cannot silently drift) and check
what a broken deployment would get wrong: every file parses as YAML; every Secret and ConfigMap a workload or
Ingress refers to exists (a CloudNativePG Cluster X provides the Secret X-app); every container has readiness
and liveness probes and CPU/memory requests and a memory limit; the berth Deployment runs 3 replicas with the s3
driver, a preStop hook and a grace period longer than berthd's 60 s drain; the PodDisruptionBudget and the
Service select the Deployment's pods.

    k8s_check.py [DIR]   DIR defaults to deploy/k8s/example (the base plus its example Secrets)
    k8s_check.py --doctored   copies of deploy/k8s, each broken in one way, must each fail with the right line
Exit 0 when everything holds, 1 with one line per problem otherwise.
"""
import os
import re
import sys

import yaml

KNOWN = {"apiVersion", "kind", "resources", "namespace"}


def render(d, problems):
    path = os.path.join(d, "kustomization.yaml")
    with open(path) as f:
        k = yaml.safe_load(f)
    extra = set(k) - KNOWN
    if extra:
        problems.append("%s: uses %s, which this renderer does not implement" % (path, ", ".join(sorted(extra))))
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(d, r))
        if os.path.isdir(p):
            objs += render(p, problems)
            continue
        if not os.path.exists(p):
            problems.append("%s: resource %s does not exist" % (path, r))
            continue
        with open(p) as f:
            try:
                docs = [x for x in yaml.safe_load_all(f) if x is not None]
            except yaml.YAMLError as e:
                problems.append("%s: does not parse: %s" % (p, str(e).replace("\n", " ")))
                continue
        for o in docs:
            if not isinstance(o, dict) or not o.get("kind") or not o.get("apiVersion") or not o.get("metadata", {}).get("name"):
                problems.append("%s: an object without apiVersion, kind or metadata.name" % p)
                continue
            o["_file"] = os.path.relpath(p)
            objs.append(o)
    if "namespace" in k:
        for o in objs:
            if o["kind"] != "Namespace":
                o["metadata"]["namespace"] = k["namespace"]
    return objs


def pod_refs(spec):
    """(kind, name, where) of every Secret and ConfigMap a pod spec names."""
    out = []
    for v in spec.get("volumes", []):
        if "secret" in v:
            out.append(("Secret", v["secret"].get("secretName"), "volume " + v["name"]))
        if "configMap" in v:
            out.append(("ConfigMap", v["configMap"].get("name"), "volume " + v["name"]))
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        for e in c.get("envFrom", []):
            for kind, key in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                if key in e:
                    out.append((kind, e[key].get("name"), "container %s envFrom" % c["name"]))
        for e in c.get("env", []):
            vf = e.get("valueFrom", {})
            for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                if key in vf:
                    out.append((kind, vf[key].get("name"), "container %s env %s" % (c["name"], e["name"])))
    return out


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def size_bytes(text, k8s=False):
    """berthd's sizes ("8G", "1073741824": K/M/G/T are powers of 1024) or, with k8s, a Kubernetes quantity ("10Gi"
    binary, "10G" or "10k" decimal)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKMGT]?)(i?)\s*", str(text))
    if m is None or (m.group(3) and not k8s):
        return 0
    n, unit = int(m.group(1)), " KMGT".index(m.group(2).upper() or " ")
    return n * (1000 ** unit if k8s and not m.group(3) else 1024 ** unit)


def check(objs):
    problems = []
    have = {(o["kind"], o["metadata"]["name"]) for o in objs}
    have |= {("Secret", o["metadata"]["name"] + "-app") for o in objs if o["kind"] == "Cluster"}  # CloudNativePG
    for o in objs:
        where = "%s %s (%s)" % (o["kind"], o["metadata"]["name"], o["_file"])
        refs = []
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            spec = o["spec"]["template"]["spec"]
            refs = pod_refs(spec)
            for c in spec.get("containers", []):
                for probe in ("readinessProbe", "livenessProbe"):
                    if not c.get(probe):
                        problems.append("%s: container %s has no %s" % (where, c["name"], probe))
                res = c.get("resources", {})
                for key in ("cpu", "memory"):
                    if key not in res.get("requests", {}):
                        problems.append("%s: container %s has no %s request" % (where, c["name"], key))
                if "memory" not in res.get("limits", {}):
                    problems.append("%s: container %s has no memory limit" % (where, c["name"]))
            if not matches(o["spec"].get("selector", {}).get("matchLabels"), o["spec"]["template"]["metadata"].get("labels", {})):
                problems.append("%s: its selector does not select its own pods" % where)
        if o["kind"] == "Ingress":
            refs = [("Secret", t.get("secretName"), "tls") for t in o["spec"].get("tls", [])]
            for rule in o["spec"].get("rules", []):
                for p in rule.get("http", {}).get("paths", []):
                    refs.append(("Service", p["backend"]["service"]["name"], "backend"))
        for kind, name, what in refs:
            if (kind, name) not in have:
                problems.append("%s: %s refers to %s %s, which is not in the rendered manifests" % (where, what, kind, name))

    berth = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "berth"]
    if len(berth) != 1:
        return problems + ["no Deployment berth"]
    d = berth[0]
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    spec = d["spec"]["template"]["spec"]
    if d["spec"].get("replicas") != 3:
        problems.append("Deployment berth: replicas %r, not 3" % d["spec"].get("replicas"))
    if spec.get("terminationGracePeriodSeconds", 30) <= 60:
        problems.append("Deployment berth: terminationGracePeriodSeconds must exceed berthd's 60 s drain")
    c = spec["containers"][0]
    if not c.get("lifecycle", {}).get("preStop"):
        problems.append("Deployment berth: no preStop hook (the endpoint must leave the Service before the drain)")
    if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/api/v2.0/health":
        problems.append("Deployment berth: readiness is not GET /api/v2.0/health (database and bucket)")
    cms = {o["metadata"]["name"]: o.get("data", {}) for o in objs if o["kind"] == "ConfigMap"}
    env = {}
    for e in c.get("envFrom", []):
        env.update(cms.get(e.get("configMapRef", {}).get("name"), {}))
    env.update({e["name"]: e.get("value") for e in c.get("env", [])})
    if env.get("BERTH_STORAGE_DRIVER") != "s3":
        problems.append("Deployment berth: BERTH_STORAGE_DRIVER is %r, not s3" % env.get("BERTH_STORAGE_DRIVER"))
    if env.get("BERTH_KEYS_DIR") not in [m["mountPath"] for m in c.get("volumeMounts", [])]:
        problems.append("Deployment berth: BERTH_KEYS_DIR %r is not a mounted Secret" % env.get("BERTH_KEYS_DIR"))
    # the edge keeps blob slices in run_dir (storage.root/run): an emptyDir past its sizeLimit gets the pod evicted,
    # and nginx trims its cache only every few seconds (a quarter more, measured: 5x a 64 MiB cache for seconds)
    cache = size_bytes(env.get("BERTH_S3_EDGE_CACHE", "8G"))
    root = env.get("BERTH_RUN_DIR") or (env.get("BERTH_STORAGE_ROOT") or "/var/lib/berth") + "/run"
    mounts = sorted((m for m in c.get("volumeMounts", []) if (root + "/").startswith(m["mountPath"].rstrip("/") + "/")),
                    key=lambda m: len(m["mountPath"]))
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    limit = vols.get(mounts[-1]["name"], {}).get("emptyDir", {}).get("sizeLimit") if mounts else None
    if cache and limit is not None and size_bytes(limit, k8s=True) < cache * 5 // 4 + (1 << 30):
        problems.append("Deployment berth: the volume of run_dir (%s, sizeLimit %s) cannot hold BERTH_S3_EDGE_CACHE %s, a quarter more and 1 GiB"
                        % (root, limit, env.get("BERTH_S3_EDGE_CACHE", "8G (default)")))
    pdbs = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    if not pdbs:
        problems.append("no PodDisruptionBudget")
    for p in pdbs:
        if not matches(p["spec"].get("selector", {}).get("matchLabels"), labels):
            problems.append("PodDisruptionBudget %s: its selector does not match the berth pods' labels %s" % (p["metadata"]["name"], labels))
        if p["spec"].get("minAvailable", 0) >= d["spec"].get("replicas", 1):
            problems.append("PodDisruptionBudget %s: minAvailable leaves no disruption possible" % p["metadata"]["name"])
    svcs = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "berth"]
    if not svcs or not matches(svcs[0]["spec"].get("selector"), labels):
        problems.append("Service berth: does not select the berth pods")
    return problems


# (file under deploy/k8s, text replaced, replacement, the problem expected)
DOCTORED = [
    ("base/deployment.yaml", "replicas: 3", "replicas: 2", "replicas 2, not 3"),
    ("base/pdb.yaml", "app.kubernetes.io/component: registry", "app.kubernetes.io/component: regsitry",
     "PodDisruptionBudget berth: its selector does not match"),
    ("base/deployment.yaml", "          readinessProbe:\n", "          readinessProbeX:\n", "has no readinessProbe"),
    ("base/deployment.yaml", "requests: {cpu: 500m, memory: 256Mi", "requests: {memory: 256Mi", "has no cpu request"),
    ("base/deployment.yaml", "emptyDir: {sizeLimit: 10Gi}", "emptyDir: {sizeLimit: 2Gi}", "cannot hold BERTH_S3_EDGE_CACHE"),
    # a Kubernetes "9G" is 9.0e9 bytes, below the 9.13e9 a 6G cache needs (read as 9 GiB it would pass)
    ("base/deployment.yaml", "emptyDir: {sizeLimit: 10Gi}", "emptyDir: {sizeLimit: 9G}", "cannot hold BERTH_S3_EDGE_CACHE"),
    ("base/configmap.yaml", "BERTH_S3_EDGE_CACHE: 6G", "BERTH_S3_EDGE_CACHE: 8G", "cannot hold BERTH_S3_EDGE_CACHE 8G"),
    ("base/deployment.yaml", "secretName: berth-s3", "secretName: berth-s4", "refers to Secret berth-s4"),
    ("base/deployment.yaml", "configMapRef: {name: berth-config}", "configMapRef: {name: berth-cfg}", "refers to ConfigMap berth-cfg"),
    ("example/secrets.example.yaml", "  name: berth-admin\n", "  name: berth-admins\n", "refers to Secret berth-admin,"),
    ("base/ingress.yaml", "  rules:\n", "  rules:\n  - [\n", "does not parse"),
    ("base/configmap.yaml", "BERTH_STORAGE_DRIVER: s3", "BERTH_STORAGE_DRIVER: filesystem", "not s3"),
    ("base/deployment.yaml", "terminationGracePeriodSeconds: 75", "terminationGracePeriodSeconds: 30", "must exceed"),
    ("base/kustomization.yaml", "  - pdb.yaml\n", "", "no PodDisruptionBudget"),
    ("example/kustomization.yaml", "resources:", "patches: []\nresources:", "does not implement"),
]


def doctored(root):
    import shutil
    import tempfile
    failed = 0
    for rel, old, new, expect in DOCTORED:
        tmp = tempfile.mkdtemp(prefix="deploy-k8s-")
        try:
            shutil.copytree(root, os.path.join(tmp, "k8s"))
            path = os.path.join(tmp, "k8s", rel)
            with open(path) as f:
                text = f.read()
            if old not in text:
                print("deploy_k8s --doctored: %r is no longer in %s: update DOCTORED" % (old, rel))
                failed += 1
                continue
            with open(path, "w") as f:
                f.write(text.replace(old, new, 1))
            problems = []
            problems += check(render(os.path.join(tmp, "k8s", "example"), problems))
            hit = [p for p in problems if expect in p]
            print("%s: %s -> %s" % ("caught" if hit else "MISSED", rel, hit[0] if hit else problems))
            failed += not hit
        finally:
            shutil.rmtree(tmp)
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--doctored"]:
        return doctored(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "k8s"))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "k8s", "example")
    problems = []
    objs = render(d, problems)
    problems += check(objs)
    for p in problems:
        print("deploy_k8s: " + p)
    if problems:
        return 1
    print("deploy_k8s: %d objects rendered from %s: %s" % (len(objs), os.path.relpath(d),
                                                          ", ".join(sorted("%s/%s" % (o["kind"], o["metadata"]["name"]) for o in objs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
