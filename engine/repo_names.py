"""The Repo resource's vocabulary: repository identity, cache key, and reading a Repo back.

Pure: no clock, no I/O. The session machine imports ``cache_key`` and ``identity`` from here to
compute a repo key without importing the repo machine.

Guarantees:
- ``identity(url)`` is the same for every spelling of one repository: the scheme, credentials and
  port are dropped, the host is lower-cased, a trailing ``.git`` and slashes are dropped. So
  ``git@github.com:Org/App.git``, ``ssh://git@github.com/Org/App`` and
  ``https://user:tok@GitHub.com/Org/App.git`` all give ``github.com/Org/App``. The path keeps its
  case (hosts differ on whether it matters).
- ``cache_key(url)`` is a DNS label (RFC 1123, at most 63 characters), a deterministic function of
  the identity. When the readable form is too long it is cut and given a ``-<10 hex>`` suffix
  hashed (sha256) from the whole identity, so two long identities never share a key by truncation.
- Anything unparsable raises ``RepoUrlError`` naming the value and the reason.

Caveats:
- The readable form folds case and punctuation (``a.b/c`` and ``a-b/c`` give one key). The repo
  machine checks the identity annotation of an existing resource and refuses a collision by name
  rather than sharing one cache between two repositories.
- The port is dropped: an ssh port and an https port of one host are one repository.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

from engine.rfc3339 import to_ms, to_text

GROUP = "kfold.dev"
API_VERSION = "kfold.dev/v1alpha1"
KIND = "Repo"
LABEL_BOUND = "kfold.dev/repo-bound"
ANNOTATION_IDENTITY = "kfold.dev/repo-identity"
ANNOTATION_LAST_ATTACHED = "kfold.dev/last-attached"

_SCHEMES = {"https": "https", "http": "https", "ssh": "ssh", "git+ssh": "ssh", "ssh+git": "ssh",
            "git": "git"}
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]*@)?(?P<host>[^/:?#]*)(?::(?P<port>\d*))?(?P<path>/[^?#]*)?$")
_SCP = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:@]+):(?!//)(?P<path>[^?#]*)$")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~%+-]+$")
MAX_LABEL = 63
HASH_LEN = 10


class RepoUrlError(ValueError):
    """A repository url or identity that cannot be used; the message names the value and why."""

    def __init__(self, value: Any, reason: str):
        value = without_password(value) if isinstance(value, str) else value
        super().__init__(f"repository {value!r} refused: {reason}")
        self.value = value
        self.reason = reason


def without_password(url: str) -> str:
    """The url with any password in its userinfo dropped: what kfold writes, logs and journals.

    ``https://user:tok@host/p`` -> ``https://user@host/p``; the credential reaches the cache agent
    through ``secretRef`` only."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^@/:]*):[^@/]*@", url)
    return url if not m else f"{m[1]}{m[2] + '@' if m[2] else ''}{url[m.end():]}"


def identity(url: str) -> str:
    """The normalised identity ``host/path`` of a clone url (see the module contract)."""
    host, path, _ = _split(url)
    return _join(url, host, path)


def transport(url: str) -> str:
    """Which credential field a url spends: ``https`` (token), ``ssh`` (deploy key) or ``git``."""
    return _split(url)[2]


def cache_key(url: str) -> str:
    """The Repo resource name for a url: a DNS label derived from its identity."""
    return key_of_identity(identity(url))


def key_of_identity(ident: str) -> str:
    check_identity(ident)
    readable = re.sub(r"[^a-z0-9]+", "-", ident.lower()).strip("-")
    if len(readable) <= MAX_LABEL:
        return readable
    digest = hashlib.sha256(ident.encode()).hexdigest()[:HASH_LEN]
    return f"{readable[:MAX_LABEL - HASH_LEN - 1].rstrip('-')}-{digest}"


def check_identity(ident: Any) -> str:
    """Refuse anything that is not a normalised ``host/path`` identity; returns it unchanged."""
    if not isinstance(ident, str) or "/" not in ident:
        raise RepoUrlError(ident, "an identity is 'host/path' (no scheme, no credentials)")
    host, path = ident.split("/", 1)
    if host != host.lower() or not _HOST.match(host):
        raise RepoUrlError(ident, f"host {host!r} is not a lower-case DNS name")
    _check_path(ident, path)
    if ident.endswith(".git"):
        raise RepoUrlError(ident, "an identity drops the trailing '.git'")
    return ident


def _split(url: Any) -> tuple[str, str, str]:
    if not isinstance(url, str) or not url.strip():
        raise RepoUrlError(url, "empty or not a string")
    if url != url.strip() or any(c.isspace() for c in url):
        raise RepoUrlError(url, "contains whitespace")
    m = _URL.match(url)
    if m:
        scheme = m["scheme"].lower()
        if scheme not in _SCHEMES:
            raise RepoUrlError(url, f"scheme {scheme!r} is not one of {', '.join(sorted(_SCHEMES))}")
        return m["host"], m["path"] or "", _SCHEMES[scheme]
    if "://" in url:
        raise RepoUrlError(url, "not a parsable url")
    m = _SCP.match(url)
    if m:
        return m["host"], m["path"], "ssh"
    raise RepoUrlError(url, "neither 'scheme://host/path' nor ssh 'user@host:path'")


def _join(url: str, host: str, path: str) -> str:
    host = host.lower()
    if not host or not _HOST.match(host):
        raise RepoUrlError(url, f"host {host!r} is not a DNS name")
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4].rstrip("/")
    _check_path(url, path)
    return f"{host}/{path}"


def _check_path(value: str, path: str) -> None:
    if not path:
        raise RepoUrlError(value, "no repository path after the host")
    for seg in path.split("/"):
        if seg in ("", ".", "..") or not _SEGMENT.match(seg):
            raise RepoUrlError(value, f"path segment {seg!r} is empty, relative or has odd characters")


# -- time on the server's clock (pure conversions, no clock is read) ---------------------------
# The shared pure conversions, under the names the repo machine uses.
rfc3339 = to_text
epoch_ms = to_ms


# -- reading a Repo back (reduce the raw object) -----------------------------------------------
_NODE_OPTIONAL = ("attempted", "lastAttempt", "lastFetched")


def repo_status_rows(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The cache agent's per-node status, as ``kfold repos`` prints it.

    Guarantees: ``node``, ``present`` and ``synced`` are always there (false when unreported);
    ``attempted``/``lastAttempt``/``lastFetched`` only when reported; ``lastError`` only when
    reported and non-empty. Rows keep the agent's order; entries without a node name are dropped."""
    nodes = ((obj or {}).get("status") or {}).get("nodes") or []
    return [_node_row(n) for n in nodes if isinstance(n, dict) and n.get("node")]


def _node_row(n: dict[str, Any]) -> dict[str, Any]:
    row = {"node": str(n["node"]), "present": n.get("present") is True, "synced": n.get("synced") is True}
    row.update({f: n[f] for f in _NODE_OPTIONAL if n.get(f) is not None})
    if n.get("lastError"):
        row["lastError"] = n["lastError"]
    return row
