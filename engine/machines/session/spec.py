"""A Session's ``spec``, validated into a small frozen record, or the first field that is wrong.

Guarantees:
- ``validate`` is pure and total: any JSON-ish input gives either a ``Spec`` or a ``SpecError``
  naming the field path (``spec.apps[1].name``) and the reason. It never raises on bad input.
- It checks the CRD's own rules first, from the one declaration the CRD is generated from
  (``session.schema``: the field path and reason admission gives), then kfold's: the default image,
  the cluster, the clone urls' form (docs/session-api.md "What kfold checks").
- A ``Spec`` holds no secret values: env entries are references (Secret name + key) only.
- ``route_ports`` never drops a port silently: each declared port is either routed or rejected
  with a reason naming the app that already holds it.
- A ``Spec`` carries what is derived from it (``routed``/``rejected``: ``route_ports``; ``digest``:
  ``shape``), computed once by ``validate``, so a step that holds a remembered spec never re-derives.
- ``shape`` is what a pod is built from; two specs with the same shape need no new pod. Ports are
  not part of the shape: a pod's ``containerPort`` list is documentation, the Service and Ingress
  are what route, so a ports-only change re-routes without a recreate.

- With ``place`` (session.tenancy.place, bound to the Session), ``cluster`` is the resolved cluster
  handle and ``tenant``/``namespace``/``bounded`` say where on it; a refusal is a ``spec.cluster``
  error. Without it, ``cluster`` is checked against the plain ``clusters`` names.

- ``image``: ``spec.image``, else (absent, null, blank) the configured default image (seed 002:
  ``spec.image || config.defaultImage``); with neither, a ``spec.image`` error naming both fixes.
- ``limits``/``requests``: ``spec.resources`` clamped to the configured ceilings
  (``session.spec.clamp``); a value that is not a Kubernetes quantity is a spec error (``session.schema``).
- ``pull_policy``: ``spec.imagePullPolicy`` (seed 002's ``pullPolicy``), set on every container;
  absent: none is set (the cluster's default), and the pod is the one made before the field.
- ``spec.cluster`` is trimmed of surrounding whitespace before it is looked up; blank = home.

Caveats:
- ``cluster`` defaults to the cluster the Session lives on; that cluster is always known.

Container resources: what a Session asks, clamped to the operator's ceilings (seed 002's
``clampLimits(config.appLimits, ...)``).

Guarantees:
- ``quantity(text)`` (``engine.quantity``) is the exact value of a Kubernetes resource quantity
  (``500m``, ``2``, ``1.5Gi``, ``1e3``) as a ``Fraction``, or None when ``text`` is not one.
- ``clamp(ceilings, limits, requests)`` -> (limits, requests), each sorted ``(resource, value)``:
  - a resource with a ceiling gets the smaller of the asked limit and the ceiling as its limit,
    and the ceiling itself when the Session asks no limit for it (the seed's
    ``clampLimits(config.appLimits, undefined)``: no ask, the ceiling is the limit);
  - a resource without a ceiling keeps the asked limit (none asked: none set);
  - a request never exceeds its resource's limit (a request above the ceiling gets the ceiling);
  - a value keeps the spelling it was given in (the Session's, or the ceiling's when that is lower).

Pure: no I/O. Values are assumed to parse (``quantity`` is checked by the callers first).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from engine.machines.session.model import canonical_json
from engine.machines.session.schema import check_name, check_spec
from engine.quantity import RESOURCE_NAME, quantity  # noqa: F401 - re-exported (kfold.daemon.config)
from engine.repo_names import RepoUrlError, cache_key
from engine.machines.session.tenancy import PlacementRefused


@dataclass(frozen=True, slots=True)
class Port:
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True, slots=True)
class App:
    name: str
    ports: tuple[Port, ...] = ()
    io: str = "none"


@dataclass(frozen=True, slots=True)
class EnvRef:
    name: str
    secret: str
    key: str


@dataclass(frozen=True, slots=True)
class Spec:
    image: str
    apps: tuple[App, ...]
    env: tuple[EnvRef, ...]
    repositories: tuple[str, ...]
    cluster: str
    limits: tuple[tuple[str, str], ...]
    suspended: bool
    stopped: bool
    tenant: str = ""           # the target cluster's tenant ("" = home or an old-form cluster)
    namespace: str = ""        # the target namespace when it is not the Session's own
    bounded: bool = False      # the target registration is namespace-bounded
    requests: tuple[tuple[str, str], ...] = ()   # container requests, clamped like ``limits``
    seed: str = ""             # spec.workspace.seedConfigMap ("" = the config's, if any)
    pull_policy: str = ""      # spec.imagePullPolicy ("" = none set: the cluster's default)
    routed: tuple[tuple[str, "Port"], ...] = ()   # ``route_ports(apps)``, derived once by ``validate``
    rejected: tuple["Rejected", ...] = ()
    digest: str = ""           # ``shape(self)``, derived once by ``validate``


@dataclass(frozen=True, slots=True)
class SpecError:
    field: str
    reason: str

    @property
    def message(self) -> str:
        return f"{self.field}: {self.reason}"


class _Bad(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(field, reason)
        self.error = SpecError(field, reason)


def validate(raw: Any, home: str, clusters: tuple[str, ...], name: str = "",
             place: Callable[[Any], Any] | None = None, default_image: str = "",
             ceilings: Pairs = ()) -> Spec | SpecError:
    """``raw`` is the Session's ``spec``; ``home`` the cluster it lives on; ``clusters`` known names;
    ``place(spec.cluster)`` (optional) resolves the target or raises ``session.tenancy.PlacementRefused``.
    ``default_image`` (config ``sessions.default_image``) is the image of a spec that names none
    (seed 002: ``spec.image || config.defaultImage``); ``ceilings`` (config ``sessions.limits``)
    bound every container's resources (``session.spec.clamp``)."""
    try:
        return _spec(raw if raw is not None else {}, home, clusters, name, place, default_image, ceilings)
    except _Bad as bad:
        return bad.error


