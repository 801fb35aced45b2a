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
can only occur inside a run of letters: a payload whose letter projection (its letters, lowered,
every other byte dropped) holds no marker is cleared after one translate and a C scan per marker;
the projection only ever joins letters, so it may show a marker the payload lacks, never miss one.

Real pods nearly always hold a marker in a harmless place (the service-account token volume,
``secretKeyRef``, ``"key":``), and names often hold one (``auth-proxy``, ``keycloak``). The scan
then checks each occurrence of a marker against that marker's benign contexts (``_unexplained``: a
``find`` pass per marker, a few ``startswith`` per occurrence; the verdict of counting both, see
``_scan``), and two verdicts are remembered by the payload's *shape*, its bytes with every digit
replaced by ``0`` (a keyed 128-bit digest of it, in a bounded memo; ``shape``): a clean scan, and
where the walk digested values (nothing, for most): the positions (entry index at each level),
which a later payload of that shape gets digested directly. Why that is sound: no marker, benign
context or rule pattern holds a digit, and a rule never looks at which digit is where, so payloads
of one shape get the same verdict at the same places (one shape is one structure: the same keys in
the same order but for digits, the same types); the two places that do read digits are left out of
it: the digest prefix ``redacted:hmac-sha256:`` (a value starting with it is kept as is) is set
apart before the digits are zeroed, and a payload with a last-applied annotation (parsed as JSON,
where ``01`` does not parse and ``10`` does) never has its walk remembered.

