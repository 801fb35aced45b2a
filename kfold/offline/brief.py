"""``kfold trace --brief``: what happened to one object in a few lines, the reason first.

Guarantees:
- ``summary`` is one line: for a Session its phase (and "deleted" once it is gone), the Ready
  condition kfold last wrote (status, reason, message: what ``kubectl get`` showed) and the
  record that wrote it, its standing failure and its last problem when they differ (the same
  ``kfold.offline.explain.SessionLog`` the UI's summary uses); for any other object its last state.
- ``step_lines`` gives, for one record, only: the phase (or state) changes of the object's
  decisions, the effects emitted on it, an outcome answering one of its effects that was not
  ``ok`` (marked ``expected`` when it is an answer the machine moves on from,
  ``kfold.offline.explain.expected_of``), a Ready condition written with a new reason, a refused
  record, a quarantine and a divergence. A record with none of these prints nothing.
"""
from __future__ import annotations

from typing import Any, Iterator

from kfold.offline.explain import SessionLog, ready_written, expected_of, problem_of
from kfold.offline.render import effect_line, iso, record_line, state_of


class Brief:
    """Fed every step of the walk (``note``); says one object's story (``summary``, ``step_lines``)."""

    def __init__(self) -> None:
        self.sessions = SessionLog()
        self.last_state: dict[str, str] = {}
        self.said: dict[str, tuple[str, str]] = {}   # key -> the Ready (status, reason) already shown
        self.last_at: int | None = None

    def note(self, step: Any) -> None:
        self.sessions.add(step, problem_of(step))
        self.last_at = step.record.at if step.record.at is not None else self.last_at
        for c in step.changes:
            self.last_state[c.key] = state_of(c.after) if c.after is not None else f"{state_of(c.before)} (removed)"

    def summary(self, key: str) -> str:
        s = self.sessions.sessions.get(key)
        if s is None:
            return f"{key}: {self.last_state.get(key, 'no decision recorded')}"
        d = s.as_dict(self.last_at)
        parts = [f"Session {key}: {d['phase'] or 'Pending'}" + (" (deleted)" if d["gone"] else "")]
        ready = d["ready"]
        if ready:
            parts.append(f"Ready {ready['status']} {ready['reason']}: {ready['message']} (#{ready['seq']})")
        failure = d["failure"]
        if failure and (not ready or ready["reason"] != failure["reason"]):
            parts.append(f"failed {failure['reason']}: {failure['message']} (#{failure['seq']})")
        problem = d["problem"]
        if problem and not failure:
            parts.append(f"last problem #{problem['seq']}: {problem['text']}")
        return "; ".join(parts)

    def step_lines(self, step: Any, key: str) -> Iterator[str]:
        items = list(self._items(step, key))
        if items:
            yield f"#{step.record.seq} {iso(step.record.at)} {record_line(step.record)}"
            yield from (f"  {item}" for item in items)

    def _items(self, step: Any, key: str) -> Iterator[str]:
        rec = step.record
        if step.error:
            yield f"not folded: {step.error}"
        if key in step.quarantined:
            yield f"QUARANTINED by machine {step.quarantined[key].machine}: {step.quarantined[key].error}"
        for c in step.changes:
            before, after = state_of(c.before), state_of(c.after)
            if c.key == key and before != after:
                yield f"{c.machine}: {before} -> {after}"
        for e in step.effects:
            if e.key != key or e.type == "log":
                continue
            yield f"effect {e.id} {effect_line(e)}"
            ready = ready_written(e) if e.machine == "session" else None
            if ready is not None and self.said.get(key) != (ready["status"], ready["reason"]):
                self.said[key] = (ready["status"], ready["reason"])
                yield f"Ready {ready['status']} {ready['reason']}: {ready['message']}"
        if rec.rec == "outcome" and rec.result != "ok" and key in (rec.key, getattr(step.answered, "key", None)):
            what = effect_line(step.answered) if step.answered is not None else f"effect {rec.effect_id}"
            words = " ".join(x for x in (rec.result, rec.status_reason, str(rec.code) if rec.code else "") if x)
            expected = expected_of(step)
            yield f"outcome {rec.effect_id} {what}: {words}" + (f": {rec.message}" if rec.message else "") \
                + (f" ({expected.split(': ', 1)[1]})" if expected else "")
        if step.divergence is not None:
            yield "DIVERGENCE: " + step.divergence.describe().splitlines()[0]
