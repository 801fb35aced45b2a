"""Files a kubeconfig names, read the way kubectl reads them and checked before a client exists.

Expected flow: ``client.configuration_for`` passes its private copy of the selected kubeconfig to
``inline_token``, lets the Kubernetes client library load it, then calls ``check_tls`` on the
resulting ``Configuration``. (Whether a kubeconfig may name files at all is decided earlier, by
``kubeconfig.select`` and ``--allow-files``.)

Guarantees:
- ``tokenFile`` is read once and its surrounding whitespace trimmed, as client-go does (its
  ``fileTokenSource`` applies ``strings.TrimSpace`` and refuses an empty result): a token file
  written by ``echo`` or an editor ends in a newline and works with kubectl, so kfold accepts the
  same file rather than refusing a kubeconfig that works everywhere else. The trimmed token is
  put inline (``token``) into kfold's private copy only; the stored kubeconfig still names the
  file. An unreadable or empty file, or a token with whitespace or control characters INSIDE it
  (no trim can make that a valid ``Authorization`` header), is refused naming the field and the
  path.
- An inline ``token`` gets the same character check but no trim (client-go sends it as written).
- ``certificate-authority``, ``client-certificate`` and ``client-key`` (file or ``-data``) and an
  oidc auth-provider's ``idp-certificate-authority`` are loaded by Python's ``ssl`` exactly as
  urllib3 will load them: missing, unreadable, not PEM, a certificate and key that do not match,
  or an encrypted key (kfold runs unattended and cannot type a pass phrase) are refused naming
  the field, instead of failing later inside a request.
- Messages carry field names, paths and the OS or TLS library's reason; never file contents.
Caveat: a token file is read when the client is built; the registry rebuilds a client when the
stored kubeconfig changes, not when the token file behind it rotates.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

from kubernetes.client import Configuration

from kfold.registry.errors import KubeconfigRefused


def _token_problem(token: str) -> str | None:
    if not token:
        return "it is empty"
    bad = sorted({c for c in token if not ("!" <= c <= "~")})
    if bad:
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
        return f"it contains whitespace or control characters inside the token ({shown})"
    return None


def _unreadable(kind: str, name: str, field: str, path: str, reason: str) -> str:
    return f"{kind} {name!r} field {field!r} names {path}, which cannot be read: {reason}"


def _read(kind: str, name: str, field: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise KubeconfigRefused([_unreadable(kind, name, field, path, e.strerror or str(e))]) from None


def check_readable(cluster_name: str, cluster: dict[str, Any], user_name: str, user: dict[str, Any],
                   base_path: str) -> None:
    """Refuse a TLS file field whose file cannot be read (the client library reads them only for
    an https server, and so does this check)."""
    if not str(cluster.get("server", "")).startswith("https"):
        return
    for kind, name, body, field in (("cluster", cluster_name, cluster, "certificate-authority"),
                                    ("user", user_name, user, "client-certificate"),
                                    ("user", user_name, user, "client-key")):
        if body.get(field) and not body.get(f"{field}-data"):
            _read(kind, name, field, os.path.normpath(os.path.join(base_path, str(body[field]))))


def inline_token(user_name: str, user: dict[str, Any], base_path: str) -> None:
    """Read ``user``'s ``tokenFile`` into ``token`` (trimmed), and check the token either way."""
    if user.get("tokenFile") and not user.get("token"):
        path = os.path.normpath(os.path.join(base_path, str(user["tokenFile"])))
        try:
            user["token"] = _read("user", user_name, "tokenFile", path).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise KubeconfigRefused([_unreadable("user", user_name, "tokenFile", path,
                                                 "it is not UTF-8 text")]) from None
        del user["tokenFile"]
        where = f"field 'tokenFile' ({path})"
    else:
        where = "field 'token'"
    token = user.get("token")
    if token is None or "auth-provider" in user or "exec" in user:
        return
    problem = _token_problem(str(token))
    if problem:
        raise KubeconfigRefused([f"user {user_name!r} {where} is not a usable bearer token: {problem}"])


def _no_pass_phrase() -> bytes:
    raise ssl.SSLError("the private key is encrypted; kfold cannot type its pass phrase: use an unencrypted key")


def _tls_problem(load: Any) -> str | None:
    try:
        load(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    except ssl.SSLError as e:
        return str(e)
    except OSError as e:
        return e.strerror or str(e)
    return None


def _shown(document_part: dict[str, Any], field: str) -> str:
    value = document_part.get(field)
    return f"{field!r} ({value})" if value else f"{field + '-data'!r}"


def check_tls(cfg: Configuration, cluster_name: str, cluster: dict[str, Any],
              user_name: str, user: dict[str, Any]) -> None:
    """Load the CA and client certificate/key ``cfg`` will use, as urllib3 will; refuse what fails."""
    problems = []
    if cfg.ssl_ca_cert:
        why = _tls_problem(lambda ctx: ctx.load_verify_locations(cafile=cfg.ssl_ca_cert))
        if why:
            problems.append(f"cluster {cluster_name!r} {_shown(cluster, 'certificate-authority')} is not a "
                            f"usable CA certificate: {why}")
    if cfg.cert_file:
        why = _tls_problem(lambda ctx: ctx.load_cert_chain(cfg.cert_file, cfg.key_file, password=_no_pass_phrase))
        if why:
            problems.append(f"user {user_name!r} {_shown(user, 'client-certificate')} and "
                            f"{_shown(user, 'client-key')} are not a usable certificate and key: {why}")
    provider = user.get("auth-provider")
    idp_ca = (provider.get("config") or {}).get("idp-certificate-authority") if isinstance(provider, dict) else None
    if idp_ca:
        why = _tls_problem(lambda ctx: ctx.load_verify_locations(cafile=str(idp_ca)))
        if why:
            problems.append(f"user {user_name!r} auth-provider field 'idp-certificate-authority' ({idp_ca}) is "
                            f"not a usable CA certificate: {why}")
    if problems:
        raise KubeconfigRefused(problems)
