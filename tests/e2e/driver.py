"""A small in-test driver: fold -> execute effects against the real apiserver -> fold outcomes.

It plays the daemon's part without the daemon (records kept in memory, no observers, no timers): every record
is stamped with the next ``seq`` and folded with ``engine.core.fold``; every non-``Log`` effect is
journaled as ``EffectIssued`` (folded too, so the state is what the daemon would have) and
performed by kfold's own ``Executor`` over a ``KubeTransport``; the ``Outcome`` draft it hands
back is folded in turn, until nothing is pending. Effects are performed one at a time, in the
order the fold emitted them.

``Probe`` is a test-only machine: command ``probe.tell`` {machine, key, message, args} delivers a
message to another machine (as the session machine would), and every message sent to ``probe``
is kept in its table, so a test can read what the pod or repo machine answered.

Every record folded is kept in ``records`` (so a test can dump them into a journal and run
``kfold replay --check`` on it), every effect in ``effects`` and every outcome in ``outcomes``;
``transport.requests`` holds every HTTP request the executor sent.
"""
from __future__ import annotations

from email.utils import parsedate_to_datetime
from typing import Any

from engine.core import Machines, State, fold, initial_state
from engine.effects.io.clock import ServerClock
from engine.effects.io.executor import Executor
from engine.effects.io.transport import KubeTransport, Response, Request, decode_body
from engine.effects.models import effect_to_dict
from engine.machines import all_machines
from engine.machines.base import Machine
from journal.records import Command, EffectIssued, ListedKey, Observed, Outcome, Record, Relist

PROBE = "probe"
MANAGED = {"app.kubernetes.io/managed-by": "kfold"}


class Probe(Machine):
    """Sends messages on command; records every message it receives (see module docstring)."""

    name = PROBE
    commands = frozenset({"probe.tell"})

    def on_command(self, ctx: Any, rec: Command) -> None:
        a = rec.args
        ctx.tell(a["machine"], a["key"], a["message"], reply_to=PROBE, reply_key=a.get("reply_key", "r"),
                 **(a.get("args") or {}))

    def on_message(self, ctx: Any, key: str, message: str, args: dict[str, Any]) -> None:
        got = ctx.get(key) or ()
        ctx.put(key, got + ((message, dict(args)),))


class RecordingTransport:
    """Wraps a transport; keeps every ``Request`` it was asked to send. ``rewrite`` (if set) maps
    each request before it is sent (e.g. to aim at an API group the apiserver does not serve)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.requests: list[Request] = []
        self.rewrite: Any = None

    async def call(self, req: Request) -> Response:
        self.requests.append(req)
        return await self.inner.call(self.rewrite(req) if self.rewrite else req)

    async def close(self) -> None:
        await self.inner.close()


class Driver:
    def __init__(self, api_client: Any, cluster: str = "local", machines: Machines | None = None,
                 env: dict[str, str] | None = None):
        self.cluster = cluster
        self.clock = ServerClock()
        self.transport = RecordingTransport(KubeTransport(lambda _c, _t: api_client, max_threads=4))
        self.executor = Executor(self.transport, self.clock, self._never, env=env or {})
        self.machines = machines or Machines([*all_machines(), Probe()])
        self.state: State = initial_state()
        self.records: list[Record] = []
        self.effects: list[Any] = []
        self.outcomes: list[tuple[Any, Outcome]] = []

    @staticmethod
    async def _never(_outcome: Outcome) -> None:  # run() is used directly, never the queue
        raise AssertionError("the driver does not use the executor's queue")

    # -- time ---------------------------------------------------------------------------------
    async def prime(self) -> int:
        """Read the apiserver's Date once (GET /version) so records carry server time."""
        reply = await self.transport.inner.call(Request(self.cluster, "", "GET", "/version"))
        self.clock.observe(reply.header("Date"))
        return self.clock.now_ms()

    def now(self) -> int | None:
        return self.clock.now_ms()

    # -- folding ------------------------------------------------------------------------------
    def append(self, record: Record) -> tuple[Any, ...]:
        """Stamp and fold one record; returns the effects it emitted."""
        rec = record.stamped(self.state.seq + 1)
        self.state, effects = fold(self.state, rec, self.machines)
        self.records.append(rec)
        self.effects.extend(effects)
        return effects

    async def feed(self, record: Record, max_steps: int = 100) -> list[tuple[Any, Outcome]]:
        """Fold ``record``, then perform every effect it leads to until nothing is pending.
        Returns the (effect, outcome) pairs of this call, in order."""
        queue = [e for e in self.append(record) if e.type != "log"]
        done: list[tuple[Any, Outcome]] = []
        while queue:
            assert len(done) < max_steps, f"more than {max_steps} effects: {[e.type for e, _ in done]}"
            effect = queue.pop(0)
            self.append(EffectIssued(at=self.now(), effect=effect_to_dict(effect)))
            outcome = await self.executor.run(effect)
            done.append((effect, outcome))
            self.outcomes.append((effect, outcome))
            queue += [e for e in self.append(outcome) if e.type != "log"]
        return done

    async def command(self, name: str, **args: Any) -> list[tuple[Any, Outcome]]:
        return await self.feed(Command(at=self.now(), name=name, cluster=args.get("cluster", self.cluster),
                                       namespace=args.get("namespace", ""), args=args))

    async def tell(self, machine: str, key: str, message: str, reply_key: str = "r",
                   **args: Any) -> list[tuple[Any, Outcome]]:
        return await self.command("probe.tell", machine=machine, key=key, message=message,
                                  reply_key=reply_key, args=args)

    def replies(self, reply_key: str = "r") -> tuple[tuple[str, dict[str, Any]], ...]:
        return self.state.table(PROBE).get(reply_key) or ()

    # -- observations built from real reads ------------------------------------------------------
    def observed(self, obj: dict[str, Any], event: str = "ADDED") -> Observed:
        md = obj["metadata"]
        return Observed(at=self.now(), cluster=self.cluster, api_version=obj.get("apiVersion", "v1"),
                        kind=obj["kind"], namespace=md.get("namespace", ""), name=md["name"],
                        uid=md.get("uid", ""), rv=md.get("resourceVersion", ""), event=event, obj=obj)

    def relist(self, api_version: str, kind: str, scope: str, items: list[dict[str, Any]], rv: str = "") -> Relist:
        keys = tuple(ListedKey(namespace=i["metadata"].get("namespace", ""), name=i["metadata"]["name"],
                               uid=i["metadata"].get("uid", ""), rv=i["metadata"].get("resourceVersion", ""))
                     for i in items)
        return Relist(at=self.now(), cluster=self.cluster, api_version=api_version, kind=kind, scope=scope,
                      rv=rv, keys=keys)

    async def write_journal(self, path: Any) -> Any:
        """Every record folded so far into a fresh ``SqliteJournal`` at ``path`` (for ``kfold replay``)."""
        from journal.sqlite import SqliteJournal
        journal = SqliteJournal(path)
        await journal.open()
        try:
            await journal.append(self.records)
        finally:
            await journal.close()
        return path

    async def close(self) -> None:
        await self.transport.close()


