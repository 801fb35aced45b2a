"""The executor builds every request path from parts checked against Kubernetes' own name rules;
a name that breaks its kind's rule is refused (naming the name and the rule) and nothing is sent."""
from __future__ import annotations

import pytest

from engine.effects.io import resources as res
from engine.effects.io.ops import perform
from engine.effects.k8s_names import DNS1123_LABEL, DNS1123_SUBDOMAIN, InvalidObjectName, problem
from engine.effects.models import (ApplySecret, CreateObject, DeleteObject, EnsureNamespace, GetObject,
                                   ListObjects, PatchObject, RecordEvent, ReplaceObject)
from engine.effects.io.watch import resource_path

BAD_NAMES = ["..", ".", "a/b", "%2e%2e", "A", "a..b", "-a", "a-", ".a", "a.", "a b", "a\\b",
             "a?b", "a#b", "ａ", "é", "a" * 254, "a\n", "a%2fb"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_an_object_name_that_breaks_the_subdomain_rule_never_becomes_a_path(name):
    with pytest.raises(InvalidObjectName) as refused:
        res.path("v1", "Secret", "sb-acme", name)
    assert "DNS-1123 subdomain" in str(refused.value) and "Secret name" in str(refused.value)
    assert refused.value.name == name
    with pytest.raises(InvalidObjectName):
        res.check_name("v1", "Secret", name)


def test_an_empty_name_addresses_the_collection_so_a_create_refuses_it():
    assert res.path("v1", "Secret", "sb-acme", "") == "/api/v1/namespaces/sb-acme/secrets"
    with pytest.raises(InvalidObjectName, match="it is empty"):
        res.check_name("v1", "Secret", "")


@pytest.mark.parametrize("namespace", ["..", ".", "sb-acme/../other", "sb.acme", "SB", "a" * 64, "%2e"])
def test_a_namespace_must_be_a_dns_label(namespace):
    with pytest.raises(InvalidObjectName, match="DNS-1123 label"):
        res.path("v1", "Pod", namespace, "p")
    with pytest.raises(InvalidObjectName, match="DNS-1123 label"):
        res.path("v1", "Pod", namespace)
    with pytest.raises(InvalidObjectName, match="DNS-1123 label"):
        resource_path("v1", "pods", namespace)


def test_each_kind_uses_its_own_rule():
    assert res.path("v1", "Secret", "sb-acme", "git.cred-1") == "/api/v1/namespaces/sb-acme/secrets/git.cred-1"
    assert res.path("v1", "Pod", "sb-acme", "s1-g2", "status") == "/api/v1/namespaces/sb-acme/pods/s1-g2/status"
    assert res.path("kfold.dev/v1alpha1", "Repo", "sb-acme", "r.x") == "/apis/kfold.dev/v1alpha1/namespaces/sb-acme/repos/r.x"
    with pytest.raises(InvalidObjectName, match="Service name .* DNS-1123 label"):
        res.path("v1", "Service", "sb-acme", "web.app")
    with pytest.raises(InvalidObjectName, match="Namespace name .* DNS-1123 label"):
        res.path("v1", "Namespace", name="sb.acme")
    with pytest.raises(InvalidObjectName, match="subresource"):
        res.path("v1", "Pod", "sb-acme", "p", "../../x")


def test_the_message_names_the_name_the_rule_and_what_breaks_it():
    message = str(pytest.raises(InvalidObjectName, res.path, "v1", "Pod", "sb-acme", "Web_1").value)
    assert '"Web_1"' in message and "DNS-1123 subdomain" in message and '"W"' in message and '"_"' in message
    assert "nothing was sent" in message


def test_the_rules_accept_what_kubernetes_accepts():
    assert problem("a" * 63, DNS1123_LABEL) is None and problem("a" * 64, DNS1123_LABEL)
    assert problem(".".join(["a" * 63] * 3) + "." + "a" * 61, DNS1123_SUBDOMAIN) is None
    assert problem("0abc", DNS1123_LABEL) is None and problem("a.b", DNS1123_LABEL)


EFFECTS = [
    GetObject(id="1.0", machine="m", key="k", api_version="v1", kind="Secret", namespace="sb-acme", name=".."),
    DeleteObject(id="1.0", machine="m", key="k", api_version="v1", kind="Secret", namespace="sb-acme", name="."),
    DeleteObject(id="1.0", machine="m", key="k", api_version="v1", kind="Pod", namespace="sb-acme", name="..",
                 uid="u", rv="1"),
    PatchObject(id="1.0", machine="m", key="k", api_version="v1", kind="Pod", namespace="sb-acme", name="%2e%2e", patch={}),
    ReplaceObject(id="1.0", machine="m", key="k", api_version="v1", kind="Pod", namespace="..", name="p", manifest={}),
    CreateObject(id="1.0", machine="m", key="k", api_version="v1", kind="Service", namespace="sb-acme", name="a.b",
                 manifest={}),
    ListObjects(id="1.0", machine="m", key="k", api_version="v1", kind="Pod", namespace="sb-acme/.."),
    EnsureNamespace(id="1.0", machine="m", key="k", namespace=".."),
    RecordEvent(id="1.0", machine="m", key="k", namespace="sb-acme", involved={}, reason="r", message="m",
                event_name="../x"),
    ApplySecret(id="1.0", machine="m", key="k", namespace="sb-acme", name=".."),
]


@pytest.mark.parametrize("effect", EFFECTS, ids=lambda e: f"{e.type}")
async def test_an_effect_with_an_invalid_name_is_refused_and_sends_nothing(effect):
    sent = []

    async def call(req):
        sent.append(req)
        raise AssertionError("nothing may be sent")

    out = await perform(effect, call, {})
    assert out.result == "refused" and "nothing was sent" in out.message, out
    assert sent == []
