"""The registry's Kubernetes client: bounds checked and rate limited on every request.

``BoundedApiClient`` is an ``ApiClient`` (use it with ``CoreV1Api(client)``, ``CustomObjectsApi``,
``DynamicClient``, ``watch.Watch`` as usual). Guarantees:
- Checked is sent. The bound is checked on the request line itself: the client's urllib3 pools
  make connections of a subclass whose ``putrequest`` (the call that writes
  ``METHOD <target> HTTP/1.1``) first runs ``bounds.admit`` on that very ``<target>``, after every
  rewrite the client library and urllib3 made (dot-segment removal, percent-encoding, proxies'
  absolute form, redirects). Nothing reaches a socket from this client without passing it, whichever
  door it came through: typed API, ``call_api``, a raw ``rest_client.pool_manager.request`` (kfold's
  own watch reader), ``watch.Watch``. ``bounds.admit`` also refuses any target that is not in
  canonical wire form (``bounds.wire_problem``), so the apiserver cannot read the admitted target
  as another resource either. This holds for every client, bounded or not: a ``..`` never reaches
  an apiserver from kfold.
- The same check runs earlier, for an early clear error and for the websocket ``stream`` path
  (exec/attach/port-forward, which swaps ``call_api`` out and sends through websocket-client,
  which sends the admitted canonical target unchanged): in ``param_serialize`` (every generated
  and dynamic API call) and in ``call_api`` (raw callers), where the URL must also be on this
  client's own server (``Configuration.host``): a raw URL elsewhere would carry the credential away.
- Each check asks ``record_source()`` for the FRESH registration: a bound tightened after the
  client was cached applies to the very next request, and a deregistered cluster answers
  ``NotRegistered``.
- Every ``call_api`` takes a token from the client's ``TokenBucket`` (``Limits``: 50 QPS / burst
  100 by default; ``Limits(None)`` sends unpaced) and the urllib3 pool keeps up to ``burst``
  connections per host, and never fewer than ``pool_size`` (the executor's threads).
- A 401 answer to any request (watches included) calls ``on_unauthorized`` (the registry then
  re-reads the credential: ``kfold.registry.reach``).
- Every request is counted by (verb, resource, HTTP status) in ``requests`` (``kfold_client_requests_total``
  on /metrics): what kfold itself sends, watches included, beside what the apiserver counts. The
  observers' raw lists and watches (engine.effects.io.watch) report through ``note_request``.
- ``repr`` names the cluster only; the ``Configuration`` holding the credential is never printed
  by kfold.
Caveats: websocket streams (exec/attach/port-forward) are bounds-checked but not rate limited;
nor are the observers' lists and watches (they go through the pool manager, not ``call_api``).
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from collections import Counter
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config import kube_config as _kube_config
from kubernetes.config.kube_config import KubeConfigLoader

from kfold.registry import bounds, kubeconfig_files
from kfold.registry.errors import KubeconfigRefused, UnsafePath
from kfold.registry.kubeconfig import Selected, context_parts
from kfold.registry.limiter import DEFAULT_BURST, Limits
from kfold.registry.records import Registration

USER_AGENT = "kfold"
RecordSource = Callable[[], "Registration | None"]


def configuration_for(selected: Selected, base_path: str = "") -> Configuration:
    """A client ``Configuration`` from a validated kubeconfig context; pool sized for the burst."""
    cfg = Configuration()
    document = copy.deepcopy(selected.document)
    _ctx, cluster_name, cluster, user_name, user = context_parts(document, selected.context)
    kubeconfig_files.check_readable(cluster_name, cluster, user_name, user, base_path)
    kubeconfig_files.inline_token(user_name, user, base_path)
    try:
        loader = _Loader(config_dict=document, active_context=selected.context, config_base_path=base_path)
        loader.load_and_set(cfg)
        loader.first_load = False
    except KubeconfigRefused:
        raise
    except (ConfigException, OSError, ValueError) as e:
        raise KubeconfigRefused([f"it cannot be loaded ({type(e).__name__}: {e})"]) from None
    kubeconfig_files.check_tls(cfg, cluster_name, cluster, user_name, user)
    return tuned(cfg)


class _PluginLog:
    """Stands in for ``logging`` in the client library's kubeconfig loader, which only logs a
    failed exec credential plugin (``logging.error``: the plugin's whole stderr on the root
    logger) and goes on without credentials. On a thread inside ``_Loader``'s plugin call the
    message is kept for the loader to raise as one line; elsewhere it goes to the
    ``kubernetes.config`` logger as a single record."""

    def __init__(self) -> None:
        self.local = threading.local()

    def error(self, msg: Any, *args: Any) -> None:
        text = str(msg) % args if args else str(msg)
        kept = getattr(self.local, "kept", None)
        if kept is not None:
            kept.append(text)
        else:
            logging.getLogger("kubernetes.config").error("%s", _one_line(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(logging, name)


_PLUGIN_LOG = _PluginLog()
_KLOG = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")
_kube_config.logging = _PLUGIN_LOG   # see _PluginLog


class _Loader(KubeConfigLoader):
    """The library's loader, except that an exec credential plugin that fails when the client is
    made is an error (``KubeconfigRefused``, one line: the plugin, its exit and the first line it
    printed) rather than a client without credentials. A later refresh (the token expired) that
    fails logs one line and keeps the previous token, as the library does."""

    first_load = True

    def _load_from_exec_plugin(self) -> Any:
        if "exec" not in self._user:
            return None
        _PLUGIN_LOG.local.kept = kept = []
        try:
            loaded = super()._load_from_exec_plugin()
        finally:
            _PLUGIN_LOG.local.kept = None
        if loaded or not self.first_load:
            for text in kept:
                logging.getLogger("kubernetes.config").error("%s", _one_line(text))
            return loaded
        command = self._user["exec"].safe_get("command") or "?"
        why = _one_line(kept[0] if kept else "it gave no token or client certificate")
        user = self._current_context["context"].safe_get("user") or "?"
        raise KubeconfigRefused([f"user {user!r}: its exec credential plugin {command} failed: {why}; run it yourself to see why "
                                 "(log in again, or install it), or use a kubeconfig with a token"])


def _one_line(text: str, limit: int = 320) -> str:
    """A message's first line, cut to ``limit`` characters (a plugin may print pages)."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    line = _KLOG.sub("", line.removeprefix("exec: "))   # a Go plugin's log header: F1207 15:14:24.509 32446 cred.go:145]
    if "No such file or directory" in line:
        return "not found on PATH"
    return line if len(line) <= limit else line[:limit] + "…"


