#!/usr/bin/env python3
"""Record golden journals: short real scenarios through the real daemon, exported as JSONL.

    python scripts/record_golden.py                       # every scenario into tests/data/
    python scripts/record_golden.py session pod_deleted   # only these
    python scripts/record_golden.py --list

Needs the local control plane (scripts/controlplane.sh start; built by scripts/build_controlplane.sh),
except the ``sim_*`` scenarios, which record ``kfold sim`` seeds with faults. Each real scenario runs
``kfold run`` (admin kubeconfig) as a real process on a fresh namespace, then exports its journal with
``kfold export --unsealed`` and checks it: ``kfold replay --check`` passes, the sentinel Secret value
appears nowhere in it (plain or base64), and the journal holds what the scenario is for (``FACTS``
below, also asserted by tests/unit/test_golden_journals.py, so a re-recording that lost its point
fails there). Scenarios:

- ``session``: a Secret labelled managed-by=kfold holding the sentinel (observed, so the journal must
  redact it) -> Session (one app, an env reference to that Secret) -> Ready -> suspend -> Suspended ->
  resume -> Ready (generation 2) -> stop -> Stopped -> deleted (kfold removes its finalizer).
- ``pod_deleted``: a Ready Session's pod deleted by someone else -> Failed PodGone ("disappeared after
  serving", seed 002) -> deleted.
- ``name_taken``: a Service kfold did not make holds the Session's name -> Failed NameTaken
  (PortsRouted False NameTaken: nothing was routed for it), the Service untouched; beside it a Session whose spec only kfold refuses (a cluster nobody
  registered: admission cannot know kfold's clusters) -> Failed InvalidSpec; both deleted.
- ``clone_failed``: a Session with a repository; the node's cache agent reports its clone failed on
  the pod's node -> Failed CloneFailed; deleted.
- ``lost_journal``: a Ready Session, kfold killed (SIGKILL) and its journal deleted; a new kfold on a
  fresh journal converges (no delete of a healthy object); the Session deleted. The journal recorded
  is the second one.
- ``fenced_409``: a Session stopped while its pod's labels change under it: the fenced pod delete is
  refused 409 Conflict (a stale resourceVersion), kfold re-reads and deletes again.
- ``sim_3``, ``sim_7``, ``sim_11``: ``kfold sim --seed N --journal`` (every fault; seed 3 loses its
  journal once).

tests/unit/test_golden_journals.py replays every tests/data/*.jsonl with the current code;
re-record when a decision changes on purpose, and say why in the commit.
"""
from __future__ import annotations

import argparse
import base64
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = REPO / "tests" / "data"