def _spec(raw: Any, home: str, clusters: tuple[str, ...], name: str, place: Callable[[Any], Any] | None,
          default_image: str, ceilings: Pairs) -> Spec:
    declared = check_name(name) or check_spec(raw)   # the CRD's rules (session.schema), as admission has them
    if declared is not None:
        raise _Bad(declared.field, declared.reason)
    image = _image(raw.get("image"), default_image)
    apps = tuple(_app(a) for a in raw.get("apps") or ())
    env = tuple(EnvRef(e["name"], e["secretRef"]["name"], e["secretRef"]["key"]) for e in raw.get("env") or ())
    repos = _repos(raw.get("repositories") or [])
    where = _placed(raw.get("cluster"), place) if place is not None else None
    cluster = where.handle if where is not None else _cluster(raw.get("cluster"), home, clusters)
    resources = raw.get("resources") or {}
    limits, requests = clamp(ceilings, _pairs(resources.get("limits")), _pairs(resources.get("requests")))
    spec = Spec(
        image=image, apps=apps, env=env, repositories=repos, cluster=cluster,
        limits=limits, suspended=bool(raw.get("suspended")), stopped=bool(raw.get("stopped")),
        tenant=where.tenant if where else "", namespace=where.namespace if where else "",
        bounded=where.bounded if where else False, requests=requests,
        seed=(raw.get("workspace") or {}).get("seedConfigMap") or "", pull_policy=raw.get("imagePullPolicy") or "")
    routed, rejected = route_ports(apps)
    return replace(spec, routed=routed, rejected=rejected, digest=shape(spec))


def _image(raw: str | None, default_image: str) -> str:
    """The spec's image; absent, null or blank: the configured default image."""
    image = (raw or "").strip() or default_image
    _need(image != "", "spec.image", "required: the image to run; set spec.image, or configure a default "
          "image for every Session (sessions.default_image in kfold's config)")
    return image


def _placed(raw: Any, place: Callable[[Any], Any]) -> Any:
    try:
        return place(raw)
    except PlacementRefused as no:
        raise _Bad("spec.cluster", no.reason) from None


def _need(ok: bool, field: str, reason: str) -> None:
    if not ok:
        raise _Bad(field, reason)


