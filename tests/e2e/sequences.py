"""Seeded operation sequences on real Sessions, checked against what the spec alone implies.

After the manner of Acto (SOSP'23): each Session is driven through a random sequence of
desired-state changes; after every step the driver waits until kfold reports the step settled *for
this spec* (``status.observedGeneration`` equal to ``metadata.generation``, and the Ready
condition's too), then compares what the apiserver holds with an expectation computed here from
the spec — never from kfold's state, manifests or journal. The contract the oracle encodes is the
user-facing one (the Session CRD, README, DESIGN.md "Names", seed 002):

- a running Session has exactly one live pod, ``<session>-g<N>``, labelled
  ``app.kubernetes.io/managed-by=kfold``, ``kfold.dev/session=<session>``,
  ``kfold.dev/generation=<N>``, owned by the Session; its containers are ``workspace`` then
  ``app-<name>`` per app in order, each running ``spec.image`` with ``spec.env`` as
  ``valueFrom.secretKeyRef``; an app container declares the app's ports (as of its pod's spec);
- the image, the app set and env are fixed in a pod: a change to one of them, a resume or an
  un-stop is a new pod of a later generation (new uid); a ports-only change or a no-op
  label/annotation edit keeps the pod (same uid, same generation) and re-routes;
- the Service ``<session>`` serves every declared port (port and protocol), the Ingress
  ``<session>`` has one rule ``<port>-<session>.<base_domain>`` per TCP port (none: no Ingress),
  both owned by the live pod; no port at all: neither;
- the Secret ``<session>-env`` exists exactly while the spec has env references, and lists them;
- suspended, stopped or failed: no pod; stopped: no Service, Ingress or Secret either;
- deleted: the Session and everything labelled for it are gone;
- nothing of an older generation is left once a step has settled;
- liveness: every step settles within ``STEP_BOUND_S``.

``run(seed, ...)`` raises ``SequenceFailure`` with the seed, the steps so far and the difference.
"""
from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"
MANAGED = "app.kubernetes.io/managed-by"
SESSION = "kfold.dev/session"
GENERATION = "kfold.dev/generation"
STEP_BOUND_S = 90.0
APP_NAMES = ["web", "api", "db", "worker", "ui"]
PORT_POOL = [8080, 8081, 8443, 9090, 9091, 5000, 6000, 7000]
ENV_REFS = [("TOKEN", "creds", "token"), ("USER", "creds", "user"), ("REGION", "other", "region")]
ENV_SECRETS = {"creds": {"token": "dG9r", "user": "dXNlcg=="}, "other": {"region": "ZXU="}}


class SequenceFailure(AssertionError):
    pass


@dataclass
class Model:
    """What the test knows of one Session: its spec and what the pod should be made from."""
    name: str
    spec: dict[str, Any] | None = None       # None: not created, or deleted
    invalid: bool = False                    # the spec on the apiserver is the invalid one
    valid_spec: dict[str, Any] | None = None  # the last valid spec (the invalid step's fix)
    pod_spec: dict[str, Any] | None = None   # the spec the live pod was made from
    pod_uid: str = ""
    pod_gen: int = 0
    service_uid: str = ""
    recreate: bool = False                   # the last step must bring a new pod
    history: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return (self.spec is not None and not self.invalid and not self.spec.get("suspended")
                and not self.spec.get("stopped"))


def _ports(spec: dict[str, Any]) -> list[tuple[int, str]]:
    return [(p["port"], p.get("protocol", "TCP")) for a in spec.get("apps", []) for p in a.get("ports", [])]


def _free_port(rng: random.Random, spec: dict[str, Any]) -> int | None:
    used = {p for p, _ in _ports(spec)}
    free = [p for p in PORT_POOL if p not in used]
    return rng.choice(free) if free else None


# -- operations: each returns (description, new spec, pod-shaping) or None when it does not apply ----

def _op_image(rng, m):
    spec = copy.deepcopy(m.spec)
    spec["image"] = f"registry.example/sandbox:{rng.randrange(2, 99)}"
    return (f"image {spec['image']}", spec, True) if spec["image"] != m.spec["image"] else None


def _op_app_add(rng, m):
    names = {a["name"] for a in m.spec["apps"]}
    free = [n for n in APP_NAMES if n not in names]
    if not free:
        return None
    spec = copy.deepcopy(m.spec)
    app: dict[str, Any] = {"name": rng.choice(free), "ports": []}
    port = _free_port(rng, spec)
    if port is not None and rng.random() < 0.8:
        app["ports"].append({"port": port, "protocol": rng.choice(["TCP", "TCP", "UDP"])})
    spec["apps"].append(app)
    return f"add app {app['name']} {app['ports']}", spec, True


