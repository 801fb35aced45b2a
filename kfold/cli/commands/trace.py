"""``kfold trace JOURNAL KEY``: every record that concerned KEY, in words.

One header line per record (seq, server time as ISO 8601 UTC, what the record says), then one line
per changed field of each decision record it changed (``phase: Pending -> Creating``), one line per
effect on KEY (``effect 9.1 create Service ns/demo``), timers set or cancelled, and, for an outcome,
the effect it answers. With leader election on, each effect on KEY journaled as issued is shown
with the leadership term that issued it (``issued 9.1 create Service ns/demo [term 3]``). A record that concerned KEY but changed nothing is left out. When KEY matches
nothing, the closest keys that exist are named (exit 1). KEY may also be ``<namespace>/<name>`` or
``<name>`` when that names one object of the journal; one naming several is refused, listing them (exit 2).
A record whose decision kept its phase shows the fields it changed under ``session (still Pending):``. A journal whose head retention cut, or an
export of it, is traced from the snapshot its history continues (stderr says so): the first lines
say what KEY's decision records held there (``#81 snapshot: history continues from here`` then
``session: Stopped``), which are the "before" of its first change.
"""
from __future__ import annotations

import difflib
import sys
from typing import Iterator

MAX_NEW_FIELDS = 12


EXAMPLES = """examples:
  kfold trace journal.db local/team-a/demo     # cluster/namespace/name, as `kfold replay` lists it
  kfold trace journal.db team-a/demo           # namespace/name, when one cluster has it
  kfold trace journal.db demo --until 4200     # a name, when it is unique in the journal
  kfold trace journal.db team-a/demo --brief   # the reason first, then phases, effects, outcomes not ok
  kfold trace journal.db team-a/demo -o json | jq -r 'select(.record | startswith("outcome")) | .record'

exit codes: 0 shown; 1 no record touched KEY (the closest keys are named); 2 bad arguments, an
ambiguous KEY (its candidates are listed) or an unreadable journal; 3 a broken checksum chain."""


def register(sub) -> None:
    import argparse
    from kfold.cli.args import seq_number
    p = sub.add_parser("trace", help="show how the decisions about one object evolved in a journal",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Every record that concerned one object, in words: its changes, effects, outcomes, timers.")
    p.add_argument("journal", help="journal file (SQLite) or its JSONL export")
    p.add_argument("key", help="the object: <cluster>/<namespace>/<name>, <namespace>/<name> or <name> (unique)")
    p.add_argument("--until", type=seq_number, default=None, metavar="SEQ", help="stop after this sequence number")
    p.add_argument("--brief", action="store_true",
                   help="the story in a few lines: a summary line (phase, Ready reason and message, failure) first, "
                        "then only phase changes, effects, outcomes not ok and Ready reasons written")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="text (default), or json: one object per record (seq, at, record, details), JSON Lines")
    p.set_defaults(func=run)


def matches(wanted: str, key: str) -> bool:
    """``key`` (``cluster/ns/name``) is what ``wanted`` names: itself, or its ``ns/name`` or ``name`` tail."""
    if wanted == key:
        return True
    parts = key.split("/")
    if len(parts) != 3 or not wanted or wanted.count("/") > 1:
        return False
    return "/".join(parts[3 - wanted.count("/") - 1:]) == wanted


def run(args) -> int:
    from kfold.offline.progress import counted
    from kfold.offline.sources import input_error, input_error_code, iter_records, start_point
    from kfold.offline.brief import Brief
    from kfold.offline.timeline import walk

    shown, seen, found = 0, set(), {}   # found: matching key -> its lines (printed once KEY is known unique)
    brief = Brief() if args.brief else None
    out: list[str] = []                 # --brief: the lines, printed after the summary line
    say = out.append if brief is not None else print
    try:
        state, first, note = start_point(args.journal, args.until)
        if note:
            print(f"kfold trace: {note}", file=sys.stderr)
        for key, lines in (snapshot_lines(state, first - 1, args.output) if state is not None else {}).items():
            seen.add(key)
            if key == args.key:
                for line in lines:
                    print(line)
                    shown += 1
            elif matches(args.key, key):
                found.setdefault(key, []).extend(lines)
        lines_of = (lambda step, key: rendered(step, key, args.output, brief.step_lines)) if brief is not None \
            else (lambda step, key: rendered(step, key, args.output))
        records = counted(iter_records(args.journal, args.until, first), args.journal, "trace", args.until,
                          from_seq=first)
        for step in walk(records, state):
            if brief is not None:
                brief.note(step)
            keys = step.keys()
            seen |= keys
            for key in keys if args.key not in keys else (args.key,):
                if key == args.key:
                    for line in lines_of(step, key):
                        say(line)
                        shown += 1
                elif matches(args.key, key):
                    found.setdefault(key, []).extend(lines_of(step, key))
    except Exception as exc:
        code = None if isinstance(exc, BrokenPipeError) else input_error_code(exc)
        if code is None:
            raise
        print(f"kfold trace: {args.journal}: {input_error(exc)}", file=sys.stderr)
        return code
    found = {k: v for k, v in found.items() if v and args.key not in seen}
    if not shown and len(found) > 1:
        print(f"kfold trace: {args.key!r} names {len(found)} objects in this journal: {', '.join(sorted(found))}; "
              f"pass one of them", file=sys.stderr)
        return 2
    if not shown and found:
        (key, lines), = found.items()
        print(f"kfold trace: {args.key} is {key}", file=sys.stderr)
        _summary(brief, key, args.output)
        print("\n".join(lines))
        return 0
    if not shown:
        print(f"kfold trace: no record touched {args.key}{_hint(args.key, seen)}", file=sys.stderr)
        return 1
    _summary(brief, args.key, args.output)
    print("\n".join(out)) if out else None
    return 0