GROUP, VERSION, PLURAL, NAME = "kfold.dev", "v1alpha1", "sessions", "demo"
SENTINEL = "golden-sentinel-" + "do-not-journal"
IMAGE = "registry.example/sandbox:1"
APPS = [{"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}]
KFOLD = [sys.executable, "-m", "kfold"]


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise SystemExit(f"record_golden: timed out waiting for {what}; last: {last!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(msg: str) -> None:
    print(f"record_golden: {msg}", file=sys.stderr)


class Run:
    """One scenario's cluster side: a fresh namespace, the API clients, and ``kfold run`` processes
    on a journal in a work directory."""

    def __init__(self, cp: dict[str, str], keep: bool):
        from kubernetes import client, config
        cfg = client.Configuration()
        config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        self.core, self.co = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        self.cp, self.keep = cp, keep
        self.ns = f"golden-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.work = Path(tempfile.mkdtemp(prefix="kfold-golden-"))
        self.journal = self.work / "journal.db"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    # -- the daemon ---------------------------------------------------------------------------
    def start(self, journal: Path | None = None) -> None:
        self.journal = journal or self.journal
        self.port = free_port()
        config = self.work / "config.yaml"
        config.write_text(yaml.safe_dump({
            "cluster": {"name": "local", "kubeconfig": self.cp["kubeconfig"]},
            "namespaces": [self.ns], "base_domain": "sessions.test",
            "journal": {"path": str(self.journal), "snapshot_every": 1000, "retention": {"keep_snapshots": 0}},
            "log": {"format": "plain", "level": "info"},
            "http": {"listen": f"127.0.0.1:{self.port}"},
        }))
        log = open(self.work / "kfold.log", "ab")
        self.proc = subprocess.Popen(KFOLD + ["run", "--config", str(config)], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        proc, port = self.proc, self.port

        def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"kfold run exited {proc.returncode}; see {self.work / 'kfold.log'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    return r.status == 200
            except Exception:
                return False
        wait_for(ready, "kfold run /readyz")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if sig == signal.SIGTERM and proc.returncode != 0:
            raise SystemExit(f"kfold run exited {proc.returncode} on SIGTERM; see {self.work / 'kfold.log'}")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if not self.keep:
                try:
                    self.core.delete_namespace(self.ns)
                except Exception:
                    pass

    # -- Sessions -------------------------------------------------------------------------------
    def create_session(self, name: str = NAME, **spec: Any) -> None:
        body = {"image": IMAGE, "apps": APPS, **spec}
        self.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
            "metadata": {"name": name, "namespace": self.ns}, "spec": body})

    def session(self, name: str = NAME) -> dict[str, Any]:
        return self.co.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def phase(self, name: str = NAME) -> str:
        return (self.session(name).get("status") or {}).get("phase", "")

    def ready_reason(self, name: str = NAME) -> str:
        conditions = (self.session(name).get("status") or {}).get("conditions") or []
        return next((f"{c['reason']}: {c.get('message', '')}" for c in conditions if c["type"] == "Ready"), "")

    def patch(self, spec: dict[str, Any], name: str = NAME) -> None:
        self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec})

    def step(self, spec: dict[str, Any], want: str, name: str = NAME, timeout: float = 60.0) -> None:
        if spec:
            self.patch(spec, name)
        wait_for(lambda: self.phase(name) == want, f"Session {name} {want}", timeout)
        say(f"{name}: {spec or 'created'} -> {want}; pods {self.pods()}")

    def pods(self) -> list[str]:
        return sorted(p.metadata.name for p in self.core.list_namespaced_pod(self.ns).items)

    def running(self, pod: str) -> bool:
        try:
            return self.core.read_namespaced_pod(pod, self.ns).status.phase == "Running"
        except Exception:
            return False

    def delete_session(self, name: str = NAME) -> None:
        from kubernetes.client.exceptions import ApiException
        self.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

        def gone() -> bool:
            try:
                self.session(name)
                return False
            except ApiException as exc:
                return exc.status == 404
        wait_for(gone, f"the Session {name} deleted (finalizer removed by kfold)")
        time.sleep(0.5)  # let the last watch events land in the journal

    def sentinel_secret(self) -> None:
        self.core.create_namespaced_secret(self.ns, {
            "metadata": {"name": "golden-token", "labels": {"app.kubernetes.io/managed-by": "kfold"}},
            "stringData": {"token": SENTINEL}})


# -- the scenarios -----------------------------------------------------------------------------
def session(run: Run) -> None:
    run.start()
    run.sentinel_secret()
    run.create_session(env=[{"name": "TOKEN", "secretRef": {"name": "golden-token", "key": "token"}}])
    run.step({}, "Ready")
    run.step({"suspended": True}, "Suspended")
    wait_for(lambda: run.pods() == [], "the g1 pod gone")
    run.step({"suspended": False}, "Ready")
    run.step({"stopped": True}, "Stopped")
    wait_for(lambda: run.pods() == [], "the g2 pod gone")
    run.delete_session()


