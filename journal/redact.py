"""Redaction: credential material is replaced by a keyed digest before a record is journaled.

Choice: a value is replaced by ``"redacted:hmac-sha256:<16 hex>"``, the first 64 bits of
HMAC-SHA256 keyed with the journal's random salt (16 bytes in the journal's ``meta`` table). Within
one journal equal values give equal digests, so "the Secret changed" stays distinguishable from
"the Secret was re-observed unchanged"; without the salt a digest cannot be brute-forced from a
dictionary of likely passwords, and the value itself is gone.

What is redacted (``Redactor.redact(kind, obj)``):
- a Secret's ``data`` and ``stringData`` values, and its
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation (whole);
- in any object, the scalar value of a key that names credential material (token, password,
  passwd, passphrase, secret, kubeconfig, client-key(-data), private key, api/access keys,
  ``.dockerconfigjson``, dockercfg, authorization, bearer, credentials), unless the key only
  *refers* to one (``secretName``, ``secretKeyRef``, ``tokenPath``, ``...Seconds``...);
- ``{"name": <credential-like>, "value": <literal>}`` pairs (pod ``env``): the ``value``;
- string values that are credentials by shape: ``Bearer ...``, a JWT, a PEM private key, or a
  multi-line text (a kubeconfig, an ``.env`` or INI file) with a ``<credential key>: value`` line;
- another object's last-applied annotation is parsed and redacted like the object itself.
- an object without ``kind`` (list items in an outcome) that has ``type`` plus ``data`` or
  ``stringData`` is treated as a Secret.

Guarantees: never mutates its input; returns a new top-level dict sharing unchanged subtrees with
the input (treat the result as read-only); idempotent (a digest is never digested again).

Caveats (limits): detection is by key names and value shapes, so a credential under an innocent
key in a single-line value (``{"note": "hunter2"}``) is not found; base64 or otherwise encoded
credentials are found only by their key. Digests reveal equality of two values within a journal.
Commands and effects are kfold's own data and by contract carry environment variable *names*, not
values (see ``ApplySecret``); only a Secret manifest inside an effect is redacted, defensively.

Speed: ``suspicious(payload)`` is a prefilter over the serialized record; it is a superset of
every rule above, so a record it clears needs no walk. Every marker is ASCII letters only, so it
can only occur inside a run of letters: a payload whose letter runs (about one per JSON string)
are all known marker-free (a bounded memo of runs seen before: field names, common values) is
cleared with one translate, one split and one set test; any other payload gets the full scan.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Any

import orjson

from journal.records import EffectIssued, Observed, Outcome, Record

PREFIX = "redacted:hmac-sha256:"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# Every rule below fires only where one of these (lower-case) markers occurs in the payload.
_MARKERS = (b"token", b"pass", b"secret", b"key", b"auth", b"kubeconfig", b"credential", b"dockerc",
            b"bearer", b"eyj")
# Occurrences inside these contexts never trigger a rule (they are references, not material).
_BENIGN = {
    b"token": (b"serviceaccounttoken", b'"path":"token"'),
    b"secret": (b"secretname", b"secretkeyref", b"secretref", b"imagepullsecrets", b'"secret":{'),
    b"key": (b'"key":', b"secretkeyref", b"configmapkeyref"),
}
_REFERENCE_SUFFIXES = ("name", "names", "ref", "refs", "namespace", "path", "file", "mode",
                       "seconds", "type", "env", "id", "kind", "audience", "expiration")
_EXACT_BENIGN_KEYS = frozenset({"key", "keys"})
_CRED_LINE = re.compile(r"^[ \t\"'-]*([\w.-]+)[\"']?[ \t]*[:=][ \t]*\S", re.M)
_JWT = re.compile(r"eyJ[\w-]{6,}\.[\w-]{6,}\.")
_KEY_CACHE: dict[str, bool] = {}
_KEY_CACHE_MAX = 50_000


_RULES = tuple((marker, _BENIGN.get(marker, ())) for marker in _MARKERS)


# ``payload.translate(_RUNS, _NOT_RUNS).split()``: the payload's ASCII letters, lowered as
# ``payload.lower()`` lowers them, split at every '"' (so about one run per JSON string) with all
# other bytes deleted. Every marker is a-z only, so each marker occurrence in the lowered payload
# lies inside one run (deleting bytes only joins letters; it never splits an occurrence).
_RUNS = bytes(c + 32 if 65 <= c <= 90 else 32 if c == 34 else c for c in range(256))
_NOT_RUNS = bytes(c for c in range(256) if not (65 <= c <= 90 or 97 <= c <= 122 or c == 34))
_CLEAN_TEXTS: set[bytes] = set()  # whole letter projections known to hold no marker (bounded memo)
_CLEAN_TEXTS_MAX_BYTES = 32 << 20
_clean_texts_bytes = 0
_CLEAN_RUNS: set[bytes] = set()   # letter runs known to hold no marker (bounded memo, < 5 MB)
_CLEAN_RUNS_MAX = 50_000
_CLEAN_RUN_LEN = 64               # longer runs are scanned each time, never memoized


def suspicious(payload: bytes) -> bool:
    """True when ``payload`` may hold something a rule redacts (never False when one would).

    Exactly ``_scan(payload.lower())``; a payload with no marker in any letter run is cleared
    without the scan (see ``_marker_free``). Whether a marker lies in a run depends only on the
    payload's letter projection (``translate``), so a projection once found marker-free clears
    every later payload with the same projection: successive events of one object usually differ
    only in digits (resourceVersion, times, counters), which the projection drops. That exact
    match (a set of whole projections, not of hashes) costs ~1 us against ~4.5 us for the runs."""
    global _clean_texts_bytes
    letters = payload.translate(_RUNS, _NOT_RUNS)
    if letters in _CLEAN_TEXTS:
        return False
    runs = letters.split()
    if _CLEAN_RUNS.issuperset(runs) or _marker_free(runs):
        if _clean_texts_bytes + len(letters) > _CLEAN_TEXTS_MAX_BYTES:
            _CLEAN_TEXTS.clear()
            _clean_texts_bytes = 0
        _CLEAN_TEXTS.add(letters)
        _clean_texts_bytes += len(letters)
        return False
    return _scan(payload.lower())


def _marker_free(runs: list[bytes]) -> bool:
    """No run holds a marker; memoizes the short runs it checks."""
    fresh = [r for r in runs if r not in _CLEAN_RUNS]
    if any(marker in r for r in fresh for marker in _MARKERS):
        return False
    if len(_CLEAN_RUNS) + len(fresh) > _CLEAN_RUNS_MAX:
        _CLEAN_RUNS.clear()
    _CLEAN_RUNS.update(r for r in fresh if len(r) <= _CLEAN_RUN_LEN)
    return True


def _suspicious_object(obj: dict[str, Any]) -> bool:
    try:
        return suspicious(orjson.dumps(obj))
    except TypeError:  # what orjson refuses (non-string keys, huge ints): the walk decides
        return True


def _scan(low: bytes) -> bool:
    """The marker scan over the ASCII-lowered payload: one C substring scan per marker (~0.5 us
    each per 1.2 KB); markers are counted, and their benign contexts scanned, only when present.
    (One alternation regex instead is ~6x slower: ``re`` has no multi-literal search.)"""
    for marker, benign in _RULES:
        if marker in low:
            n = low.count(marker)
            if n > sum(low.count(b) for b in benign):
                return True
    return False


def is_credential_key(key: str) -> bool:
    """Does this key (or env var name) name credential material, rather than refer to it?"""
    hit = _KEY_CACHE.get(key)
    if hit is None:
        hit = _credential_key(key)
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = hit
    return hit


def _credential_key(key: str) -> bool:
    low = key.encode().lower()  # ASCII-only lowering, exactly as ``suspicious`` sees the payload
    if low.decode() in _EXACT_BENIGN_KEYS or not suspicious(low):
        return False
    norm = low.replace(b"-", b"").replace(b"_", b"").replace(b".", b"").decode()
    return not norm.endswith(_REFERENCE_SUFFIXES)


def _credential_value(value: str) -> bool:
    if len(value) < 8 or value.startswith(PREFIX):
        return False
    if value[:7].lower() == "bearer " or "PRIVATE KEY" in value or _JWT.search(value):
        return True
    return "\n" in value and any(is_credential_key(m.group(1)) for m in _CRED_LINE.finditer(value))


class Redactor:
    """Redaction keyed with one journal's salt. See the module docstring for the rules."""

    def __init__(self, salt: bytes):
        self.salt = salt

    def digest(self, value: Any) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
            return value
        text = value if isinstance(value, str) else str(value)
        if text.startswith(PREFIX):
            return text
        return PREFIX + hmac.new(self.salt, text.encode(), hashlib.sha256).hexdigest()[:16]

    def redact(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """A new dict with credential material replaced by digests; ``obj`` is not touched.

        An object of a known kind other than Secret whose JSON the ``suspicious`` prefilter clears
        is copied without the walk (the walk would return it unchanged: the prefilter is a
        superset of every rule). This is the observer's path, once per watch event."""
        if kind not in ("Secret", "") and not _suspicious_object(obj):
            return dict(obj)
        out = self._redact(kind, obj)
        return dict(out) if out is obj else out

    def _redact(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Like ``redact`` but returns ``obj`` itself when nothing needed redacting."""
        kind = kind or obj.get("kind") or ("Secret" if _secret_shaped(obj) else "")
        out = self._dict(obj, kind == "Secret")
        return self._secret_payload(out) if kind == "Secret" else out

    def needs_walk(self, rec: Record, payload: bytes) -> bool:
        """Must ``record`` walk this record? Only an observed non-Secret object can be cleared by
        the ``suspicious`` prefilter; outcomes and effects (rarer, kind unknown) are always walked."""
        if isinstance(rec, Observed):
            return rec.kind in ("Secret", "") or suspicious(payload)
        return isinstance(rec, (Outcome, EffectIssued))

    def record(self, rec: Record) -> Record:
        """The record with its object(s) redacted (the same record when nothing changed)."""
        if isinstance(rec, Observed):
            obj = self._redact(rec.kind, rec.obj)
            return rec if obj is rec.obj else rec.model_copy(update={"obj": obj})
        if isinstance(rec, Outcome):
            return self._outcome(rec)
        if isinstance(rec, EffectIssued):
            return self._effect(rec)
        return rec

    # -- objects ------------------------------------------------------------------------------
    def _secret_payload(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = dict(obj)
        for field in ("data", "stringData"):
            if isinstance(out.get(field), dict):
                out[field] = {k: self.digest(v) for k, v in out[field].items()}
        return out

    def _walk(self, node: Any, secret: bool) -> Any:
        if isinstance(node, dict):
            return self._dict(node, secret)
        if isinstance(node, list):
            items = [self._walk(v, secret) for v in node]
            return node if all(a is b for a, b in zip(items, node)) else items
        if isinstance(node, str) and _credential_value(node):
            return self.digest(node)
        return node

    def _dict(self, node: dict[str, Any], secret: bool) -> dict[str, Any]:
        out: dict[str, Any] | None = None
        for k, v in node.items():
            new = self._entry(node, k, v, secret)
            if new is not v:
                out = dict(node) if out is None else out
                out[k] = new
        return node if out is None else out

    def _entry(self, node: dict[str, Any], k: str, v: Any, secret: bool) -> Any:
        if isinstance(v, (dict, list)):
            return self._walk(v, secret)
        if v is None or isinstance(v, bool):
            return v
        if k == LAST_APPLIED and isinstance(v, str):
            return self.digest(v) if secret else self._last_applied(v)
        if is_credential_key(k) or (k == "value" and _env_credential(node)):
            return self.digest(v)
        return self._walk(v, secret)

    def _last_applied(self, text: str) -> str:
        try:
            inner = orjson.loads(text)
        except orjson.JSONDecodeError:
            return self.digest(text)
        if not isinstance(inner, dict):
            return self.digest(text)
        red = self._redact(str(inner.get("kind", "")), inner)
        return text if red is inner else orjson.dumps(red).decode()

    # -- records ------------------------------------------------------------------------------
    def _outcome(self, rec: Outcome) -> Outcome:
        obj = None if rec.obj is None else self._redact("", rec.obj)
        items = None if rec.items is None else tuple(self._redact("", i) for i in rec.items)
        same_items = items is None or all(a is b for a, b in zip(items, rec.items or ()))
        if obj is rec.obj and same_items:
            return rec
        return rec.model_copy(update={"obj": obj, "items": items})

    def _effect(self, rec: EffectIssued) -> EffectIssued:
        manifest = rec.effect.get("manifest")
        if not isinstance(manifest, dict) or manifest.get("kind") != "Secret":
            return rec
        red = self._redact("Secret", manifest)
        return rec if red is manifest else rec.model_copy(update={"effect": {**rec.effect, "manifest": red}})


def _env_credential(node: dict[str, Any]) -> bool:
    name = node.get("name")
    return isinstance(name, str) and is_credential_key(name)


def _secret_shaped(obj: dict[str, Any]) -> bool:
    return "type" in obj and ("data" in obj or "stringData" in obj) and "spec" not in obj


def new_salt() -> bytes:
    """A fresh random salt for a new journal (the journal stores it in its ``meta`` table)."""
    return os.urandom(16)


_PROCESS = Redactor(new_salt())


def redact(kind: str, obj: dict[str, Any], salt: bytes | None = None) -> dict[str, Any]:
    """Redact ``obj`` (of ``kind``) with ``salt``, or with a per-process random salt when None.

    Observers should use their journal's ``redactor`` so digests match what the journal stores."""
    return (Redactor(salt) if salt is not None else _PROCESS).redact(kind, obj)
