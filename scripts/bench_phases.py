#!/usr/bin/env python3
"""Where a bench_peer round's time went, read from kfold's own journal: bring-up and teardown phases.

    python scripts/bench_phases.py WORKDIR_OR_JOURNAL [...]

``WORKDIR_OR_JOURNAL``: a journal file, or a directory searched for ``kfold*/journal.db`` (what
``scripts/bench_peer.py --workdir DIR`` leaves, one per kfold round). Each journal is read through
``SqliteJournal`` (the chain verified) and, per Session, the server-clock time (``at``, the
apiserver's clock as kfold carries it) of each step is taken; printed are p10/p50/p90/max over the
Sessions, in seconds after the round's first Session ADDED (bring-up) and after the first Session
deletion kfold saw (teardown):

bring-up   added: the Session's ADDED; Pod/Service created: the create's outcome; pod ready: the
           first observation of its pod with condition Ready=True; status Ready: the first
           observation of the Session with ``status.phase`` Ready (kfold's own write, seen back)
teardown   deletion seen: the first observation with ``deletionTimestamp``; pod terminating: its
           pod seen with one; pod gone: the pod's DELETED; finalizer released: the outcome of the
           patch that removes it; session gone: the Session's DELETED

Read-only; for benchmarks on the bench's own namespace (pod ``<session>-g<N>``).
"""
from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from journal.records import EffectIssued, Observed, Outcome  # noqa: E402
from journal.sqlite import SqliteJournal  # noqa: E402

BRING_UP = ("added", "Pod created", "pod ready", "Service created", "status Ready")
TEARDOWN = ("deletion seen", "pod terminating", "pod gone", "finalizer released", "session gone")


async def phases(path: Path) -> dict[str, dict[str, int]]:
    """Session name -> step -> server time (ms) of its first occurrence."""
    t: dict[str, dict[str, int]] = defaultdict(dict)
    effects: dict[str, Any] = {}
    at = 0
    async with SqliteJournal(str(path), readonly=True) as journal:
        async for rec in journal.read():
            at = rec.at or at   # an EffectIssued carries none: the time of the record before it
            if isinstance(rec, Observed):
                _observed(t, rec, at)
            elif isinstance(rec, EffectIssued):
                effects[rec.effect.get("id", "")] = rec.effect
            elif isinstance(rec, Outcome) and rec.effect_id in effects and rec.result == "ok":
                e = effects[rec.effect_id]
                session = str(e.get("name") or str(e.get("key", "")).rsplit("/", 1)[-1])
                session = session.rsplit("-g", 1)[0] if e.get("kind") == "Pod" else session
                if e.get("type") == "create":
                    t[session].setdefault(f"{e.get('kind')} created", at)
                elif e.get("type") == "patch" and e.get("kind") == "Session" and "finalizers" in str(e.get("patch")):
                    if "deletion seen" in t[session]:
                        t[session].setdefault("finalizer released", at)
    return t


def _observed(t: dict[str, dict[str, int]], rec: Observed, at: int) -> None:
    obj = rec.obj or {}
    md = obj.get("metadata") or {}
    if rec.kind == "Session":
        steps = t[rec.name]
        steps.setdefault("added", at)
        if (obj.get("status") or {}).get("phase") == "Ready":
            steps.setdefault("status Ready", at)
        if md.get("deletionTimestamp"):
            steps.setdefault("deletion seen", at)
        if rec.event == "DELETED":
            steps.setdefault("session gone", at)
    elif rec.kind == "Pod" and "-g" in rec.name:
        steps = t[rec.name.rsplit("-g", 1)[0]]
        conditions = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []
                      if isinstance(c, dict)}
        if conditions.get("Ready") == "True":
            steps.setdefault("pod ready", at)
        if md.get("deletionTimestamp"):
            steps.setdefault("pod terminating", at)
        if rec.event == "DELETED":
            steps.setdefault("pod gone", at)


def report(path: Path, t: dict[str, dict[str, int]]) -> None:
    sessions = [s for s in t.values() if "added" in s]
    print(f"{path}: {len(sessions)} Sessions")
    for title, steps, origin in (("bring-up", BRING_UP, "added"), ("teardown", TEARDOWN, "deletion seen")):
        zero = [s[origin] for s in sessions if origin in s]
        if not zero:
            continue
        print(f"  {title} (s after the first {origin}):")
        for step in steps:
            xs = sorted(s[step] - min(zero) for s in sessions if step in s)
            if xs:
                q = lambda f: xs[min(len(xs) - 1, int(len(xs) * f))] / 1000  # noqa: E731
                print(f"    {step:19s} n={len(xs):4d}  p10 {q(0.1):6.2f}  p50 {q(0.5):6.2f}  "
                      f"p90 {q(0.9):6.2f}  max {xs[-1] / 1000:6.2f}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    paths: list[Path] = []
    for arg in map(Path, argv):
        if not arg.exists():
            print(f"{arg}: no such file or directory (give a journal file or a bench_peer --workdir)", file=sys.stderr)
            return 2
        paths += sorted(arg.glob("kfold*/journal.db")) if arg.is_dir() else [arg]
    if not paths:
        print(f"no kfold journal under {' '.join(argv)} (expected kfold*/journal.db)", file=sys.stderr)
        return 2
    for path in paths:
        try:
            report(path, asyncio.run(phases(path)))
        except Exception as exc:   # not a journal, or a damaged one: say which file, go on
            print(f"{path}: cannot read it as a kfold journal: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
