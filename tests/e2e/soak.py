"""The soak (issue 51): one ``kfold run`` on the real control plane for the whole run, N Sessions
under seeded churn at a stated rate, faults at seeded times, oracles from the soak's own watches and
the spec alone. Shared by ``scripts/soak.py`` (the long runs) and ``tests/e2e/test_soak.py`` (the
few-minute sibling CI runs).

What it does, per run (``Soak.run``):

- **Churn**: every ``1/rate`` seconds one operation on a Session that has settled, chosen by the
  seed: everything ``tests/e2e/sequences.py``'s driver does (create, image change, app added or
  removed, ports added, removed or renumbered, env set, changed or cleared, suspend/resume,
  stop/un-stop, a no-op label edit, delete, and create again under the same name), plus a spec the
  apiserver refuses at admission (a resource limit that is no quantity: 422, nothing changes), a
  spec only kfold refuses (an unregistered ``spec.cluster``: Failed naming the field, no pod; the
  next operation puts the last valid spec back) and a foreign object under a taken name (a Service
  ``<session>`` that is not kfold's made before the Session: Failed ``NameTaken``, the Service
  untouched; then the Session is deleted and the soak deletes its Service).
- **Oracles**, continuously from the soak's own watches of Pods, Services, Ingresses, Secrets and
  Sessions: never two live pods (no deletionTimestamp) of one Session at any moment; nothing that is
  not kfold's (no ``app.kubernetes.io/managed-by=kfold``) is deleted unless the soak deleted it
  itself; every operation settles to the state its spec asks within ``bound_s`` (the sequence
  oracle's ``settled`` and ``check``; a fault's downtime is added to the bound of the operations it
  overlaps); the Session Pending, Provisioning or Stopping past the bound is a failure. At the end:
  every Session deleted, nothing kfold made left, the foreign objects all there, ``kfold replay
  --check`` clean on the journal.
- **Samples** every ``sample_s`` of ``/metrics``: the size gauges (docs/metrics.md "Sizes"), CPU
  seconds, requests sent, the histograms of time to Ready and event -> effect issued.
- **Faults** (``faults``): ``kill9`` (SIGKILL, restart on the same journal), ``term`` (SIGTERM,
  restart), ``lost`` (SIGKILL, the journal moved away, restart on a fresh one), ``apiserver`` and ``etcd`` (``scripts/controlplane.sh restart``), ``compact`` (etcd
  compacted; the watch cache is off, so watches meet 410 Gone), each at a seeded time, round robin.

``summarize`` turns the samples into the issue's targets (see its docstring).
"""
from __future__ import annotations

import copy
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.sequences import GROUP, MANAGED, PLURAL, SESSION, VERSION, Driver, Model, first_spec

REPO = Path(__file__).resolve().parents[2]
FOREIGN = {"app": "billing", "soak.kfold.dev/foreign": "true"}
BAD_QUANTITY = {"limits": {"cpu": "lots"}}
KINDS = ("Pod", "Service", "Ingress", "Secret", "Session")
FAULTS = ("kill9", "term", "lost", "apiserver", "etcd", "compact")


def transient(exc: BaseException) -> bool:
    """The apiserver not answering (yet) after a fault: a 5xx or 429, a connection refused or reset."""
    import urllib3
    if isinstance(exc, ApiException):
        return exc.status is not None and (exc.status >= 500 or exc.status == 429)
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))
# The soak's own operations beside the sequence driver's (weights out of the driver's 24).
EXTRA = {"admission": 1, "kfold_refuses": 1, "foreign": 1}


# -- watches: the soak's own view, and the continuous oracles -----------------------------------

