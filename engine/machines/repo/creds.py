"""What kfold writes on a Repo: git credentials resolved to a ``secretRef``, and the statements.

Credentials (issue 3, rule 6):
- An entry ``{match, env?, secret?}`` applies to an identity equal to ``match`` or under it on a
  path-segment boundary (``github.com/org`` covers ``github.com/org/app``, not
  ``github.com/org-x/app``); the longest match wins, the first listed on a tie.
- The url's transport picks the field: https spends a token from the environment variable ``env``,
  materialised as a Secret in Flux's shape (``username: x-access-token``, ``password: <token>``);
  ssh names ``secret``, an existing deploy-key Secret kfold never reads; ``git://`` is anonymous.
- The fold never sees a token: it knows only which variable NAMES are set (``env_present``), and
  the ``ApplySecret`` effect names the variable; the executor reads it at apply time.
- An unset token variable means no ``secretRef`` (anonymous clone); it is reported once, by the
  bind at boot (``missing_env``), never per attach.

Statements: the create manifest and the merge patches (RFC 7386, ``None`` clears). Bind states the
url, ``secretRef``, identity and bound label, never ``last-attached``; an attach moves the clock.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from engine.labels import MANAGED_LABELS
from engine.machines.base import Decision
from engine.repo_names import (
    ANNOTATION_IDENTITY, ANNOTATION_LAST_ATTACHED, API_VERSION, KIND, LABEL_BOUND,
    RepoUrlError, check_identity, transport,
)

TOKEN_USERNAME = "x-access-token"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_ENTRY_FIELDS = {"match", "env", "secret"}


class CredentialError(ValueError):
    """A credential entry that cannot be used; names the entry and the reason."""


class CredEntry(Decision):
    match: str
    env: str = ""
    secret: str = ""


@dataclass(frozen=True)
class Resolved:
    """The ``secretRef`` name for one url (``None`` = anonymous) and the token variable, if any."""

    ref: str | None = None
    token_env: str = ""


def parse_credentials(raw: Any) -> tuple[CredEntry, ...]:
    """Validate every entry; the first bad one raises (``RepoUrlError`` or ``CredentialError``)."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise CredentialError(f"credentials of type {type(raw).__name__} refused: expected a list of {{match, env?, secret?}}")
    return tuple(_entry(e) for e in raw)


def _entry(e: Any) -> CredEntry:
    if not isinstance(e, dict):
        raise CredentialError(f"credential entry of type {type(e).__name__} refused: expected keys match, env?, secret?")
    unknown = sorted(str(k) for k in set(e) - _ENTRY_FIELDS)
    if unknown or "match" not in e:
        # Names the keys, never a value: a token put inline under a wrong key stays out of the log.
        what = f"with keys {unknown} unknown" if unknown else "without match"
        raise CredentialError(f"credential entry {what} refused: expected keys match, env?, secret?")
    env, secret = e.get("env") or "", e.get("secret") or ""
    if not env and not secret:
        raise CredentialError(f"credential entry {e['match']!r} refused: names neither env nor secret")
    if env and not _ENV_NAME.match(str(env)):
        raise CredentialError(f"credential entry {e['match']!r} refused: env {env!r} is not a variable name")
    if secret and not _SECRET_NAME.match(str(secret)):
        raise CredentialError(f"credential entry {e['match']!r} refused: secret {secret!r} is not a Secret name")
    return CredEntry(match=normalise_match(e["match"]), env=env, secret=secret)


def normalise_match(match: Any) -> str:
    """A match is an identity prefix: ``host`` or ``host/path``; the host is lower-cased."""
    if not isinstance(match, str) or not match.strip("/") or "://" in match or "@" in match:
        raise RepoUrlError(match, "a credential match is an identity prefix 'host[/path]'")
    host, _, path = match.strip("/").partition("/")
    check_identity(f"{host.lower()}/{path or 'x'}")
    return f"{host.lower()}/{path}" if path else host.lower()


def match_credential(ident: str, creds: tuple[CredEntry, ...]) -> CredEntry | None:
    best: CredEntry | None = None
    for c in creds:
        covers = ident == c.match or ident.startswith(c.match + "/")
        if covers and (best is None or len(c.match) > len(best.match)):
            best = c
    return best


def resolve(url: str, ident: str, creds: tuple[CredEntry, ...], env_present: tuple[str, ...]) -> Resolved:
    """The ``secretRef`` the cache agent should use for ``url`` (see the module contract)."""
    entry = match_credential(ident, creds)
    kind = transport(url)
    if entry is None or kind == "git":
        return Resolved()
    if kind == "ssh":
        return Resolved(ref=entry.secret or None)
    if not entry.env or entry.env not in env_present:
        return Resolved()
    return Resolved(ref=token_secret_name(entry.match), token_env=entry.env)


def token_secret_name(match: str) -> str:
    """Deterministic per entry, distinct between entries (hash of the whole match), a DNS label."""
    digest = hashlib.sha256(match.encode()).hexdigest()[:10]
    readable = re.sub(r"[^a-z0-9]+", "-", match.lower()).strip("-")[:40].rstrip("-")
    return f"kfold-git-{readable}-{digest}"


def missing_env(creds: tuple[CredEntry, ...], env_present: tuple[str, ...]) -> list[CredEntry]:
    return [c for c in creds if c.env and c.env not in env_present]


def secret_fields(namespace: str, resolved: Resolved) -> dict[str, Any]:
    """``ApplySecret`` fields for a token ref: values by variable NAME, never by value."""
    return {
        "namespace": namespace, "name": resolved.ref, "labels": dict(MANAGED_LABELS),
        "literal": {"username": TOKEN_USERNAME}, "values_from_env": {"password": resolved.token_env},
    }


# -- statements ----------------------------------------------------------------------------------
def create_manifest(name: str, namespace: str, url: str, ident: str, *, bound: bool,
                    ref: str | None, stamp: str | None, refresh: str) -> dict[str, Any]:
    labels = {**MANAGED_LABELS, **({LABEL_BOUND: "true"} if bound else {})}
    annotations = {ANNOTATION_IDENTITY: ident, **({ANNOTATION_LAST_ATTACHED: stamp} if stamp else {})}
    spec: dict[str, Any] = {"url": url, "refreshInterval": refresh}
    if ref:
        spec["secretRef"] = {"name": ref}
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec,
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}}


def bind_patch(url: str, ident: str, ref: str | None) -> dict[str, Any]:
    """The boot's restatement: url, credential (``None`` clears), identity, bound label. No clock."""
    return {"metadata": {"labels": {LABEL_BOUND: "true"}, "annotations": {ANNOTATION_IDENTITY: ident}},
            "spec": {"url": url, "secretRef": _ref(ref)}}


def clock_patch(stamp: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {ANNOTATION_LAST_ATTACHED: stamp}}}


def unbound_attach_patch(stamp: str | None, ref: str | None) -> dict[str, Any]:
    """An attach of a Repo nothing binds: the clock, and the credential restated (``None`` clears)."""
    patch: dict[str, Any] = clock_patch(stamp) if stamp else {}
    return {**patch, "spec": {"secretRef": _ref(ref)}}


def unbind_patch() -> dict[str, Any]:
    return {"metadata": {"labels": {LABEL_BOUND: None}}}


def _ref(ref: str | None) -> dict[str, str] | None:
    return {"name": ref} if ref else None
