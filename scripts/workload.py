"""Realistic watch events for the benchmarks and the soak (shared by every script under scripts/).

``World(pods, seed)`` is a namespace-spread population of Pods shaped like the ones a real
cluster serves (~1.5 KB of JSON each): Deployment-style names, owner references, one to three
containers with env (literal values, ``secretKeyRef``/``configMapKeyRef``/``fieldRef``), ports,
resources and mounts, the service-account token projected volume every pod carries, tolerations,
four conditions, container statuses that run, wait (CrashLoopBackOff) or terminate, and varied
phases. Half the pods carry kfold's labels (the pod machine tracks them). With ``secrets`` > 0,
one event in that many is a Secret (Opaque or dockerconfigjson, base64 data) and about one pod in
twenty carries credential material in the open (a literal ``*_PASSWORD``/``*_TOKEN`` env value, a
``Bearer`` annotation): the redaction workload.

``world.events(n)`` yields ``(type, object)`` pairs: each pod is ADDED once, then MODIFIED (new
resourceVersion, restarts, conditions and phase moving), now and then DELETED and re-created under
a new uid. Deterministic for a seed; nothing reads the clock.
"""
from __future__ import annotations

import base64
import hashlib
import random
from typing import Any, Iterator

APPS = ("api", "web", "worker", "ingest", "billing", "search", "auth-proxy", "scheduler", "notifier", "cache")
IMAGES = ("registry.example.com/platform/{app}:v{major}.{minor}.{patch}", "ghcr.io/acme/{app}:{major}.{minor}",
          "docker.io/library/{app}:{major}.{minor}-alpine", "quay.io/team/{app}@sha256:{digest}")