def tuned(cfg: Configuration, pool_size: int = DEFAULT_BURST) -> Configuration:
    """Apply kfold's transport settings: no debug logging, a pool that can carry the burst, and
    no urllib3 retries: its default ``Retry(3)`` would silently repeat a DELETE after a read error
    and wait out 429s behind kfold's back. kfold decides every retry itself (journaled)."""
    cfg.debug = False
    cfg.connection_pool_maxsize = pool_size
    cfg.retries = False
    paced_refresh(cfg)
    return cfg


REFRESH_EVERY_S = 1.0


def paced_refresh(cfg: Configuration, every_s: float = REFRESH_EVERY_S,
                  monotonic: Callable[[], float] = time.monotonic) -> None:
    """Run the client library's ``refresh_api_key_hook`` at most once per ``every_s`` instead of on
    every request. The library's hooks (kubeconfig tokens, in-cluster service-account tokens) check
    an expiry with minutes of margin, then re-apply the whole configuration, which re-reads every
    environment variable for proxy settings: that was ~15% of a request's CPU. The library
    re-installs its hook on each call; this wrapper keeps itself in front of the newest one."""
    inner = cfg.refresh_api_key_hook
    if inner is None:
        return
    last = [float("-inf")]

    def hook(c: Configuration) -> None:
        nonlocal inner
        now = monotonic()
        if now - last[0] < every_s:
            return
        last[0] = now
        inner(c)
        fresh = c.refresh_api_key_hook
        if fresh is not hook and fresh is not None:
            inner = fresh
        c.refresh_api_key_hook = hook

    cfg.refresh_api_key_hook = hook


