"""The declared schema as the apiserver takes it: the generated Session CRD is a structural schema
(every node typed, no $ref/anyOf/oneOf, rules only as x-kubernetes-validations), and the declaration's
check judges types, bounds and patterns before CEL rules, as the apiserver does."""
from __future__ import annotations

from engine.machines.session.schema import check_spec
from kfold.daemon.session_crd import crd


def _nodes(schema, path):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}[]")


def test_the_session_crd_is_a_structural_schema():
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _nodes(root, "Session"):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "not"} & set(node), path
        typed = "type" in node or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        assert typed, f"{path} has no type"
        for rule in node.get("x-kubernetes-validations", []):
            assert set(rule) <= {"rule", "messageExpression", "fieldPath", "reason"}, path


def test_a_type_error_anywhere_is_reported_before_any_rule():
    """The apiserver skips CEL rules while the object has schema errors; so does the check."""
    raw = {"apps": [{"name": "a"}, {"name": "a"}], "suspended": "yes"}
    got = check_spec(raw)
    assert got.field == "spec.suspended" and not got.rule
    del raw["suspended"]
    got = check_spec(raw)
    assert got.field == "spec.apps" and got.rule and "'a'" in got.reason


def test_a_null_field_is_absent_as_the_apiserver_prunes_it():
    assert check_spec({"image": None, "env": [{"name": "X", "value": None, "secretRef": {"name": "s", "key": "k"}}]}) is None
