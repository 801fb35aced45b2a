"""``fold_many`` is ``fold`` record after record: same state, same effects, all or nothing.

Every scenario test also re-folds its records in random batches (tests/conftest.py); these cases
add a real journal (the golden session) and a long run of Pod events over many objects."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine import SequenceError, fold, fold_many, initial_state, snapshot
from journal.records import Observed
from kfold.offline.sources import iter_records

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden_session.jsonl"


def one_by_one(records):
    state, effects = initial_state(), []
    for rec in records:
        state, more = fold(state, rec)
        effects.append(more)
    return state, effects


def in_batches(records, sizes):
    state, effects, i = initial_state(), [], 0
    while i < len(records):
        n = next(sizes)
        state, more = fold_many(state, records[i:i + n])
        effects.extend(more)
        i += n
    return state, effects


def pod_events(n: int, objects: int) -> list[Observed]:
    rng, out = random.Random(7), []
    for seq in range(1, n + 1):
        i = rng.randrange(objects)
        md = {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}-{seq // 50}", "resourceVersion": str(seq),
              "labels": {"app.kubernetes.io/managed-by": "kfold"} if i % 3 else {}}
        if rng.random() < 0.05:
            md["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        event = rng.choice(("ADDED", "MODIFIED", "MODIFIED", "DELETED"))
        out.append(Observed(seq=seq, at=1_000 + seq, cluster="local", api_version="v1", kind="Pod",
                            namespace="ns", name=md["name"], uid=md["uid"], rv=md["resourceVersion"],
                            event=event, obj={"metadata": md, "status": {"phase": "Running"}}))
    return out


@pytest.mark.parametrize("source", ["golden", "pods"])
@pytest.mark.parametrize("sizes", [(1,), (2, 5), (64,), (10_000,)])
def test_batches_of_any_size_fold_to_the_same_state_and_effects(source, sizes):
    records = list(iter_records(str(GOLDEN))) if source == "golden" else pod_events(3_000, 200)
    want_state, want_effects = one_by_one(records)
    cycle = iter(sizes * (len(records) + 1))
    state, effects = in_batches(records, cycle)
    assert effects == want_effects
    assert snapshot.dump(state) == snapshot.dump(want_state)
    assert (state.seq, state.at) == (want_state.seq, want_state.at)


def test_a_batch_that_cannot_be_folded_returns_nothing_and_leaves_the_state_as_it_was():
    records = pod_events(20, 5)
    state, _ = fold_many(initial_state(), records[:10])
    before = snapshot.dump(state)
    broken = records[10:15] + records[16:]  # seq 16 missing: 17 cannot follow 15
    with pytest.raises(SequenceError, match="record seq 17 cannot follow seq 15"):
        fold_many(state, broken)
    assert snapshot.dump(state) == before and state.seq == 10
    resumed, _ = fold_many(state, records[10:])  # the same state still folds on
    assert resumed.seq == 20


def test_a_batch_after_a_table_was_iterated_keeps_every_write():
    """A relist iterates a table mid-batch (freezing its working copy); writes before and after
    the iteration must all reach the final state."""
    records = list(iter_records(str(GOLDEN)))
    relists = [r.seq for r in records if r.rec == "relist"]
    assert relists, "the golden journal has relists"
    want, _ = one_by_one(records)
    got, _ = fold_many(initial_state(), records)
    assert snapshot.dump(got) == snapshot.dump(want)
