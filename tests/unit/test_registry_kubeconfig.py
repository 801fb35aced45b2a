"""Kubeconfig validation: exec plugins, command auth-providers and local files are refused unless allowed."""

import pickle

import pytest

from kfold.registry import Kubeconfig, KubeconfigRefused, select

TOKEN = "tok-3f9a-very-secret"


def kubeconfig(user: str = f"token: {TOKEN}", cluster: str = "") -> Kubeconfig:
    return Kubeconfig(f"""apiVersion: v1
kind: Config
current-context: main
contexts:
- name: main
  context: {{cluster: c, user: u, namespace: work}}
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
{cluster}
users:
- name: u
  user:
    {user}
""")


EXEC = "exec: {apiVersion: client.authentication.k8s.io/v1, command: aws-iam-authenticator}"
GCP = "auth-provider: {name: gcp, config: {cmd-path: /usr/bin/gcloud}}"
OIDC_CMD = "auth-provider: {name: oidc, config: {cmd-path: /bin/get-token}}"


def refusal(config: Kubeconfig, **flags) -> str:
    with pytest.raises(KubeconfigRefused) as refused:
        select(config, **flags)
    return str(refused.value)


def test_a_token_kubeconfig_is_accepted_with_its_context_server_and_namespace():
    selected = select(kubeconfig())
    assert (selected.context, selected.server, selected.namespace) == ("main", "https://10.0.0.1:6443", "work")


def test_an_exec_plugin_is_refused_naming_the_command_and_the_flag():
    message = refusal(kubeconfig(EXEC))
    assert "exec credential plugin (aws-iam-authenticator)" in message
    assert "run a command on this machine" in message and "--allow-exec" in message


@pytest.mark.parametrize("provider", [GCP, OIDC_CMD], ids=["gcp", "oidc-with-cmd-path"])
def test_an_auth_provider_that_runs_commands_is_refused(provider):
    message = refusal(kubeconfig(provider))
    assert "auth-provider" in message and "--allow-exec" in message


def test_exec_is_accepted_when_the_operator_allows_it():
    assert select(kubeconfig(EXEC), allow_exec=True).context == "main"
    assert select(kubeconfig(GCP), allow_exec=True).context == "main"


@pytest.mark.parametrize(
    "user, cluster, field",
    [
        ("client-certificate: /etc/k/cert.pem", "", "client-certificate"),
        ("client-key: /etc/k/key.pem", "", "client-key"),
        ("tokenFile: /var/run/token", "", "tokenFile"),
        (f"token: {TOKEN}", "    certificate-authority: /etc/k/ca.pem", "certificate-authority"),
    ],
)
def test_a_local_file_reference_is_refused_unless_allowed(user, cluster, field):
    config = kubeconfig(user, cluster)
    message = refusal(config)
    assert f"field {field!r} names a file on this machine" in message and "--allow-files" in message
    assert select(config, allow_files=True).context == "main"


def test_every_problem_is_reported_at_once():
    message = refusal(kubeconfig(EXEC + "\n    client-key: /k.pem"))
    assert "exec credential plugin" in message and "'client-key'" in message


@pytest.mark.parametrize(
    "text, problem",
    [
        ("a: [unclosed", "does not parse as YAML"),
        ("- a list", "not a kubeconfig mapping"),
        ("apiVersion: v1\nkind: Config\n", "no current-context"),
        ("current-context: nope\ncontexts: []\n", "context 'nope' is not defined"),
    ],
)
def test_a_malformed_kubeconfig_is_refused_saying_what_is_wrong(text, problem):
    assert problem in refusal(Kubeconfig(text))


def test_a_yaml_error_does_not_echo_the_credential():
    broken = Kubeconfig(f"users:\n- user: {{token: {TOKEN}\n  : [")
    message = refusal(broken)
    assert "does not parse as YAML" in message and TOKEN not in message


def test_a_kubeconfig_never_shows_its_text():
    config = kubeconfig()
    for shown in (repr(config), str(config), f"{config}", "%s" % config, repr([config])):
        assert TOKEN not in shown
    assert TOKEN in config.reveal()
    with pytest.raises(TypeError):
        pickle.dumps(config)
    assert TOKEN not in repr(select(config))
