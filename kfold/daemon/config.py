"""The ``kfold run`` configuration file (YAML), validated field by field. See docs/config.md.

Guarantees:
- ``read_config(path)`` returns a frozen ``Config`` or raises ``ConfigError`` whose message names
  the file, the field (``repos.bindings[0].url``) and what to do:
  ``kfold: config /etc/kfold/config.yaml: field repos.bindings[0].url: ...``.
- Unknown fields are errors (a typo never silently falls back to a default).
- The configuration holds no secret values: credentials name environment variables or Secrets.
- ``command_drafts`` turns it into the boot commands the machines read; only the NAMES of the
  environment variables that are set are passed (``env_present``), never their values.
"""
from __future__ import annotations

import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Mapping, Union, get_args, get_origin

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from engine.machines.session.spec import RESOURCE_NAME, quantity

from kfold.registry.limiter import DEFAULT_BURST, DEFAULT_QPS, Limits

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LISTEN = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-]*):(\d{1,5})$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RateLimit(_Model):
    """Client-side pacing of one cluster's client: ``qps`` null or 0 = no client-side limit."""
    qps: float | None = Field(default=None, ge=0)
    burst: int = Field(default=100, ge=1, le=10_000)   # also the size of the connection pool

    def limits(self) -> Limits:
        return Limits(self.qps or None, self.burst)


class ClusterConfig(RateLimit):
    name: str = "local"
    kubeconfig: str | None = None
    context: str | None = None
    allow_exec: bool = False   # run the kubeconfig's exec credential plugin (gke/eks/aks login), docs/cli.md
    service_account_dir: str = "/var/run/secrets/kubernetes.io/serviceaccount"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _DNS_LABEL.match(v):
            raise ValueError(f"{v!r} is not a DNS label (lower-case letters, digits, '-'); e.g. 'local'")
        return v


class RetentionConfig(_Model):
    keep_snapshots: int = Field(4, ge=0)     # 0: keep everything
    archive_dir: str | None = None           # JSONL of what is cut, written before the cut


class JournalConfig(_Model):
    """See ``journal.retention`` for the snapshot cadence and the retention policy."""

    path: str = "/var/lib/kfold/journal.db"
    snapshot_ratio: float = Field(20.0, ge=1)            # record bytes between snapshots / snapshot size
    snapshot_min_bytes: int = Field(4 << 20, ge=0)       # ... and at least this many record bytes
    snapshot_every: int | None = Field(None, ge=1)       # ... and at most this many records (None: no bound)
    retention: RetentionConfig = RetentionConfig()

    def snapshot_policy(self) -> Any:
        from journal.retention import SnapshotPolicy
        return SnapshotPolicy(ratio=self.snapshot_ratio, min_bytes=self.snapshot_min_bytes, every=self.snapshot_every)

    def retention_policy(self) -> Any:
        from journal.retention import Retention
        return Retention(keep_snapshots=self.retention.keep_snapshots, archive_dir=self.retention.archive_dir)


class Deadlines(_Model):
    start_seconds: int = Field(180, ge=1)
    ready_seconds: int = Field(120, ge=1)
    watch_idle_seconds: int = Field(70, ge=5)


_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class WorkspaceConfig(_Model):
    """Where a Session's workspace lives. With ``storage_class`` set, each Session gets a
    PersistentVolumeClaim ``<session>-workspace`` that outlives its generations (suspend, resume,
    set-apps keep the files) and is deleted at teardown; without it the workspace is an emptyDir
    of each pod (its files are lost whenever the pod is recreated). ``seed_configmap`` names a
    ConfigMap in the Session's namespace whose files are copied into a new workspace once (a
    Session's ``spec.workspace.seedConfigMap`` overrides it)."""
    storage_class: str | None = None
    size: str = "1Gi"
    access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = "ReadWriteOnce"
    seed_configmap: str | None = None

    @field_validator("storage_class", "seed_configmap")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_SUBDOMAIN.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes object name (lower-case DNS subdomain)")
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        if not _QUANTITY.match(v):
            raise ValueError(f"{v!r} is not a storage quantity; e.g. '1Gi' or '500Mi'")
        return v