def _app(raw: dict[str, Any]) -> App:
    ports = tuple(Port(p["port"], p.get("protocol") or "TCP") for p in raw.get("ports") or ())
    return App(name=raw["name"], ports=ports, io=raw.get("io") or "none")


def _repos(raw: list[dict[str, Any]]) -> tuple[str, ...]:
    """The clone urls, each parsed as the Repo resource parses it (kfold's rule, not the CRD's)."""
    urls = []
    for i, item in enumerate(raw):
        try:
            cache_key(item["url"])
        except RepoUrlError as exc:
            raise _Bad(f"spec.repositories[{i}].url", exc.reason) from None
        urls.append(item["url"])
    return tuple(dict.fromkeys(urls))


def _cluster(raw: Any, home: str, clusters: tuple[str, ...]) -> str:
    raw = raw.strip() if isinstance(raw, str) else raw  # as session.tenancy.place: blank = home
    if raw in (None, ""):
        return home
    _need(isinstance(raw, str) and (raw == home or raw in clusters), "spec.cluster",
          # Never list the known names: another tenant's cluster must answer exactly like a missing one.
          f"no cluster named {raw!r} is registered for this tenant")
    return raw


def _pairs(raw: dict[str, Any] | None) -> Pairs:
    """``spec.resources.limits`` or ``.requests`` (names and quantities checked by session.schema)."""
    return tuple(sorted((str(k), str(v).strip()) for k, v in (raw or {}).items()))


# -- what the spec means ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Rejected:
    app: str
    port: Port
    reason: str


def route_ports(apps: tuple[App, ...]) -> tuple[tuple[tuple[str, Port], ...], tuple[Rejected, ...]]:
    """(routed (app, port) pairs, rejected ports). The first app to declare a port keeps it."""
    owner: dict[Port, str] = {}
    routed, rejected = [], []
    for app in apps:
        for port in app.ports:
            if port in owner:
                who = "it already" if owner[port] == app.name else f"app {owner[port]!r} already"
                rejected.append(Rejected(app.name, port, f"{who} declares {port.protocol} port {port.port}"))
                continue
            owner[port] = app.name
            routed.append((app.name, port))
    return tuple(routed), tuple(rejected)


def shape(spec: Spec) -> str:
    """What the pod is built from (everything but ports and the suspend/stop flags), as a digest."""
    parts: list[Any] = [spec.image, [(a.name, a.io) for a in spec.apps],
                        [(e.name, e.secret, e.key) for e in spec.env], list(spec.repositories),
                        spec.cluster, list(spec.limits)]
    if spec.requests:  # only when asked: shapes without requests are unchanged
        parts.append(["requests", list(spec.requests)])
    if spec.namespace:  # only when not the Session's own: home-cluster shapes are unchanged
        parts.append(spec.namespace)
    if spec.seed:       # likewise: only a Session that names a seed has it in its shape
        parts.append(["seed", spec.seed])
    if spec.pull_policy:   # likewise: a spec without one keeps the shape it had before the field
        parts.append(["imagePullPolicy", spec.pull_policy])
    return canonical_json(parts, sort_keys=False)


Pairs = tuple[tuple[str, str], ...]

def ceilings(limits: dict[str, str]) -> Pairs:
    """``session.configure``'s ``limits`` as sorted pairs; a value that is no positive quantity
    (which a validated config never states) bounds nothing."""
    return tuple(sorted((k, str(v).strip()) for k, v in limits.items() if (quantity(v) or 0) > 0))


def _lower(asked: str | None, bound: str | None) -> str | None:
    if asked is None or bound is None:
        return bound if asked is None else asked
    return bound if quantity(asked) > quantity(bound) else asked  # type: ignore[operator]


def clamp(ceilings: Pairs, limits: Pairs, requests: Pairs) -> tuple[Pairs, Pairs]:
    ceiling, asked = dict(ceilings), dict(limits)
    final = {name: _lower(asked.get(name), ceiling.get(name)) for name in {*ceiling, *asked}}
    out_requests = {name: _lower(value, final.get(name)) for name, value in requests}
    return (tuple(sorted((k, v) for k, v in final.items() if v is not None)),
            tuple(sorted((k, v) for k, v in out_requests.items() if v is not None)))
