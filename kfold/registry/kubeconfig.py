"""Kubeconfig material: a redacting holder and the validation every kubeconfig passes before use.

Guarantees:
- ``Kubeconfig`` never shows its text in ``repr``/``str``/format, refuses pickling, and is the only
  type that carries credential text through the registry; ``reveal()`` is called only where the
  text is parsed or stored.
- ``select`` refuses, with one message per problem saying what and why: exec credential plugins
  and command/ambient auth-providers (unless ``allow_exec``), and any field that names a file on
  this machine (unless ``allow_files``): ``certificate-authority``, ``client-certificate``,
  ``client-key``, ``tokenFile`` and an oidc auth-provider's ``idp-certificate-authority``. What an
  allowed file holds is checked when a client is built (``kubeconfig_files``). Only the selected context's cluster and user are checked:
  they are all that is ever used.
- Refusal messages carry names, field names, commands and paths, never tokens, keys or YAML text.
Caveats: the Python client writes ``*-data`` certificates to temporary files (removed at exit) for
``ssl``; that is the client's mechanism, not a store.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import yaml

from kfold.registry.errors import KubeconfigRefused

CLUSTER_FILE_FIELDS = {"certificate-authority": "certificate-authority-data"}
USER_FILE_FIELDS = {
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "tokenFile": "token",
}
OIDC_FILE_FIELDS = {"idp-certificate-authority": "idp-certificate-authority-data"}


class Kubeconfig:
    """Kubeconfig text that does not print itself."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def reveal(self) -> str:
        """The text; for parsing and storing only."""
        return self._text

    @property
    def digest(self) -> str:
        """sha256 of the text: tells two credentials apart without showing either."""
        return hashlib.sha256(self._text.encode()).hexdigest()

    def __repr__(self) -> str:
        return "Kubeconfig(<redacted>)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce__(self) -> Any:
        raise TypeError("a Kubeconfig is credential material and is never serialised")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kubeconfig) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self.digest)


@dataclass(frozen=True, repr=False)
class Selected:
    """A validated kubeconfig narrowed to one context (repr shows no material)."""

    document: dict
    context: str
    server: str
    namespace: str | None

    def __repr__(self) -> str:
        return f"Selected(context={self.context!r}, server={self.server!r})"


def _parse(kubeconfig: Kubeconfig) -> dict:
    try:
        doc = yaml.safe_load(kubeconfig.reveal())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise KubeconfigRefused([f"it does not parse as YAML ({where}{getattr(e, 'problem', '')})"]) from None
    if not isinstance(doc, dict):
        raise KubeconfigRefused(["it is not a kubeconfig mapping"])
    return doc


def _entry(doc: dict, section: str, name: Any) -> dict:
    for item in doc.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise KubeconfigRefused([f"{section[:-1]} {name!r} is not defined in it"])


def context_parts(doc: dict, context: Any) -> tuple[dict, str, dict, str, dict]:
    """(context, cluster name, cluster, user name, user) of ``context`` in ``doc``; the dicts are
    the document's own (a caller holding a private copy may edit them)."""
    ctx = _entry(doc, "contexts", context)
    cluster = _entry(doc, "clusters", ctx.get("cluster"))
    user = _entry(doc, "users", ctx.get("user")) if ctx.get("user") else {}
    return ctx, str(ctx.get("cluster")), cluster, str(ctx.get("user")), user


def _file_problems(kind: str, name: str, body: dict, fields: dict[str, str]) -> list[str]:
    return [
        f"{kind} {name!r} field {field!r} names a file on this machine ({body[field]}): kfold "
        f"would read it with its own privileges and it is not part of the stored credential; "
        f"embed it as {data_field!r}, or pass --allow-files"
        for field, data_field in fields.items()
        if body.get(field)
    ]


def _oidc_config(user: dict) -> dict:
    provider = user.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    return config if isinstance(config, dict) else {}


def _exec_problems(name: str, user: dict) -> list[str]:
    out = []
    if "exec" in user:
        command = (user.get("exec") or {}).get("command", "?")
        out.append(
            f"user {name!r} uses an exec credential plugin ({command}): it would run a command on "
            "this machine with kfold's privileges whenever the cluster is reached; embed a token "
            "or client certificate instead, or pass --allow-exec"
        )
    provider = user.get("auth-provider")
    if isinstance(provider, dict) and _provider_runs_or_reads_ambient(provider):
        out.append(
            f"user {name!r} uses auth-provider {provider.get('name')!r}: it runs a command "
            "(cmd-path) or reads this machine's ambient cloud credentials, outside the stored "
            "kubeconfig; embed a token instead, or pass --allow-exec"
        )
    return out


def _provider_runs_or_reads_ambient(provider: dict) -> bool:
    config = provider.get("config") or {}
    return provider.get("name") != "oidc" or bool(config.get("cmd-path"))


def select(
    kubeconfig: Kubeconfig,
    context: str | None = None,
    *,
    allow_exec: bool = False,
    allow_files: bool = False,
) -> Selected:
    """Validate ``kubeconfig`` for ``context`` (default: its current-context); see module contract."""
    doc = _parse(kubeconfig)
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigRefused(["it names no current-context and no context was given"])
    ctx, cluster_name, cluster, user_name, user = context_parts(doc, name)
    problems = [] if cluster.get("server") else [f"cluster {cluster_name!r} has no server"]
    if not allow_exec:
        problems += _exec_problems(user_name, user)
    if not allow_files:
        problems += _file_problems("cluster", cluster_name, cluster, CLUSTER_FILE_FIELDS)
        problems += _file_problems("user", user_name, user, USER_FILE_FIELDS)
        problems += _file_problems("user", user_name, _oidc_config(user), OIDC_FILE_FIELDS)
    if problems:
        raise KubeconfigRefused(problems)
    return Selected(doc, str(name), str(cluster["server"]), ctx.get("namespace"))