class SweepConfig(_Model):
    grace_seconds: int = Field(600, ge=0)
    interval_seconds: int = Field(300, ge=10)
    resync_seconds: int = Field(36000, ge=60)   # every namespace's Secrets, whatever happened (kfold.daemon.sweeps)


class Binding(_Model):
    url: str

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if "://" not in v and "@" not in v:
            raise ValueError(f"{v!r} is not a git URL; use https://host/path.git or git@host:path.git")
        if re.match(r"^[a-z]+://[^/@]*:[^/@]*@", v):
            raise ValueError("the URL carries a password; put the token in an environment variable "
                             "and name it under repos.credentials")
        return v


class Credential(_Model):
    match: str
    env: str | None = None
    secret: str | None = None

    @field_validator("env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", v):
            raise ValueError(f"{v!r} is not an environment variable name")
        return v


class ReposConfig(_Model):
    bindings: tuple[Binding, ...] = ()
    credentials: tuple[Credential, ...] = ()
    refresh_interval: str = "5m"
    gc_ttl_seconds: int = Field(7 * 24 * 3600, ge=0)
    gc_interval_seconds: int = Field(3600, ge=60)


class LogConfig(_Model):
    format: Literal["plain", "json"] = "plain"
    level: Literal["debug", "info", "warning", "error"] = "info"


def _check_listen(v: str | None) -> str | None:
    m = _LISTEN.match(v) if v is not None else True
    if not m or (v is not None and not 0 < int(m.group(2)) < 65536):
        raise ValueError(f"{v!r} is not HOST:PORT; e.g. '0.0.0.0:8080' or '127.0.0.1:9090'")
    return v


def host_port(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT``, ``:PORT``) as a bind address; an empty host is every IPv4 one."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class HttpConfig(_Model):
    """The probes, plain HTTP: ``/healthz``, ``/readyz`` (and ``/metrics`` when ``metrics.listen``
    is null). ``kfold run --listen`` overrides ``listen``."""
    listen: Annotated[str, AfterValidator(_check_listen)] = "0.0.0.0:8080"

    @property
    def host_port(self) -> tuple[str, int]:
        return host_port(self.listen)


class MetricsConfig(_Model):
    """Where ``/metrics`` is served (kfold.daemon.secure). ``listen`` null: beside the probes on
    ``http.listen``, plain HTTP, no authentication (a local run). Set (``--metrics-listen``): a
    port of its own, and with ``secure`` (the default) over HTTPS, readable only by a caller the
    apiserver authenticates (TokenReview) and allows to ``get`` the non-resource URL ``/metrics``
    (SubjectAccessReview), as controller-runtime's ``filters.WithAuthenticationAndAuthorization``.
    ``cert_dir``: ``tls.crt`` and ``tls.key`` there (a mounted Secret, re-read when they change);
    null, or a directory with neither file: a self-signed certificate made at start."""
    listen: Annotated[str | None, AfterValidator(_check_listen)] = None
    secure: bool = True
    cert_dir: str | None = None

    @property
    def host_port(self) -> tuple[str, int] | None:
        return host_port(self.listen) if self.listen is not None else None


class ExecutorConfig(_Model):
    threads: int = Field(64, ge=1, le=1024)
    max_attempts: int = Field(6, ge=1)


MIN_MARGIN_S = 2   # leader.margin_seconds: a server-clock step of up to 1 s, plus 1 s of latency


