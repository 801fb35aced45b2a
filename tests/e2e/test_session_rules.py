"""One copy of the Session's rules, checked against the real apiserver: every spec kfold's validator
refuses (tests/unit/test_session_spec.py ``REFUSED``) is sent to admission. Where the refusal comes
from the declaration the CRD is generated from (``session.schema``), admission refuses it with the
same field path and a message naming the value (a CEL rule's message word for word); where it is
kfold's own (its config or its url parser), admission accepts it. The oracle is the apiserver.

Also: the duplicate-port rule (admission refuses, naming the apps; kfold routes the first app's), and
ratcheting (an object stored before a rule stays updatable and deletable under the new CRD).
"""
from __future__ import annotations

import copy
import json
import re
import time
import uuid

import pytest

from engine.machines.session.schema import check_name, check_spec
from engine.machines.session.spec import Spec, SpecError, validate
from kfold.daemon.session_crd import crd
from tests.unit.test_session_spec import REFUSED

GROUP, VERSION, PLURAL = "kfold.dev", "v1alpha1", "sessions"


def _create(admin, ns: str, name: str, spec, group: str = GROUP, dry_run: bool = True):
    """(None, created object) or (status body of the refusal, None)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    body = {"apiVersion": f"{group}/{VERSION}", "kind": "Session", "metadata": {"name": name}, "spec": spec}
    try:
        made = client.CustomObjectsApi(admin).create_namespaced_custom_object(
            group, VERSION, ns, PLURAL, body, **({"dry_run": "All"} if dry_run else {}))
        return None, made
    except ApiException as exc:
        return json.loads(exc.body or "{}") | {"code": exc.status}, None


def _named(cause: dict, reason: str) -> bool:
    """The apiserver's message names the offending value (quoted its way or kfold's). A type error
    is the apiserver's own words before any rule runs: it names the type it got, not the value."""
    if cause.get("reason") == "FieldValueTypeInvalid":
        return True
    values = re.findall(r"'([^']*)'", reason.split(";")[0])
    return all(v in cause.get("message", "") for v in values)


@pytest.mark.parametrize("what, raw, name, field", [r[:4] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_spec_kfold_refuses_by_a_crd_rule_is_refused_at_admission_on_the_same_field(admin, crds, namespace,
                                                                                    what, raw, name, field):
    err = validate(raw, "local", ("local", "edge"), name)
    assert isinstance(err, SpecError) and err.field == field
    declared = check_name(name) or check_spec(raw)
    refused, _ = _create(admin, namespace, name, raw)
    if declared is None:   # kfold's own rule: admission cannot judge it and lets it through
        assert refused is None, f"{what}: admission refused what only kfold judges: {refused}"
        return
    assert declared.field == err.field
    assert refused is not None and refused["code"] == 422, f"{what}: admission accepted it"
    causes = {c.get("field"): c for c in refused["details"]["causes"]}
    assert err.field in causes, f"{what}: kfold says {err.field}, admission {sorted(causes)}"
    cause = causes[err.field]
    assert _named(cause, err.reason), f"{what}: {cause} does not name the value of {err.reason!r}"
    if declared.rule:
        assert err.reason in cause["message"], f"{what}: CEL says {cause['message']!r}, kfold {err.reason!r}"


def test_a_port_two_apps_declare_is_refused_at_admission_naming_them_and_kfold_routes_the_first(admin, crds, namespace):
    spec = {"image": "ws:1", "apps": [{"name": "web", "ports": [{"port": 8080}]},
                                      {"name": "api", "ports": [{"port": 8080}, {"port": 9090}]}]}
    refused, _ = _create(admin, namespace, "dup", spec)
    causes = {c.get("field"): c["message"] for c in refused["details"]["causes"]}
    assert 'apps ["web", "api"] declare the same port' in causes["spec.apps"], causes
    got = validate(spec, "local", ("local",), "dup")
    assert isinstance(got, Spec)   # stored before the rule (ratcheted): kfold routes web's, rejects api's
    assert [(a, p.port) for a, p in got.routed] == [("web", 8080), ("api", 9090)]
    assert [(r.app, r.port.port) for r in got.rejected] == [("api", 8080)]
    once = {"image": "ws:1", "apps": [{"name": "web", "ports": [{"port": 80}, {"port": 80}]}]}
    refused, _ = _create(admin, namespace, "twice", once)
    causes = {c.get("field"): c["message"] for c in refused["details"]["causes"]}
    assert "TCP port 80 is declared more than once in this app" in causes["spec.apps[0].ports"], causes


# -- ratcheting ---------------------------------------------------------------------------------

RATCHET_GROUP = "ratchet.kfold.dev"


def _crd_in(group: str, without_rules_on: tuple[str, ...] = ()) -> dict:
    """The Session CRD under another group (so the real one is never touched); ``without_rules_on``:
    the schema paths (under spec) whose CEL rules are left out, i.e. the CRD before those rules."""
    doc = copy.deepcopy(crd())
    doc["metadata"]["name"] = f"{PLURAL}.{group}"
    doc["spec"]["group"] = group
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for path in without_rules_on:
        node = spec
        for step in path.split("."):
            node = node[step]
        node.pop("x-kubernetes-validations")
    return doc


def _install(admin, doc: dict) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    api = client.ApiextensionsV1Api(admin)
    try:
        old = api.read_custom_resource_definition(doc["metadata"]["name"])
        doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": old.metadata.resource_version}}
        api.replace_custom_resource_definition(doc["metadata"]["name"], doc)
    except ApiException as exc:
        if exc.status != 404:
            raise
        api.create_custom_resource_definition(doc)
    time.sleep(2.0)   # established, and the new schema in force


@pytest.fixture
def ratchet_crd(admin):
    from kubernetes import client
    yield lambda doc: _install(admin, doc)
    client.ApiextensionsV1Api(admin).delete_custom_resource_definition(f"{PLURAL}.{RATCHET_GROUP}")


def test_a_session_stored_before_a_rule_stays_updatable_and_deletable(admin, namespace, ratchet_crd):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    values = "resources.properties.limits.additionalProperties"
    ratchet_crd(_crd_in(RATCHET_GROUP, without_rules_on=(f"properties.{values}",)))
    co = client.CustomObjectsApi(admin)
    name = f"old-{uuid.uuid4().hex[:6]}"
    spec = {"image": "ws:1", "resources": {"limits": {"cpu": "lots"}}}
    refused, made = _create(admin, namespace, name, spec, group=RATCHET_GROUP, dry_run=False)
    assert refused is None, refused
    co.patch_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name,
                                      {"metadata": {"finalizers": ["kfold.dev/teardown"]}})
    ratchet_crd(_crd_in(RATCHET_GROUP))   # the quantity rule arrives
    refused, _ = _create(admin, namespace, "new", spec, group=RATCHET_GROUP)
    assert refused is not None and refused["code"] == 422, "the new CRD does not hold the rule"
    # an unrelated field changes: the old value is ratcheted
    co.patch_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name, {"spec": {"suspended": True}})
    with pytest.raises(ApiException) as bad:   # the value itself changes: judged by the new rule
        co.patch_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name,
                                          {"spec": {"resources": {"limits": {"cpu": "heaps"}}}})
    assert bad.value.status == 422 and "'heaps' is not a Kubernetes quantity" in bad.value.body
    co.delete_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name)
    co.patch_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        co.get_namespaced_custom_object(RATCHET_GROUP, VERSION, namespace, PLURAL, name)
    assert gone.value.status == 404
