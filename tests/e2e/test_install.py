"""The documented install (docs/install.md) on the real control plane, with the real kubectl.

1. deploy/install.yaml and the kustomize base deploy/kustomize pass ``kubectl apply
   --dry-run=server`` as released (the namespaces they create are made first, when absent: a
   namespaced dry run needs its namespace).
2. Install, Session Ready, upgrade, uninstall, from ``kfold manifests --kustomize`` rendered for
   unique namespaces (the apiserver is shared), applied with ``kubectl apply --server-side -k``:
   - the Deployment rolls out on kwok's fake node (a PersistentVolume is made for the journal
     claim: the control plane has no provisioner). kwok runs no container, so the daemon itself is
     run the way the pod would run it: the image ``scripts/build_image.sh`` built (tests/e2e/
     test_image.py's runtime: read-only root, uid 65532, in-cluster config) when the machine can
     (root and a built image), else ``kfold run`` as a process; either way with the installed
     ConfigMap's config (read back from the apiserver; only ``http.listen`` and ``metrics.listen``,
     free loopback ports, and, for the process, the journal path differ) and a token of the installed ServiceAccount,
     so the install's RBAC is what authorizes every request (no 403 in the log).
   - ``kubectl wait --for=condition=Ready session/demo``;
   - upgrade: a newer rendering (a changed config) re-applied rolls the pod template (the config
     checksum) and the Session stays Ready across a restart of the daemon on the same journal;
   - uninstall: ``kubectl delete -f kfold.yaml`` removes kfold and keeps the CRDs, the namespaces
     and the Session.
3. The tenants' aggregated roles: a ServiceAccount bound to the built-in ``edit`` may create
   Sessions, one bound to ``view`` may only read them (``kubectl auth can-i``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from kfold.daemon.manifests import CONFIG_CHECKSUM, DATA, NONROOT
from tests.e2e.conftest import (REPO, discard_namespace, free_port, service_account_kubeconfig,
                                service_account_token, wait_for)
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, session_manifest

KUBECTL = Path(os.environ.get("KFOLD_CACHE", Path.home() / ".cache" / "kfold")) / "bin" / "kubectl"
pytestmark = pytest.mark.timeout(1500)


def _refusals(log: str) -> list[str]:
    """The log lines that show a request refused by RBAC: a 403 status or a Forbidden reason. At
    debug level urllib3 prints each response as ``"GET /path HTTP/1.1" 200 1403`` (status, then
    the body's length): the length is not a status."""
    refused = []
    for line in log.splitlines():
        line = re.sub(r'(HTTP/1\.1" \d{3}) \d+', r"\1", line)
        if re.search(r"(?<![\w.,:=/-])403(?![\w.])", line) or "forbidden" in line.lower():
            refused.append(line)
    return refused


def test_refusals_are_403s_and_forbidden_reasons_not_body_lengths():
    assert _refusals('urllib3: "GET /api/v1/pods HTTP/1.1" 200 1403\nseq=403\nat 15:23:35,403 ok') == []
    assert _refusals('urllib3: "GET /api/v1/pods HTTP/1.1" 403 233') != []
    assert _refusals("effect create Pod -> refused: 403 Forbidden") != []
    assert _refusals('pods is forbidden: User "x" cannot list') != []


@pytest.fixture
def kubectl(cp):
    if not os.access(KUBECTL, os.X_OK):
        pytest.fail(f"{KUBECTL} is missing (bash scripts/build_controlplane.sh builds it)")

    def run(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([str(KUBECTL), "--kubeconfig", cp["kubeconfig"], *args], input=stdin,
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r
    return run


def test_the_release_install_and_kustomize_base_pass_a_server_side_dry_run(kubectl, admin, crds):
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "install.yaml").read_text()) if d]
    made = []
    core = client.CoreV1Api(admin)
    for ns in [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]:
        try:
            core.create_namespace({"metadata": {"name": ns}})
            made.append(ns)
        except client.ApiException as exc:
            assert exc.status == 409
    try:
        for args in (["-f", str(REPO / "deploy" / "install.yaml")], ["-k", str(REPO / "deploy" / "kustomize")]):
            out = kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", *args).stdout
            assert out.count("(server dry run)") == len(docs), out
        assert not client.AppsV1Api(admin).list_namespaced_deployment("kfold").items  # nothing persisted
    finally:
        for ns in made:
            core.delete_namespace(ns)