def _op_app_remove(rng, m):
    if len(m.spec["apps"]) < 2:
        return None
    spec = copy.deepcopy(m.spec)
    gone = spec["apps"].pop(rng.randrange(len(spec["apps"])))
    return f"remove app {gone['name']}", spec, True


def _op_port_add(rng, m):
    spec = copy.deepcopy(m.spec)
    port = _free_port(rng, spec)
    if port is None:
        return None
    app = rng.choice(spec["apps"])
    proto = rng.choice(["TCP", "UDP"])
    app["ports"].append({"port": port, "protocol": proto})
    return f"add port {port}/{proto} to {app['name']}", spec, False


def _op_port_remove(rng, m):
    spec = copy.deepcopy(m.spec)
    apps = [a for a in spec["apps"] if a["ports"]]
    if not apps:
        return None
    app = rng.choice(apps)
    gone = app["ports"].pop(rng.randrange(len(app["ports"])))
    return f"remove port {gone['port']} from {app['name']}", spec, False


def _op_port_renumber(rng, m):
    spec = copy.deepcopy(m.spec)
    apps = [a for a in spec["apps"] if a["ports"]]
    port = _free_port(rng, spec)
    if not apps or port is None:
        return None
    p = rng.choice(rng.choice(apps)["ports"])
    was, p["port"] = p["port"], port
    return f"renumber port {was} -> {port}", spec, False


def _op_env(rng, m):
    spec = copy.deepcopy(m.spec)
    now = spec.get("env", [])
    choice = rng.choice(["set", "change", "clear"])
    if choice == "clear":
        if not now:
            return None
        spec.pop("env", None)
    else:
        k = rng.randrange(1, len(ENV_REFS) + 1)
        refs = rng.sample(ENV_REFS, k)
        spec["env"] = [{"name": n, "secretRef": {"name": s, "key": key}} for n, s, key in refs]
        if spec["env"] == now:
            return None
    return f"env {choice} -> {[e['name'] for e in spec.get('env', [])]}", spec, True


def _op_flag(flag: str, value: bool, shaping: bool) -> Callable:
    def op(rng, m):
        if bool(m.spec.get(flag)) == value:
            return None
        if flag == "suspended" and m.spec.get("stopped"):
            return None   # a stopped Session's suspend flag changes nothing visible
        spec = copy.deepcopy(m.spec)
        spec[flag] = value
        return f"{flag}={value}", spec, shaping and not spec.get("stopped") and not spec.get("suspended")
    return op


OPS: dict[str, Callable] = {
    "image": _op_image, "app_add": _op_app_add, "app_remove": _op_app_remove,
    "port_add": _op_port_add, "port_remove": _op_port_remove, "port_renumber": _op_port_renumber,
    "env": _op_env,
    "suspend": _op_flag("suspended", True, False), "resume": _op_flag("suspended", False, True),
    "stop": _op_flag("stopped", True, False), "unstop": _op_flag("stopped", False, True),
}
WEIGHTS = {"image": 2, "app_add": 2, "app_remove": 1, "port_add": 2, "port_remove": 1, "port_renumber": 1,
           "env": 2, "suspend": 1, "resume": 2, "stop": 1, "unstop": 2, "noop": 2, "invalid": 1, "delete": 1}


def first_spec(rng: random.Random) -> dict[str, Any]:
    port = rng.choice(PORT_POOL)
    return {"image": "registry.example/sandbox:1",
            "apps": [{"name": "web", "ports": [{"port": port, "protocol": "TCP"}]}]}


