"""The home cluster: a kubeconfig file/context or in-cluster; never an ambient fallback."""

import pytest

from kfold.registry import HomeUnavailable, KubeconfigRefused, MemoryCredentials, NotRegistered, RegistrationIndex, Registry
from kfold.registry.home import home_configuration
from tests.contract import tls_material

HOME = """apiVersion: v1
current-context: dev
contexts:
- {{name: dev, context: {{cluster: dev, user: dev, namespace: kfold-system}}}}
- {{name: other, context: {{cluster: other, user: dev}}}}
clusters:
- {{name: dev, cluster: {{server: "https://127.0.0.1:6443", certificate-authority: ca.pem}}}}
- {{name: other, cluster: {{server: "https://127.0.0.2:6443", insecure-skip-tls-verify: true}}}}
users:
- {{name: dev, user: {{token: home-token{extra}}}}}
"""


@pytest.fixture(scope="module")
def real_ca(tmp_path_factory):
    """A real CA certificate: the file is loaded by ``ssl`` when the client is built."""
    return tls_material.make(tmp_path_factory.mktemp("tls")).ca.read_text()


@pytest.fixture
def kubeconfig_file(tmp_path, real_ca):
    (tmp_path / "ca.pem").write_text(real_ca)
    path = tmp_path / "config"
    path.write_text(HOME.format(extra=""))
    return path


def test_a_kubeconfig_file_gives_its_context_server_and_namespace(kubeconfig_file):
    config, source = home_configuration(str(kubeconfig_file))
    assert (source.kind, source.endpoint, source.namespace) == ("kubeconfig", "https://127.0.0.1:6443", "kfold-system")
    assert config.ssl_ca_cert == str(kubeconfig_file.parent / "ca.pem")


def test_a_named_context_is_used_instead_of_the_current_one(kubeconfig_file):
    _, source = home_configuration(str(kubeconfig_file), "other")
    assert (source.endpoint, source.namespace) == ("https://127.0.0.2:6443", None)


def test_a_home_kubeconfig_with_exec_needs_allow_exec(tmp_path):
    path = tmp_path / "config"
    path.write_text(HOME.format(extra=", exec: {command: gke-gcloud-auth-plugin}"))
    with pytest.raises(KubeconfigRefused, match="gke-gcloud-auth-plugin"):
        home_configuration(str(path), "other")


def test_in_cluster_uses_the_service_account_token_ca_and_namespace(tmp_path):
    for name, text in (("token", "sa-token"), ("ca.crt", "ca"), ("namespace", "kfold-system\n")):
        (tmp_path / name).write_text(text)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config, source = home_configuration(None, service_account_dir=str(tmp_path), environ=env)
    assert (source.kind, source.endpoint, source.namespace) == ("in-cluster", "https://10.96.0.1:443", "kfold-system")
    assert config.ssl_ca_cert == str(tmp_path / "ca.crt")


def test_in_cluster_without_a_token_says_so(tmp_path):
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(HomeUnavailable, match="in-cluster service account unusable"):
        home_configuration(None, service_account_dir=str(tmp_path), environ=env)


def test_with_no_kubeconfig_outside_a_pod_there_is_no_ambient_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "would-be-ambient"))
    with pytest.raises(HomeUnavailable, match="no home cluster"):
        home_configuration(None, environ={})


def test_the_home_client_is_the_tenant_less_entry_named_by_config(tmp_path, kubeconfig_file):
    registry = Registry(RegistrationIndex(tmp_path / "i"), MemoryCredentials(), home_name="local")
    with pytest.raises(NotRegistered):
        registry.reach(None, "local")
    home = registry.home(str(kubeconfig_file))
    assert registry.home() is home
    assert registry.reach(None, "local") is home
    assert registry.home_source.namespace == "kfold-system"
    with pytest.raises(NotRegistered):
        registry.reach(None, "elsewhere")
    with pytest.raises(NotRegistered):
        registry.reach("acme", "local")
    assert "home-token" not in repr(home) + repr(registry)


def test_the_token_refresh_hook_runs_at_most_once_a_second_and_stays_in_front_of_the_librarys():
    """The library's hook runs on every request and re-applies the whole configuration (rescanning
    the environment for proxies); kfold paces it. Like the library's, the fake hook re-installs a
    fresh closure each time it runs: the pacing must survive that."""
    from kubernetes.client import Configuration

    from kfold.registry.client import paced_refresh
    calls, now = [], [100.0]

    def library_hook(c):
        calls.append(now[0])
        c.api_key["BearerToken"] = f"token-{len(calls)}"
        c.refresh_api_key_hook = library_hook_again

    library_hook_again = library_hook
    cfg = Configuration()
    cfg.refresh_api_key_hook = library_hook
    paced_refresh(cfg, monotonic=lambda: now[0])
    for _ in range(50):
        cfg.get_api_key_with_prefix("BearerToken")
    assert calls == [100.0]
    now[0] = 100.5
    assert cfg.get_api_key_with_prefix("BearerToken") == "token-1" and len(calls) == 1
    now[0] = 101.0
    assert cfg.get_api_key_with_prefix("BearerToken") == "token-2", "due again after a second"
    assert cfg.refresh_api_key_hook is not library_hook, "the wrapper stays in front"


def test_in_cluster_and_kubeconfig_clients_keep_their_token_through_the_paced_hook(tmp_path, kubeconfig_file):
    for name, text in (("token", "sa-token"), ("ca.crt", "ca"), ("namespace", "kfold-system\n")):
        (tmp_path / name).write_text(text)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    in_cluster, _ = home_configuration(None, service_account_dir=str(tmp_path), environ=env)
    from_file, _ = home_configuration(str(kubeconfig_file))
    for cfg, token in ((in_cluster, "bearer sa-token"), (from_file, "Bearer home-token")):
        assert cfg.refresh_api_key_hook.__qualname__.startswith("paced_refresh")
        for _ in range(3):
            assert cfg.auth_settings()["BearerToken"]["value"] == token