class Runner:
    """kfold run as the installed pod would run it: the image when it can be run here, else the process."""

    def __init__(self, admin, cp, home: str, tmp: Path):
        self.admin, self.cp, self.home, self.tmp = admin, cp, home, tmp
        self.journal = tmp / "journal"
        self.journal.mkdir()
        os.chown(self.journal, NONROOT, NONROOT) if os.geteuid() == 0 else None
        self.port, self.metrics_port = free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self.log = tmp / "kfold.log"
        self.image = self._image()

    def _image(self):
        """The image of this checkout (``scripts/build_image.sh``: a hash check when cached) when root
        may build and run it; ``KFOLD_E2E_INSTALL_PROCESS=1`` runs the process instead."""
        if os.geteuid() != 0 or os.environ.get("KFOLD_E2E_INSTALL_PROCESS"):
            return None
        from tests.e2e.test_image import Image
        out = subprocess.run(["bash", str(REPO / "scripts" / "build_image.sh")], cwd=REPO, check=True,
                             stdout=subprocess.PIPE, text=True, timeout=840).stdout
        work = self.tmp / "image"
        work.mkdir()
        return Image(Path(out.strip().splitlines()[-1]), work)

    def config(self) -> dict:
        """The installed ConfigMap's config, as the apiserver holds it."""
        cm = client.CoreV1Api(self.admin).read_namespaced_config_map("kfold-config", self.home)
        cfg = yaml.safe_load(cm.data["config.yaml"])
        cfg.setdefault("http", {})["listen"] = f"127.0.0.1:{self.port}"
        if (cfg.get("metrics") or {}).get("listen"):   # its own port too: never a fixed one on a shared machine
            cfg["metrics"]["listen"] = f"127.0.0.1:{self.metrics_port}"
        cfg.setdefault("log", {})["format"] = "plain"
        return cfg

    def start(self) -> None:
        cfg = self.config()
        etc = self.tmp / "etc"
        etc.mkdir(exist_ok=True)
        if self.image is None:
            kubeconfig = service_account_kubeconfig(self.admin, self.cp, self.home, self.tmp / "sa.kubeconfig")
            cfg["cluster"]["kubeconfig"] = str(kubeconfig)
            cfg["journal"]["path"] = str(self.journal / "journal.db")
            (etc / "config.yaml").write_text(yaml.safe_dump(cfg))
            argv, env = [sys.executable, "-m", "kfold", "run", "--config", str(etc / "config.yaml")], dict(os.environ)
        else:
            from tests.e2e.test_image import SA_DIR
            sa = self.tmp / "serviceaccount"
            sa.mkdir(exist_ok=True)
            (sa / "token").write_text(service_account_token(self.admin, self.home))
            shutil.copy(self.cp["ca"], sa / "ca.crt")
            (sa / "namespace").write_text(self.home)
            (etc / "config.yaml").write_text(yaml.safe_dump(cfg))
            mounts = {"/etc/kfold": (etc, False), "/var/lib/kfold": (self.journal, True), SA_DIR: (sa, False)}
            server = urlsplit(self.cp["server"])
            env = self.image.env({"KUBERNETES_SERVICE_HOST": server.hostname, "KUBERNETES_SERVICE_PORT": str(server.port)})
            argv = self.image.command(None, mounts)
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)

        def ready():
            assert self.proc.poll() is None, f"kfold run exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ready, 60, what="kfold run /readyz")

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        if self.image is not None:
            from tests.e2e.test_image import _stop
            return _stop(self.proc)
        self.proc.terminate()
        return self.proc.wait(timeout=30)


def render(tmp: Path, home: str, sessions: str, level: str) -> Path:
    cfg = yaml.safe_load((DATA / "config.example.yaml").read_text())
    cfg["namespaces"] = [sessions]
    cfg["log"]["level"] = level
    path = tmp / f"config-{level}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = tmp / f"base-{level}"
    subprocess.run([sys.executable, "-m", "kfold", "manifests", "--namespace", home, "--config", str(path),
                    "--kustomize", str(out)], cwd=REPO, check=True)
    return out