An observed object of a known kind other than Secret is judged *per top-level entry*
(``Redactor._observed``): each mapping or list value (``metadata``, ``spec``, ``status``) by the
memo of its own shape, and walked alone when that shape is new and its scan not clean. The walk of
an object is the walk of each of its entries, and what a rule decides inside an entry reads
nothing outside it, so the verdicts compose. Why: the events of one Pod differ in more than digits
(a node assigned, containers starting, conditions added), so a whole-object shape is mostly new on
each event (48% misses on the benchmark's realistic pods), while its ``spec``, most of its bytes
and of its markers, keeps its shape for its life: its verdict, and its walk when a name holds a
marker, are paid once per pod (the observer's redaction of the benchmark's first 60k Pod events:
52 -> 19 us each). An object the
observer's ``Redactor.redact`` returned is not scanned again at all when the journal seals the
record built around it (``_vetted``: kfold run's observers redact with the journal's redactor).
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import re
import sys
from typing import Any, Iterator

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
    b"secret": (b"secretname", b"secretkeyref", b"secretref", b"imagepullsecrets", b'"secret":{',
                b"/run/secrets/kubernetes.io/serviceaccount"),
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
# marker -> its benign contexts, each with where the marker sits in it (``_unexplained``)
_CONTEXTS = {marker: tuple((ctx, ctx.index(marker)) for ctx in benign) for marker, benign in _RULES}
assert all(ctx.count(m) == 1 for m, cs in _CONTEXTS.items() for ctx, _ in cs), "a context holds its marker once"


# ``payload.translate(_RUNS, _NOT_RUNS)``: the payload's ASCII letters, lowered as
# ``payload.lower()`` lowers them, a space for every '"' (so runs of letters stay apart at string
# boundaries), all other bytes deleted. Every marker is a-z only, so each marker occurrence in the
# lowered payload lies inside one run (deleting bytes only joins letters; it never splits one).
_RUNS = bytes(c + 32 if 65 <= c <= 90 else 32 if c == 34 else c for c in range(256))
_NOT_RUNS = bytes(c for c in range(256) if not (65 <= c <= 90 or 97 <= c <= 122 or c == 34))
_DIGITS_TO_0 = bytes.maketrans(b"123456789", b"000000000")
_SHAPE_KEY = os.urandom(16)       # per process: nobody outside can aim a payload at a stored shape
_CLEAN_SCANS: set[Any] = set()  # shapes whose full scan was clean
_WALKS: dict[Any, tuple[tuple[int, ...], ...]] = {}  # shape of an observed non-Secret object ->
                                                         # positions of the values its walk digested
_SHAPES_MAX = 200_000             # per set (~30 MB at most); cleared when full
_VETTED_MAX = 8_192               # objects ``Redactor.redact`` returned, awaiting the journal's pass


_PREFIX_BYTES = PREFIX.encode()


def shape(payload: bytes) -> Any:
    """A 128-bit keyed digest of ``payload`` with every digit replaced by ``0`` (see the module
    docstring); the digest prefix is kept apart first (a byte orjson never writes raw), as the walk
    reads it whole. The digest: CPython's own keyed hash (SipHash-1-3 under the process's random
    hash key) of those bytes and of them reversed, ~10x cheaper than BLAKE2b on a 2 KB Pod; when
    hash randomization is off (``PYTHONHASHSEED`` set), that key is known, so BLAKE2b keyed with a
    per-process random key instead."""
    zeroed = payload.replace(_PREFIX_BYTES, b"\x01").translate(_DIGITS_TO_0)
    if _SIPHASH:
        return hash(zeroed), hash(zeroed[::-1])
    return hashlib.blake2b(zeroed, digest_size=16, key=_SHAPE_KEY).digest()


_SIPHASH = bool(sys.flags.hash_randomization) and sys.hash_info.algorithm.startswith("siphash")


def _remember(memo: set[Any], key: Any) -> None:
    if len(memo) >= _SHAPES_MAX:
        memo.clear()
    memo.add(key)


def _remember_walk(key: Any, paths: tuple[tuple[int, ...], ...]) -> None:
    if len(_WALKS) >= _SHAPES_MAX:
        _WALKS.clear()
    _WALKS[key] = paths


def suspicious(payload: bytes) -> bool:
    """True when ``payload`` may hold something a rule redacts (never False when one would).

    Exactly ``_scan(payload.lower())``. A payload whose letter projection holds no marker is
    cleared after one translate and ten C scans (~2 us per 1.5 KB); one with a marker pays the
    full scan once per shape (see the module docstring), then a digest and a set test."""
    letters = payload.translate(_RUNS, _NOT_RUNS)
    return any(marker in letters for marker in _MARKERS) and _scan_by_shape(payload, shape(payload), letters)


def _scan_by_shape(payload: bytes, key: Any, letters: bytes) -> bool:
    if key in _CLEAN_SCANS:
        return False
    if _unexplained(payload.lower(), [marker for marker in _MARKERS if marker in letters]):
        return True
    _remember(_CLEAN_SCANS, key)
    return False


def _unexplained(low: bytes, markers: list[bytes]) -> bool:
    """``_scan(low)``, for the ``markers`` the letter projection shows: does an occurrence of one
    lie outside all of its marker's benign contexts? The same verdict as ``_scan``'s counts (each
    context holds its marker once and no two contexts can share an occurrence, so "as many
    contexts as occurrences" is "every occurrence in a context"), found with one C ``find`` pass
    per marker and a few ``startswith`` per occurrence instead of a count pass per context (~4x
    cheaper on a real Pod, which holds its markers a handful of times, each in a reference)."""
    for marker in markers:
        contexts, step = _CONTEXTS[marker], len(marker)
        at = low.find(marker)
        while at >= 0:
            for ctx, off in contexts:
                if at >= off and low.startswith(ctx, at - off):
                    break
            else:
                return True
            at = low.find(marker, at + step)
    return False


# Letter projections of the two things a walk reads digits in (see the module docstring).
_DIGIT_READERS = (b"lastappliedconfiguration",)


def _object_payload(obj: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps(obj)
    except TypeError:  # what orjson refuses (non-string keys, huge ints): the walk decides
        return None


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
    if value[:7].lower() == "bearer " or "PRIVATE KEY" in value or ("eyJ" in value and _JWT.search(value)):
        return True
    return "\n" in value and any(is_credential_key(m.group(1)) for m in _CRED_LINE.finditer(value))


class Redactor:
    """Redaction keyed with one journal's salt. See the module docstring for the rules."""

    def __init__(self, salt: bytes):
        self.salt = salt
        self._done: dict[int, dict[str, Any]] = {}   # see ``_vetted``

    def digest(self, value: Any) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
            return value
        text = value if isinstance(value, str) else str(value)
        if text.startswith(PREFIX):
            return text
        return PREFIX + hmac.new(self.salt, text.encode(), hashlib.sha256).hexdigest()[:16]

    def redact(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """A new dict with credential material replaced by digests; ``obj`` is not touched.

        An object of a known kind other than Secret is redacted part by part (``_observed``), each
        top-level mapping or list cleared, or its digested positions found, by its shape's memo.
        This is the observer's path, once per watch event."""
        out = self._observed(obj) if kind not in ("Secret", "") else self._redact(kind, obj)
        out = dict(out) if out is obj else out
        self._vetted(out)
        return out

    def _observed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``_redact`` of an observed object of a known kind other than Secret (the same result;
        ``obj`` itself when nothing changed), top-level entry by entry: the walk of an object is
        the walk of each entry (``_entry``), and an entry's verdict depends on nothing outside it
        but its key, so each mapping or list value is judged by the memo of its own shape
        (``_walk_plan`` of its JSON) and walked only when that shape is new and may hold something
        a rule redacts. Why per entry: successive events of one Pod keep its ``spec`` (most of its
        bytes and of its markers) while ``status`` and ``metadata`` move, so the spec's verdict is
        found once per pod instead of once per event."""
        out: dict[str, Any] | None = None
        for k, v in obj.items():
            if isinstance(v, (dict, list)):   # what ``_entry`` walks whatever its key
                payload = _object_payload(v)
                plan = _walk_plan(payload) if payload is not None else None
                if plan == ():
                    continue
                new = self._planned(v, plan) if plan is not None else None
                if new is None:
                    new = self._walk(v, False)
                    if payload is not None:
                        _learn(payload, v, new)
            else:
                new = self._entry(obj, k, v, False)
            if new is not v:
                out = dict(obj) if out is None else out
                out[k] = new
        return obj if out is None else out

    def _vetted(self, out: dict[str, Any]) -> None:
        """Remember ``out`` as redacted here, so that the journal's own pass over the record the
        observer builds around it (``sealed``) is skipped: the work is done once per event, not
        twice. Keyed by the identity of its ``metadata`` value: the record holds a shallow copy
        of ``out`` (pydantic copies the top-level dict) sharing its values; the reference kept
        here stops that id from being reused while it is remembered."""
        md = out.get("metadata")
        if isinstance(md, dict):
            if len(self._done) >= _VETTED_MAX:   # redacted objects whose records never came: forget
                self._done.clear()
            self._done[id(md)] = out

    def _was_vetted(self, obj: Any) -> bool:
        """Is ``obj`` (an observed record's object) made of exactly the values of an object
        ``redact`` returned, each the same object under the same key in the same order? Then its
        content is what was redacted (neither records nor what ``redact`` returns are mutated)."""
        out = self._done.pop(id(obj.get("metadata")), None) if type(obj) is dict else None
        return (out is not None and len(out) == len(obj)
                and all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(out.items(), obj.items())))

    def _planned(self, node: Any, plan: tuple[tuple[int, ...], ...]) -> Any:
        """``node`` (a mapping or list) with the values at ``plan``'s positions digested (copied
        along the way), as the walk of a value of the same shape did; None if it does not fit."""
        root = dict(node) if isinstance(node, dict) else list(node)
        fresh = {id(root)}
        try:
            for path in plan:
                node = root
                for step in path[:-1]:
                    key = _key_at(node, step)
                    child = node[key]
                    if id(child) not in fresh:
                        child = dict(child) if isinstance(child, dict) else list(child)
                        node[key] = child
                        fresh.add(id(child))
                    node = child
                key = _key_at(node, path[-1])
                node[key] = self.digest(node[key])
        except (KeyError, IndexError, TypeError, StopIteration):  # not this shape after all: walk
            return None
        return root

    def _redact(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Like ``redact`` but returns ``obj`` itself when nothing needed redacting."""
        kind = kind or obj.get("kind") or ("Secret" if _secret_shaped(obj) else "")
        out = self._dict(obj, kind == "Secret")
        return self._secret_payload(out) if kind == "Secret" else out

    def needs_walk(self, rec: Record) -> bool:
        """Must ``record`` walk this record whole? Not an observed object of a known kind other
        than Secret (``_observed`` judges it part by part); outcomes and effects (rarer, kind
        unknown) always are."""
        if isinstance(rec, Observed):
            return rec.kind in ("Secret", "")
        return isinstance(rec, (Outcome, EffectIssued))

    def sealed(self, rec: Record, payload: bytes, dump: Any) -> tuple[Record, bytes]:
        """``(record, payload)`` as journaled: redacted when a rule applies, else as given (and a
        clean walk of an observed object remembered by its shape). ``dump`` serializes a record."""
        if isinstance(rec, Observed) and rec.kind not in ("Secret", ""):
            if self._done and self._was_vetted(rec.obj):   # the observer's ``redact`` did it
                return rec, payload
            obj = self._observed(rec.obj)
            red = rec if obj is rec.obj else rec.model_copy(update={"obj": obj})
        elif self.needs_walk(rec):
            red = self.record(rec)
        else:
            return rec, payload
        return (rec, payload) if red is rec else (red, dump(red))

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


def _walk_plan(payload: bytes) -> tuple[tuple[int, ...], ...] | None:
    """What redacting a mapping or list of an observed non-Secret object (its JSON ``payload``)
    takes: ``()`` nothing; a tuple of value positions to digest, remembered from a walk of a value
    of the same shape (see the module docstring: the walk's every decision is the same for both);
    None: walk it. The memo is asked first: two payloads of one shape have the same letters, so a
    remembered walk never answers for a payload with a last-applied annotation (``_learn`` keeps
    none of those) and a remembered clean verdict is the scan's."""
    key = shape(payload)
    if key in _CLEAN_SCANS:
        return ()
    plan = _WALKS.get(key)
    if plan is not None:
        return plan
    letters = payload.translate(_RUNS, _NOT_RUNS)
    if not any(marker in letters for marker in _MARKERS):
        _remember(_CLEAN_SCANS, key)
        return ()
    return None if _scan_by_shape(payload, key, letters) else ()


def _learn(payload: bytes, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Remember where the walk of ``before`` (JSON ``payload``) digested values, by its shape."""
    letters = payload.translate(_RUNS, _NOT_RUNS)
    if not any(r in letters for r in _DIGIT_READERS):
        _remember_walk(shape(payload), tuple(_changed(before, after, ())))


def _changed(a: Any, b: Any, path: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Positions (dict entry or list item index at each level) where the walk put a new value;
    the walk keeps every unchanged subtree as the same object, so only changed branches are read."""
    if a is b:
        return
    if isinstance(a, dict):
        for i, (k, v) in enumerate(a.items()):
            yield from _changed(v, b[k], path + (i,))
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _changed(x, y, path + (i,))
    else:
        yield path


def _key_at(node: Any, i: int) -> Any:
    return i if isinstance(node, list) else next(itertools.islice(node, i, None))


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