def _summary(brief, key: str, output: str) -> None:
    """--brief: the object's summary line first (JSON: ``{"summary": ...}``)."""
    if brief is not None:
        import json
        line = brief.summary(key)
        print(json.dumps({"summary": line}) if output == "json" else line)


def rendered(step, key: str, output: str, lines_for=None) -> list[str]:
    """``step_lines`` (or ``lines_for``: ``Brief.step_lines``) as printed: as they are, or (json)
    one object for the record, its header split into ``seq``, ``at`` (ISO 8601 server time, null
    before any) and ``record``."""
    lines = list((lines_for or step_lines)(step, key))
    if output != "json" or not lines:
        return lines
    import json
    from kfold.offline.render import record_line
    rec = step.record
    at = lines[0][len(f"#{rec.seq} "):].removesuffix(" " + record_line(rec))
    return [json.dumps({"seq": rec.seq, "at": None if rec.at is None else at, "record": record_line(rec),
                        "details": [line.strip() for line in lines[1:]]})]


def snapshot_lines(state, seq: int, output: str) -> dict[str, list[str]]:
    """Where a cut history begins: each object key the snapshot at ``seq`` holds -> its lines
    (``#81 snapshot: history continues from here`` and one ``<machine>: <state>`` line per machine
    that holds it), so a key whose later records change nothing is still shown as it stood."""
    from kfold.offline.render import state_of
    from kfold.offline.replay import is_object_key
    held: dict[str, list[str]] = {}
    for machine, table in sorted(state.tables.items()):
        for key, decision in table.items():
            if is_object_key(key):
                held.setdefault(key, []).append(f"{machine}: {state_of(decision)}")
    header = "snapshot: history continues from here"
    if output == "json":
        import json
        return {k: [json.dumps({"seq": seq, "at": None, "record": header, "details": v})] for k, v in held.items()}
    return {k: [f"#{seq} {header}"] + [f"  {line}" for line in v] for k, v in held.items()}


def _hint(key: str, seen: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(seen), n=5, cutoff=0.4)
    name = key.rpartition("/")[2]
    close += [k for k in sorted(seen) if name and k.endswith("/" + name) and k not in close][:5 - len(close)]
    shape = "" if key.count("/") >= 2 else \
        " (a key is <cluster>/<namespace>/<name>, as `kfold replay` and the logs show it, e.g. local/ns/demo)"
    return shape + (f"; closest keys in this journal: {', '.join(close)}" if close else "")


def step_lines(step, key: str) -> Iterator[str]:
    from kfold.offline.render import effect_line, iso, record_line, show, state_of

    rec = step.record
    mine = [c for c in step.changes if c.key == key]
    effects = [e for e in step.effects if e.key == key]
    timers = [t for t in step.timers if t.key == key]
    quarantined = step.quarantined.get(key)
    issued_in_term = (rec.rec == "effect" and getattr(rec, "term", None) is not None
                      and step.answered is not None and step.answered.key == key)   # kfold.daemon.leader: who sent it
    if not (mine or effects or timers or step.error or step.divergence or quarantined or issued_in_term
            or rec.rec in ("outcome", "deadline")):
        return
    yield f"#{rec.seq} {iso(rec.at)} {record_line(rec)}"
    if step.fired is not None:
        yield "  fired" if step.fired else "  stale: the timer was cancelled or moved since (decides nothing)"
    if step.answered is not None and rec.rec == "outcome":
        yield f"  answers {step.answered.id}: {effect_line(step.answered)}"
    if step.error:
        yield f"  not folded: {step.error}"
    if quarantined is not None:
        yield f"  QUARANTINED by machine {quarantined.machine}: {quarantined.error}"
    for c in mine:
        diff = [] if c.after is None else [d for d in c.diff() if d[0] not in ("phase", "state") or c.before is not None]
        before, after = state_of(c.before), state_of(c.after)
        if before == after and c.before is not None and c.after is not None:
            if not diff:
                continue   # nothing of this decision changed
            yield f"  {c.machine} (still {after}):"
        else:
            yield f"  {c.machine}: {before} -> {after}"
        if c.after is None:
            continue
        for path, old, new in diff[:MAX_NEW_FIELDS] if c.before is None else diff:
            yield f"    {path}: {show(new)}" if c.before is None else f"    {path}: {show(old)} -> {show(new)}"
        if c.before is None and len(diff) > MAX_NEW_FIELDS:
            yield f"    (+{len(diff) - MAX_NEW_FIELDS} more fields)"
    for e in effects:
        yield f"  effect {e.id} {effect_line(e)}"
    for t in timers:
        yield f"  timer {t.name} " + (f"due {iso(t.due)}" if t.due is not None else "cancelled")
    if step.divergence is not None:
        yield "  DIVERGENCE: " + step.divergence.describe().replace("\n", "\n  ")