class Driver:
    """One namespace, several Sessions, one ``kfold run`` (started by the caller)."""

    def __init__(self, admin: Any, ns: str, base_domain: str = "sessions.test"):
        self.ns, self.base = ns, base_domain
        self.co = client.CustomObjectsApi(admin)
        self.core = client.CoreV1Api(admin)
        self.net = client.NetworkingV1Api(admin)
        for name, data in ENV_SECRETS.items():
            try:
                self.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": data})
            except ApiException as exc:
                if exc.status != 409:
                    raise

    # -- reading the apiserver ----------------------------------------------------------------
    def session(self, name: str) -> dict[str, Any] | None:
        try:
            return self.co.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def labelled(self, name: str) -> dict[str, list[Any]]:
        sel = f"{SESSION}={name}"
        return {"Pod": self.core.list_namespaced_pod(self.ns, label_selector=sel).items,
                "Service": self.core.list_namespaced_service(self.ns, label_selector=sel).items,
                "Ingress": self.net.list_namespaced_ingress(self.ns, label_selector=sel).items,
                "Secret": self.core.list_namespaced_secret(self.ns, label_selector=sel).items}

    # -- a step --------------------------------------------------------------------------------
    def step(self, rng: random.Random, m: Model) -> str:
        """Apply one random operation to ``m`` (create when it does not exist yet)."""
        if m.spec is None:
            m.spec = first_spec(rng)
            self.co.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "Session",
                "metadata": {"name": m.name, "namespace": self.ns}, "spec": m.spec})
            m.recreate = True
            return self._did(m, f"create {m.spec}")
        if m.invalid:   # the fix of the invalid step: back to the last valid spec
            m.spec, m.invalid, m.recreate = m.valid_spec, False, True
            self._replace_spec(m)
            return self._did(m, "fix the invalid spec")
        ops = [k for k in WEIGHTS for _ in range(WEIGHTS[k])]
        for _ in range(20):
            kind = rng.choice(ops)
            if kind == "delete":
                self.co.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, m.name)
                m.spec = None
                return self._did(m, "delete")
            if kind == "noop":
                what = rng.choice(["labels", "annotations"])
                self.co.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, m.name,
                                                       {"metadata": {what: {"test.kfold.dev/touch": str(rng.random())[2:8]}}})
                m.recreate = False
                return self._did(m, f"no-op {what} edit")
            if kind == "invalid":
                if not m.running:
                    continue
                bad = copy.deepcopy(m.spec)
                bad["apps"][0]["name"] = "Not_A_DNS_Label"
                try:
                    self._replace_spec(m, bad)
                except ApiException as exc:
                    if exc.status == 422:   # refused at admission: the spec did not change, no new pod
                        m.recreate = False
                        return self._did(m, "invalid spec refused at admission")
                    raise
                m.valid_spec, m.invalid, m.recreate = m.spec, True, False
                return self._did(m, "invalid app name")
            made = OPS[kind](rng, m)
            if made is None:
                continue
            what, spec, shaping = made
            m.spec, m.recreate = spec, shaping
            self._replace_spec(m)
            return self._did(m, what)
        m.recreate = False
        return self._did(m, "nothing applicable")

    def _replace_spec(self, m: Model, spec: dict[str, Any] | None = None) -> None:
        """The whole spec replaced, as ``kubectl replace`` (or ``edit``) sends it: a read, then a
        PUT preconditioned on its resourceVersion (kfold's status writes may move it: read again)."""
        for _ in range(10):
            obj = self.session(m.name)
            obj["spec"] = spec if spec is not None else m.spec
            try:
                self.co.replace_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, m.name, obj)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise SequenceFailure(f"{m.name}: the spec could not be replaced (409 ten times)")

    @staticmethod
    def _did(m: Model, what: str) -> str:
        m.history.append(what)
        return what

    # -- settling and the oracle ---------------------------------------------------------------
    def settled(self, m: Model) -> str:
        """"" when the Session's step has settled for its spec, else what is still awaited."""
        obj = self.session(m.name)
        if m.spec is None:
            if obj is not None:
                return "the Session still exists"
            left = {k: [o.metadata.name for o in v] for k, v in self.labelled(m.name).items() if v}
            return f"left after delete: {left}" if left else ""
        if obj is None:
            return "the Session does not exist"
        gen = obj["metadata"].get("generation")
        st = obj.get("status") or {}
        if st.get("observedGeneration") != gen:
            return f"status.observedGeneration {st.get('observedGeneration')} != generation {gen}"
        ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("observedGeneration") != gen:
            return f"Ready condition not about generation {gen}: {ready}"
        want = self.expected_phase(m)
        if st.get("phase") != want:
            return f"phase {st.get('phase')}, expected {want}"
        if want == "Ready" and ready.get("status") != "True":   # phase Ready while re-routing: Ready False, Routing
            return f"Ready {ready.get('status')} ({ready.get('reason')}): not serving the spec yet"
        pods = [p for p in self.labelled(m.name)["Pod"]]
        if not m.running and pods:
            return f"pods left: {[p.metadata.name for p in pods]}"
        if m.running and len(pods) != 1:
            return f"pods: {[(p.metadata.name, bool(p.metadata.deletion_timestamp)) for p in pods]}"
        if m.spec.get("stopped"):
            left = {k: [o.metadata.name for o in v] for k, v in self.labelled(m.name).items() if v}
            if left:
                return f"left after stop: {left}"
        return ""

    @staticmethod
    def expected_phase(m: Model) -> str:
        if m.invalid:
            return "Failed"
        if m.spec.get("stopped"):
            return "Stopped"
        if m.spec.get("suspended"):
            return "Suspended"
        return "Ready"

    def check(self, m: Model) -> list[str]:
        """Differences between the apiserver and what ``m``'s spec implies (empty: none)."""
        if m.spec is None:
            return []
        obj = self.session(m.name)
        problems: list[str] = []
        objs = self.labelled(m.name)
        if not m.running:
            if m.spec.get("stopped"):
                problems += [f"{k} {o.metadata.name} left after stop" for k, v in objs.items() for o in v]
            problems += [f"pod {p.metadata.name} of a Session that is not running" for p in objs["Pod"]]
            m.pod_uid, m.service_uid = "", ""
            return problems
        (pod,) = objs["Pod"]
        labels = pod.metadata.labels or {}
        gen = int(labels.get(GENERATION, "0") or 0)
        if pod.metadata.name != f"{m.name}-g{gen}":
            problems.append(f"pod {pod.metadata.name} is not named for generation {gen}")
        if labels.get(MANAGED) != "kfold" or labels.get(SESSION) != m.name:
            problems.append(f"pod labels {labels}")
        owners = [(o.kind, o.uid) for o in pod.metadata.owner_references or []]
        if ("Session", obj["metadata"]["uid"]) not in owners:
            problems.append(f"pod owners {owners}, not the Session {obj['metadata']['uid']}")
        if (obj.get("status") or {}).get("podName") != pod.metadata.name:
            problems.append(f"status.podName {(obj.get('status') or {}).get('podName')} != {pod.metadata.name}")
        if m.recreate or not m.pod_uid:
            # pod_gen outlives a suspend or a stop: a later pod is always a later generation.
            if pod.metadata.uid == m.pod_uid or gen <= m.pod_gen:
                problems.append(f"{m.history[-1]!r} needs a new pod of a later generation than g{m.pod_gen}: "
                                f"uid {pod.metadata.uid} generation {gen}")
            m.pod_spec = copy.deepcopy(m.spec)
        elif pod.metadata.uid != m.pod_uid or gen != m.pod_gen:
            problems.append(f"{m.history[-1]!r} needs no new pod: {m.pod_uid}/g{m.pod_gen} -> {pod.metadata.uid}/g{gen}")
        m.pod_uid, m.pod_gen = pod.metadata.uid, gen
        problems += self._containers(m, pod)
        problems += self._routes(m, objs, pod)
        problems += self._env_secret(m, objs)
        return problems

    def _containers(self, m: Model, pod: Any) -> list[str]:
        made_from = m.pod_spec or m.spec
        names = [c.name for c in pod.spec.containers]
        want = ["workspace"] + [f"app-{a['name']}" for a in m.spec["apps"]]
        problems = [] if names == want else [f"containers {names}, spec implies {want}"]
        env_want = [(e["name"], e["secretRef"]["name"], e["secretRef"]["key"]) for e in m.spec.get("env", [])]
        apps = {f"app-{a['name']}": a for a in made_from["apps"]}
        for c in pod.spec.containers:
            if c.image != m.spec["image"]:
                problems.append(f"container {c.name} runs {c.image}, spec says {m.spec['image']}")
            env = [(e.name, e.value_from.secret_key_ref.name, e.value_from.secret_key_ref.key)
                   if e.value_from and e.value_from.secret_key_ref else (e.name, "literal", e.value or "")
                   for e in c.env or []]
            # docs/session-api.md "Container identity": after the spec's env, the container's role,
            # and in an app its name and the ports declared when the pod was made
            identity = [("KFOLD_CONTAINER", "literal", c.name)]
            if c.name in apps:
                identity += [("KFOLD_APP", "literal", c.name[len("app-"):]),
                             ("KFOLD_APP_PORTS", "literal", ",".join(
                                 f"{q['port']}/{q.get('protocol', 'TCP')}" for q in apps[c.name]["ports"]))]
            if env != env_want + identity:
                problems.append(f"container {c.name} env {env}, spec says {env_want + identity}")
            if c.name in apps:
                ports = sorted((p.container_port, p.protocol or "TCP") for p in c.ports or [])
                declared = sorted((p["port"], p.get("protocol", "TCP")) for p in apps[c.name]["ports"])
                if ports != declared:
                    problems.append(f"container {c.name} ports {ports}, its pod's spec declared {declared}")
        return problems

    @staticmethod
    def _one(objs: list[Any], kind: str, name: str, wanted: bool, why: str) -> tuple[Any, list[str]]:
        """The object named ``name`` if the spec wants one; a problem if present and unwanted or missing."""
        found = [o for o in objs if o.metadata.name == name]
        if not wanted:
            return None, [f"{kind} {name} with {why}"] if found else []
        return (found[0], []) if found else (None, [f"no {kind} {name} for {why}"])

    def _routes(self, m: Model, objs: dict[str, list[Any]], pod: Any) -> list[str]:
        ports = sorted(_ports(m.spec))
        svc, problems = self._one(objs["Service"], "Service", m.name, bool(ports),
                                  f"ports {ports}" if ports else "no declared port")
        if svc is not None:
            have = sorted((p.port, p.protocol or "TCP") for p in svc.spec.ports or [])
            if have != ports:
                problems.append(f"Service ports {have}, spec declares {ports}")
            owners = [o.uid for o in svc.metadata.owner_references or []]
            if pod.metadata.uid not in owners:
                problems.append(f"Service owners {owners}, not the live pod {pod.metadata.uid}")
            noop = m.history[-1].startswith("no-op")
            if noop and m.service_uid and svc.metadata.uid != m.service_uid:
                problems.append("a no-op edit replaced the Service")
            m.service_uid = svc.metadata.uid
        tcp = sorted(p for p, proto in ports if proto == "TCP")
        ing, more = self._one(objs["Ingress"], "Ingress", m.name, bool(tcp),
                              f"TCP ports {tcp}" if tcp else f"no TCP port (declared {ports})")
        problems += more
        if ing is not None:
            hosts = sorted(r.host for r in ing.spec.rules or [])
            want = sorted(f"{p}-{m.name}.{self.base}" for p in tcp)
            if hosts != want:
                problems.append(f"Ingress hosts {hosts}, spec implies {want}")
            owners = [o.uid for o in ing.metadata.owner_references or []]
            if pod.metadata.uid not in owners:
                problems.append(f"Ingress owners {owners}, not the live pod {pod.metadata.uid}")
        return problems

    def _env_secret(self, m: Model, objs: dict[str, list[Any]]) -> list[str]:
        secrets = [s for s in objs["Secret"] if s.metadata.name == f"{m.name}-env"]
        refs = sorted(f"{e['name']}={e['secretRef']['name']}/{e['secretRef']['key']}" for e in m.spec.get("env", []))
        if not refs:
            return [f"Secret {m.name}-env outlives a spec with no env"] if secrets else []
        if not secrets:
            return [f"no Secret {m.name}-env for env {refs}"]
        have = sorted(r for r in ((secrets[0].metadata.annotations or {}).get("kfold.dev/env-refs") or "").split(",") if r)
        return [] if have == refs else [f"Secret {m.name}-env lists {have}, spec says {refs}"]


