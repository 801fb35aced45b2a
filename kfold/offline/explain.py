"""What ``kfold ui`` says about a walk (``kfold.offline.timeline.walk``) beyond one record: which clock
stamped a record, the signed time since the previous record on that clock, whether a record is a
problem, a Session's phases with their durations, and what is still pending when the journal ends.

Guarantees:
- ``clock_of`` names the cluster whose server clock stamped a record (``engine.effects.io.clock``):
  an observation or relist its cluster's, an effect and its outcome the effect's cluster's, a
  deadline its timer's, a command the home cluster's. Times on two clocks are never subtracted:
  ``Clocks.delta`` is the time since the previous record *on the same clock* (signed: a record
  may carry an earlier time than the one before it), and ``delta_text`` tags it with the cluster
  when that clock is not the home one (``+0.012s``, ``-0.001s``, ``+3.000s on edge``).
- ``expected_of`` is non-empty for an outcome that is an answer the machine asked for and moves
  on from, not a failure: ``AlreadyExists`` on a create (it reads the object next and adopts it
  when it is its own, or fails the Session naming the holder), ``NotFound`` on a delete (already
  gone) or on a read (absence is the answer).
- ``problem_of`` is non-empty exactly for: an outcome whose result is not ``ok`` and not expected
  (its reason and message), a record the fold refused, the first divergence, a quarantine, a
  Session entering ``Failed``.
- ``SessionLog`` keeps one ``SessionSummary`` per Session key, from the Session decisions the walk
  changed and the status writes it emitted: each phase with the seq and server time it was
  entered and how long it lasted (the last one until the journal's last record on the Session's
  clock, marked open), the current generation, the current pod and its phase, the Ready
  condition's status, reason and message as last written to the Session (what ``kubectl get``
  shows), its failure (reason and message, while it stands), and its last problem: the failure
  when there is one, else the last problem of the Session or of its effects.
- ``pending_at_end`` lists the effects emitted or issued without an outcome and the timers still
  armed in the state a walk ended in, oldest first, each with how long it had waited by the last
  record on its cluster's clock.
- ``natural_key`` sorts keys as people count (``s2`` before ``s10``): runs of digits compare by
  value (zero-padded to ``NATURAL_DIGITS``, so the key also sorts correctly as plain text in SQL).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from journal.records import Record
from kfold.offline.replay import is_object_key
from kfold.offline.render import effect_line
from kfold.offline.timeline import Step

NATURAL_DIGITS = 12
_DIGITS = re.compile(r"\d+")


def natural_key(text: str) -> str:
    return _DIGITS.sub(lambda m: m.group().lstrip("0").rjust(NATURAL_DIGITS, "0"), text)


def key_cluster(key: str) -> str:
    return key.split("/", 1)[0] if key.count("/") >= 2 else ""


# -- clocks -----------------------------------------------------------------------------------
def clock_of(step: Step, home: str) -> str:
    rec = step.record
    if rec.rec in ("observed", "relist"):
        return rec.cluster
    if rec.rec == "effect":
        return rec.effect.get("cluster") or home
    if rec.rec == "outcome":
        e = step.answered
        return (getattr(e, "cluster", "") if e is not None else "") or key_cluster(rec.key) or home
    if rec.rec == "deadline":
        return step.timer_cluster or key_cluster(rec.key) or home
    return home


def delta_text(ms: int | None, clock: str, home: str) -> str:
    """``+1.250s`` / ``-0.001s``, plus `` on <cluster>`` for a clock other than the home one."""
    if ms is None:
        return ""
    sign = "-" if ms < 0 else "+"
    tag = f" on {clock}" if clock and home and clock != home else ""
    return f"{sign}{abs(ms) / 1000:.3f}s{tag}"


def duration_text(ms: int | None) -> str:
    """``12 ms``, ``3.4 s``, ``2 min 05 s``, ``3 h 02 min`` (empty when unknown)."""
    if ms is None:
        return ""
    sign, ms = ("-" if ms < 0 else ""), abs(ms)
    if ms < 1000:
        return f"{sign}{ms} ms"
    if ms < 60_000:
        return f"{sign}{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{sign}{minutes} min {seconds:02d} s"
    return f"{sign}{minutes // 60} h {minutes % 60:02d} min"


class Clocks:
    """The last server time seen on each clock."""

    def __init__(self) -> None:
        self.home = ""
        self.last: dict[str, int] = {}

    def note_home(self, rec: Record) -> None:
        if rec.rec == "command" and rec.name == "session.configure":
            self.home = rec.args.get("home") or self.home

    def delta(self, clock: str, at: int | None) -> int | None:
        """``at`` minus the previous time on ``clock`` (None for the first, or a record without a time)."""
        if at is None:
            return None
        before = self.last.get(clock)
        self.last[clock] = at
        return None if before is None else at - before


# -- problems ---------------------------------------------------------------------------------
# (effect type, outcome result) -> why that answer is one the machine asked for and moves on from
EXPECTED = {
    ("create", "already_exists"): "kfold reads it next and adopts it if it is its own",
    ("delete", "not_found"): "already gone",
    ("get", "not_found"): "not there: an answer, not a failure",
}


def expected_of(step: Step) -> str:
    rec = step.record
    if rec.rec != "outcome" or step.answered is None:
        return ""
    why = EXPECTED.get((step.answered.type, rec.result))
    return f"{rec.status_reason or rec.result}: expected, {why}" if why else ""


def problem_of(step: Step) -> str:
    rec = step.record
    if step.error:
        return f"not folded: {step.error}"
    if step.divergence is not None:
        return f"divergence: effect {step.divergence.effect_id}"
    if step.quarantined:
        return "quarantined: " + ", ".join(sorted(step.quarantined))
    if rec.rec == "outcome" and rec.result != "ok" and not expected_of(step):
        what = effect_line(step.answered) if step.answered is not None else f"effect {rec.effect_id}"
        words = " ".join(x for x in (rec.result, rec.status_reason, str(rec.code) if rec.code else "") if x)
        return f"{what}: {words}" + (f": {rec.message}" if rec.message else "")
    for c in step.changes:
        if c.machine == "session" and getattr(c.after, "phase", None) == "Failed" \
                and getattr(c.before, "phase", None) != "Failed":
            failure = getattr(c.after, "failure", None)
            return "Session Failed" + (f": {failure.reason}: {failure.message}" if failure else "")
    return ""


# -- Sessions ---------------------------------------------------------------------------------
@dataclass
class SessionSummary:
    key: str
    phases: list[dict[str, Any]] = field(default_factory=list)  # {phase, seq, at, ms, open}
    generation: int = 0
    pod: str = ""
    pod_phase: str = ""
    problem: dict[str, Any] | None = None   # {seq, text}: the last problem of the Session or its effects
    failure: dict[str, Any] | None = None   # {seq, reason, message}: the failure standing, from the record that set it
    ready: dict[str, Any] | None = None     # the last status write: {seq, phase, status, reason, message} (Ready's)
    gone: bool = False

    def as_dict(self, last_at: int | None) -> dict[str, Any]:
        phases = [dict(p) for p in self.phases]
        for here, after in zip(phases, phases[1:]):
            here["ms"], here["open"] = _minus(after["at"], here["at"]), False
        if phases:
            end = phases[-1]
            end["ms"], end["open"] = _minus(last_at, end["at"]), not self.gone
        for p in phases:
            p["took"] = duration_text(p["ms"])
        failed = self.failure
        problem = {"seq": failed["seq"], "text": f"{failed['reason']}: {failed['message']}"} if failed else self.problem
        ready = self.ready or {}
        return {"key": self.key, "phases": phases, "phase": phases[-1]["phase"] if phases else "",
                "generation": self.generation, "pod": self.pod, "pod_phase": self.pod_phase,
                "reason": ready.get("reason", ""), "message": ready.get("message", ""), "ready": self.ready,
                "failure": failed, "problem": problem, "gone": self.gone}


def _failure(d: Any, seq: int, before: dict[str, Any] | None) -> dict[str, Any] | None:
    """The failure standing on a Session decision, with the seq that set it (kept while it is the same)."""
    f = getattr(d, "failure", None)
    if f is None:
        return None
    if before is not None and (before["reason"], before["message"]) == (f.reason, f.message):
        return before
    return {"seq": seq, "reason": f.reason, "message": f.message}


def ready_written(effect: Any) -> dict[str, Any] | None:
    """The Ready condition of a Session status write (``patch`` of the status subresource)."""
    body = getattr(effect, "patch", None) if effect.type == "patch" else None
    status = body.get("status") if isinstance(body, dict) else None
    for cond in (status or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return {"phase": status.get("phase", ""), "status": cond.get("status", ""), "reason": cond.get("reason", ""),
                    "message": cond.get("message", "")}
    return None


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


class SessionLog:
    """Per-Session summaries, fed one step at a time."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionSummary] = {}
        self.pods: dict[str, str] = {}    # pod key -> the Session key whose pod it is (or was)

    def add(self, step: Step, problem: str) -> None:
        rec = step.record
        for c in step.changes:
            if c.machine != "session" or not is_object_key(c.key):
                continue
            s = self.sessions.setdefault(c.key, SessionSummary(c.key))
            d = c.after
            if d is None:
                s.gone = True
                continue
            if not s.phases or s.phases[-1]["phase"] != d.phase:
                s.phases.append({"phase": d.phase, "seq": rec.seq, "at": rec.at})
            s.generation = d.generation
            s.pod, s.pod_phase = d.pod.name, d.pod.phase
            if d.pod.name and d.target:
                self.pods[f"{d.target}/{d.target_ns}/{d.pod.name}"] = c.key
            for pod in (*d.releasing, *d.abandoned):
                self.pods.setdefault(pod, c.key)
            s.gone = bool(d.gone)
            s.failure = _failure(d, rec.seq, s.failure)
        for e in step.effects:
            if e.machine == "session" and e.key in self.sessions and (cond := ready_written(e)) is not None:
                self.sessions[e.key].ready = {"seq": rec.seq, **cond}
        if problem:
            concerned = {c.key for c in step.changes if c.machine == "session"}
            if step.answered is not None:   # an outcome: the Session whose effect (or pod's effect) it answers
                concerned.add(self._session_of(step.answered.machine, step.answered.key))
            for key in concerned:
                if key in self.sessions:
                    self.sessions[key].problem = {"seq": rec.seq, "text": problem}

    def _session_of(self, machine: str, key: str) -> str:
        if machine == "session" and key in self.sessions:
            return key
        return self.pods.get(key, "") if machine == "pod" else ""