PHASES = ("Pending", "Running", "Running", "Running", "Running", "Succeeded", "Failed")
REASONS = ("CrashLoopBackOff", "ImagePullBackOff", "ContainerCreating", "ErrImagePull")
T = "2030-01-{day:02d}T{h:02d}:{m:02d}:{s:02d}Z"


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _alnum(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def _uid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _time(rng: random.Random) -> str:
    return T.format(day=rng.randint(1, 28), h=rng.randint(0, 23), m=rng.randint(0, 59), s=rng.randint(0, 59))


class World:
    def __init__(self, pods: int, seed: int = 1, secrets: int = 0, namespaces: int = 50):
        self.rng = random.Random(seed)
        self.namespaces = [f"tenant-{i:03d}" for i in range(namespaces)]
        self.pods = [self._pod(i) for i in range(pods)]
        self.secrets_every = secrets
        self.secret_objs = [self._secret(i) for i in range(max(1, pods // 10))] if secrets else []
        self.rv = 1000
        self.live = [False] * pods

    # -- objects --------------------------------------------------------------------------------
    def _pod(self, i: int) -> dict[str, Any]:
        rng = self.rng
        app = APPS[i % len(APPS)]
        ns = self.namespaces[i % len(self.namespaces)]
        rs = f"{app}-{_alnum(rng, 10)}"
        kfold = i % 2 == 0
        name = f"s{i:05d}-g1" if kfold else f"{rs}-{_alnum(rng, 5)}"
        labels = {"app.kubernetes.io/name": app, "pod-template-hash": rs.rsplit("-", 1)[1]}
        if kfold:
            labels |= {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": f"s{i:05d}",
                       "kfold.dev/generation": "1"}
        annotations = {}
        leaky = self.rng.random() < 0.05
        if leaky:
            annotations["example.com/upstream-auth"] = f"Bearer {_alnum(rng, 40)}"
        containers = [self._container(rng, app, c, leaky and c == 0) for c in range(rng.choice((1, 1, 1, 1, 1, 2, 3)))]
        vol = f"kube-api-access-{_alnum(rng, 5)}"
        for c in containers:
            c["volumeMounts"] = [{"name": vol, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": _uid(rng),
                         "resourceVersion": "1", "creationTimestamp": _time(rng), "labels": labels,
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                              "uid": _uid(rng), "controller": True, "blockOwnerDeletion": True}]},
            "spec": {
                "volumes": [{"name": vol, "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                        "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
                "containers": containers, "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                "serviceAccountName": app, "nodeName": f"node-{rng.randint(1, 40):02d}",
            },
            "status": {"phase": "Pending", "podIP": f"10.{rng.randint(64, 127)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                       "startTime": _time(rng), "conditions": [], "containerStatuses": []},
        }

    @staticmethod
    def _container(rng: random.Random, app: str, c: int, leaky: bool) -> dict[str, Any]:
        image = rng.choice(IMAGES).format(app=app, major=rng.randint(0, 9), minor=rng.randint(0, 30),
                                          patch=rng.randint(0, 99), digest=_hex(rng, 64))
        env = [{"name": "LOG_LEVEL", "value": rng.choice(("info", "debug", "warn"))},
               {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
        if rng.random() < 0.6:
            env.append({"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": f"{app}-db", "key": "url"}}})
        elif rng.random() < 0.5:
            env.append({"name": "FEATURE_FLAGS", "valueFrom": {"configMapKeyRef": {"name": f"{app}-config", "key": "flags"}}})
        if leaky:
            env.append({"name": rng.choice(("DB_PASSWORD", "API_TOKEN", "STRIPE_SECRET")), "value": _alnum(rng, 24)})
        return {"name": app if c == 0 else f"sidecar-{c}", "image": image, "env": env,
                "ports": [{"containerPort": 8080 + c}],
                "resources": {"requests": {"cpu": f"{rng.choice((50, 100, 250, 500))}m",
                                           "memory": f"{rng.choice((64, 128, 256, 512))}Mi"}}}

    def _secret(self, i: int) -> dict[str, Any]:
        rng = self.rng
        docker = i % 4 == 0
        data = ({".dockerconfigjson": base64.b64encode(('{"auths":{"ghcr.io":{"auth":"%s"}}}' % _alnum(rng, 32)).encode()).decode()}
                if docker else {k: base64.b64encode(_alnum(rng, 32).encode()).decode() for k in ("username", "password", "url")})
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson" if docker else "Opaque",
                "metadata": {"name": f"{APPS[i % len(APPS)]}-db-{i}", "namespace": self.namespaces[i % len(self.namespaces)],
                             "uid": _uid(rng), "resourceVersion": "1",
                             "labels": {"app.kubernetes.io/managed-by": "kfold"}},
                "data": data}

    # -- events ---------------------------------------------------------------------------------
    def events(self, n: int, start: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
        for k in range(start, start + n):
            yield self.event(k)

    def event(self, k: int) -> tuple[str, dict[str, Any]]:
        self.rv += 1
        if self.secrets_every and k % self.secrets_every == self.secrets_every - 1:
            s = self.secret_objs[(k // self.secrets_every) % len(self.secret_objs)]
            return "MODIFIED", {**s, "metadata": {**s["metadata"], "resourceVersion": str(self.rv)}}
        i = k % len(self.pods)
        if not self.live[i]:
            self.live[i] = True
            return "ADDED", self._status(self.pods[i], k)
        if k % 997 == 0:
            self.live[i] = False
            gone = self._status(self.pods[i], k)
            self.pods[i] = {**self.pods[i], "metadata": {**self.pods[i]["metadata"], "uid": _uid(self.rng)}}
            return "DELETED", gone
        return "MODIFIED", self._status(self.pods[i], k)

    def _status(self, pod: dict[str, Any], k: int) -> dict[str, Any]:
        h = hashlib.blake2b(k.to_bytes(8, "little"), digest_size=8).digest()
        phase = PHASES[h[0] % len(PHASES)]
        ready = "True" if phase == "Running" and h[1] % 5 else "False"
        when = T.format(day=1 + h[2] % 28, h=h[3] % 24, m=h[4] % 60, s=h[5] % 60)
        statuses = []
        for c in pod["spec"]["containers"]:
            if phase == "Running" and ready == "True":
                state = {"running": {"startedAt": when}}
            elif phase in ("Succeeded", "Failed"):
                state = {"terminated": {"exitCode": 0 if phase == "Succeeded" else 1 + h[6] % 137,
                                        "reason": "Completed" if phase == "Succeeded" else "Error",
                                        "startedAt": when, "finishedAt": when}}
            else:
                state = {"waiting": {"reason": REASONS[h[6] % len(REASONS)]}}
            statuses.append({"name": c["name"], "ready": ready == "True", "restartCount": h[7] % 12,
                             "image": c["image"], "state": state,
                             "containerID": f"containerd://{h.hex() * 3}"})
        conditions = [{"type": t, "status": "True" if t in ("Initialized", "PodScheduled") else ready,
                       "lastTransitionTime": when}
                      for t in ("Ready", "ContainersReady", "PodScheduled")]
        md = {**pod["metadata"], "resourceVersion": str(self.rv)}
        return {**pod, "metadata": md, "status": {**pod["status"], "phase": phase, "conditions": conditions,
                                                  "containerStatuses": statuses}}


def mean_size(world: World, n: int = 2000) -> float:
    import orjson
    return sum(len(orjson.dumps(obj)) for _, obj in world.events(n)) / n


# -- the daemon's own path, for the benchmarks and the soak ---------------------------------------
def variants(world: World, n: int) -> list[bytes]:
    """``n`` events of ``world`` as watch-event JSON lines' objects (``orjson`` bytes): the
    benchmarks decode one per event, as the watch does, instead of holding millions of dicts."""
    import orjson
    return [orjson.dumps({"type": t, "object": obj}) for t, obj in world.events(n)]


def observed(line: bytes, rv: int, at: int, cluster: str = "local") -> Any:
    """The draft the observer makes of one watch line (decode, new resourceVersion, ``Observed``)."""
    import orjson
    from journal.records import Observed
    ev = orjson.loads(line)
    obj = ev["object"]
    md = obj["metadata"] = {**obj["metadata"], "resourceVersion": str(rv)}
    return Observed(at=at, cluster=cluster, api_version=obj["apiVersion"], kind=obj["kind"],
                    namespace=md["namespace"], name=md["name"], uid=md["uid"], rv=md["resourceVersion"],
                    event=ev["type"], obj=obj)


async def start_daemon(journal: Any, snapshots: Any = None, metrics: Any = None) -> Any:
    """``kfold run``'s committer around ``journal`` (opened here): the real machines, the fold,
    snapshots and retention, effects to an in-memory fake apiserver; recovered and looping."""
    from engine.effects.io.clock import ServerClock
    from engine.effects.io.executor import Executor
    from engine.effects.io.fake import FakeApiServer, FakeTransport
    from kfold.daemon.loop import Daemon
    await journal.open()
    clock, server = ServerClock(), FakeApiServer(strict_namespaces=False)
    daemon = Daemon(journal, lambda sink: Executor(FakeTransport(server), clock, sink, env={}), clock,
                    snapshots=snapshots, metrics=metrics)
    daemon.start_loops()
    await daemon.recover()
    return daemon


def watch_lines(pool: list[bytes], n: int, rate: float = 0.0, stamp: str | None = None) -> Iterator[Any]:
    """``n`` watch-event lines cycling ``pool`` under growing resourceVersions; ``stamp`` names a
    label that carries ``time.monotonic_ns()`` at the line's making (for latency); a float
    every 100 lines paces the stream at ``rate``/s (the stub sleeps that long)."""
    import time

    import orjson
    for k in range(n):
        ev = orjson.loads(pool[k % len(pool)])
        md = ev["object"]["metadata"]
        md["resourceVersion"] = str(1000 + k)
        if stamp:
            md["labels"] = {**md.get("labels", {}), stamp: str(time.monotonic_ns())}   # projected: the fold sees it
        yield orjson.dumps(ev)
        if rate and k % 100 == 99:
            yield 100 / rate


def serve_watch(objects: int, secrets: int, n: int, rate: float, chunk: int, stamp: str | None, conn: Any) -> None:
    """Child process: a stub apiserver whose Pod watch streams ``n`` events (an empty LIST first),
    so making the events does not share the daemon's GIL. Sends its URL, serves until told."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.contract.watch_stub import ListReply, StubApiserver, WatchReply
    pool = variants(World(objects, secrets=secrets), objects * 4)
    stub = StubApiserver(lists=[ListReply([], rv="1")],
                         watches=[WatchReply(watch_lines(pool, n, rate, stamp), end="stall", lines_per_chunk=chunk)])
    stub.start()
    conn.send(stub.url)
    conn.recv()
    stub.stop()


def start_stub(objects: int, secrets: int, n: int, rate: float = 0.0, chunk: int = 64,
               stamp: str | None = None) -> tuple[str, Any]:
    """(URL, stop()) of a ``serve_watch`` child process."""
    import multiprocessing as mp
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=serve_watch, args=(objects, secrets, n, rate, chunk, stamp, child),
                                           daemon=True)
    proc.start()
    url = parent.recv()

    def stop() -> None:
        parent.send("done")
        proc.join(5)
    return url, stop


def watch_observer(url: str, daemon: Any) -> Any:
    """The Pod observer ``kfold run`` starts, on the stub at ``url``, its drafts into ``daemon.submit``
    and redacted with the journal's redactor, as ``kfold.daemon.boot.make_observers`` wires it."""
    from kubernetes import client as k8s

    from engine.effects.io.observer import Observer
    cfg = k8s.Configuration()
    cfg.host = url
    return Observer(lambda: k8s.ApiClient(cfg), "local", "v1", "Pod", "pods", "", daemon.submit, daemon.clock.for_cluster("local"),
                    redact=daemon.journal.redactor.redact, prepare=daemon.journal.prepare_one,
                    idle_timeout_s=60, server_timeout_s=3600)
