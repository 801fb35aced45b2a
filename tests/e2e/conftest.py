"""Shared e2e fixtures: the real control plane, kfold's install, a ServiceAccount identity, and
a daemon factory that runs ``kfold run`` as a real process.

The control plane comes from scripts/controlplane.sh (built by scripts/build_controlplane.sh);
scripts/test.sh starts it before pytest, and ``ensure_controlplane`` is idempotent.
"""
from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from tests.e2e.controlplane import ensure_controlplane

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def cp():
    return ensure_controlplane(build=False)


@pytest.fixture(scope="session")
def admin(cp):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    return client.ApiClient(cfg)


def apply(api, docs):
    """Create each document, replacing nothing: AlreadyExists is fine (idempotent install)."""
    from kubernetes import utils
    from kubernetes.client.exceptions import ApiException
    for doc in docs:
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            if not all(getattr(e, "status", 0) == 409 for e in exc.api_exceptions):
                raise
        except ApiException as exc:
            if exc.status != 409:
                raise


def install_crds(api) -> None:
    """kfold's CRDs as this checkout has them: created, or updated where a reused control plane
    holds an older version (a field the CRD lacks is pruned by the apiserver). Also the bench's."""
    from kfold.daemon.manifests import crds as crd_docs
    from tests.e2e.driver import ok
    docs = crd_docs()
    apply(api, docs)
    for doc in docs:
        ok(api, "PATCH", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}",
           {"spec": doc["spec"]})


@pytest.fixture(scope="session")
def crds(admin):
    install_crds(admin)
    time.sleep(1.0)  # CRD establishment
    return True


def discard_namespace(admin, name: str) -> None:
    """Delete a test's namespace for good. The daemon that held its Sessions' and Repos'
    finalizers is gone by now, so they are stripped first: otherwise the namespace stays
    Terminating forever and the controller manager, apiserver and etcd keep retrying it, a
    background load that every later test and benchmark on this control plane pays. The leader
    Leases named after it (in kfold's own namespace) go too."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    co = client.CustomObjectsApi(admin)
    for plural in ("sessions", "repos"):
        try:
            items = co.list_namespaced_custom_object("kfold.dev", "v1alpha1", name, plural)["items"]
        except ApiException:
            continue
        for item in items:
            if item["metadata"].get("finalizers"):
                try:
                    co.patch_namespaced_custom_object("kfold.dev", "v1alpha1", name, plural, item["metadata"]["name"],
                                                      {"metadata": {"finalizers": None}})
                except ApiException:
                    pass
    try:
        client.CoreV1Api(admin).delete_namespace(name)
    except ApiException:
        pass
    leases = client.CoordinationV1Api(admin)   # a test's leader Leases (``kfold-<namespace>[-shard-N]``)
    try:
        for lease in leases.list_namespaced_lease("kfold-e2e").items:
            if lease.metadata.name == f"kfold-{name}" or lease.metadata.name.startswith(f"kfold-{name}-shard-"):
                leases.delete_namespaced_lease(lease.metadata.name, "kfold-e2e")
    except ApiException:
        pass


@pytest.fixture
def namespaces(admin, crds):
    """``namespaces(prefix)``: a fresh namespace named ``<prefix>-<random>``; every one made is
    discarded after the test (``discard_namespace``)."""
    from kubernetes import client
    made: list[str] = []

    def make(prefix: str = "e2e") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": name}})
        made.append(name)
        return name
    yield make
    for name in made:
        discard_namespace(admin, name)


@pytest.fixture
def namespace(namespaces):
    """A fresh namespace for one test; discarded afterwards."""
    return namespaces("e2e")


def install_rbac(admin, kfold_ns: str, watched: list[str]) -> None:
    from kfold.daemon.manifests import rbac
    from kubernetes import client
    try:
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": kfold_ns}})
    except Exception:
        pass
    apply(admin, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kfold", "namespace": kfold_ns}}])
    apply(admin, rbac(kfold_ns, watched))


def service_account_token(admin, kfold_ns: str) -> str:
    """A short-lived token of the kfold ServiceAccount (TokenRequest API), as a pod is given."""
    from kubernetes import client
    tr = client.CoreV1Api(admin).create_namespaced_service_account_token(
        "kfold", kfold_ns, {"spec": {"expirationSeconds": 3600}})
    return tr.status.token


def service_account_kubeconfig(admin, cp, kfold_ns: str, path: Path) -> Path:
    """A kubeconfig holding a short-lived token of the kfold ServiceAccount."""
    ca = base64.b64encode(Path(cp["ca"]).read_bytes()).decode()
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kfold",
        "clusters": [{"name": "e2e", "cluster": {"server": cp["server"], "certificate-authority-data": ca}}],
        "users": [{"name": "kfold", "user": {"token": service_account_token(admin, kfold_ns)}}],
        "contexts": [{"name": "kfold", "context": {"cluster": "e2e", "user": "kfold"}}],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """``kfold run`` as a real process."""

    def __init__(self, tmp: Path, kubeconfig: str, namespaces: list[str], extra: dict | None = None):
        self.port = free_port()
        self.journal = tmp / "journal.db"
        self.log = tmp / f"kfold-{uuid.uuid4().hex[:6]}.log"
        cfg = {
            "cluster": {"name": "local", "kubeconfig": kubeconfig},
            "namespaces": namespaces,
            "base_domain": "sessions.test",
            # the tests read the whole history (export, replay --check, every row): no retention cut
            "journal": {"path": str(self.journal), "snapshot_every": 100, "retention": {"keep_snapshots": 0}},
            "log": {"format": "plain", "level": "info"},
            "http": {"listen": f"127.0.0.1:{self.port}"},
        }
        for k, v in (extra or {}).items():
            cfg[k] = v
        self.config = tmp / "config.yaml"
        self.config.write_text(yaml.safe_dump(cfg))
        self.proc: subprocess.Popen | None = None

    def start(self, wait_ready: bool = True, env: dict | None = None) -> "Daemon":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kfold", "run", "--config", str(self.config)],
            cwd=REPO, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})})
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"kfold run exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(0.2)
        raise AssertionError(f"kfold run not ready in {timeout}s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else 0

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def daemon_factory(tmp_path):
    started: list[Daemon] = []

    def make(kubeconfig: str, namespaces: list[str], extra: dict | None = None) -> Daemon:
        d = Daemon(tmp_path, kubeconfig, namespaces, extra)
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()


def wait_for(fn, timeout: float = 30.0, interval: float = 0.25, what: "str | Callable[[], str]" = "condition"):
    """``fn()`` until it is truthy (returned) or ``timeout`` passes (AssertionError). ``what`` names
    the wait; a callable is called at the timeout, so a message showing state shows it then."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}; last: {last!r}")