class Watches:
    """A watch (list, then watch from its resourceVersion, relist on 410) per kind in ``ns``, each
    in a thread, into a cache by name. Oracles run on every event: ``violations`` collects them."""

    def __init__(self, admin: Any, ns: str):
        self.ns = ns
        self.core, self.net, self.co = client.CoreV1Api(admin), client.NetworkingV1Api(admin), client.CustomObjectsApi(admin)
        self.cache: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        self.lock = threading.Lock()
        self.violations: list[str] = []
        self.expected_deletes: set[tuple[str, str]] = set()   # (kind, uid) the soak deletes itself
        self.relists: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.events = 0
        self.max_live: dict[str, int] = {}
        self._stop = threading.Event()
        self._synced = {k: threading.Event() for k in KINDS}
        self._threads = [threading.Thread(target=self._run, args=(k,), name=f"watch-{k}", daemon=True) for k in KINDS]

    def start(self) -> "Watches":
        for t in self._threads:
            t.start()
        for k, e in self._synced.items():
            if not e.wait(60):
                raise AssertionError(f"soak: the {k} watch did not list within 60 s")
        return self

    def stop(self) -> None:
        self._stop.set()

    def _list_fn(self, kind: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        if kind == "Session":
            return self.co.list_namespaced_custom_object, (GROUP, VERSION, self.ns, PLURAL)
        fn = {"Pod": self.core.list_namespaced_pod, "Service": self.core.list_namespaced_service,
              "Secret": self.core.list_namespaced_secret, "Ingress": self.net.list_namespaced_ingress}[kind]
        return fn, (self.ns,)

    def _run(self, kind: str) -> None:
        (fn, args), rv = self._list_fn(kind), None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist(kind, fn(*args))
                w = watch.Watch()
                for ev in w.stream(fn, *args, resource_version=rv, timeout_seconds=50, allow_watch_bookmarks=True):
                    if self._stop.is_set():
                        w.stop()
                        return
                    obj = ev["object"]
                    rv = _rv(obj) or rv
                    if ev["type"] != "BOOKMARK":
                        self._event(kind, ev["type"], obj)
            except ApiException as exc:
                if exc.status == 410:   # compacted past rv: list again, judging what went in the gap
                    rv = None
                else:
                    time.sleep(1.0)   # the apiserver restarting, or refusing: watch again from rv
            except Exception:   # a connection reset mid-stream (an apiserver restart)
                time.sleep(1.0)

    def _relist(self, kind: str, listed: Any) -> str:
        items = listed["items"] if isinstance(listed, dict) else listed.items
        rv = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
        now = {_name(o): o for o in items}
        with self.lock:
            if self._synced[kind].is_set():
                self.relists[kind] += 1
                for name, old in self.cache[kind].items():   # gone across the gap: judged as a delete
                    if name not in now or _uid(now[name]) != _uid(old):
                        self._judge_delete(kind, old)
            self.cache[kind] = now
            if kind == "Pod":
                for s in {_labels(o).get(SESSION, "") for o in now.values()}:
                    self._judge_live(s)
        self._synced[kind].set()
        return rv

    def _event(self, kind: str, typ: str, obj: Any) -> None:
        with self.lock:
            self.events += 1
            name = _name(obj)
            if typ == "DELETED":
                self.cache[kind].pop(name, None)
                self._judge_delete(kind, obj)
            else:
                self.cache[kind][name] = obj
            if kind == "Pod":
                self._judge_live(_labels(obj).get(SESSION, ""))

    def _judge_live(self, session: str) -> None:
        if not session:
            return
        live = sorted(_name(p) for p in self.cache["Pod"].values()
                      if _labels(p).get(SESSION) == session and not _deleting(p))
        self.max_live[session] = max(self.max_live.get(session, 0), len(live))
        if len(live) > 1:
            self.violations.append(f"{_now()} two live pods of Session {session}: {live}")

    def _judge_delete(self, kind: str, obj: Any) -> None:
        if _labels(obj).get(MANAGED) == "kfold" or (kind, _uid(obj)) in self.expected_deletes:
            return
        if kind in ("Session",):
            return   # the soak deletes Sessions: the user's own
        if kind == "Secret" and str(getattr(obj, "type", "")).startswith("kubernetes.io/service-account"):
            return
        self.violations.append(f"{_now()} {kind} {_name(obj)} (uid {_uid(obj)}) that is not kfold's was deleted")

    # -- reads for the driver ------------------------------------------------------------------
    def get(self, kind: str, name: str) -> Any:
        with self.lock:
            return self.cache[kind].get(name)

    def labelled(self, session: str) -> dict[str, list[Any]]:
        with self.lock:
            return {k: [o for o in self.cache[k].values() if _labels(o).get(SESSION) == session]
                    for k in ("Pod", "Service", "Ingress", "Secret")}


def _md(o: Any) -> Any:
    return o["metadata"] if isinstance(o, dict) else o.metadata


def _name(o: Any) -> str:
    md = _md(o)
    return md["name"] if isinstance(md, dict) else md.name


def _uid(o: Any) -> str:
    md = _md(o)
    return md.get("uid", "") if isinstance(md, dict) else md.uid


def _rv(o: Any) -> str | None:
    md = _md(o)
    return md.get("resourceVersion") if isinstance(md, dict) else md.resource_version


def _labels(o: Any) -> dict[str, str]:
    md = _md(o)
    return (md.get("labels") if isinstance(md, dict) else md.labels) or {}


def _deleting(o: Any) -> bool:
    md = _md(o)
    return bool(md.get("deletionTimestamp") if isinstance(md, dict) else md.deletion_timestamp)


def _now() -> str:
    return time.strftime("%H:%M:%S")


class CachedDriver(Driver):
    """The sequence driver reading the soak's watches instead of the apiserver; ``direct`` reads the
    apiserver (to confirm a difference before calling it one: the caches lag by an event or two)."""

    def __init__(self, admin: Any, ns: str, watches: Watches):
        super().__init__(admin, ns)
        self.watches, self.direct = watches, False

    def session(self, name: str) -> dict[str, Any] | None:
        return super().session(name) if self.direct else copy.deepcopy(self.watches.get("Session", name))

    def labelled(self, name: str) -> dict[str, list[Any]]:
        return super().labelled(name) if self.direct else self.watches.labelled(name)

    def _replace_spec(self, m: Model, spec: dict[str, Any] | None = None) -> None:
        was, self.direct = self.direct, True   # a PUT needs the newest resourceVersion
        try:
            super()._replace_spec(m, spec)
        finally:
            self.direct = was


# -- the churn --------------------------------------------------------------------------------

@dataclass
class Op:
    model: Model
    what: str
    at: float                      # monotonic, when it was sent
    deadline: float
    needs_ready: bool = False
    foreign: str = ""              # the foreign Service's uid this op's Session must fail on
    rv: int = 0                    # the Session's resourceVersion read just after the write


@dataclass
class Soak:
    admin: Any
    ns: str
    start_daemon: Callable[[], Any]        # starts ``kfold run`` (a tests.e2e.conftest.Daemon), returns it
    seed: int
    sessions: int = 50
    rate: float = 1.0                      # operations per second
    duration_s: float = 300.0
    sample_s: float = 10.0
    bound_s: float = 90.0
    faults: tuple[str, ...] = ()
    fault_every_s: float = 600.0
    fault_plan: list[tuple[float, str]] | None = None   # (seconds into the run, fault): instead of drawn times
    out: Path | None = None
    log: Callable[[str], None] = print
    samples: list[dict[str, Any]] = field(default_factory=list)
    settles: list[tuple[float, float, str]] = field(default_factory=list)   # (t, seconds, what)
    fault_log: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    ops_done: int = 0
    skipped: int = 0
    refused: int = 0
    lost: list[Path] = field(default_factory=list)   # journals a ``lost`` fault set aside

    def run(self) -> dict[str, Any]:
        rng = random.Random(self.seed)
        self.watches = Watches(self.admin, self.ns).start()
        self.driver = CachedDriver(self.admin, self.ns, self.watches)
        self.daemon = self.start_daemon()
        self.t0 = time.monotonic()
        self.models = [Model(name=f"s{i:04d}") for i in range(self.sessions)]
        self.foreign: dict[str, str] = {}     # session name -> uid of the foreign Service under its name
        busy: dict[str, Op] = {}
        plan = self._fault_plan(rng)
        sampler = threading.Thread(target=self._sample_loop, name="sampler", daemon=True)
        self._sampling = True
        sampler.start()
        next_op = self.t0
        try:
            while (now := time.monotonic()) - self.t0 < self.duration_s:
                if plan and now - self.t0 >= plan[0][0]:
                    self._fault(plan.pop(0)[1], busy)
                    continue
                self._settle(busy)
                if now >= next_op:
                    next_op += 1.0 / self.rate
                    idle = [m for m in self.models if m.name not in busy]
                    if not idle:
                        self.skipped += 1
                    else:
                        m = rng.choice(idle)
                        saved = copy.deepcopy(m)
                        try:
                            op = self._operate(rng, m)
                            if op is not None:
                                op.rv = self._written_rv(m.name)
                        except Exception as exc:   # the apiserver not answering yet after a fault: try later
                            if not transient(exc):
                                raise
                            m.__dict__.update(saved.__dict__)
                            self.refused += 1
                            self.log(f"soak: {m.name}: the apiserver refused an operation: {exc!r:.200}")
                            op = None
                        if op is not None:
                            busy[m.name] = op
                            self.ops_done += 1
                time.sleep(min(0.2, max(0.0, next_op - time.monotonic())))
                if len(self.failures) + len(self.watches.violations) > 20:
                    break
            self._drain(busy)
            self._teardown()
        finally:
            self._sampling = False
            sampler.join(timeout=self.sample_s + 5)
            self.watches.stop()
            if self.daemon.proc and self.daemon.proc.poll() is None:
                code = self.daemon.stop()
                if code != 0:
                    self.failures.append(f"kfold run exited {code} on SIGTERM at the end")
        self._replay_check()
        return self.result()

    # -- operations ---------------------------------------------------------------------------
    def _operate(self, rng: random.Random, m: Model) -> Op | None:
        now = time.monotonic()
        if m.name in self.foreign:   # the NameTaken Session: delete it, then the soak's Service
            if m.spec is not None:
                self.driver.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, m.name)
                m.spec = None
                return Op(m, self.driver._did(m, "delete the NameTaken Session"), now, now + self.bound_s)
            uid = self.foreign.pop(m.name)
            self.watches.expected_deletes.add(("Service", uid))
            self.driver.core.delete_namespaced_service(m.name, self.ns)
            self.driver._did(m, "the soak deletes its foreign Service")
            return None
        extra = [k for k, w in EXTRA.items() for _ in range(w)]
        kind = rng.choice(extra + [""] * 24)
        if kind == "foreign" and m.spec is None:
            svc = self.driver.core.create_namespaced_service(self.ns, {
                "metadata": {"name": m.name, "labels": FOREIGN},
                "spec": {"selector": FOREIGN, "ports": [{"port": 80, "targetPort": 8080}]}})
            self.foreign[m.name] = svc.metadata.uid
            m.spec = first_spec(rng)
            self.driver.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
                "metadata": {"name": m.name, "namespace": self.ns}, "spec": m.spec})
            return Op(m, self.driver._did(m, "create under a name a foreign Service holds"), now, now + self.bound_s,
                      foreign=svc.metadata.uid)
        if kind == "admission" and m.spec is not None and not m.invalid:
            bad = copy.deepcopy(m.spec)
            bad["resources"] = BAD_QUANTITY
            try:
                self.driver._replace_spec(m, bad)
            except ApiException as exc:
                if exc.status == 422:
                    m.recreate = False
                    return Op(m, self.driver._did(m, "a bad quantity, refused at admission"), now, now + self.bound_s)
                raise
            self.failures.append(f"{m.name}: the apiserver admitted resources {BAD_QUANTITY}")
            return None
        if kind == "kfold_refuses" and m.running:
            bad = copy.deepcopy(m.spec)
            bad["cluster"] = "mars"
            self.driver._replace_spec(m, bad)
            m.valid_spec, m.invalid, m.recreate = m.spec, True, False
            return Op(m, self.driver._did(m, "spec.cluster mars (only kfold refuses it)"), now, now + self.bound_s)
        what = self.driver.step(rng, m)
        if what == "nothing applicable":
            return None
        return Op(m, what, now, now + self.bound_s, needs_ready=m.running and m.recreate)

    def _settle(self, busy: dict[str, Op]) -> None:
        for name, op in list(busy.items()):
            try:
                self._settle_one(busy, name, op)
            except Exception as exc:   # a direct read refused just after a fault: judged again next round
                if not transient(exc):
                    raise

    def _settle_one(self, busy: dict[str, Op], name: str, op: Op) -> None:
        now = time.monotonic()
        waiting = self._awaited(op)
        if not waiting:
            problems = self._checked(op)
            if problems:
                self.failures.append(f"{_now()} {name} after {op.what!r}: " + "; ".join(problems)
                                     + f" (history: {' | '.join(op.model.history[-6:])})")
            self.settles.append((op.at - self.t0, now - op.at, op.what))
            if op.model.spec is None:   # deleted: the next create under its name starts from nothing
                op.model.pod_uid, op.model.pod_gen, op.model.service_uid, op.model.pod_spec = "", 0, "", None
            del busy[name]
        elif now > op.deadline:
            self.driver.direct = True
            try:
                waiting = self._awaited(op)
            finally:
                self.driver.direct = False
            if waiting:
                self.failures.append(f"{_now()} {name} after {op.what!r}: not settled within {self.bound_s:.0f} s "
                                     f"(+ faults): {waiting} (history: {' | '.join(op.model.history[-6:])})")
                del busy[name]

    def _written_rv(self, name: str) -> int:
        """The Session's resourceVersion now (0: gone): a cached copy older than it predates the
        operation, and says nothing about whether it settled (a watch reconnecting after an
        apiserver restart is seconds behind)."""
        was, self.driver.direct = self.driver.direct, True
        try:
            obj = self.driver.session(name)
        finally:
            self.driver.direct = was
        return int(_rv(obj) or 0) if obj is not None else 0

    def _awaited(self, op: Op) -> str:
        if not self.driver.direct and op.rv:
            cached = self.watches.get("Session", op.model.name)
            if cached is not None and int(_rv(cached) or 0) < op.rv:
                return "the soak's Session watch is behind the operation"
        if op.foreign:
            obj = self.driver.session(op.model.name)
            st = (obj or {}).get("status") or {}
            ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})
            if st.get("phase") != "Failed" or ready.get("reason") != "NameTaken":
                return f"phase {st.get('phase')} reason {ready.get('reason')}, expected Failed NameTaken"
            live = [_name(p) for p in self.driver.labelled(op.model.name)["Pod"] if not _deleting(p)]
            return f"pods of a NameTaken Session: {live}" if live else ""
        return self.driver.settled(op.model)

    def _checked(self, op: Op) -> list[str]:
        """The sequence oracle's check, from the caches; a difference is read again from the
        apiserver (a cache an event behind is not a failure)."""
        if op.foreign:
            svc = self.watches.get("Service", op.model.name)
            pods = self.watches.labelled(op.model.name)["Pod"]
            problems = [] if svc is not None and _uid(svc) == op.foreign and _labels(svc) == FOREIGN else [
                f"the foreign Service {op.model.name} changed: {svc and (_uid(svc), _labels(svc))}"]
            return problems + [f"pod {_name(p)} of a NameTaken Session" for p in pods if not _deleting(p)]
        trial = copy.deepcopy(op.model)
        problems = self.driver.check(trial)
        if problems:
            self.driver.direct = True
            try:
                trial = copy.deepcopy(op.model)
                problems = self.driver.check(trial)
            finally:
                self.driver.direct = False
        op.model.__dict__.update(trial.__dict__)
        return problems

    def _drain(self, busy: dict[str, Op]) -> None:
        deadline = time.monotonic() + self.bound_s + 30
        while busy and time.monotonic() < deadline:
            self._settle(busy)
            time.sleep(0.5)

    def _teardown(self) -> None:
        """Every Session deleted; then nothing kfold made may be left, and every foreign object the
        soak made is still there (then the soak deletes them)."""
        for m in self.models:
            if self.watches.get("Session", m.name) is not None:
                try:
                    self.driver.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, m.name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
        deadline = time.monotonic() + self.bound_s + 60
        left: list[str] = []
        while time.monotonic() < deadline:
            left = self._leftovers()
            if not left:
                break
            time.sleep(1.0)
        if left:
            self.failures.append(f"left after every Session was deleted: {left[:20]}")
        for name, uid in self.foreign.items():
            try:
                svc = self.driver.core.read_namespaced_service(name, self.ns)
                if svc.metadata.uid != uid:
                    self.failures.append(f"the foreign Service {name} was replaced")
                self.watches.expected_deletes.add(("Service", uid))
                self.driver.core.delete_namespaced_service(name, self.ns)
            except ApiException as exc:
                self.failures.append(f"the foreign Service {name}: {exc.status}")

    def _leftovers(self) -> list[str]:
        core, net, co = self.driver.core, self.driver.net, self.driver.co
        sel = f"{MANAGED}=kfold"
        found = [f"Session/{s['metadata']['name']}" for s in co.list_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL)["items"]]
        found += [f"Pod/{o.metadata.name}" for o in core.list_namespaced_pod(self.ns, label_selector=sel).items]
        found += [f"Service/{o.metadata.name}" for o in core.list_namespaced_service(self.ns, label_selector=sel).items]
        found += [f"Ingress/{o.metadata.name}" for o in net.list_namespaced_ingress(self.ns, label_selector=sel).items]
        found += [f"Secret/{o.metadata.name}" for o in core.list_namespaced_secret(self.ns, label_selector=sel).items]
        return found

    def _replay_check(self) -> None:
        """``kfold replay --check`` of the journal, and of every one a ``lost`` fault set aside."""
        for path in self.lost + [Path(self.daemon.journal)]:
            res = subprocess.run([sys.executable, "-m", "kfold", "replay", str(path), "--check"],
                                 cwd=REPO, capture_output=True, text=True, timeout=600)
            self.replay = (res.returncode, (res.stdout + res.stderr).strip().splitlines()[-3:])
            if res.returncode != 0 or "divergence" in res.stdout + res.stderr:
                self.failures.append(f"kfold replay --check {path.name}: exit {res.returncode}: "
                                     f"{res.stdout[-800:]}{res.stderr[-800:]}")

    # -- faults -------------------------------------------------------------------------------
    def _set_aside(self, i: int) -> Path:
        """Move the journal (its file, -wal and -shm) away; ``_replay_check`` checks it too."""
        j = Path(self.daemon.journal)
        kept = j.with_name(f"lost-{i}-{j.name}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{j}{suffix}")
            if src.exists():
                src.rename(Path(f"{kept}{suffix}"))
        return kept

    def _fault_plan(self, rng: random.Random) -> list[tuple[float, str]]:
        """A fault every ``fault_every_s`` (seeded jitter of +-25%), kinds in turn, none in the
        first or last 10% of the run."""
        if self.fault_plan is not None:
            return sorted(self.fault_plan)
        plan, t, i = [], 0.0, 0
        while self.faults:
            t += self.fault_every_s * rng.uniform(0.75, 1.25)
            if t > self.duration_s * 0.9:
                break
            plan.append((max(t, self.duration_s * 0.1), self.faults[i % len(self.faults)]))
            i += 1
        return plan

    def _fault(self, kind: str, busy: dict[str, Op]) -> None:
        t = time.monotonic()
        self.log(f"soak: fault {kind} at {t - self.t0:.0f} s")
        if kind == "kill9":
            self.daemon.kill9()
            self.daemon.start()
        elif kind == "lost":   # SIGKILL, and the journal gone: kfold starts afresh on what the cluster holds
            self.daemon.kill9()
            self.lost.append(self._set_aside(len(self.lost)))
            self.daemon.start()
        elif kind == "term":
            code = self.daemon.stop()
            if code != 0:
                self.failures.append(f"kfold run exited {code} on SIGTERM")
            self.daemon.start()
        elif kind == "compact":
            subprocess.run(["bash", str(REPO / "scripts/controlplane.sh"), "compact"], check=True,
                           capture_output=True, timeout=60)
        else:
            component = {"apiserver": "kube-apiserver", "etcd": "etcd"}[kind]
            subprocess.run(["bash", str(REPO / "scripts/controlplane.sh"), "restart", component], check=True,
                           capture_output=True, timeout=180)
            self.daemon.wait_ready(timeout=120)
        took = time.monotonic() - t
        for op in busy.values():   # a fault's downtime is not the operation's
            op.deadline += took
        self.fault_log.append({"t": round(t - self.t0, 1), "kind": kind, "took_s": round(took, 2)})

    # -- samples ------------------------------------------------------------------------------
    def _sample_loop(self) -> None:
        while self._sampling:
            t = time.monotonic()
            try:
                row = sample(self.daemon.port)
            except Exception as exc:   # kfold restarting under a fault: no sample this time
                row = {"error": type(exc).__name__}
            row.update(t=round(t - self.t0, 2), ops=self.ops_done)
            self.samples.append(row)
            if self.out is not None:
                with open(self.out / "samples.jsonl", "a") as f:
                    f.write(json.dumps(row, sort_keys=True) + "\n")
            time.sleep(max(0.0, self.sample_s - (time.monotonic() - t)))

    def result(self) -> dict[str, Any]:
        return {"seed": self.seed, "sessions": self.sessions, "rate": self.rate, "duration_s": self.duration_s,
                "bound_s": self.bound_s, "faults": self.fault_log, "ops": self.ops_done, "skipped": self.skipped,
                "refused": self.refused,
                "watch_events": self.watches.events, "watch_relists": self.watches.relists,
                "violations": self.watches.violations, "failures": self.failures,
                "replay": getattr(self, "replay", None)}