def test_install_a_session_ready_upgrade_and_uninstall(kubectl, admin, cp, crds, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    home, sessions = f"kfold-inst-{suffix}", f"kfold-inst-{suffix}-s"
    core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
    pv = f"kfold-inst-{suffix}-journal"
    runner = Runner(admin, cp, home, tmp_path)
    try:
        base = render(tmp_path, home, sessions, "info")
        kubectl("apply", "--server-side", "--force-conflicts", "-k", str(base))
        core.create_persistent_volume({"metadata": {"name": pv}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": f"/tmp/{pv}"},
            "claimRef": {"namespace": home, "name": "kfold-journal"}, "persistentVolumeReclaimPolicy": "Delete"}})
        kubectl("rollout", "status", "deployment/kfold", "-n", home, "--timeout=90s", timeout=120)
        # kfold's own ownership label is on none of the install's objects: no sweep of kfold selects them
        owned = kubectl("get", "all,configmap,pvc,serviceaccount,role,rolebinding", "-n", home,
                        "-l", "app.kubernetes.io/managed-by=kfold", "-o", "name").stdout
        assert owned == "", owned

        runner.start()
        co = client.CustomObjectsApi(admin)
        co.create_namespaced_custom_object(GROUP, VERSION, sessions, PLURAL, session_manifest(sessions, [WEB]))
        kubectl("wait", "--for=condition=Ready", "session/demo", "-n", sessions, "--timeout=90s", timeout=120)
        # (the columns are tests/e2e/test_session_admission.py's: other branches re-apply their CRDs here)
        got = kubectl("get", "session", "demo", "-n", sessions, "-o", "jsonpath={.status.phase} {.status.podName}").stdout
        assert got == "Ready demo-g1", got

        # upgrade: a newer rendering re-applied rolls the pod template; the Session stays Ready
        before = apps.read_namespaced_deployment("kfold", home)
        newer = render(tmp_path, home, sessions, "debug")
        kubectl("apply", "--server-side", "--force-conflicts", "-k", str(newer))
        after = apps.read_namespaced_deployment("kfold", home)
        assert after.metadata.generation == before.metadata.generation + 1
        sums = [d.spec.template.metadata.annotations[CONFIG_CHECKSUM] for d in (before, after)]
        assert sums[0] != sums[1]
        kubectl("rollout", "status", "deployment/kfold", "-n", home, "--timeout=90s", timeout=120)
        assert runner.stop() == 0
        assert runner.config()["log"]["level"] == "debug"
        runner.start()
        kubectl("wait", "--for=condition=Ready", "session/demo", "-n", sessions, "--timeout=60s")
        st = co.get_namespaced_custom_object(GROUP, VERSION, sessions, PLURAL, "demo")["status"]
        assert st["podName"] == "demo-g1", st  # the same pod: the journal carried over
        assert runner.stop() == 0
        log = runner.log.read_text()
        refused = _refusals(log)
        assert not refused, refused[:5]

        # uninstall: kfold goes, the CRDs, the namespaces and the Session stay
        kubectl("delete", "-f", str(newer / "kfold.yaml"), "--wait=true", timeout=120)
        assert not apps.list_namespaced_deployment(home).items
        assert kubectl("get", "serviceaccount", "kfold", "-n", home, check=False).returncode != 0
        assert kubectl("get", "crd", "sessions.kfold.dev", "repos.kfold.dev").returncode == 0
        assert co.get_namespaced_custom_object(GROUP, VERSION, sessions, PLURAL, "demo")["metadata"]["name"] == "demo"
        assert {core.read_namespace(n).status.phase for n in (home, sessions)} == {"Active"}
    finally:
        runner.stop()
        for ns in (sessions, home):
            discard_namespace(admin, ns)
        for name in ("kfold-session-editor", "kfold-session-viewer"):
            try:
                client.RbacAuthorizationV1Api(admin).delete_cluster_role(name)
            except client.ApiException:
                pass
        try:
            core.delete_persistent_volume(pv)
        except client.ApiException:
            pass


def test_tenants_edit_and_view_roles_include_sessions_by_aggregation(kubectl, admin, crds, namespace, tmp_path):
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "kfold", "manifests", "--kustomize", str(base)], cwd=REPO, check=True)
    roles = [d for d in yaml.safe_load_all((base / "kfold.yaml").read_text()) if d and d["kind"] == "ClusterRole"]
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": roles}))
    for who, role in (("editor", "edit"), ("viewer", "view")):
        kubectl("create", "serviceaccount", who, "-n", namespace)
        kubectl("create", "rolebinding", who, f"--clusterrole={role}", f"--serviceaccount={namespace}:{who}", "-n", namespace)

    def can(who: str, verb: str, what: str) -> bool:
        what, _, sub = what.partition("/")
        r = kubectl("auth", "can-i", verb, what, *([f"--subresource={sub}"] if sub else []), "-n", namespace,
                    f"--as=system:serviceaccount:{namespace}:{who}", check=False)
        return r.stdout.strip() == "yes"
    wait_for(lambda: can("editor", "create", "sessions.kfold.dev"), 15, what="edit aggregating the session editor role")
    assert can("editor", "delete", "sessions.kfold.dev") and can("editor", "get", "repos.kfold.dev")
    assert not can("editor", "patch", "sessions.kfold.dev/status") and not can("editor", "create", "repos.kfold.dev")
    wait_for(lambda: can("viewer", "list", "sessions.kfold.dev"), 15, what="view aggregating the session viewer role")
    assert not can("viewer", "create", "sessions.kfold.dev") and can("viewer", "get", "repos.kfold.dev")