def pod_deleted(run: Run) -> None:
    run.start()
    run.create_session()
    run.step({}, "Ready")
    wait_for(lambda: run.running(f"{NAME}-g1"), "demo-g1 Running")
    run.core.delete_namespaced_pod(f"{NAME}-g1", run.ns)   # someone else: a user, an eviction
    say("deleted demo-g1 as another client")
    wait_for(lambda: run.phase() == "Failed", "demo Failed", 90)   # seed 002: gone after serving
    say(f"demo: {run.ready_reason()}; pods {run.pods()}")
    run.delete_session()


def name_taken(run: Run) -> None:
    run.start()
    foreign = {"app": "billing"}
    run.core.create_namespaced_service(run.ns, {
        "metadata": {"name": NAME, "labels": foreign},
        "spec": {"selector": foreign, "ports": [{"port": 80, "targetPort": 8080}]}})
    before = run.core.read_namespaced_service(NAME, run.ns).metadata.resource_version
    run.create_session()
    run.create_session("bad", cluster="mars")
    wait_for(lambda: run.phase() == "Failed", "demo Failed", 90)
    wait_for(lambda: run.phase("bad") == "Failed", "bad Failed", 90)
    say(f"demo: {run.ready_reason()}; bad: {run.ready_reason('bad')}")
    run.delete_session()
    run.delete_session("bad")
    after = run.core.read_namespaced_service(NAME, run.ns).metadata.resource_version
    if after != before:
        raise SystemExit(f"record_golden: the foreign Service changed ({before} -> {after})")


def clone_failed(run: Run) -> None:
    url = "https://git.example/team/broken.git"
    run.start()
    run.create_session(repositories=[{"url": url}])

    def node() -> str:
        try:
            return run.core.read_namespaced_pod(f"{NAME}-g1", run.ns).spec.node_name or ""
        except Exception:
            return ""
    where = wait_for(node, "demo-g1 scheduled")

    def repo() -> dict[str, Any] | None:
        items = run.co.list_namespaced_custom_object(GROUP, VERSION, run.ns, "repos")["items"]
        return next((r for r in items if r["spec"].get("url") == url), None)
    obj = wait_for(repo, "the Repo made")
    # the node's cache agent: its clone failed
    run.co.patch_namespaced_custom_object_status(GROUP, VERSION, run.ns, "repos", obj["metadata"]["name"], {
        "status": {"nodes": [{"node": where, "present": False, "synced": False, "attempted": "Clone",
                              "lastAttempt": "2026-01-01T00:00:00Z",
                              "lastError": "fatal: repository 'https://git.example/team/broken.git/' not found"}]}})
    say(f"the Repo's clone reported failed on {where}")
    wait_for(lambda: run.phase() == "Failed", "demo Failed", 90)
    say(f"demo: {run.ready_reason()}")
    run.delete_session()


def lost_journal(run: Run) -> None:
    run.start(run.work / "lost.db")
    run.create_session()
    run.step({}, "Ready")
    wait_for(lambda: run.running(f"{NAME}-g1"), "demo-g1 Running")
    time.sleep(1.0)   # the endpoints written
    run.stop(signal.SIGKILL)
    for f in run.work.glob("lost.db*"):
        f.unlink()
    say("kfold killed, its journal deleted")
    run.start(run.work / "journal.db")
    wait_for(lambda: run.phase() == "Ready", "demo Ready on the fresh journal")
    time.sleep(2.0)   # converged: what it re-observed is journaled
    if run.pods() != [f"{NAME}-g1"]:
        raise SystemExit(f"record_golden: the fresh journal replaced the healthy pod: {run.pods()}")
    run.delete_session()


