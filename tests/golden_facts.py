"""Facts of the golden journal (tests/data/golden_session.jsonl), read from the journal itself.

The golden journal is re-recorded on the real control plane whenever a decision changes on purpose
(scripts/record_golden.py): its namespace is random and its seq numbers, effect ids and server
times move. Tests of the viewers (``kfold trace``, ``kfold ui``, progress) take what they expect
from here, worked out from the raw JSON lines without the code they test, so they keep checking
the same behaviour on any recording of the same scenario.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "data" / "golden_session.jsonl"


def iso_ms(ms: int) -> str:
    """Server milliseconds as the ISO 8601 UTC text the viewers print."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


@dataclass(frozen=True)
class Effect:
    """One effect of the journal: its issued record, and the outcome record that answers it."""
    id: str
    cause: int           # seq of the record whose fold emitted it (the effect id is "<cause>.<n>")
    issued: int          # seq of its EffectIssued record
    outcome: int | None  # seq of the outcome that answers it
    body: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.body['namespace']}/{self.body['name']}"


@dataclass(frozen=True)
class Golden:
    lines: list[str]
    records: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.records)

    def index(self, seq: int) -> int:
        """The line index of the record with ``seq``."""
        return next(i for i, r in enumerate(self.records) if r["seq"] == seq)

    def record(self, seq: int) -> dict[str, Any]:
        return self.records[self.index(seq)]

    @property
    def kinds(self) -> list[str]:
        return sorted({r["rec"] for r in self.records})

    @property
    def session_observed(self) -> dict[str, Any]:
        """The first observation of the Session."""
        return next(r for r in self.records if r["rec"] == "observed" and r["kind"] == "Session")

    @property
    def namespace(self) -> str:
        return self.session_observed["namespace"]

    @property
    def session(self) -> str:
        """The Session's key, ``cluster/namespace/name``."""
        r = self.session_observed
        return f"{r['cluster']}/{r['namespace']}/{r['name']}"

    def key(self, name: str) -> str:
        """The key of object ``name`` in the Session's namespace."""
        return f"{self.session.rsplit('/', 1)[0]}/{name}"

    def first(self, type_: str, kind: str) -> Effect:
        """The first effect of ``type_`` (create, delete, ...) on a ``kind`` object."""
        issued = next(r for r in self.records if r["rec"] == "effect"
                      and r["effect"]["type"] == type_ and r["effect"]["kind"] == kind)
        eid = issued["effect"]["id"]
        outcome = next((r["seq"] for r in self.records if r["rec"] == "outcome" and r["effect_id"] == eid), None)
        return Effect(eid, int(eid.split(".")[0]), issued["seq"], outcome, issued["effect"])

    @property
    def created(self) -> set[tuple[str, str]]:
        """(kind, name) of every object an effect created."""
        return {(r["effect"]["kind"], r["effect"]["name"]) for r in self.records
                if r["rec"] == "effect" and r["effect"]["type"] == "create"}

    def machine_seqs(self, machine: str) -> list[int]:
        """Seqs of the commands, effects and outcomes of ``machine``."""
        return [r["seq"] for r in self.records
                if (r["rec"] == "command" and r["name"].startswith(f"{machine}."))
                or (r["rec"] == "effect" and r["effect"]["machine"] == machine)
                or (r["rec"] == "outcome" and r["machine"] == machine)]

    @property
    def configure(self) -> dict[str, Any]:
        """The boot's ``session.configure`` command (its args hold the deadlines)."""
        return next(r for r in self.records if r["rec"] == "command" and r["name"] == "session.configure")

    @property
    def start_timer(self) -> tuple[int, int]:
        """(seq, due) of the record that arms the Session's start timer: the outcome of the pod's
        creation, due ``start_seconds`` (from session.configure) after that record's server time."""
        arms = self.record(self.first("create", "Pod").outcome)
        return arms["seq"], arms["at"] + 1000 * self.configure["args"]["start_seconds"]

    @property
    def ready_timer(self) -> tuple[int, int]:
        """(seq, due) of the record that arms the Session's ready timer: the first observation of
        its pod Running, due ``ready_seconds`` (from session.configure) after that record's server time."""
        arms = next(r for r in self.records if r["rec"] == "observed" and r["kind"] == "Pod"
                    and (r["obj"].get("status") or {}).get("phase") == "Running")
        return arms["seq"], arms["at"] + 1000 * self.configure["args"]["ready_seconds"]

    def with_record(self, seq: int, rec: dict[str, Any] | str) -> str:
        """The journal's text with the record at ``seq`` replaced."""
        lines = list(self.lines)
        lines[self.index(seq)] = rec if isinstance(rec, str) else json.dumps(rec)
        return "\n".join(lines) + "\n"


@cache
def golden(path: Path = GOLDEN) -> Golden:
    lines = path.read_text().splitlines()
    return Golden(lines, [json.loads(line) for line in lines])
