"""No secret material at rest: values written through append never reach the SQLite files."""
from __future__ import annotations

import base64
import copy

import orjson
import pytest

from journal.records import Observed, Outcome
from journal.redact import PREFIX, Redactor, redact, suspicious
from journal.sqlite import SqliteJournal

SECRET_VALUES = {
    "data": "s3cr3t-alpha-VALUE",
    "string_data": "plain-stringdata-VALUE",
    "configmap_token": "tok-ABCDEF1234567890",
    "client_key": "LS0tLS1CRUdJTi1DTElFTlQtS0VZLURBVEE=",
    "kubeconfig_token": "kubeconfig-bearer-TOKEN-77",
    "env_password": "pod-env-PASSWORD-42",
    "header": "Bearer hdr-SECRET-abc",
}
V = SECRET_VALUES


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, value: str) -> dict:
    applied = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "stringData": {"extra": V["string_data"]}}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": "ns", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": orjson.dumps(applied).decode()}},
            "data": {"password": b64(value)}, "stringData": {"extra": V["string_data"]}}


KUBECONFIG = (f"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
              f"    client-key-data: {V['client_key']}\n    token: {V['kubeconfig_token']}\n")

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "ns"},
             "data": {"api_token": V["configmap_token"], "kubeconfig": KUBECONFIG, "config": KUBECONFIG,
                      "mode": "fast"}}

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s-g1", "namespace": "ns",
                                                       "labels": {"kfold.dev/session": "s"}},
       "spec": {"containers": [{"name": "app", "image": "app:1",
                                "env": [{"name": "DB_PASSWORD", "value": V["env_password"]},
                                        {"name": "LOG_LEVEL", "value": "debug"}],
                                "args": ["--header", V["header"]]}],
                "volumes": [{"name": "creds", "secret": {"secretName": "git-creds"}}]},
       "status": {"phase": "Pending", "message": "secret \"git-creds\" not found"}}


def observed(obj: dict) -> Observed:
    md = obj["metadata"]
    return Observed(cluster="c", api_version="v1", kind=obj["kind"], namespace=md.get("namespace", ""),
                    name=md["name"], event="ADDED", obj=obj)


def forbidden_bytes() -> list[bytes]:
    out = []
    for value in SECRET_VALUES.values():
        bare = value.removeprefix("Bearer ")
        out += [bare.encode(), b64(bare).encode(), b64(b64(bare)).encode()]
    return out


async def test_known_secret_values_appear_nowhere_in_the_sqlite_file_or_its_wal(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = SqliteJournal(path)
    async with journal:
        await journal.append([observed(secret("one", V["data"])), observed(CONFIGMAP), observed(POD)])
        await journal.append([Outcome(effect_id="1.0", machine="pod", key="c/ns/x", result="ok",
                                      items=tuple(copy.deepcopy([secret("two", V["data"])])))])
        wal = path.with_name(path.name + "-wal")
        assert wal.exists() and wal.stat().st_size > 0
        files_while_open = {p.name: p.read_bytes() for p in (path, wal)}
    files_after_close = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for files in (files_while_open, files_after_close):
        for name, raw in files.items():
            for needle in forbidden_bytes():
                assert needle not in raw, f"{needle!r} found in {name}"


async def test_the_journal_keeps_digests_that_tell_equal_values_from_different_ones(tmp_path):
    async with SqliteJournal(tmp_path / "j.sqlite") as journal:
        a, b, c = await journal.append([observed(secret("a", "same")), observed(secret("b", "same")),
                                        observed(secret("c", "different"))])
    assert a.obj["data"]["password"] == b.obj["data"]["password"]
    assert a.obj["data"]["password"] != c.obj["data"]["password"]
    assert a.obj["data"]["password"].startswith(PREFIX) and len(a.obj["data"]["password"]) == len(PREFIX) + 16


def test_two_journals_digest_the_same_value_differently():
    assert Redactor(b"salt-1").digest("v") != Redactor(b"salt-2").digest("v")


def test_what_merely_refers_to_a_secret_is_kept():
    red = redact("Pod", POD)
    container = red["spec"]["containers"][0]
    assert container["env"][0]["value"].startswith(PREFIX)
    assert container["env"][1] == {"name": "LOG_LEVEL", "value": "debug"}
    assert container["args"][1].startswith(PREFIX)
    assert red["spec"]["volumes"] == POD["spec"]["volumes"]
    assert red["status"] == POD["status"]
    assert red["metadata"] == POD["metadata"]


def test_a_configmap_keeps_innocent_keys_and_loses_tokens_and_kubeconfigs():
    red = redact("ConfigMap", CONFIGMAP)
    assert red["data"]["mode"] == "fast"
    assert all(red["data"][k].startswith(PREFIX) for k in ("api_token", "kubeconfig", "config"))


def test_redaction_never_mutates_its_input_and_is_idempotent():
    before = copy.deepcopy(POD)
    once = redact("Pod", POD)
    assert POD == before and once is not POD
    assert redact("Pod", once) == once


REALISTIC = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx", "envFrom": [{"secretRef": {"name": "s"}}],
                             "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}],
             "imagePullSecrets": [{"name": "regcred"}],
             "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                 {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                 {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                 {"secret": {"name": "s"}}]}}]},
}


