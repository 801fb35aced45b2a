#!/usr/bin/env python3
"""Make an upgrade fixture: a journal written by an older kfold, cut by its own retention.

    python scripts/make_upgrade_fixture.py [--commit ae4b05a] [--checkout DIR] [-o tests/data/upgrade/ae4b05a.sqlite]

The older kfold runs as a real process (``kfold run`` of a checkout of ``--commit``, with that
checkout's own venv) against the local control plane (scripts/controlplane.sh start; KFOLD_CACHE and
the port variables as for the e2e tests). Without ``--checkout`` a detached worktree of ``--commit``
is added beside a temporary directory and set up (scripts/setup.sh, Python only), then removed.

Scenario, in a fresh namespace, with a repository bound by the config, a workspace class, no
periodic snapshot and 2 snapshots kept (``journal.retention.keep_snapshots``); three lives of the
daemon, each ended by SIGTERM (exit 0), which writes a snapshot:
  1. Sessions alpha (an env Secret reference and a repository: Provisioning, as no node here syncs
     it), beta, gamma -> Ready;
  2. beta suspended -> Suspended; gamma stopped -> Stopped;
  3. beta resumed -> Ready (pod generation 2); delta created -> Ready.
The third snapshot's retention cut removes every record up to the second: the journal keeps the
second snapshot, the third life's records and the third snapshot: a journal whose head is gone. The file is checked with the older kfold itself
(``replay --check`` passes, history begins after seq 1, the snapshots hold entries of the pod,
repo and session machines) and copied to ``-o``; tests/unit/test_upgrade.py boots it on the
current code. The copy is the file as kfold left it, less the free pages its cut left (``VACUUM
INTO``: the same rows, byte for byte). Re-make it only to move the fixture to another commit (add a new file, keep the old).
"""
from __future__ import annotations

import argparse
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.record_golden import free_port, wait_for  # noqa: E402

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
BOUND = "https://git.example.test/team/tools.git"
WEB = {"name": "web", "ports": [{"port": 8080, "protocol": "TCP"}]}
SESSIONS = {
    "alpha": {"env": [{"name": "TOKEN", "secretRef": {"name": "creds", "key": "token"}}],
              "repositories": [{"url": "https://git.example.test/team/alpha.git"}]},
    "beta": {}, "gamma": {}, "delta": {},
}


def checkout(commit: str, work: Path) -> Path:
    """A detached worktree of ``commit`` with its own venv (Python only)."""
    tree = work / f"kfold-{commit}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["bash", "scripts/setup.sh"], cwd=tree, check=True,
                   env={**_env(), "KFOLD_SKIP_CONTROLPLANE": "1", "KFOLD_SKIP_PROMTOOL": "1"})
    return tree


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


def old_kfold(tree: Path, *argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(tree / ".venv" / "bin" / "python"), "-m", "kfold", *argv], cwd=tree, **kw)