def replay_check(journal: Any) -> str:
    """``python -m kfold replay JOURNAL --check`` as a real process; asserts exit 0; its stdout."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-m", "kfold", "replay", str(journal), "--check"],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kfold replay --check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


# -- admin-side helpers (the test's own view of the apiserver, independent of kfold) -------------
def pod_manifest(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {**MANAGED, "kfold.dev/session": name, **(labels or {})}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def raw(admin: Any, method: str, path: str, body: Any = None, query: list | None = None) -> tuple[int, dict[str, str], Any]:
    """One request with the admin ApiClient: (status, headers, JSON body); never raises on a status."""
    from kubernetes.client.exceptions import ApiException
    ct = "application/merge-patch+json" if method == "PATCH" else "application/json"
    m, url, hdrs, b, _ = admin.param_serialize(
        method, path, query_params=query or [], header_params={"Accept": "application/json", "Content-Type": ct},
        body=body, auth_settings=["BearerToken"])
    try:
        resp = admin.call_api(m, url, header_params=hdrs, body=b)
        data = resp.read()
    except ApiException as exc:
        return exc.status, dict(exc.headers or {}), decode_body(exc.body)
    return resp.status, dict(resp.headers), decode_body(data)


def get(admin: Any, path: str, query: list | None = None) -> dict[str, Any] | None:
    """GET ``path`` as JSON; ``None`` on 404."""
    status, _, data = raw(admin, "GET", path, query=query)
    if status == 404:
        return None
    assert 200 <= status < 300, (status, data)
    return data


def ok(admin: Any, method: str, path: str, body: Any = None) -> dict[str, Any]:
    status, _, data = raw(admin, method, path, body)
    assert 200 <= status < 300, (method, path, status, data)
    return data


def pod_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def running(admin: Any, ns: str, name: str) -> dict[str, Any] | None:
    """The pod as JSON once kwok made it Running + Ready with a podIP (so its rv stops moving)."""
    p = get(admin, pod_path(ns, name))
    if not p:
        return None
    st = p.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or ())
    return p if st.get("phase") == "Running" and ready and st.get("podIP") else None


def server_date_ms(cp: dict) -> int:
    """The apiserver's Date header (ms), read with urllib and the admin cert, not through kfold."""
    from tests.e2e import controlplane
    with controlplane.api_get(cp, "/version") as r:
        return int(parsedate_to_datetime(r.headers["Date"]).timestamp() * 1000)
