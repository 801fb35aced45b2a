"""A Pod observation's projection (``journal.projection``) folds exactly as the whole record does.

Every fold below runs twice: once on the records as journaled, once on the same records with
their objects replaced by what the projection keeps, wrapped in a tripwire that notes any read
of a key the projection does not keep (``POD``). The two must give byte-identical snapshots and
identical effects, and the tripwire must note nothing. Inputs: generated pods and machine tables
(malformed objects included: the generators of the fast-path tests), the records of simulated
runs (sessions, pods of every phase, deletes, relists, faults) and the realistic workload of the
benchmarks. A machine that starts reading another field of a Pod fails here until ``POD`` keeps it
(and ``projection.VERSION`` moves)."""
from __future__ import annotations

import logging
import random
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import fold_many, initial_state, snapshot
from engine.effects.models import effect_to_dict
from engine.machines.session import pods as session_pods
from journal import projection
from journal.chain import parse_payloads
from journal.projection import POD, Each, prune
from journal.records import Observed
from tests.unit.test_fastpath_observe import random_pod
from tests.unit.test_fastpath_pod_observe import (FAST, _Reader, outcome, random_obj, random_op, random_record,
                                                  random_session_table, session_pod, step)

ROOT = Path(__file__).resolve().parents[2]
READS_OUTSIDE: list[str] = []


class Tripwire(dict):
    """A projected mapping: reads as the mapping it holds, and notes in ``READS_OUTSIDE`` every
    read of a key its spec does not keep, and every use of the mapping as a whole."""

    def __init__(self, data: dict[str, Any], spec: dict[str, Any], where: str):
        super().__init__(data)
        self._spec, self._where = spec, where

    def _note(self, what: Any) -> None:
        if what not in self._spec:
            READS_OUTSIDE.append(f"{self._where}.{what}")

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self._note(key)
        return super().__contains__(key)

    def _whole(self, *_: Any) -> Any:
        READS_OUTSIDE.append(f"{self._where} (the whole mapping)")
        return dict.items(self)

    keys = values = items = __iter__ = _whole

    def __bool__(self) -> bool:  # kept by the projection: never emptied where the object is not
        return dict.__len__(self) > 0

    def __len__(self) -> int:
        READS_OUTSIDE.append(f"{self._where} (its length)")
        return dict.__len__(self)


def tripwired(value: Any, spec: Any, where: str = "obj") -> Any:
    if spec is None:
        return value
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return value
        return Tripwire({k: tripwired(v, spec.get(k), f"{where}.{k}") if k in spec else v for k, v in value.items()},
                        spec, where)
    if not isinstance(value, list):
        return value
    return [tripwired(v, spec.spec, f"{where}[]") for v in value]


def projected(rec: Any) -> Any:
    """``rec`` as the projection gives it back (its object pruned, JSON round trip), tripwired."""
    if not isinstance(rec, Observed) or rec.kind not in projection.SPECS:
        return rec
    obj = orjson.loads(projection.project(rec))
    return rec.model_copy(update={"obj": tripwired(obj, projection.SPECS[rec.kind])})


def fold_both(records: list[Any], run: int = 64) -> tuple[Any, Any]:
    """Fold ``records`` whole and projected, run by run; assert equal snapshots and effects."""
    READS_OUTSIDE.clear()
    whole = part = initial_state()
    for i in range(0, len(records), run):
        chunk = records[i:i + run]
        whole, fx_whole = fold_many(whole, chunk)
        part, fx_part = fold_many(part, [projected(r) for r in chunk])
        dicts = [[[effect_to_dict(e) for e in fx] for fx in per_record] for per_record in (fx_part, fx_whole)]
        assert dicts[0] == dicts[1], f"effects differ in records {chunk[0].seq}..{chunk[-1].seq}"
        assert snapshot.dump(part) == snapshot.dump(whole), f"states differ after record {chunk[-1].seq}"
    assert READS_OUTSIDE == [], f"the fold read what the projection does not keep: {sorted(set(READS_OUTSIDE))[:10]}"
    return whole, part


# -- the projection itself ------------------------------------------------------------------------

def test_a_value_of_an_unexpected_type_is_kept_whole_and_nothing_is_emptied():
    assert prune({"metadata": ["a", "list"], "spec": "x"}, POD) == {"metadata": ["a", "list"], "spec": "x"}
    status = {"containerStatuses": [{"name": "c", "state": {"running": {"startedAt": "t"}}}, 7]}
    assert prune({"status": status}, POD) == {"status": status}  # running: no kept key, so kept whole
    ready = {"status": {"conditions": [{"type": "Ready"}]}}
    assert prune(ready, POD) == ready  # no PodScheduled condition: the list is kept whole
    pod = {"metadata": {"name": "p", "annotations": {"a": "b"}, "labels": {"app": "x"}},
           "spec": {"containers": [{"name": "c"}], "nodeName": "n"},
           "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "False",
                                                                           "lastTransitionTime": "t"}]}}
    assert prune(pod, POD) == {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"nodeName": "n"},
                               "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    assert isinstance(POD["status"]["conditions"], Each)


