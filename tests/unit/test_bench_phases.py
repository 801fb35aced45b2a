"""scripts/bench_phases.py reads a bench round's phases from a real SQLite journal."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from journal.records import EffectIssued, Observed, Outcome
from journal.sqlite import SqliteJournal

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_893_456_000_000


def _session(name: str, at: int, event: str = "MODIFIED", **extra) -> Observed:
    md = {"name": name, "namespace": "b", "uid": f"u-{name}", **extra.pop("md", {})}
    return Observed(at=at, cluster="local", api_version="kfold.dev/v1alpha1", kind="Session", namespace="b",
                    name=name, uid=md["uid"], rv=str(at), event=event, obj={"metadata": md, **extra})


def _pod(session: str, at: int, event: str = "MODIFIED", ready: bool = False, deleting: bool = False) -> Observed:
    md = {"name": f"{session}-g1", "uid": f"p-{session}", **({"deletionTimestamp": "x"} if deleting else {})}
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return Observed(at=at, cluster="local", api_version="v1", kind="Pod", namespace="b", name=md["name"],
                    uid=md["uid"], rv=str(at), event=event, obj={"metadata": md, "status": status})


def _call(eid: str, at: int, **effect) -> list:
    return [EffectIssued(effect={"id": eid, **effect}),
            Outcome(at=at, effect_id=eid, machine="m", key=effect.get("key", ""), result="ok")]


def test_each_step_of_a_sessions_life_is_timed_from_the_rounds_first_event(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_phases
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    path = tmp_path / "kfold-x" / "journal.db"
    path.parent.mkdir()
    records = [
        _session("s1", T0, "ADDED"), _session("s2", T0 + 1000, "ADDED"),
        *_call("1.0", T0 + 1500, type="create", kind="Pod", name="s1-g1", key="local/b/s1-g1"),
        _pod("s1", T0 + 2000, ready=True),
        *_call("2.0", T0 + 3000, type="create", kind="Service", name="s1", key="local/b/s1"),
        _session("s1", T0 + 3100, status={"phase": "Ready"}),
        _session("s1", T0 + 10_000, md={"deletionTimestamp": "x"}),
        _pod("s1", T0 + 10_500, deleting=True), _pod("s1", T0 + 12_000, "DELETED"),
        *_call("3.0", T0 + 12_100, type="patch", kind="Session", key="local/b/s1",
               patch=[{"op": "remove", "path": "/metadata/finalizers/0"}]),
        _session("s1", T0 + 12_200, "DELETED"),
    ]

    async def write() -> None:
        async with SqliteJournal(str(path)) as journal:
            await journal.append(records)

    asyncio.run(write())
    t = asyncio.run(bench_phases.phases(path))
    assert t["s1"] == {"added": T0, "Pod created": T0 + 1500, "pod ready": T0 + 2000, "Service created": T0 + 3000,
                       "status Ready": T0 + 3100, "deletion seen": T0 + 10_000, "pod terminating": T0 + 10_500,
                       "pod gone": T0 + 12_000, "finalizer released": T0 + 12_100, "session gone": T0 + 12_200}
    assert t["s2"] == {"added": T0 + 1000}
    assert bench_phases.main([str(tmp_path)]) == 0
    assert bench_phases.main([str(tmp_path / "nowhere")]) == 2
