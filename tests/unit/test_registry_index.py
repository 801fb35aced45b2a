"""The registration index: per-tenant files, atomic replacement, corruption is not emptiness."""

import json
import os
import stat

import pytest

from kfold.registry import Registration, RegistrationIndex, RegistryCorrupt


def rec(name, tenant="acme", **kw):
    return Registration(name=name, tenant=tenant, **kw)


def test_an_absent_index_is_an_empty_registry(tmp_path):
    """Seed 004:449-451: an absent index is an empty registry."""
    assert RegistrationIndex(tmp_path / "index").read("acme") == ()
    assert RegistrationIndex(tmp_path / "index").tenants() == ()


def test_records_round_trip_per_tenant(tmp_path):
    index = RegistrationIndex(tmp_path)
    index.update("acme", lambda rs: (*rs, rec("a", namespaces=["x"])))
    index.update("beta", lambda rs: (*rs, rec("b", tenant="beta")))
    assert index.read("acme") == (rec("a", namespaces=["x"]),)
    assert index.read("beta") == (rec("b", tenant="beta"),)
    assert index.tenants() == ("acme", "beta")


def test_an_index_file_is_owner_only_and_leaves_no_temporary_behind(tmp_path):
    index = RegistrationIndex(tmp_path)
    index.update("acme", lambda rs: (rec("a"),))
    index.update("acme", lambda rs: (*rs, rec("b")))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "acme.json"]
    assert stat.S_IMODE(os.stat(tmp_path / "acme.json").st_mode) == 0o600


def test_a_failed_change_leaves_the_old_index_intact(tmp_path):
    index = RegistrationIndex(tmp_path)
    index.update("acme", lambda rs: (rec("a"),))

    def boom(records):
        raise RuntimeError("change failed")

    with pytest.raises(RuntimeError):
        index.update("acme", boom)
    assert index.read("acme") == (rec("a"),)


def test_a_hand_edited_row_cannot_claim_another_tenant(tmp_path):
    """Seed 004:463-468: a hand-edited row cannot claim another tenant."""
    (tmp_path / "acme.json").write_text(json.dumps([{"name": "a", "tenant": "beta"}]))
    assert RegistrationIndex(tmp_path).read("acme")[0].tenant == "acme"


@pytest.mark.parametrize("body", ["{not json", '[{"name": "Bad!"}]', '[{"name": "a", "kubeconfig": "x"}]', "[1]"])
def test_a_corrupt_index_is_an_error_not_an_empty_registry(tmp_path, body):
    (tmp_path / "acme.json").write_text(body)
    with pytest.raises(RegistryCorrupt, match="cluster index for tenant acme is corrupt"):
        RegistrationIndex(tmp_path).read("acme")
