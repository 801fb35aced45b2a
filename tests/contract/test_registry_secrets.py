"""Credentials never reach logs, reprs, records, index files or refusal messages."""

import logging

import pytest
from kubernetes.client import CoreV1Api

from kfold.registry import DirectoryCredentials, OutOfBounds, RegistrationIndex, Registry, RegistryError
from tests.contract.registry_stub import api_stub  # noqa: F401

SECRET = "tok-7c1e-must-never-show"


@pytest.fixture(autouse=True)
def restore_library_log_levels():
    levels = {n: logging.getLogger(n).level for n in ("urllib3", "kubernetes")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@pytest.fixture
def registry(tmp_path):
    return Registry(RegistrationIndex(tmp_path / "index"), DirectoryCredentials(tmp_path / "creds"))


def test_no_credential_in_logs_reprs_records_or_errors(registry, api_stub, tmp_path, caplog):
    api_stub.tokens = {SECRET}
    shown: list[str] = []
    caplog.set_level(logging.DEBUG)
    for name in ("", "urllib3", "kubernetes"):
        logging.getLogger(name).setLevel(logging.DEBUG)

    record = registry.register("acme", "shared", api_stub.kubeconfig(SECRET), namespaces=["team-a"])
    client = registry.reach("acme", "shared")
    for name in ("urllib3", "kubernetes"):  # the client's Configuration resets these to WARNING
        logging.getLogger(name).setLevel(logging.DEBUG)
    CoreV1Api(client).list_namespaced_pod("team-a")
    for bad in (lambda: CoreV1Api(client).list_node(),
                lambda: registry.register("acme", "other", api_stub.kubeconfig(SECRET + "-wrong")),
                lambda: registry.register("acme", "x", api_stub.kubeconfig(SECRET, user_extra="\n    tokenFile: /t"))):
        with pytest.raises((OutOfBounds, RegistryError)) as refused:
            bad()
        shown.append(str(refused.value))
    shown += [repr(registry), repr(client), str(client), repr(client.configuration), repr(record),
              record.model_dump_json(), repr(registry.list_all())]
    shown += [p.read_text() for p in (tmp_path / "index").glob("*.json")]
    registry.deregister("acme", "shared")

    assert api_stub.arrived[0].authorization == f"Bearer {SECRET}", "the credential was used"
    loggers = {r.name for r in caplog.records}
    assert {"kfold.registry", "urllib3.connectionpool"} <= loggers, "debug logging was captured"
    assert SECRET not in caplog.text
    for text in shown:
        assert SECRET not in text
    assert client.configuration.debug is False


def test_the_credential_file_is_the_only_place_the_material_rests(registry, api_stub, tmp_path):
    api_stub.tokens = {SECRET}
    registry.register("acme", "own", api_stub.kubeconfig(SECRET))
    holders = [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
               if p.is_file() and SECRET in p.read_text(errors="ignore")]
    assert holders == ["creds/acme.own"]