def run(driver: Driver, seed: int, sessions: int = 2, steps: int = 8,
        on_step: Callable[[str], None] | None = None) -> list[Model]:
    """``steps`` rounds over ``sessions`` Sessions; each round applies one step to every Session
    (at once), waits for all to settle within the bound, then checks each against its spec."""
    rng = random.Random(seed)
    models = [Model(name=f"seq{seed % 1000}-{i}") for i in range(sessions)]
    for round_ in range(steps):
        for m in models:
            if m.spec is None and m.history and m.history[-1] == "delete":
                continue   # deleted for good in this sequence
            what = driver.step(rng, m)
            if on_step:
                on_step(f"seed {seed} round {round_} {m.name}: {what}")
        deadline = time.monotonic() + STEP_BOUND_S
        waiting = {m.name: "" for m in models}
        while time.monotonic() < deadline:
            waiting = {m.name: w for m in models if (w := driver.settled(m))}
            if not waiting:
                break
            time.sleep(0.5)
        if waiting:
            raise SequenceFailure(_report(seed, models, f"not settled within {STEP_BOUND_S:.0f} s: {waiting}"))
        for m in models:
            problems = driver.check(m)
            if problems:
                raise SequenceFailure(_report(seed, models, f"{m.name}: " + "; ".join(problems)))
    return models


def _report(seed: int, models: list[Model], what: str) -> str:
    lines = [f"sequence seed {seed}: {what}"]
    for m in models:
        lines.append(f"  {m.name}: " + " | ".join(m.history))
    return "\n".join(lines)