GAUGES = {   # sample key -> (family, sample name, how to reduce its samples)
    "rss_bytes": ("process_resident_memory_bytes", None),
    "open_fds": ("process_open_fds", None),
    "asyncio_tasks": ("kfold_asyncio_tasks", None),
    "threads": ("kfold_threads", None),
    "state_objects": ("kfold_state_objects", None),
    "timers": ("kfold_timers", None),
    "effects_in_flight": ("kfold_effects_in_flight", None),
    "effects_waiting": ("kfold_effects_waiting", None),
    "effects_retrying": ("kfold_effects_retrying", None),
    "event_series": ("kfold_event_series", None),
    "watch_objects": ("kfold_watch_objects", None),
    "bookkeeping": ("kfold_bookkeeping_entries", None),
    "journal_bytes": ("kfold_journal_bytes", None),
    "journal_records": ("kfold_journal_records", None),
    "journal_snapshots": ("kfold_journal_snapshots", None),
    "cpu_seconds": ("process_cpu_seconds", "process_cpu_seconds_total"),
    "start_time": ("process_start_time_seconds", None),
    "requests": ("kfold_client_requests", "kfold_client_requests_total"),
}
HISTOGRAMS = {"ready": "kfold_session_time_to_ready_seconds", "event_to_issue": "kfold_event_to_effect_issued_seconds"}


