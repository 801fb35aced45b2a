"""How records and effects read, for people: one line each, the server time as ISO 8601 UTC, and
the fields that differ between two versions. Shared by ``kfold trace``, ``kfold replay --check``
and ``kfold ui``; reads nothing but its arguments.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from engine.effects.models import effect_to_dict
from journal.records import Record


# -- words ------------------------------------------------------------------------------------
def iso(ms: int | None) -> str:
    """Server milliseconds as ISO 8601 UTC (``2026-11-29T20:05:17.022Z``)."""
    if ms is None:
        return "(no server time yet)"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def state_of(decision: Any) -> str:
    if decision is None:
        return "(absent)"
    for attr in ("phase", "state"):
        value = getattr(decision, attr, None)
        if isinstance(value, str):
            return value
    return type(decision).__name__


def record_line(rec: Record) -> str:
    """What a record says, in one line (no payloads: they may be long; never secrets, which the
    journal redacted before append)."""
    if rec.rec == "observed":
        return f"observed {rec.event} {rec.kind} {_where(rec.cluster, rec.namespace, rec.name)} rv={rec.rv}"
    if rec.rec == "relist":
        return f"relist {rec.kind} {_where(rec.cluster, rec.scope, '')}: {len(rec.keys)} present"
    if rec.rec == "command":
        target = _where(rec.cluster, rec.namespace, rec.target)
        return f"command {rec.name}" + (f" {target}" if target else "")
    if rec.rec == "deadline":
        return f"deadline {rec.machine} {rec.key} {rec.name} (due {iso(rec.due)})"
    if rec.rec == "outcome":
        reason = f" {rec.status_reason}" if rec.status_reason else ""
        why = f": {rec.message}" if rec.message and rec.result != "ok" else ""
        return f"outcome {rec.effect_id} {rec.result}{reason}" + (f" ({rec.code})" if rec.code else "") + why
    if rec.rec == "effect":
        term = f" [term {rec.term}]" if getattr(rec, "term", None) is not None else ""   # kfold.daemon.leader
        if term and getattr(rec, "shard", None) is not None:   # kfold.daemon.shards
            term = f" [shard {rec.shard} term {rec.term}]"
        return f"issued {rec.effect.get('id', '?')} {effect_line(rec.effect)}{term}"
    return rec.rec


def effect_line(effect: Any) -> str:
    """An effect in one line: ``create Service kfold-demo/demo`` (plus the cluster when it is not
    kfold's own, and a fence or subresource when there is one)."""
    e = effect if isinstance(effect, dict) else effect_to_dict(effect)
    t = e.get("type", "?")
    if t == "log":
        return f"log {e.get('level', 'info')}: {e.get('message', '')}"
    if t == "ensure_namespace":
        what = f"ensure_namespace {e.get('namespace', '')}"
    elif t == "apply_secret":
        what = f"apply_secret Secret {e.get('namespace', '')}/{e.get('name', '')}"
    elif t == "event":
        what = f"event {e.get('event_type', '')} {e.get('reason', '')} on {e.get('involved', {}).get('kind', '')} " \
               f"{e.get('namespace', '')}/{e.get('involved', {}).get('name', '')}"
    elif t == "post_event":
        what = f"post_event {e.get('event_type', '')} {e.get('reason', '')} on {e.get('regarding', {}).get('kind', '')} " \
               f"{e.get('namespace', '')}/{e.get('regarding', {}).get('name', '')}"
    elif t == "list":
        sel = f" -l {e['label_selector']}" if e.get("label_selector") else ""
        what = f"list {e.get('kind', '')} in {e.get('namespace') or '(all namespaces)'}{sel}"
    else:
        ns = e.get("namespace", "")
        what = f"{t} {e.get('kind', '')} {ns + '/' if ns else ''}{e.get('name', '')}"
        if e.get("subresource"):
            what += f" /{e['subresource']}"
        if t == "delete" and e.get("uid"):
            what += f" (fenced uid={e['uid'][:8]} rv={e.get('rv', '')})"
    cluster = e.get("cluster", "")
    return what + (f" on {cluster}" if cluster and cluster != "local" else "")


def effect_target(effect: Any) -> tuple[str, str] | None:
    """``(kind, <cluster>/<namespace>/<name>)`` of the object an effect acts on, if it names one."""
    e = effect if isinstance(effect, dict) else effect_to_dict(effect)
    kind = {"apply_secret": "Secret", "ensure_namespace": "Namespace"}.get(e.get("type"), e.get("kind"))
    name = e.get("name") or (e.get("namespace") if e.get("type") == "ensure_namespace" else "")
    if not kind or not name:
        return None
    ns = "" if e.get("type") == "ensure_namespace" else e.get("namespace", "")
    return kind, f"{e.get('cluster', '')}/{ns}/{name}"


def _where(cluster: str, namespace: str, name: str) -> str:
    return "/".join(x for x in (namespace, name) if x) + (f" on {cluster}" if cluster and cluster != "local" else "")


# -- field-level diff -------------------------------------------------------------------------
def decision_diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``field_diff`` of two decision records, comparing field by field first so only the fields
    that changed are turned into JSON (a Pod's manifest is not dumped when only its rv moved)."""
    if type(old) is type(new) and isinstance(old, BaseModel):
        out, after = [], new.__dict__  # a frozen model's fields, in declaration order
        for name, a in old.__dict__.items():
            b = after[name]
            if a is not b and a != b:
                out += decision_diff(a, b, f"{path}.{name}" if path else name)
        return out
    return field_diff(_jsonable(old), _jsonable(new), path)


def _jsonable(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else to_jsonable_python(value)


def field_diff(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``[(dotted.path, old, new)]`` for every leaf that differs; a list of a different length is
    one change; a missing side is ``None``."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in list(old) + [k for k in new if k not in old]:
            out += field_diff(old.get(k), new.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += field_diff(a, b, f"{path}[{i}]")
        return out
    if isinstance(old, str) and isinstance(new, str) and old[:1] in "{[" and new[:1] in "{[":
        inner = _json_or_none(old), _json_or_none(new)
        if None not in inner:  # a digest kept as JSON text (a manifest, a written status): diff inside
            return field_diff(*inner, path=f"{path}~" if path else "~")
    if old is None and isinstance(new, dict):
        return [d for k, v in new.items() for d in field_diff(None, v, f"{path}.{k}" if path else str(k))
                if not _empty(v)]
    return [(path or "(value)", old, new)]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _empty(value: Any) -> bool:
    return value in (None, "", [], {}, False, 0)


def show(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
