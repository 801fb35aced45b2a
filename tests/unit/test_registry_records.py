"""Registration records: DNS-label names, no credential in a record, inventory counts."""

import pydantic
import pytest

from kfold.registry import InvalidName, Inventory, Registration, check_name, credential_ref
from kfold.registry.probe import inventory_of
from kfold.registry.records import http_date_ms, quantity_int


@pytest.mark.parametrize("name", ["a", "prod-1", "x" * 63, "0abc9", "a-b-c"])
def test_a_dns_label_is_a_usable_cluster_name(name):
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name, problem",
    [
        ("Prod", "uppercase letters are not allowed"),
        ("a..b", "'.'"),
        ("a/b", "'/'"),
        ("x" * 64, "64 characters long"),
        ("-lead", "starts or ends with '-'"),
        ("trail-", "starts or ends with '-'"),
        ("", "empty"),
        ("sp ace", "' '"),
    ],
    ids=["uppercase", "dot-dot", "slash", "64-chars", "leading-dash", "trailing-dash", "empty", "space"],
)
def test_a_name_that_is_not_a_dns_label_is_refused_saying_why(name, problem):
    """Seed 004:495-509: a cluster name is a DNS label of at most 63 characters."""
    with pytest.raises(InvalidName) as refused:
        check_name(name)
    assert problem in str(refused.value)
    assert "1-63 characters of a-z, 0-9 and '-'" in str(refused.value)


def test_a_record_refuses_an_invalid_name_or_tenant():
    with pytest.raises(pydantic.ValidationError):
        Registration(name="Bad", tenant="acme")
    with pytest.raises(pydantic.ValidationError):
        Registration(name="ok", tenant="../other")


def test_a_record_has_no_field_for_a_credential_or_its_reference():
    """Seed 004:84-97: a record holds no credential nor a reference to one."""
    fields = set(Registration.model_fields)
    assert not {f for f in fields if "cred" in f or "kubeconfig" in f or "secret" in f or "token" in f}
    with pytest.raises(pydantic.ValidationError):
        Registration(name="c", tenant="acme", kubeconfig="apiVersion: v1")
    with pytest.raises(pydantic.ValidationError):
        Registration(name="c", tenant="acme", credential_ref="other.c")


def test_the_credential_reference_is_derived_from_tenant_and_name():
    """Seed 004:486-490: the credential's reference is derived from tenant and name."""
    assert credential_ref("acme", "prod") == "acme.prod"
    with pytest.raises(InvalidName):
        credential_ref("acme/..", "prod")


def test_a_record_is_frozen():
    record = Registration(name="c", tenant="acme")
    with pytest.raises(pydantic.ValidationError):
        record.name = "d"


def test_a_namespace_bound_is_trimmed_deduplicated_and_ordered():
    """Seed 004:516-531: a namespace bound is trimmed, deduplicated, ordered; blanks are no bound."""
    record = Registration(name="c", tenant="acme", namespaces=[" b", "a", "", "b"])
    assert record.namespaces == ("b", "a")
    assert record.bounded
    assert not Registration(name="c", tenant="acme", namespaces=["  "]).bounded


@pytest.mark.parametrize(
    "value, count",
    [("8", 8), (" 2 ", 2), ("0", 0), (None, 0), ("", 0), ("1.5", 0), ("2k", 0), ("-1", 0), ("abc", 0), (4, 4)],
)
def test_a_malformed_accelerator_count_reads_as_zero(value, count):
    """Seed 004:557-560: a malformed accelerator count reads as zero."""
    assert quantity_int(value) == count


class _Status:
    def __init__(self, allocatable):
        self.allocatable = allocatable


class _Node:
    def __init__(self, **allocatable):
        self.status = _Status(allocatable)


def test_inventory_sums_nvidia_and_amd_gpus_over_node_allocatable():
    nodes = [_Node(**{"nvidia.com/gpu": "8"}), _Node(**{"amd.com/gpu": "4", "nvidia.com/gpu": "x"}), _Node()]
    assert inventory_of(nodes) == Inventory(nodes=3, nvidia_gpu=8, amd_gpu=4)


def test_the_server_date_header_becomes_epoch_milliseconds():
    assert http_date_ms("Sat, 01 Jan 2000 00:00:00 GMT") == 946684800000
    assert http_date_ms(None) is None
    assert http_date_ms("not a date") is None
