"""Credential stores: a directory (mounted Secret) and Kubernetes Secrets in kfold's namespace."""

import base64
import json
import os
import stat

import pytest
from kubernetes.client.exceptions import ApiException

from kfold.registry import DirectoryCredentials, Kubeconfig, MemoryCredentials, SecretCredentials

TEXT = "apiVersion: v1\nusers: [{name: u, user: {token: s3cret}}]\n"


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return MemoryCredentials() if request.param == "memory" else DirectoryCredentials(tmp_path / "creds")


def test_a_stored_credential_reads_back_and_a_missing_one_is_none(store):
    assert store.get("acme.prod") is None
    store.put("acme.prod", Kubeconfig(TEXT))
    assert store.get("acme.prod").reveal() == TEXT


def test_put_replaces_and_destroy_removes(store):
    store.put("acme.prod", Kubeconfig(TEXT))
    store.put("acme.prod", Kubeconfig("rotated"))
    assert store.get("acme.prod").reveal() == "rotated"
    store.destroy("acme.prod")
    store.destroy("acme.prod")
    assert store.get("acme.prod") is None


def test_a_directory_store_writes_owner_only_files_named_by_reference(tmp_path):
    store = DirectoryCredentials(tmp_path / "creds")
    store.put("acme.prod", Kubeconfig(TEXT))
    assert os.listdir(tmp_path / "creds") == ["acme.prod"]
    assert stat.S_IMODE(os.stat(tmp_path / "creds" / "acme.prod").st_mode) == 0o600
    assert "s3cret" not in repr(store)


@pytest.mark.parametrize("ref", ["../acme.prod", "a/b", ".hidden"])
def test_a_directory_store_refuses_references_that_escape_it(tmp_path, ref):
    with pytest.raises(ValueError):
        DirectoryCredentials(tmp_path).get(ref)


def api_error(status, reason):
    error = ApiException(status=status, reason="HTTP phrase")
    error.body = json.dumps({"kind": "Status", "reason": reason, "code": status})
    return error


class FakeCoreApi:
    """Records calls; holds Secrets in a dict; answers like the apiserver would."""

    def __init__(self):
        self.secrets = {}
        self.calls = []

    def read_namespaced_secret(self, name, namespace):
        self.calls.append(("read", name, namespace))
        if (namespace, name) not in self.secrets:
            raise api_error(404, "NotFound")
        return self.secrets[(namespace, name)]

    def create_namespaced_secret(self, namespace, body):
        self.calls.append(("create", body.metadata.name, namespace))
        if (namespace, body.metadata.name) in self.secrets:
            raise api_error(409, "AlreadyExists")
        self.secrets[(namespace, body.metadata.name)] = body

    def replace_namespaced_secret(self, name, namespace, body):
        self.calls.append(("replace", name, namespace))
        self.secrets[(namespace, name)] = body

    def delete_namespaced_secret(self, name, namespace):
        self.calls.append(("delete", name, namespace))
        if self.secrets.pop((namespace, name), None) is None:
            raise api_error(404, "NotFound")


def test_a_secret_store_keeps_the_kubeconfig_under_key_kubeconfig_labelled_managed_by_kfold():
    api = FakeCoreApi()
    SecretCredentials(api, "kfold-system").put("acme.prod", Kubeconfig(TEXT))
    secret = api.secrets[("kfold-system", "kfold-cluster.acme.prod")]
    assert base64.b64decode(secret.data["kubeconfig"]).decode() == TEXT
    assert secret.metadata.labels == {
        "app.kubernetes.io/managed-by": "kfold", "kfold.dev/tenant": "acme", "kfold.dev/cluster": "prod"}


def test_a_secret_store_replaces_an_existing_secret_on_already_exists():
    api = FakeCoreApi()
    store = SecretCredentials(api, "kfold-system")
    store.put("acme.prod", Kubeconfig(TEXT))
    store.put("acme.prod", Kubeconfig("rotated"))
    assert [c[0] for c in api.calls] == ["create", "create", "replace"]
    assert store.get("acme.prod").reveal() == "rotated"


def test_a_secret_store_reads_absence_as_none_and_destroys_idempotently():
    api = FakeCoreApi()
    store = SecretCredentials(api, "kfold-system")
    assert store.get("acme.prod") is None
    store.put("acme.prod", Kubeconfig(TEXT))
    store.destroy("acme.prod")
    store.destroy("acme.prod")
    assert store.get("acme.prod") is None


def test_a_secret_store_outage_is_an_error_not_absence():
    """Seed 004:115-118: an unreachable store is an error, never an empty answer."""
    class Down(FakeCoreApi):
        def read_namespaced_secret(self, name, namespace):
            raise api_error(503, "ServiceUnavailable")

    with pytest.raises(ApiException):
        SecretCredentials(Down(), "kfold-system").get("acme.prod")


def test_a_404_without_a_notfound_status_is_not_absence():
    class Proxy(FakeCoreApi):
        def read_namespaced_secret(self, name, namespace):
            error = ApiException(status=404, reason="Not Found")
            error.body = "<html>proxy</html>"
            raise error

    with pytest.raises(ApiException):
        SecretCredentials(Proxy(), "kfold-system").get("acme.prod")