@pytest.mark.parametrize("obj", [REALISTIC, POD, CONFIGMAP, secret("x", "y")], ids=["refs-only", "pod", "configmap", "secret"])
def test_the_prefilter_clears_only_objects_that_need_no_redaction(obj):
    needs = redact(obj["kind"], obj) != obj
    assert suspicious(orjson.dumps(obj)) or not needs
    if obj is REALISTIC:
        assert not suspicious(orjson.dumps(obj)), "references alone must take the fast path"


def test_the_prefilter_memo_agrees_with_the_full_scan_whatever_came_before():
    """``suspicious`` remembers payload letter projections it cleared; whatever it saw before, its
    answer must stay exactly the full scan's (a memo hit may only ever clear a marker-free payload)."""
    import random

    from journal.redact import _scan
    rng = random.Random(11)
    words = ["name", "web", "Running", "phase", "podIP", "to", "ken", "Token", "pass", "word", "PASS",
             "secretName", "secret", "key", "monkey", "auth", "or", "bear", "er", "Bearer", "eyJ", "hb"]
    seen: list[bytes] = []
    for i in range(3000):
        if seen and rng.random() < 0.4:  # the same letters as an earlier payload, other digits
            payload = bytes(b if not 48 <= b <= 57 else rng.randrange(48, 58) for b in rng.choice(seen))
        else:
            parts = [rng.choice(words) + (str(rng.randrange(100)) if rng.random() < 0.3 else "") for _ in range(8)]
            payload = orjson.dumps({p: rng.choice(words) for p in parts[:4]} | {"v": "".join(parts[4:])})
        seen.append(payload)
        assert suspicious(payload) == _scan(payload.lower()), payload