def fenced_409(run: Run) -> None:
    run.start()
    run.create_session()
    run.step({}, "Ready")
    pod = f"{NAME}-g1"
    wait_for(lambda: run.running(pod), f"{pod} Running")
    stop = threading.Event()

    def churn() -> None:   # another client keeps changing the pod: each change a new resourceVersion
        i = 0
        while not stop.is_set():
            i += 1
            try:
                run.core.patch_namespaced_pod(pod, run.ns, {"metadata": {"annotations": {"golden/churn": str(i)}}})
            except Exception:
                return
    threads = [threading.Thread(target=churn, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    run.patch({"stopped": True})
    wait_for(lambda: run.phase() == "Stopped", "demo Stopped", 90)
    stop.set()
    for t in threads:
        t.join(5)
    wait_for(lambda: run.pods() == [], "the pod gone", 90)
    run.delete_session()


# What each journal is for, read from its records: tests/unit/test_golden_journals.py asserts these too.
def _outcomes(recs: list[dict[str, Any]], kind: str, type_: str) -> list[dict[str, Any]]:
    effects = {r["effect"]["id"]: r["effect"] for r in recs if r["rec"] == "effect"}
    return [r for r in recs if r["rec"] == "outcome" and effects.get(r.get("effect_id"), {}).get("kind") == kind
            and effects[r["effect_id"]].get("type") == type_]


def _pod_creates(recs: list[dict[str, Any]]) -> list[str]:
    return [r["effect"]["name"] for r in recs if r["rec"] == "effect"
            and r["effect"].get("kind") == "Pod" and r["effect"].get("type") == "create"]


def _statuses(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every status kfold wrote (a status subresource merge patch)."""
    out = []
    for r in recs:
        eff = r.get("effect") or {}
        patch = eff.get("patch") if eff.get("type") == "patch" else None
        status = patch.get("status") if isinstance(patch, dict) else None
        if isinstance(status, dict):
            out.append(status)
    return out


def _status_reasons(recs: list[dict[str, Any]]) -> set[str]:
    """The reasons of every status kfold wrote: ``status.reason`` and its conditions'."""
    return {x for s in _statuses(recs) for x in [s.get("reason")] + [c.get("reason") for c in s.get("conditions") or []] if x}


def _ports_routed(recs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(status, reason) of every PortsRouted condition kfold wrote."""
    return {(c.get("status"), c.get("reason")) for s in _statuses(recs) for c in s.get("conditions") or []
            if c.get("type") == "PortsRouted"}


def _converged_without_writes(recs: list[dict[str, Any]]) -> str:
    """A fresh journal over a Ready Session: it adopts the running pod (no create) and deletes
    nothing before the Session's own deletion is observed."""
    if _pod_creates(recs):
        return f"pod creates {_pod_creates(recs)} on the fresh journal"
    if not any(r["rec"] == "observed" and r.get("kind") == "Pod" for r in recs):
        return "the running pod was never observed"
    for r in recs:
        obj = r.get("obj") or {}
        if r["rec"] == "observed" and r.get("kind") == "Session" and (obj.get("metadata") or {}).get("deletionTimestamp"):
            return ""
        if r["rec"] == "effect" and r["effect"].get("type") == "delete":
            return f"seq {r['seq']}: a delete of {r['effect'].get('kind')} {r['effect'].get('name')} before the Session's deletion"
    return "the Session's deletion was never observed"


FACTS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "pod_deleted": lambda recs: "" if "PodGone" in _status_reasons(recs) and _pod_creates(recs) == ["demo-g1"] else
    f"status reasons {sorted(_status_reasons(recs))}, pod creates {_pod_creates(recs)}",
    "name_taken": lambda recs: "" if {"NameTaken", "InvalidSpec"} <= _status_reasons(recs)
    and ("False", "NameTaken") in _ports_routed(recs) and ("True", "AllRouted") not in _ports_routed(recs) else
    f"status reasons {sorted(_status_reasons(recs))}, PortsRouted {sorted(_ports_routed(recs))}",
    "clone_failed": lambda recs: "" if "CloneFailed" in _status_reasons(recs) else
    f"status reasons {sorted(_status_reasons(recs))}",
    "lost_journal": lambda recs: _converged_without_writes(recs),
    "fenced_409": lambda recs: "" if any(r.get("status_reason") == "Conflict"
                                         for r in _outcomes(recs, "Pod", "delete")) else "no pod delete answered 409",
}

REAL = {f.__name__: f for f in (session, pod_deleted, name_taken, clone_failed, lost_journal, fenced_409)}
SIM_SEEDS = (3, 7, 11)
TRIES = {"fenced_409": 6}   # the race it records is not certain on every try


def output_of(name: str) -> Path:
    return DATA / ("golden_session.jsonl" if name == "session" else f"golden_{name}.jsonl")


def check_and_write(name: str, journal: Path, work: Path) -> str:
    """Export ``journal``, check it, and write it to tests/data; '' or why it was not written."""
    tmp_out = work / f"{name}.jsonl"
    # unsealed: plain records from seq 1, which the tests edit line by line (tests/golden_facts.py)
    subprocess.run(KFOLD + ["export", str(journal), "-o", str(tmp_out), "--unsealed"], cwd=REPO, check=True)
    text = tmp_out.read_text()
    for needle in (SENTINEL, base64.b64encode(SENTINEL.encode()).decode()):
        if needle in text:
            raise SystemExit(f"record_golden: the secret value leaked into the export ({needle!r}); not written")
    check = subprocess.run(KFOLD + ["replay", str(tmp_out), "--check"], cwd=REPO, capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"record_golden: replay --check failed:\n{check.stdout}{check.stderr}")
    fact = FACTS.get(name)
    missing = fact([json.loads(line) for line in text.splitlines()]) if fact else ""
    if missing:
        return missing
    shutil.copyfile(tmp_out, output_of(name))
    say(f"{name}: {len(text.splitlines())} records -> {output_of(name)}")
    return ""


def record_real(name: str, keep: bool) -> None:
    from kubernetes import client, config, utils
    from kfold.daemon.manifests import crds
    from tests.e2e.controlplane import ensure_controlplane

    cp = ensure_controlplane(build=False)
    cfg = client.Configuration()
    config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    for doc in crds():
        try:
            utils.create_from_dict(client.ApiClient(cfg), doc)
        except utils.FailToCreateError as exc:
            if not all(getattr(e, "status", 0) == 409 for e in exc.api_exceptions):
                raise
    time.sleep(1.0)
    for attempt in range(1, TRIES.get(name, 1) + 1):
        run = Run(cp, keep)
        try:
            REAL[name](run)
        finally:
            run.close()
        missing = check_and_write(name, run.journal, run.work)
        if not keep:
            shutil.rmtree(run.work, ignore_errors=True)
        if not missing:
            return
        say(f"{name}: try {attempt}: the journal does not hold what it is for ({missing})")
    raise SystemExit(f"record_golden: {name}: not recorded")


def record_sim(seed: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="kfold-golden-sim-"))
    try:
        subprocess.run(KFOLD + ["sim", "--seed", str(seed), "--journal", "--out", str(work)], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        missing = check_and_write(f"sim_{seed}", work / f"seed-{seed}.sqlite", work)
        if missing:
            raise SystemExit(f"record_golden: sim_{seed}: {missing}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    names = list(REAL) + [f"sim_{s}" for s in SIM_SEEDS]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help=f"which to record (default: all): {', '.join(names)}")
    ap.add_argument("--list", action="store_true", help="list the scenarios and where each is written")
    ap.add_argument("--keep", action="store_true", help="keep the work directories and the namespaces")
    args = ap.parse_args(argv)
    if args.list:
        for n in names:
            print(f"{n:14} {output_of(n).relative_to(REPO)}")
        return 0
    unknown = sorted(set(args.scenarios) - set(names))
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(names)}")
    DATA.mkdir(parents=True, exist_ok=True)
    for name in args.scenarios or names:
        if name.startswith("sim_"):
            record_sim(int(name[4:]))
        else:
            record_real(name, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