def sample(port: int) -> dict[str, Any]:
    """One scrape of ``/metrics``, reduced: each gauge summed over its labels (and per label for the
    per-machine ones), each histogram's cumulative buckets summed over its labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        fams = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
    row: dict[str, Any] = {}
    for key, (fam, name) in GAUGES.items():
        f = fams.get(fam)
        if f is None:
            continue
        vals = [s for s in f.samples if s.name == (name or fam)]
        row[key] = sum(s.value for s in vals)
        if key in ("state_objects", "timers", "bookkeeping"):
            for s in vals:
                row[f"{key}.{next(iter(s.labels.values()))}"] = s.value
    for key, fam in HISTOGRAMS.items():
        f = fams.get(fam)
        buckets: dict[str, float] = {}
        for s in f.samples if f else ():
            if s.name.endswith("_bucket"):
                buckets[s.labels["le"]] = buckets.get(s.labels["le"], 0.0) + s.value
        row[key] = buckets
    return row


# -- the figures at the end ---------------------------------------------------------------------

def t_975(dof: int) -> float:
    """Student's t 97.5% quantile (Cornish-Fisher from the normal one; within 0.5% from 5 dof)."""
    z = 1.959964
    if dof <= 0:
        return math.inf
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def fit(ts: list[float], ys: list[float]) -> dict[str, float] | None:
    """Least squares ``y = a + b t``: slope b and its 95% interval, as % of the mean per hour."""
    n = len(ts)
    if n < 4:
        return None
    mt, my = sum(ts) / n, sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    if sxx == 0:
        return None
    b = sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / sxx
    a = my - b * mt
    resid = sum((y - a - b * t) ** 2 for t, y in zip(ts, ys))
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t_975(n - 2) * se
    scale = 3600 * 100 / my if my else 0.0
    return {"mean": my, "slope_per_h": b * 3600, "lo_pct_per_h": (b - half) * scale, "hi_pct_per_h": (b + half) * scale,
            "n": n}