def scenario(tree: Path, journal: Path, work: Path) -> None:
    from kubernetes import client, config, utils
    from kubernetes.client.exceptions import ApiException

    from kfold.daemon.manifests import crds
    from tests.e2e.controlplane import ensure_controlplane

    cp = ensure_controlplane(build=False)
    cfg = client.Configuration()
    config.load_kube_config(cp["kubeconfig"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for doc in crds():
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            if not all(getattr(e, "status", 0) == 409 for e in exc.api_exceptions):
                raise
    time.sleep(1.0)
    ns = f"upgrade-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    volumes = [f"ws-{ns}-{name}" for name in SESSIONS]
    for pv in volumes:   # no provisioner runs here: one volume of the workspace class per Session
        core.create_persistent_volume({"metadata": {"name": pv}, "spec": {
            "storageClassName": f"ws-{ns}", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/tmp/kfold-{pv}"}}})
    core.create_namespaced_secret(ns, {"metadata": {"name": "creds"}, "stringData": {"token": "t"}})
    port = free_port()
    (work / "config.yaml").write_text(yaml.safe_dump({
        "cluster": {"name": "local", "kubeconfig": cp["kubeconfig"]},
        "namespaces": [ns], "base_domain": "sessions.test",
        "repos": {"bindings": [{"url": BOUND}]},
        "workspace": {"storage_class": f"ws-{ns}", "size": "1Gi"},
        "journal": {"path": str(journal), "snapshot_every": 1_000_000,
                    "retention": {"keep_snapshots": 2}},
        "log": {"format": "plain", "level": "info"},
        "http": {"listen": f"127.0.0.1:{port}"},
    }))
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(work / "kfold.log", "ab")
        proc = subprocess.Popen([str(tree / ".venv" / "bin" / "python"), "-m", "kfold", "run",
                                 "--config", str(work / "config.yaml")], cwd=tree, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        procs.append(proc)

        def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"kfold run exited {proc.returncode}; see {work / 'kfold.log'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    return r.status == 200
            except Exception:
                return False
        wait_for(ready, "kfold run /readyz")
        return proc

    def stop(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            raise SystemExit(f"kfold run exited {proc.returncode} on SIGTERM; see {work / 'kfold.log'}")

    def phase(name: str) -> str:
        s = co.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        return (s.get("status") or {}).get("phase", "")

    def create(name: str) -> None:
        co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session", "metadata": {"name": name, "namespace": ns},
            "spec": {"image": "registry.example/sandbox:1", "apps": [WEB], **SESSIONS[name]}})

    def spec(name: str, **fields) -> None:
        co.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"spec": fields})

    def reach(name: str, want: str) -> None:
        seen: list[str] = []
        try:
            wait_for(lambda: seen.append(phase(name)) or seen[-1] == want, f"Session {name} {want}", timeout=120)
        except SystemExit:
            raise SystemExit(f"make_upgrade_fixture: Session {name} is {seen[-1:]}, not {want}; "
                             f"see {work / 'kfold.log'}") from None
        print(f"make_upgrade_fixture: {name} {want}", file=sys.stderr)

    try:
        life = start()   # the two lives whose records retention cuts: only the second's snapshot stays
        for name in ("alpha", "beta", "gamma"):
            create(name)
        reach("alpha", "Provisioning")   # its repository waits for a node's cache, which no node here keeps
        for name in ("beta", "gamma"):
            reach(name, "Ready")
        time.sleep(1.0)  # the last watch events land in the journal
        stop(life)
        life = start()
        spec("beta", suspended=True)
        spec("gamma", stopped=True)
        reach("beta", "Suspended")
        reach("gamma", "Stopped")
        time.sleep(1.0)  # the last watch events land in the journal
        stop(life)
        life = start()   # the kept tail: a restart, a resume and a new Session
        spec("beta", suspended=False)
        create("delta")
        reach("beta", "Ready")
        reach("delta", "Ready")
        time.sleep(1.0)
        stop(life)
    finally:
        for proc in procs:   # one left running by a failure above
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for name in SESSIONS:   # the finalizer is kfold's: without it the namespace would hang
            try:
                co.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {"metadata": {"finalizers": None}})
            except ApiException:
                pass
        try:
            core.delete_namespace(ns)
        except ApiException:
            pass
        for pv in volumes:
            try:
                core.delete_persistent_volume(pv)
            except ApiException:
                pass


def check(tree: Path, journal: Path) -> str:
    """The older kfold's own verdict on the file; a line of what it holds."""
    done = old_kfold(tree, "replay", str(journal), "--check", capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"make_upgrade_fixture: the older kfold's replay --check failed:\n{done.stdout}{done.stderr}")
    if not done.stdout.startswith("history begins at seq "):
        raise SystemExit(f"make_upgrade_fixture: retention did not cut the head:\n{done.stdout}")
    with sqlite3.connect(journal) as db:
        snaps = db.execute("SELECT seq, data FROM snapshots ORDER BY seq").fetchall()
        first = db.execute("SELECT min(seq), max(seq) FROM journal").fetchone()
    tables = orjson.loads(snaps[0][1])["tables"]
    missing = {"pod", "repo", "session"} - {m for m, t in tables.items() if t}
    if missing:
        raise SystemExit(f"make_upgrade_fixture: the oldest kept snapshot has no entries of {sorted(missing)}")
    return (f"records {first[0]}..{first[1]}, snapshots at {[s for s, _ in snaps]}, "
            + ", ".join(f"{m}: {len(t)} entries" for m, t in sorted(tables.items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="ae4b05a", help="the kfold commit that writes the journal")
    ap.add_argument("--checkout", type=Path, help="a checkout of --commit with its .venv (else one is made)")
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)
    out = args.output or REPO / "tests" / "data" / "upgrade" / f"{args.commit}.sqlite"
    work = Path(tempfile.mkdtemp(prefix="kfold-upgrade-"))
    tree = args.checkout or checkout(args.commit, work)
    try:
        journal = work / "journal.db"
        scenario(tree, journal, work)
        print(f"make_upgrade_fixture: {check(tree, journal)}", file=sys.stderr)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        with sqlite3.connect(journal) as db:   # the same rows, without the pages the cut freed
            db.execute("VACUUM INTO ?", (str(out),))
        print(f"make_upgrade_fixture: {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    finally:
        if args.checkout is None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