# -- what is pending when the journal ends ----------------------------------------------------
def _due_text(ms: int) -> str:
    return f"due in {duration_text(ms)}" if ms >= 0 else f"overdue by {duration_text(-ms)}"


def pending_at_end(state: Any, clocks: Clocks, limit: int = 500) -> dict[str, Any]:
    effects = []
    for eid, p in state.pending.items():
        e = p.effect
        effects.append({"id": eid, "line": effect_line(e), "machine": e.machine, "key": e.key,
                        "issued": p.issued, "attempt": p.attempt, "not_before": p.not_before,
                        "cluster": e.cluster or clocks.home})
    timers = []
    for t in state.timers.values():
        clock = t.cluster or key_cluster(t.key) or clocks.home
        now = clocks.last.get(clock)
        timers.append({"id": t.id, "machine": t.machine, "key": t.key, "name": t.name, "due": t.due,
                       "cluster": clock, "in_ms": None if now is None else t.due - now,
                       "in_text": "" if now is None else _due_text(t.due - now)})
    effects.sort(key=lambda e: natural_key(e["id"]))
    timers.sort(key=lambda t: (t["due"], t["id"]))
    return {"effects": effects[:limit], "timers": timers[:limit],
            "more": max(0, len(effects) - limit) + max(0, len(timers) - limit)}
