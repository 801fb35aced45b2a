"""A declared API schema: one tree from which a CRD's OpenAPI v3 schema (CEL rules included) and a
pure validator both derive, so admission and kfold judge a resource by the same rules.

Guarantees:
- ``openapi(node)`` is a Kubernetes *structural* schema: every node has a ``type`` (or is
  ``x-kubernetes-int-or-string`` / ``x-kubernetes-preserve-unknown-fields``), no ``$ref``, no
  ``anyOf``; a ``CelRule`` becomes an ``x-kubernetes-validations`` entry (``rule``,
  ``messageExpression``, ``fieldPath``, ``reason``).
- ``check(node, value, path)`` is the first ``Problem`` the apiserver would report for ``value``
  (``None`` when there is none), with the apiserver's field path (``spec.apps[1].ports[0].port``;
  a map value ``spec.resources.limits[cpu]``) and a reason naming the offending value. Like the
  apiserver it judges the whole tree's types, bounds, enums, patterns and required fields first and
  the CEL rules only when all of those hold. It never raises on bad input.
- A ``CelRule``'s Python twin (``holds``/``says``) is what kfold runs; the CEL text is what the
  apiserver runs. They are declared side by side; tests/e2e/test_session_rules.py applies every
  refusal to the real apiserver, which is the oracle that the two agree.

Caveats:
- Only what kfold's CRDs use is supported (no ``oneOf``, no ``format`` checks, no ``oldSelf``):
  the CRD validation ratcheting of the apiserver keeps objects stored before a rule updatable.
- ``pattern`` is matched as Go's RE2 does for these simple patterns (``$`` is the end of the text).

Pure: no I/O.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
              "boolean": "true or false", "int-or-string": "an integer or a string"}


@dataclass(frozen=True, slots=True)
class CelRule:
    """A CEL rule and its Python twin. ``holds(value)`` is the rule, ``says(value)`` the message
    when it fails; ``cel``/``message`` are the same for the apiserver. ``field`` (``.value``) names
    the child the apiserver reports; ``cel_only``: kfold does not run this rule (its own handling
    of the case is documented where the rule is declared)."""
    cel: str
    message: str
    holds: Callable[[Any], bool]
    says: Callable[[Any], str]
    field: str = ""
    reason: str = ""
    cel_only: bool = False


@dataclass(frozen=True, slots=True)
class Node:
    type: str                                   # TYPE_WORDS' keys, or "any" (preserve unknown fields)
    description: str
    properties: dict[str, "Node"] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    items: "Node | None" = None
    values: "Node | None" = None                # a map's values (additionalProperties)
    enum: tuple[Any, ...] = ()
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    max_items: int | None = None
    max_properties: int | None = None
    pattern: str = ""
    what: str = ""                              # the value's kind in words, for kfold's messages
    rules: tuple[CelRule, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)   # OpenAPI-only keys (format, nullable, list-type)


@dataclass(frozen=True, slots=True)
class Problem:
    field: str
    reason: str
    rule: bool = False      # a CEL rule's: the apiserver's message is this reason, word for word


# -- the OpenAPI schema -------------------------------------------------------------------------

_KEYS = (("enum", "enum"), ("minimum", "minimum"), ("maximum", "maximum"), ("min_length", "minLength"),
         ("max_length", "maxLength"), ("max_items", "maxItems"), ("max_properties", "maxProperties"),
         ("pattern", "pattern"))


def openapi(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = _type(node.type)
    out["description"] = node.description
    for attr, key in _KEYS:
        value = getattr(node, attr)
        if value not in (None, "", ()):
            out[key] = list(value) if key == "enum" else value
    if node.default is not None:
        out["default"] = node.default
    if node.required:
        out["required"] = list(node.required)
    if node.properties:
        out["properties"] = {name: openapi(sub) for name, sub in node.properties.items()}
    if node.items is not None:
        out["items"] = openapi(node.items)
    if node.values is not None:
        out["additionalProperties"] = openapi(node.values)
    out.update(node.extra)
    if node.rules:
        out["x-kubernetes-validations"] = [_rule(r) for r in node.rules]
    return out


def _type(kind: str) -> dict[str, Any]:
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    if kind == "any":
        return {"x-kubernetes-preserve-unknown-fields": True}
    return {"type": kind}


def _rule(rule: CelRule) -> dict[str, Any]:
    out = {"rule": rule.cel, "messageExpression": rule.message}
    if rule.field:
        out["fieldPath"] = rule.field
    if rule.reason:
        out["reason"] = rule.reason
    return out


# -- the validator ------------------------------------------------------------------------------

class _Found(Exception):
    def __init__(self, problem: Problem):
        super().__init__(problem.field, problem.reason)
        self.problem = problem


def check(node: Node, value: Any, path: str) -> Problem | None:
    """The first problem with ``value`` at ``path`` (see the module contract)."""
    try:
        _walk(node, value, path, _structure)
        _walk(node, value, path, _rules)
    except _Found as found:
        return found.problem
    return None


def _fail(path: str, reason: str, rule: bool = False) -> None:
    raise _Found(Problem(path, reason, rule))


def _walk(node: Node, value: Any, path: str, visit: Callable[[Node, Any, str], None]) -> None:
    visit(node, value, path)
    if isinstance(value, dict) and node.type == "object":
        for name, sub in node.properties.items():
            if name in value and value[name] is not None:
                _walk(sub, value[name], f"{path}.{name}", visit)
        if node.values is not None:
            for key, item in value.items():
                _walk(node.values, item, f"{path}[{key}]", visit)
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            _walk(node.items, item, f"{path}[{i}]", visit)


def _is(kind: str, value: Any) -> bool:
    integer = isinstance(value, int) and not isinstance(value, bool)
    return {"object": isinstance(value, dict), "array": isinstance(value, list), "string": isinstance(value, str),
            "integer": integer, "boolean": isinstance(value, bool), "any": True,
            "int-or-string": integer or isinstance(value, str)}[kind]


def _structure(node: Node, value: Any, path: str) -> None:
    if not _is(node.type, value):
        _fail(path, f"{value!r} is not {TYPE_WORDS[node.type]}" if _scalar(value) else f"must be {TYPE_WORDS[node.type]}")
    if node.enum and value not in node.enum:
        _fail(path, f"{value!r} is not one of {', '.join(map(str, node.enum))}")
    if isinstance(value, (list, dict)):
        _sizes(node, value, path)
        for name in node.required:
            if isinstance(value, dict) and value.get(name) is None:
                _fail(f"{path}.{name}", "required")
        return
    low, high = node.minimum, node.maximum
    if isinstance(value, int) and ((low is not None and value < low) or (high is not None and value > high)):
        _fail(path, f"{value!r} is not {node.what or 'a number'} between {low} and {high}")
    if isinstance(value, str) and not _fits(node, value):
        _fail(path, f"{value!r} is not {node.what}")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _sizes(node: Node, value: list[Any] | dict[str, Any], path: str) -> None:
    most = node.max_items if isinstance(value, list) else node.max_properties
    if most is not None and len(value) > most:
        _fail(path, f"at most {most} entries, not {len(value)}")


def _fits(node: Node, value: str) -> bool:
    if node.min_length is not None and len(value) < node.min_length:
        return False
    if node.max_length is not None and len(value) > node.max_length:
        return False
    return not node.pattern or re.search(_re2(node.pattern), value) is not None


def _re2(pattern: str) -> str:
    """Go's ``$`` (no multi-line flag) is the end of the text; Python's also matches before a final newline."""
    return pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern


def _rules(node: Node, value: Any, path: str) -> None:
    for rule in node.rules:
        if not rule.cel_only and not rule.holds(value):
            _fail(path + rule.field, rule.says(value), rule=True)
