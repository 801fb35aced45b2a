"""Namespace bounds: resolve inside, refuse outside (never narrow), refuse cluster scope when bounded."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfold.registry import (
    ALL_NAMESPACES, OutOfBounds, Registration, UnsafePath, classify, resolve, resolve_one, wire_problem,
)
from kfold.registry.bounds import admit, explain_wire_problem

BOUNDED = Registration(name="shared", tenant="acme", namespaces=["team-a", "team-b"])
WHOLE = Registration(name="own", tenant="acme")


def test_a_named_namespace_inside_the_bound_resolves_to_itself():
    assert resolve(BOUNDED, "team-b") == ("team-b",)


def test_a_named_namespace_outside_the_bound_is_refused_not_narrowed():
    """Seed 004:174-179: a namespace outside the bound is refused, not narrowed."""
    with pytest.raises(OutOfBounds, match="namespace 'other' is outside what this tenant's registration of cluster 'shared' may address"):
        resolve(BOUNDED, "other")


def test_the_refusal_names_the_bound_the_caller_may_use():
    with pytest.raises(OutOfBounds, match=r"\(bound: team-a, team-b\)$"):
        resolve(BOUNDED, "other")


def test_no_namespace_on_a_bounded_registration_means_the_whole_bound():
    """Seed 004:171-172: no namespace on a bounded registration means the whole bound."""
    assert resolve(BOUNDED, None) == ("team-a", "team-b")
    assert resolve(BOUNDED, "  ") == ("team-a", "team-b")


def test_an_unbounded_registration_takes_the_callers_namespace_or_all():
    """Seed 004:165-169: an unbounded registration takes the caller's namespace, or all."""
    assert resolve(WHOLE, "anything") == ("anything",)
    assert resolve(WHOLE, None) == (ALL_NAMESPACES,)


def test_a_single_object_operation_needs_a_named_namespace():
    """Seed 004:186-196: a single-object operation needs a named namespace."""
    assert resolve_one(BOUNDED, "team-a") == "team-a"
    with pytest.raises(OutOfBounds, match="requires a namespace"):
        resolve_one(BOUNDED, None)
    with pytest.raises(OutOfBounds):
        resolve_one(BOUNDED, "other")