def test_a_memo_hit_still_finds_a_credential_added_to_the_same_object():
    clean = {"kind": "Pod", "metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"env": [{"name": "MODE", "value": "x"}]}}
    assert not suspicious(orjson.dumps(clean))
    assert not suspicious(orjson.dumps(clean | {"metadata": {"name": "web", "resourceVersion": "2"}}))
    leaked = clean | {"spec": {"env": [{"name": "MODE", "value": "x"}, {"name": "DB_PASSWORD", "value": "hunter2"}]}}
    assert suspicious(orjson.dumps(leaked))
    assert redact("Pod", leaked)["spec"]["env"][1]["value"].startswith(PREFIX)


def test_the_observers_redact_equals_the_full_walk_for_every_object():
    """``Redactor.redact`` skips the walk when the prefilter clears an object; the result must be
    what the walk gives, for clean objects, objects with credentials and Secrets alike."""
    import random

    r = Redactor(b"0" * 16)
    rng = random.Random(5)
    words = ["name", "web", "token", "password", "DB_PASSWORD", "secretName", "value", "key", "apiKey",
             "Bearer abc.def", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "mode", "note", "auth"]
    objs = [REALISTIC, POD, CONFIGMAP, secret("x", "y")]
    for _ in range(500):
        env = [{"name": rng.choice(words), "value": rng.choice(words)} for _ in range(rng.randrange(3))]
        objs.append({"kind": "Pod", "metadata": {"name": rng.choice(words), "labels": {rng.choice(words): rng.choice(words)}},
                     "spec": {"containers": [{"name": "c", "env": env, "args": [rng.choice(words)]}]}})
    for obj in objs:
        walked = r._redact(obj["kind"], obj)
        assert r.redact(obj["kind"], obj) == walked
        assert r.redact(obj["kind"], obj) is not obj


def test_a_remembered_shape_never_hides_a_credential_that_differs_in_letters():
    """The scan and walk verdicts are remembered by shape (digits zeroed); a later event of the same
    pod with a credential added, or a pod whose service-account mount made it walk, still redacts."""
    sa = {"kind": "Pod", "metadata": {"name": "auth-1", "resourceVersion": "1"},
          "spec": {"containers": [{"name": "c", "env": [{"name": "MODE", "value": "x"}],
                                   "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}]}}
    for rv in ("1", "2", "37"):  # walked once (the name holds "auth"), then remembered by shape
        obj = sa | {"metadata": {"name": "auth-1", "resourceVersion": rv}}
        assert redact("Pod", obj) == obj
    leak = sa | {"spec": {"containers": [{"name": "c", "env": [{"name": "API_TOKEN", "value": "abcdefgh12"}]}]}}
    assert redact("Pod", leak)["spec"]["containers"][0]["env"][0]["value"].startswith(PREFIX)
    digest_like = sa | {"metadata": {"name": "auth-1", "password": "redacted:hmac-sha256:0123456789abcdef"}}
    assert redact("Pod", digest_like) == digest_like  # already a digest: kept, and never memoized
    other = sa | {"metadata": {"name": "auth-1", "password": "redacted:hmac-sha257:0123456789abcdef"}}
    assert redact("Pod", other)["metadata"]["password"].startswith(PREFIX + "")
    assert redact("Pod", other)["metadata"]["password"] != other["metadata"]["password"]


def test_a_remembered_walk_digests_the_same_places_as_a_fresh_walk_of_each_object():
    """Objects of one shape (same bytes but digits) reuse the positions one walk digested; every
    result must equal what a fresh walk gives, credentials in env, annotations and keys included."""
    import random

    rng = random.Random(5)
    r = Redactor(b"s" * 16)

    def pod(i: int) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"auth-{i % 3}", "resourceVersion": str(rng.randrange(10**6)),
                             "annotations": {"x/upstream-auth": f"Bearer abc{rng.randrange(10**8)}def"}},
                "spec": {"containers": [{"name": "c", "env": [
                    {"name": "MODE", "value": "x"},
                    {"name": "DB_PASSWORD", "value": f"pw{rng.randrange(10**9)}xyz"},
                    {"name": f"TOKEN{rng.randrange(9)}", "value": rng.choice(["abcdefgh1", "redacted:hmac-sha256:00"])}]}],
                    "volumes": [{"secret": {"secretName": "s"}}], "port": rng.randrange(100)}}

    for i in range(300):
        obj = pod(i)
        assert r.redact("Pod", obj) == r._redact("Pod", obj), obj


async def test_the_journal_stores_what_a_fresh_walk_gives_when_it_reuses_a_remembered_walk():
    from journal.memory import MemoryJournal
    from journal.records import Observed

    def observed(rv: str, pw: str) -> Observed:
        obj = {"kind": "Pod", "metadata": {"name": "p", "resourceVersion": rv},
               "spec": {"env": [{"name": "API_TOKEN", "value": pw}, {"name": "MODE", "value": "x"}]}}
        return Observed(cluster="c", api_version="v1", kind="Pod", name="p", rv=rv, event="MODIFIED", obj=obj)

    async with MemoryJournal() as j:
        drafts = [observed(str(n), f"secret{n}value") for n in range(1, 40)]
        stored = await j.append(drafts)
        for draft, rec in zip(drafts, stored):
            assert rec.obj == j.redactor._redact("Pod", draft.obj)
            assert rec.obj["spec"]["env"][0]["value"].startswith(PREFIX)


def test_the_occurrence_scan_gives_the_count_scans_verdict_on_every_payload():
    """``_unexplained`` (each marker occurrence checked against its benign contexts) must give
    exactly ``_scan``'s verdict (occurrences counted against contexts), whatever the payload:
    contexts at the very start, back to back, sharing letters with a marker, cut in two."""
    import random

    from journal.redact import _BENIGN, _MARKERS, _scan, _unexplained
    rng = random.Random(23)
    pieces = [c.decode() for cs in _BENIGN.values() for c in cs] + [m.decode() for m in _MARKERS] + [
        "Secret", "KEY", "Token", "name", "ref", '"', ":", "{", "/", "x", "e", "eyJ", "serviceaccount", "secrets",
        "keyref", "path", "-", " ", "1", "configmap", "imagepull", "run/"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 9)))
        low = text.encode().lower()
        assert _unexplained(low, list(_MARKERS)) == _scan(low), text
        assert suspicious(text.encode()) == _scan(low), text


def test_the_shape_memo_keeps_its_verdicts_with_either_digest(monkeypatch):
    """The shape digest is CPython's keyed hash, or BLAKE2b when hash randomization is off; with
    both, a remembered clean shape clears only payloads of that shape."""
    from journal import redact as R
    for siphash in (True, False):
        monkeypatch.setattr(R, "_SIPHASH", siphash)
        clean = {"kind": "Pod", "metadata": {"name": "w", "resourceVersion": "1"},
                 "spec": {"volumes": [{"secret": {"secretName": "s"}}]}}
        assert not suspicious(orjson.dumps(clean)) and not suspicious(orjson.dumps(clean))
        assert R.shape(orjson.dumps(clean)) == R.shape(orjson.dumps(clean | {"metadata": {"name": "w", "resourceVersion": "7"}}))
        leaked = clean | {"spec": {"volumes": [{"secret": {"secretName": "s", "token": "abcdefgh"}}]}}
        assert suspicious(orjson.dumps(leaked))
        assert redact("Pod", leaked)["spec"]["volumes"][0]["secret"]["token"].startswith(PREFIX)


def test_an_object_the_observer_redacted_is_not_scanned_again_when_the_journal_seals_it(monkeypatch):
    """kfold run's observers redact with the journal's own redactor; the journal's pass over the
    record built around that object is skipped (the work is done once per event), and what it
    stores is what the observer's redaction gave."""
    import journal.redact as rd
    from journal.chain import dump

    r = Redactor(b"v" * 16)
    calls = []
    real = rd._walk_plan
    monkeypatch.setattr(rd, "_walk_plan", lambda payload: calls.append(payload) or real(payload))
    out = r.redact("Pod", copy.deepcopy(POD))
    parts = sum(isinstance(v, (dict, list)) for v in POD.values())
    assert len(calls) == parts == 3, "one judgement per top-level mapping"
    rec = observed(out)
    assert rec.obj is not out, "the record holds a copy of the redacted object"
    sealed, payload = r.sealed(rec, dump(rec), dump)
    assert len(calls) == parts, "the journal's pass was skipped"
    assert sealed.obj == r._redact("Pod", POD) and orjson.loads(payload)["obj"] == sealed.obj
    assert sealed.obj["spec"]["containers"][0]["env"][0]["value"].startswith(PREFIX)
    again, _ = r.sealed(rec, dump(rec), dump)   # remembered once: a second pass scans
    assert len(calls) == 2 * parts and again.obj == sealed.obj


def test_a_record_that_only_shares_parts_with_a_redacted_object_is_redacted_in_full():
    """The skip needs every top-level value of the record's object to be the very object the
    redaction returned: one holding the vetted metadata beside a new spec with a credential in
    the open, or a key added, is scanned and redacted."""
    from journal.chain import dump

    r = Redactor(b"w" * 16)
    out = r.redact("Pod", copy.deepcopy(POD))
    leak = {"containers": [{"name": "app", "env": [{"name": "API_TOKEN", "value": "tok-LEAKED-123456"}]}]}
    for obj in ({**out, "spec": leak}, {**out, "extra": {"password": "hunter2-LEAKED"}}):
        r._vetted(out)   # as if the observer had just returned it again
        sealed, payload = r.sealed(observed(obj), dump(observed(obj)), dump)
        assert b"LEAKED" not in payload and sealed.obj == r._redact("Pod", obj)


def test_the_redactor_forgets_objects_whose_records_never_came():
    import journal.redact as rd

    r = Redactor(b"x" * 16)
    for i in range(rd._VETTED_MAX + 10):
        r.redact("Pod", {"kind": "Pod", "metadata": {"name": f"p{i}"}})
    assert 0 < len(r._done) <= rd._VETTED_MAX


def test_an_object_judged_part_by_part_gets_what_a_walk_of_the_whole_gives():
    """Observed objects are judged per top-level entry, each by the memo of its own shape; over a
    pod's life (its spec's shape kept, metadata and status moving, credentials appearing in any
    part, at the top level, in a top-level list, under a credential key), the journal's pass and
    the observer's both store exactly what one walk of the whole object gives."""
    import random

    from journal.chain import dump

    rng = random.Random(17)
    r = Redactor(b"p" * 16)
    words = ["web", "auth-proxy", "monkey", "MODE", "DB_PASSWORD", "API_TOKEN", "Bearer abcdefgh.ijk",
             "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "secretKeyRef", "token", "x"]

    def spec(i: int) -> dict:
        pick = random.Random(i)   # one spec per pod, the same on every event
        env = [{"name": pick.choice(words), "value": pick.choice(words) + "12345678"} for _ in range(pick.randrange(3))]
        return {"containers": [{"name": pick.choice(words), "env": env, "args": [pick.choice(words)]}],
                "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}

    for k in range(600):
        i = rng.randrange(12)
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{rng.choice(words)}-{i}", "resourceVersion": str(rng.randrange(10**7)),
                            "annotations": {rng.choice(words): rng.choice(words)}},
               "spec": spec(i),
               "status": {"phase": rng.choice(["Pending", "Running"]), "message": rng.choice(words),
                          "containerStatuses": [{"name": rng.choice(words), "ready": rng.random() < 0.5}]}}
        extra = rng.randrange(5)
        if extra == 1:
            obj["password"] = "hunter2-" + str(k)           # a top-level credential key
        elif extra == 2:
            obj["items"] = [{"name": "API_TOKEN", "value": f"v{k}-abcdefgh"}]   # a top-level list
        elif extra == 3:
            obj["token"] = {"raw": "abcdefgh"}              # a mapping under a credential key
        before = copy.deepcopy(obj)
        walked = r._redact("Pod", obj)
        assert r.redact("Pod", obj) == walked, obj
        rec = observed(obj)
        sealed, payload = r.sealed(rec, dump(rec), dump)
        assert sealed.obj == walked and orjson.loads(payload)["obj"] == walked
        assert obj == before and rec.obj == before, "never mutates its input"


def test_a_pods_spec_is_walked_once_across_its_events(monkeypatch):
    """Why the per-part judgement exists: a Pod whose spec holds a marker outside any benign
    context (a container named ``auth-proxy``) has its spec walked on its first event only; later
    events with a new status and resourceVersion reuse the remembered verdict for the spec."""
    r = Redactor(b"q" * 16)
    walked = []
    real = Redactor._walk
    monkeypatch.setattr(Redactor, "_walk", lambda self, node, secret: walked.append(node) or real(self, node, secret))
    spec = {"containers": [{"name": "auth-proxy", "env": [{"name": "DB_PASSWORD", "value": "hunter2-x"}]}]}
    outs = []
    for n, phase in enumerate(["Pending", "Running", "Succeeded"]):
        obj = {"kind": "Pod", "metadata": {"name": "p", "resourceVersion": str(10 + n)}, "spec": spec,
               "status": {"phase": phase, **({"podIP": "10.0.0.1"} if n else {})}}
        before = len(walked)
        outs.append(r.redact("Pod", obj))
        assert (spec in walked[before:]) == (n == 0), f"event {n}: spec walked again"
    assert all(o["spec"]["containers"][0]["env"][0]["value"].startswith(PREFIX) for o in outs)
    assert {o["spec"]["containers"][0]["env"][0]["value"] for o in outs} == {outs[0]["spec"]["containers"][0]["env"][0]["value"]}


def test_a_value_is_a_jwt_only_when_it_has_the_shape_of_one_not_when_it_merely_contains_eyj():
    """Over-redaction hides what an operator needs: a value that contains "eyJ" (as "keyJar" does)
    but is no header.payload.signature stays as it is; a real JWT argument is redacted."""
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"
    pod = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "args": ["--keyJar=/var/lib/jar", jwt]}]}}
    args = Redactor(b"j" * 16).redact("Pod", pod)["spec"]["containers"][0]["args"]   # its own verdict cache
    assert args[0] == "--keyJar=/var/lib/jar"
    assert args[1].startswith(PREFIX)
