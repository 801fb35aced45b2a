"""engine.machines.session.model.canonical_json gives exactly the standard library's compact, sorted JSON text:
the digests made with it are kept in decision records and snapshots, so a different byte would
make an upgraded daemon rewrite what did not change."""
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.machines.session.model import canonical_json

_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e-05, -7.9e-05, 1.1e-06, 2.2e-09, 1e-10, 1e16, 1e22, 0.0001, -0.0, 5e-324])
_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | _floats
            | st.text() | st.text(alphabet=st.characters(max_codepoint=0x7f)))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


def _stdlib(value, sort_keys=True):
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"))


@settings(max_examples=3000, deadline=None)
@given(_values)
def test_same_text_as_the_standard_library(value):
    assert canonical_json(value) == _stdlib(value)
    assert canonical_json(value, sort_keys=False) == _stdlib(value, sort_keys=False)


def test_the_cases_orjson_writes_differently_take_the_standard_path():
    for value in ({"cpu": 1e-05}, {"x": [2.5e-7]}, {"name": "caf\u00e9"}, {"n": 2**65}, {1: "int key"},
                  {"msg": "line\nbreak\x01\x7f"}, {"b": True, "a": None}):
        assert canonical_json(value) == _stdlib(value)
    assert not math.isnan(json.loads(canonical_json({"f": 0.1}))["f"])


def test_a_realistic_manifest_is_byte_identical():
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "s1", "namespace": "team", "labels": {"kfold.dev/session": "s1"},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "s1-g1",
                                                 "uid": "0d5e-...", "controller": True}]},
               "spec": {"selector": {"kfold.dev/session": "s1", "kfold.dev/generation": "1"},
                        "ports": [{"name": "web-8080", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}}
    assert canonical_json(service) == _stdlib(service)


@settings(max_examples=2000, deadline=None)
@given(_values, _values)
def test_same_json_is_equality_of_the_json_text(a, b):
    from engine.machines.session.model import same_json
    assert same_json(a, a)
    if "-0.0" in _stdlib(a) + _stdlib(b):
        return   # 0.0 == -0.0 in Python, written apart in JSON; no spec tells them apart
    assert same_json(a, b) == (_stdlib(a) == _stdlib(b))


def test_same_json_tells_apart_what_equality_does_not():
    from engine.machines.session.model import same_json
    assert {"suspended": 1} == {"suspended": True} and not same_json({"suspended": 1}, {"suspended": True})
    assert [1] == [1.0] and not same_json([1], [1.0])
    assert same_json({"apps": [{"name": "web", "ports": [8080]}]}, {"apps": [{"name": "web", "ports": [8080]}]})
    assert not same_json({"a": 1}, {"a": 1, "b": None})