@pytest.mark.parametrize(
    "method, path, scope, namespace",
    [
        ("GET", "/api/v1/namespaces/team-a/pods", "namespaced", "team-a"),
        ("DELETE", "/api/v1/namespaces/team-a/pods/p-g1", "namespaced", "team-a"),
        ("GET", "/api/v1/watch/namespaces/team-a/pods", "namespaced", "team-a"),
        ("POST", "/apis/kfold.dev/v1/namespaces/team-a/sessions", "namespaced", "team-a"),
        ("GET", "/apis/apps/v1/namespaces/team%2Da/deployments", "namespaced", "team-a"),
        ("GET", "/api/v1/nodes", "cluster", None),
        ("POST", "/api/v1/namespaces", "cluster", None),
        ("GET", "/api/v1/namespaces/team-a", "cluster", None),
        ("PUT", "/api/v1/namespaces/team-a/finalize", "cluster", None),
        ("GET", "/api/v1/pods", "cluster", None),
        ("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "cluster", None),
        ("GET", "/apis/kfold.dev/v1/sessions", "cluster", None),
        ("GET", "/healthz", "cluster", None),
        ("GET", "/api", "discovery", None),
        ("GET", "/api/v1", "discovery", None),
        ("GET", "/apis/apps/v1", "discovery", None),
        ("GET", "/version", "discovery", None),
        ("GET", "/openapi/v2", "discovery", None),
        ("GET", "/OPENAPI/v2", "cluster", None),
        ("GET", "/openapi/v3/apis/apps/v1", "discovery", None),
        ("GET", "/versions", "cluster", None),
        ("POST", "/api/v1", "cluster", None),
    ],
)
def test_request_paths_are_classified_by_what_they_address(method, path, scope, namespace):
    target = classify(method, path)
    assert (target.scope, target.namespace) == (scope, namespace)


@pytest.mark.parametrize("path", ["/api/v1/nodes", "/api/v1/namespaces", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"])
def test_cluster_scoped_requests_are_refused_on_a_bounded_registration(path):
    """Seed 004:204-209: cluster-scoped requests are refused on a bounded registration."""
    with pytest.raises(OutOfBounds, match="cluster-scoped operations are not available") as refused:
        admit(BOUNDED, "get", path)
    assert str(refused.value).endswith(f"(GET {path})"), "the refusal names the request it refused"
    admit(WHOLE, "GET", path)


def test_requests_into_the_bound_pass_and_outside_it_are_refused():
    admit(BOUNDED, "GET", "/api/v1/namespaces/team-a/pods")
    admit(BOUNDED, "GET", "/apis")
    with pytest.raises(OutOfBounds, match="'team-c' is outside"):
        admit(BOUNDED, "POST", "/api/v1/namespaces/team-c/pods")


@pytest.mark.parametrize(
    "target, problem",
    [
        ("/api/v1/namespaces/team-a/../other/pods", "dot segment '..'"),
        ("/api/v1/namespaces/team-a/secrets/.", "dot segment '.'"),
        ("/api/v1/namespaces/team-a/secrets/%2e%2e", "lower-case percent-escape"),
        ("/api/v1/namespaces/team-a/secrets/%2E%2E", "encoded dot segment"),
        ("/api/v1/namespaces/team-a%2F..%2Fother/pods", "decodes to '/'"),
        ("/api/v1/namespaces/team-a/secrets/a%5Cb", "decodes to '\\\\'"),
        ("/api/v1/namespaces/team-a/secrets/a%252Fb", "decodes to '%'"),
        ("/api/v1/namespaces/team-a/secrets/a%3Fb", "decodes to '?'"),
        ("/api/v1/namespaces/team-a/secrets/a%00", "decodes to '\\x00'"),
        ("/api/v1/namespaces/team-a/secrets/%C3%A9", "decodes to 'é'"),
        ("/api/v1/namespaces/team-a/secrets/%FF", "not UTF-8"),
        ("/api/v1/namespaces/team-a/secrets/%2", "malformed percent-escape"),
        ("/api/v1/namespaces/team-a/secrets/%2Da", "not in canonical form"),
        ("/api/v1/namespaces/team-a/secrets/a:b", "not in canonical form"),
        ("/api/v1//namespaces/team-a/pods", "empty segment"),
        ("/api/v1/namespaces/team-a\\..\\other/pods", "backslash"),
        ("/api/v1/namespaces/team-a/pods#/../x", "fragment"),
        ("/api/v1/namespaces/team-а/pods", "'а'"),  # Cyrillic a
        ("/api/v1/namespaces/team-a/pods/a b", "' '"),
        ("api/v1/namespaces/team-a/pods", "does not start with '/'"),
        ("/api/v1/namespaces/team-a/pods?labelSelector=a b", "' '"),
        ("/api/v1/namespaces/team-a/pods?labelSelector=a%2fb", "lower-case"),
    ],
)
def test_a_target_that_the_http_layer_or_the_apiserver_could_read_differently_is_refused(target, problem):
    found = wire_problem(target)
    assert found is not None and problem in found, found
    assert explain_wire_problem(target) == found
    for record in (BOUNDED, WHOLE, None):
        with pytest.raises(UnsafePath, match="refused before sending") as refused:
            admit(record, "GET", target)
        assert refused.value.problem == found and str(refused.value).endswith(f": {found}")


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/namespaces/team-a/pods",
        "/api/v1/namespaces/team-a/pods/p.g1?timeoutSeconds=5&watch=true",
        "/api/v1/namespaces/team-a/pods?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkfold%2Ca%20in%20%28x%29",
        "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name=x/y",
        "/apis/",
        "/api",
        "/",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aadmin",
    ],
)
def test_a_canonical_target_passes_the_wire_check(target):
    assert wire_problem(target) is None and explain_wire_problem(target) is None


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["/", ".", "..", "a", "-", "%2E", "%2e", "%2F", "%41", "%", "?", "=", "&", ":",
                                 "#", "\\", " ", "é", "~", "_", "%3A"]), max_size=12).map("".join))
def test_the_fast_path_of_the_wire_check_accepts_nothing_the_full_rules_refuse(target):
    if wire_problem(target) is None:
        assert explain_wire_problem(target) is None, target


@pytest.mark.parametrize(
    "target, reason",
    [
        ("/api/v1/namespaces/team-a/secrets/%GGa", "it has a malformed percent-escape at '%GG'"),
        ("/api/v1/namespaces/team-a/secrets/a%2", "it has a malformed percent-escape at '%2'"),
        ("/api/v1/namespaces/team-a/pods?labelSelector=a%2fb", "it has a lower-case percent-escape '%2f'"),
        ("/api/v1/namespaces/team-a/secrets/%2E", "segment '%2E' is an encoded dot segment"),
        ("/api/v1/namespaces/team-a/secrets/x%2F%5C", "segment 'x%2F%5C' decodes to '/', '\\\\'"),
        ("/api/v1/namespaces/team-a/pods/a b", "it contains ' '"),
        ("/api/v1/namespaces/team-\x01\u00e9/pods", "it contains '\\x01', '\u00e9'"),
        ("/api/v1/namespaces/team-\u00e9/pods", "it contains '\u00e9'"),
        ("/api/v1/namespaces/team-a/pods#x", "it contains a fragment ('#')"),
        ("/api/v1/namespaces/team-a\\pods", "it contains a backslash"),
        ("api/v1/namespaces/team-a/pods", "it does not start with '/'"),
        ("/api/v1/namespaces//pods", "it has an empty segment ('//')"),
        ("/api/v1/namespaces/team-a/pods?labelSelector=a|b", "its query has '|'"),
        ("/api/v1/namespaces/team-a/pods?labelSelector=<a>", "its query has '<', '>'"),
    ],
)
def test_a_refused_target_is_told_exactly_which_part_is_wrong(target, reason):
    """The reason quotes the offending escape itself (three characters), or every bad character."""
    assert wire_problem(target) == reason


def test_a_query_may_use_every_character_urllib3_sends_unchanged():
    query = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%41"
    target = "/api/v1/namespaces/team-a/pods?" + query
    assert explain_wire_problem(target) is None
    assert wire_problem(target) is None