class LeaderConfig(_Model):
    """Leader election on a Lease (kfold.daemon.leader); off: this daemon is the only writer (one replica)."""
    enabled: bool = False
    lease_name: str = "kfold"
    namespace: str | None = None     # None: the service account's namespace, else the first of ``namespaces``
    lease_seconds: int = Field(15, ge=3, le=3600)
    renew_seconds: int = Field(10, ge=2)
    retry_seconds: float = Field(2, gt=0)
    margin_seconds: int = 2          # >= MIN_MARGIN_S (``_margin``)
    # kfold.daemon.shards: > 1 spreads Sessions over the replicas, one Lease per shard (``<lease_name>-shard-<i>``);
    # 1: one Lease (``lease_name``), one leader, the others standbys
    shards: int = Field(1, ge=1, le=256)

    @field_validator("lease_name", "namespace")
    @classmethod
    def _dns(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_LABEL.match(v):
            raise ValueError(f"{v!r} is not a DNS label (lower-case letters, digits, '-')")
        return v

    @field_validator("margin_seconds")
    @classmethod
    def _margin(cls, v: int) -> int:
        """The fence holds while an apiserver clock step plus a request's latency stays under the
        margin (docs/ha.md): a 1 s step needs 1 s, and the latency 1 s more."""
        if v < MIN_MARGIN_S:
            raise ValueError(f"{v} is too small: the fence needs 1 s for an apiserver clock step of up to 1 s and 1 s "
                             f"for a request's latency; set leader.margin_seconds to {MIN_MARGIN_S} or more")
        return v

    @model_validator(mode="after")
    def _order(self) -> "LeaderConfig":
        if not self.retry_seconds < self.renew_seconds <= self.lease_seconds - self.margin_seconds:
            raise ValueError(f"need retry_seconds ({self.retry_seconds:g}) < renew_seconds ({self.renew_seconds}) "
                             f"<= lease_seconds ({self.lease_seconds}) - margin_seconds ({self.margin_seconds}); "
                             "e.g. 2 < 10 <= 15 - 2")
        return self


def _ceiling(v: Any) -> str:
    ok = not isinstance(v, bool) and isinstance(v, (str, int, float)) and (quantity(v) or 0) > 0
    if not ok:
        raise ValueError(f"{v!r} is not a positive Kubernetes quantity; e.g. '2', '500m' or '4Gi'")
    return str(v).strip()


class SessionsConfig(_Model):
    """What every Session gets from the operator (seed 002: ``config.defaultImage``,
    ``clampLimits(config.appLimits, ...)``)."""
    default_image: str | None = None     # the image of a Session whose spec names none
    limits: dict[str, Annotated[str, BeforeValidator(_ceiling)]] = Field(default_factory=dict)

    @field_validator("default_image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and (v.strip() == "" or any(c.isspace() for c in v.strip())):
            raise ValueError(f"{v!r} is not an image reference; e.g. 'registry.example/sandbox:1' (or null)")
        return v.strip() if v is not None else v

    @field_validator("limits")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not RESOURCE_NAME.match(name):
                raise ValueError(f"key {name!r} is not a resource name; e.g. 'cpu', 'memory', 'nvidia.com/gpu'")
        return v


class EventsConfig(_Model):
    """The Kubernetes Events kfold posts about a Session (``kubectl describe session``), as kopf's
    ``settings.posting.level``: ``Normal`` posts every one (Ready, Stopped, and the warnings);
    ``Warning`` only the warnings (Failed with its reason, TeardownBlocked, Quarantined)."""
    level: Literal["Normal", "Warning"] = "Normal"


class RegistryConfig(_Model):
    """Where registered clusters live: the same layout as ``kfold cluster --registry-dir``; how
    fast kfold may talk to them (``qps``/``burst``: every registered cluster, seed 004's 50/100;
    ``limits``: per cluster handle ``<name>@<tenant>``)."""

    dir: str | None = None        # None: "<journal dir>/registry"
    credentials: Literal["directory", "secrets"] = "directory"
    secrets_namespace: str | None = None   # credentials=secrets: kfold's own namespace
    rescan_seconds: int = Field(default=30, ge=0)   # re-read registrations this often (0: only at start)
    credential_refresh_seconds: int = Field(default=60, ge=0)   # re-read a held credential this often (and on a 401)
    qps: float | None = Field(default=DEFAULT_QPS, ge=0)
    burst: int = Field(default=DEFAULT_BURST, ge=1, le=10_000)
    limits: dict[str, RateLimit] = Field(default_factory=dict)

    def default_limits(self) -> Limits:
        return Limits(self.qps or None, self.burst)

    @field_validator("limits")
    @classmethod
    def _limits(cls, v: dict[str, RateLimit]) -> dict[str, RateLimit]:
        for key in v:
            name, _, tenant = key.partition("@")
            if not (_DNS_LABEL.match(name) and _DNS_LABEL.match(tenant)):
                raise ValueError(f"key {key!r} is not a cluster handle '<name>@<tenant>'; e.g. 'edge@acme'")
        return v

    @field_validator("secrets_namespace")
    @classmethod
    def _ns(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_LABEL.match(v):
            raise ValueError(f"{v!r} is not a namespace name (DNS label)")
        return v


def _namespace(v: str) -> str:
    if not _DNS_LABEL.match(v):
        raise ValueError(f"{v!r} is not a namespace name (a DNS label: lower-case letters, digits and '-'); "
                         f"e.g. 'team-a'")
    return v


class Config(_Model):
    cluster: ClusterConfig = ClusterConfig()
    registry: RegistryConfig = RegistryConfig()
    tenants: dict[str, str] = Field(default_factory=dict)   # Session namespace -> tenant
    namespaces: tuple[Annotated[str, AfterValidator(_namespace)], ...] = Field(min_length=1)
    base_domain: str | None = None   # None: cluster-internal endpoints only (a Service, no Ingress)
    journal: JournalConfig = JournalConfig()
    deadlines: Deadlines = Deadlines()
    workspace: WorkspaceConfig = WorkspaceConfig()
    sweep: SweepConfig = SweepConfig()
    repos: ReposConfig = ReposConfig()
    log: LogConfig = LogConfig()
    http: HttpConfig = HttpConfig()
    metrics: MetricsConfig = MetricsConfig()
    executor: ExecutorConfig = ExecutorConfig()
    leader: LeaderConfig = LeaderConfig()
    sessions: SessionsConfig = SessionsConfig()
    events: EventsConfig = EventsConfig()

    @field_validator("tenants")
    @classmethod
    def _tenants(cls, v: dict[str, str]) -> dict[str, str]:
        for ns, tenant in v.items():
            if not _DNS_LABEL.match(ns):
                raise ValueError(f"key {ns!r} is not a namespace name (DNS label)")
            if not _DNS_LABEL.match(tenant):
                raise ValueError(f"tenants[{ns}] {tenant!r} is not a tenant name (DNS label)")
        return v

    @field_validator("metrics")
    @classmethod
    def _own_port(cls, v: MetricsConfig, info: ValidationInfo) -> MetricsConfig:
        probes = info.data.get("http")   # validated before (declared above); absent if it failed
        if v.listen is not None and probes is not None and v.host_port[1] == probes.host_port[1]:
            raise ValueError(f"metrics.listen {v.listen!r} uses http.listen's port ({probes.listen!r}); give /metrics "
                             "a port of its own (e.g. 0.0.0.0:8443), or null to serve it beside the probes")
        return v

    @field_validator("base_domain")
    @classmethod
    def _domain(cls, v: str | None) -> str | None:
        if v is None:
            return v
        labels = v.split(".")
        if len(labels) < 2 or not all(_DNS_LABEL.match(x) for x in labels):
            raise ValueError(f"{v!r} is not a DNS domain; e.g. 'sessions.example.com' (or leave base_domain "
                             "out for cluster-internal endpoints only)")
        return v


class ConfigError(Exception):
    """A config file kfold cannot run with; the message is meant for the operator as is."""


def read_config(path: str | Path, overrides: Mapping[str, Any] | None = None,
                flags: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate; ``overrides`` are dotted paths (``journal.path``) from the CLI,
    ``flags`` the flag that set each (``{"namespaces": "-n/--namespace"}``): a bad value given
    by a flag is blamed on that flag, not on the file."""
    where = f"kfold: config {path}"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror}; pass --config PATH to an existing file") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where}: not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of fields (see kfold/data/config.example.yaml)")
    given = {k: (flags or {}).get(k, f"the flag that sets {k}") for k, v in (overrides or {}).items() if v is not None}
    return parse_config(_apply(raw, overrides or {}), where, given)


def parse_config(raw: dict[str, Any], where: str = "kfold: config", flags: Mapping[str, str] | None = None) -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        failed = {e["loc"][:-1] for e in errors if isinstance(e["loc"][-1], int)}   # fields with a bad item
        errors = [e for e in errors if not (e["type"] == "too_short" and e["loc"] in failed)]  # counted after it
        raise ConfigError("\n".join(_blame(e, where, flags or {}) for e in errors)) from None


def _blame(err: Any, where: str, flags: Mapping[str, str]) -> str:
    """``where: field F: what is wrong; the fix``, or ``kfold: FLAG: ...`` for a value a flag set."""
    dotted = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
    flag = next((f for path, f in flags.items() if dotted == path or dotted.startswith(path + ".")), None)
    if flag is not None:
        return f"kfold: {flag}: {_what(err, flag=True)}"
    return f"{where}: field {_field(err['loc'])}: {_what(err)}"


# pydantic's error types, in kfold's words: what the field must be (ctx fills the braces)
_MUST = {
    "tuple_type": "must be a list (e.g. [a, b], or one '- item' per line)",
    "list_type": "must be a list (e.g. [a, b], or one '- item' per line)",
    "dict_type": "must be a mapping ('key: value' lines)",
    "model_type": "must be a mapping of its fields (see docs/config.md)",
    "model_attributes_type": "must be a mapping of its fields (see docs/config.md)",
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "string_type": "must be text (quote it if YAML reads it as something else: \"...\")",
    "greater_than_equal": "must be {ge} or more", "greater_than": "must be more than {gt}",
    "less_than_equal": "must be {le} or less", "less_than": "must be less than {lt}",
    "literal_error": "must be one of {expected}",
    "too_short": "needs at least {min_length} item(s)", "too_long": "takes at most {max_length} item(s)",
}


def _what(err: Any, flag: bool = False) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "missing":
        return "required; add it (see docs/config.md)"
    if kind == "extra_forbidden":
        return "unknown field; " + _suggest(err["loc"])
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", err["msg"])).removeprefix("Value error, ")
    must = _MUST.get(kind)
    text = must.format(**{k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in ctx.items()}) \
        if must else err["msg"]
    return f"{text} (got {err.get('input')!r})" if not flag else f"{text}, not {err.get('input')!r}"


def _suggest(loc: tuple[Any, ...]) -> str:
    """``did you mean 'path'?`` for a misspelt field (difflib), else the fields allowed there."""
    import difflib
    names = _fields_at(loc[:-1])
    if not names:
        return "check the spelling against docs/config.md"
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    if close:
        return f"did you mean {_field((*loc[:-1], close[0]))}?"
    return f"the fields here are {', '.join(names)} (docs/config.md)"


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model that ``loc`` (a path into the raw config) points at."""
    node: Any = Config
    for part in loc:
        node = _unwrapped(node)
        if _is_model(node):
            field = node.model_fields.get(part) if isinstance(part, str) else None
            node = field.annotation if field is not None else None
        elif get_origin(node) in (tuple, list, dict):   # an item or a mapping's value
            node = get_args(node)[-1 if get_origin(node) is dict else 0]
        else:
            return []
    node = _unwrapped(node)
    return sorted(node.model_fields) if _is_model(node) else []


def _unwrapped(node: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while get_origin(node) in (Union, UnionType, Annotated):
        node = next(a for a in get_args(node) if a is not type(None))
    return node


def _is_model(node: Any) -> bool:
    return isinstance(node, type) and issubclass(node, BaseModel)


def _field(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _apply(raw: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = out
        *parents, leaf = dotted.split(".")
        for p in parents:
            node[p] = dict(node.get(p) or {})
            node = node[p]
        node[leaf] = value
    return out