def p99(before: dict[str, float], after: dict[str, float]) -> float | None:
    """The 99th percentile of the observations between two cumulative bucket readings (linear
    inside the bucket, as Prometheus' histogram_quantile); None without any."""
    les = sorted(after, key=lambda le: math.inf if le == "+Inf" else float(le))
    counts = [after[le] - before.get(le, 0.0) for le in les]
    total = counts[-1] if counts else 0
    if total <= 0:
        return None
    rank, prev_le, prev_c = 0.99 * total, 0.0, 0.0
    for le, c in zip(les, counts):
        up = math.inf if le == "+Inf" else float(le)
        if c >= rank:
            if up == math.inf:
                return prev_le
            return prev_le + (up - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 1.0)
        prev_le, prev_c = up, c
    return prev_le


FITTED = ("rss_bytes", "open_fds", "asyncio_tasks", "threads", "state_objects", "timers", "effects_retrying",
          "event_series", "watch_objects", "bookkeeping", "journal_bytes", "journal_records")


def lifetimes(samples: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The samples split per kfold process (its start time), errors dropped."""
    out: list[list[dict[str, Any]]] = []
    for s in samples:
        if "error" in s or "start_time" not in s:
            continue
        if not out or out[-1][-1]["start_time"] != s["start_time"]:
            out.append([])
        out[-1].append(s)
    return out


def summarize(samples: list[dict[str, Any]], warmup_s: float, window_s: float, keep_snapshots: int,
              snapshot_every: int, settles: list[tuple[float, float, str]] = (), growth_pct: float = 1.0,
              window_pct: float = 10.0, faults: list[float] = ()) -> dict[str, Any]:
    """The issue's targets. Growth: per kfold lifetime, the samples after ``warmup_s`` of it, each
    gauge's linear fit with its 95% interval, as % of its mean per hour: within +-``growth_pct``
    (a gauge whose mean is under 1 — e.g. retries at rest — is judged on its range instead: it
    passes when it never exceeds 10). Journal: every sample at most ``keep_snapshots`` + 1 snapshots
    and (``keep_snapshots`` + 1) x ``snapshot_every`` records. Windows of ``window_s`` from the end
    of the warm-up: CPU seconds and requests per operation, kfold's time-to-Ready p99 and event ->
    effect issued p99, and the soak's own operation -> settled p99, each within ``window_pct``% of
    the first window's (a window that a fault (its time in ``faults``) or a restart falls in is
    not compared)."""
    out: dict[str, Any] = {"growth": {}, "windows": [], "journal": {}, "ok": True, "misses": []}
    lives = lifetimes(samples)
    for i, life in enumerate(lives):
        t0 = life[0]["t"]
        warm = [s for s in life if s["t"] - t0 >= warmup_s]
        for key in FITTED:
            pts = [(s["t"], s[key]) for s in warm if key in s]
            f = fit([p[0] for p in pts], [p[1] for p in pts])
            if f is None:
                continue
            if f["mean"] < 1:
                f["ok"] = max(p[1] for p in pts) <= 10
            else:
                f["ok"] = -growth_pct <= f["lo_pct_per_h"] and f["hi_pct_per_h"] <= growth_pct
            out["growth"].setdefault(key, []).append({"life": i, **{k: round(v, 4) for k, v in f.items()}})
            if not f["ok"]:
                out["misses"].append(f"{key} (life {i}): {f['lo_pct_per_h']:+.2f}..{f['hi_pct_per_h']:+.2f} %/h")
    snaps = max((s.get("journal_snapshots", 0) for s in samples if "error" not in s), default=0)
    recs = max((s.get("journal_records", 0) for s in samples if "error" not in s), default=0)
    bound = (keep_snapshots + 1) * snapshot_every
    out["journal"] = {"max_snapshots": snaps, "max_records": recs, "records_bound": bound,
                      "max_bytes": max((s.get("journal_bytes", 0) for s in samples if "error" not in s), default=0),
                      "ok": snaps <= keep_snapshots + 1 and recs <= bound}
    if not out["journal"]["ok"]:
        out["misses"].append(f"journal: {snaps} snapshots, {recs} records (bound {keep_snapshots + 1}, {bound})")
    out["windows"] = windows(samples, warmup_s, window_s, settles, faults)
    first = next((w for w in out["windows"] if w["clean"]), None)
    for w in out["windows"]:
        w["ok"] = True
        if first is None or w is first or not w["clean"]:
            continue
        for key in ("cpu_s_per_op", "requests_per_op", "ready_p99_s", "event_to_issue_p99_s", "settle_p99_s"):
            a, b = first.get(key), w.get(key)
            if a and b is not None and abs(b - a) > a * window_pct / 100:
                w["ok"] = False
                out["misses"].append(f"window {w['from_s']:.0f} s: {key} {b:.4g} vs first {a:.4g}")
    out["ok"] = not out["misses"]
    return out


def windows(samples: list[dict[str, Any]], warmup_s: float, window_s: float,
            settles: list[tuple[float, float, str]], faults: list[float] = ()) -> list[dict[str, Any]]:
    good = [s for s in samples if "error" not in s and "start_time" in s]
    if not good:
        return []
    out, start = [], good[0]["t"] + warmup_s
    end = good[-1]["t"]
    while start + window_s <= end + 1e-6:
        inside = [s for s in good if start <= s["t"] <= start + window_s]
        if len(inside) >= 2:
            a, b = inside[0], inside[-1]
            clean = a["start_time"] == b["start_time"] and len({s["start_time"] for s in inside}) == 1 and \
                len(inside) >= int(window_s / max(1.0, (b["t"] - a["t"]) / max(1, len(inside) - 1))) - 1 and \
                not any(start - 30 <= f <= start + window_s for f in faults)
            ops = b["ops"] - a["ops"]
            w = {"from_s": round(start, 1), "to_s": round(start + window_s, 1), "ops": ops, "clean": clean}
            if ops > 0 and clean:
                w["cpu_s_per_op"] = round((b["cpu_seconds"] - a["cpu_seconds"]) / ops, 5)
                w["requests_per_op"] = round((b["requests"] - a["requests"]) / ops, 3)
            for key in HISTOGRAMS:
                q = p99(a[key], b[key]) if clean else None
                if q is not None:
                    w[f"{key}_p99_s"] = round(q, 4)
            took = sorted(d for t, d, _ in settles if start <= t < start + window_s)
            if took:
                w["settle_p99_s"] = round(took[min(len(took) - 1, int(0.99 * len(took)))], 3)
            out.append(w)
        start += window_s
    return out


def plot(samples: list[dict[str, Any]], summary: dict[str, Any], out: Path, title: str) -> None:
    """The gauges against time, and the per-window figures, as one SVG (matplotlib, reproducible)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "soak"
    good = [s for s in samples if "error" not in s and "start_time" in s]
    panels = [("rss_bytes", "RSS (MiB)", 1 / 2 ** 20), ("journal_bytes", "journal (MiB)", 1 / 2 ** 20),
              ("state_objects", "fold state records", 1), ("watch_objects", "watched objects", 1),
              ("event_series", "Event series", 1), ("asyncio_tasks", "asyncio tasks", 1),
              ("open_fds", "open fds", 1), ("timers", "timers", 1), ("bookkeeping", "daemon map entries", 1)]
    fig, axes = plt.subplots(4, 3, figsize=(13, 11))
    mins = [s["t"] / 60 for s in good]
    for ax, (key, label, scale) in zip(axes.flat, panels):
        ax.plot(mins, [s.get(key, 0) * scale for s in good], lw=1)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("minutes", fontsize=8)
        ax.tick_params(labelsize=8)
    w = [x for x in summary.get("windows", []) if x.get("clean")]
    xs = [x["from_s"] / 60 for x in w]
    for ax, keys, label in zip(list(axes.flat)[9:], (("cpu_s_per_op",), ("requests_per_op",),
                                                   ("ready_p99_s", "event_to_issue_p99_s", "settle_p99_s")),
                               ("CPU s per operation", "requests per operation", "p99 per window (s)")):
        for key in keys:
            ax.plot(xs, [x.get(key) for x in w], marker="o", lw=1, label=key.replace("_p99_s", ""))
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("window start (minutes)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_ylim(bottom=0)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