class BoundedApiClient(ApiClient):
    """An ApiClient that checks the fresh registration's bound and paces every request."""

    def __init__(
        self,
        configuration: Configuration,
        *,
        label: str,
        record_source: RecordSource,
        limits: Limits = Limits(),
        pool_size: int = 0,
        on_unauthorized: Callable[[], None] | None = None,
    ) -> None:
        # The pool carries the burst, and at least ``pool_size`` (the executor's threads): a thread
        # finding no idle connection opens one, and urllib3 discards it after the request when the
        # pool is full, so each request beyond the pool's width would pay a TLS handshake.
        configuration.connection_pool_maxsize = max(limits.burst, pool_size)
        super().__init__(configuration)
        self.user_agent = USER_AGENT
        self.label = label
        self.limits = limits
        self.limiter = limits.bucket()   # None: unlimited
        self._record_source = record_source
        self._on_unauthorized = on_unauthorized
        self._origin = configuration.host.rstrip("/")
        self._prefix = urlsplit(self._origin).path
        check_on_the_wire(self.rest_client.pool_manager, self._admit_sent)
        self.requests: Counter[tuple[str, str, str]] = Counter()   # (verb, resource, code) -> sent
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<BoundedApiClient cluster={self.label}>"

    __str__ = __repr__

    @property
    def registration(self) -> Registration | None:
        """The fresh record (None for the home cluster, which has no bound)."""
        return self._record_source()

    def resolve_namespace(self, namespace: str | None) -> tuple[str, ...]:
        """``bounds.resolve`` against the fresh record."""
        record = self._record_source()
        if record is None:
            return (namespace,) if namespace else (bounds.ALL_NAMESPACES,)
        return bounds.resolve(record, namespace)

    def admit(self, method: str, url: str) -> None:
        """Raise ``UnsafePath``, ``OutOfBounds`` or ``NotRegistered`` unless ``method url`` may
        leave: ``url`` on this client's server, its target in wire form and inside the bound."""
        if not url.startswith(self._origin + "/"):
            raise UnsafePath(method, url, f"it is not on this cluster's server {self._origin}")
        self._admit_target(method, url[len(self._origin):])

    def param_serialize(self, method, resource_path, *args, **kwargs):  # type: ignore[override]
        serialized = super().param_serialize(method, resource_path, *args, **kwargs)
        self.admit(serialized[0], serialized[1])
        return serialized

    def call_api(self, method, url, *args, **kwargs):  # type: ignore[override]
        return self._paced(method, url, lambda: super(BoundedApiClient, self).call_api(method, url, *args, **kwargs))

    def send_encoded(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
                     timeout: tuple[float, float]) -> Any:
        """``call_api`` for a body already encoded as JSON (the executor's requests): the same bound
        check, token and count, then straight to this client's pool manager (whose connections
        check the request line too), without the client library re-walking and re-encoding the
        body. Returns the unread urllib3 response, whatever its status."""
        return self._paced(method, url, lambda: self.rest_client.pool_manager.request(
            method, url, body=body, headers=headers, preload_content=False,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1])))

    def _paced(self, method: str, url: str, send: Callable[[], Any]) -> Any:
        self.admit(method, url)
        if self.limiter is not None:
            self.limiter.acquire()
        code: int | str = "error"
        try:
            reply = send()
            code = reply.status
            return reply
        finally:
            self.note_request(method, url, code)

    def note_request(self, method: str, url: str, code: int | str) -> None:
        """Count one request sent (also called by the observers' raw list/watch, which bypass
        ``call_api``)."""
        key = (*request_kind(method, self._path(url), urlsplit(url).query), str(code))
        with self._count_lock:
            self.requests[key] += 1
        if code == 401 and self._on_unauthorized is not None:
            self._on_unauthorized()

    def _path(self, url: str) -> str:
        path = urlsplit(url).path
        if self._prefix and path.startswith(self._prefix):
            path = path[len(self._prefix):]
        return path or "/"

    def _admit_sent(self, method: str, target: str) -> None:
        """The check on the request line: ``target`` is exactly what follows the method."""
        if not target.startswith("/"):  # absolute form, through an HTTP proxy
            return self.admit(method, target)
        if not target.startswith(self._prefix + "/"):
            raise UnsafePath(method, target, f"it is outside this cluster's server path {self._prefix}")
        return self._admit_target(method, target[len(self._prefix):])

    def _admit_target(self, method: str, target: str) -> None:
        bounds.admit(self._record_source(), method, target)


def check_on_the_wire(pool_manager: Any, admit: Callable[[str, str], None]) -> None:
    """Make every connection ``pool_manager`` opens call ``admit(method, target)`` in
    ``putrequest``, before the request line is written (see module contract)."""
    pool_manager.pool_classes_by_scheme = {
        scheme: type(f"Checked{pool.__name__}", (pool,), {"ConnectionCls": _checked(pool.ConnectionCls, admit)})
        for scheme, pool in pool_manager.pool_classes_by_scheme.items()
    }


def _checked(connection: type, admit: Callable[[str, str], None]) -> type:
    def putrequest(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> None:
        admit(method, url)
        connection.putrequest(self, method, url, *args, **kwargs)

    return type(f"Checked{connection.__name__}", (connection,), {"putrequest": putrequest})


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_kind(method: str, path: str, query: str = "") -> tuple[str, str]:
    """``(verb, resource)`` of a request path as the apiserver names them: ``("watch", "pods")``,
    ``("patch", "sessions/status")``, ``("get", "namespaces")``; non-resource paths are their path."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method.lower(), path
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]                  # namespaced: drop "namespaces/<ns>"
    resource = "/".join(rest[:1] + rest[2:3])   # kind, then a subresource after the name
    named = len(rest) >= 2
    if method == "GET":
        watch = parse_qs(query).get("watch", [""])[0] in ("true", "1")
        verb = "watch" if watch else ("get" if named else "list")
    else:
        verb = _VERBS.get(method, method.lower())
    return verb, resource