def test_only_pod_observations_are_projected():
    pod = Observed(cluster="c", api_version="v1", kind="Pod", name="p", event="ADDED", obj={"metadata": {"name": "p"}})
    secret = pod.model_copy(update={"kind": "Secret"})
    assert orjson.loads(projection.project(pod)) == {"metadata": {"name": "p"}}
    assert projection.project(secret) is None


def test_a_sealed_projection_opens_only_for_its_own_row_and_version():
    sealed = projection.seal(b'{"a":1}', 1234)
    assert projection.unseal(sealed, 1234) == b'{"a":1}'
    assert projection.unseal(sealed, 1235) is None                        # another row's checksum
    assert projection.unseal(sealed[:-1] + b"2", 1234) is None             # a flipped byte
    assert projection.unseal(sealed[:4] + bytes([projection.VERSION + 1]) + sealed[5:], 1234) is None
    assert projection.unseal(None, 1234) is None and projection.unseal(b"", 0) is None


# -- folds ---------------------------------------------------------------------------------------

def owned_pod(rng: random.Random) -> dict[str, Any]:
    """A pod of session "demo" or "other" (``session_pod``) with a generated status, malformed
    parts included (``random_pod``): what the session machine reduces in full."""
    pod = random_pod(rng)
    return {**pod, "metadata": session_pod(rng)["metadata"]} if rng.random() < 0.8 else pod


@pytest.mark.parametrize("seed", range(20))
def test_a_generated_pod_event_folds_the_same_from_its_projection(seed):
    rng = random.Random(seed)
    owned = 0
    for _ in range(200):
        tables = {"pod": {f"c/ns/{n}": random_op(rng) for n in ("p0", "demo-g1", "other-g1") if rng.random() < 0.6},
                  "session": random_session_table(rng)}
        obj = rng.choice([owned_pod(rng), owned_pod(rng), random_obj(rng), None])
        md = obj.get("metadata") if isinstance(obj, dict) else None
        name = md.get("name") if isinstance(md, dict) and isinstance(md.get("name"), str) else "p0"
        rec = random_record(rng, [name] * 3 + ["demo-g1", "x"], obj)
        READS_OUTSIDE.clear()
        assert outcome(step, FAST, tables, projected(rec)) == outcome(step, FAST, tables, rec), (tables, rec)
        assert READS_OUTSIDE == [], (READS_OUTSIDE, rec)
        owned += session_pods.pod_owner(_Reader(tables["session"]), rec) is not None
    assert owned > 2  # the session machine's full reduction of a pod was exercised


@pytest.fixture(scope="module")
def simulated() -> list[list[Any]]:
    """The records of a few simulated runs (``kfold sim``), as their journals hold them."""
    from kfold.sim.world import Options, simulate
    logging.disable(logging.CRITICAL)
    try:
        runs = [simulate(Options(seed=seed, steps=200, sessions=4)) for seed in (1, 7, 4)]
    finally:
        logging.disable(logging.NOTSET)
    return [[row for _, row in sorted(r.store.rows.items())] for r in runs]


def test_simulated_runs_fold_the_same_from_their_projections(simulated):
    pods = 0
    for rows in simulated:
        records = parse_payloads([row[3] for row in rows])
        pods += sum(1 for r in records if isinstance(r, Observed) and r.kind == "Pod")
        fold_both(records)
    assert pods > 50


def test_a_journal_reads_back_each_pod_record_from_its_projection(simulated):
    for rows in simulated:
        whole, read = parse_payloads([row[3] for row in rows]), projection.parse_rows(rows)
        assert [r.seq for r in read] == [r.seq for r in whole]
        for w, r in zip(whole, read):
            if isinstance(w, Observed) and w.kind == "Pod":
                assert r.model_copy(update={"obj": {}}) == w.model_copy(update={"obj": {}})
                assert r.obj == prune(w.obj, POD) and r.obj != w.obj or w.obj == prune(w.obj, POD)
            else:
                assert r == w


def test_the_benchmark_workload_folds_the_same_from_its_projections():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from workload import World, observed
    except ImportError:  # pragma: no cover - the scripts are part of the repository
        pytest.skip("scripts/workload.py not found")
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    world = World(200, seed=3, secrets=20)
    lines = [orjson.dumps({"type": t, "object": o}) for t, o in world.events(3000)]
    records = [observed(line, 1000 + k, 1_893_456_000_000 + k).model_copy(update={"seq": k + 1})
               for k, line in enumerate(lines)]
    fold_both(records, run=128)
