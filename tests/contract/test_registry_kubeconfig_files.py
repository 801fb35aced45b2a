"""Every kubeconfig field that reads a file, with ``--allow-files``: what a good file does, and what
a bad one gets (a refusal naming the field and the path, never a traceback, never the content).

Fields: ``tokenFile``, ``certificate-authority``, ``client-certificate``, ``client-key`` (against
an HTTPS stub that verifies client certificates) and an oidc auth-provider's
``idp-certificate-authority``. A token file ending in a newline is trimmed, as kubectl does.
"""
from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys

import pytest

from kfold.registry import DirectoryCredentials, KubeconfigRefused, RegistrationIndex, Registry
from tests.contract import tls_material
from tests.contract.registry_stub import ApiStub, api_stub, start  # noqa: F401
from tests.contract.registry_stub import kubeconfig as stub_kubeconfig

TOKEN = "stub-token"


@pytest.fixture
def registry(tmp_path):
    return Registry(RegistrationIndex(tmp_path / "index"), DirectoryCredentials(tmp_path / "creds"))


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return tls_material.make(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def https_stub(tls):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls.server_cert, tls.server_key)
    ctx.load_verify_locations(tls.ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    stub = start(ApiStub(), tls=ctx)
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def kubeconfig(server: str, user: str, cluster: str = "") -> str:
    return stub_kubeconfig(server, None, user_extra="\n" + user, cluster_extra="\n" + cluster if cluster else "")


def refusal(registry, text: str) -> str:
    with pytest.raises(KubeconfigRefused) as refused:
        registry.register("acme", "edge", text, allow_files=True)
    return str(refused.value)


# -- tokenFile ----------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [TOKEN + "\n", TOKEN + "\r\n", f"  {TOKEN}\n\n", TOKEN],
                         ids=["newline", "crlf", "surrounding-blanks", "bare"])
def test_a_token_file_is_trimmed_like_kubectl_does(registry, api_stub, tmp_path, content):
    (tmp_path / "token").write_text(content)
    registry.register("acme", "edge", kubeconfig(api_stub.url, f"    tokenFile: {tmp_path / 'token'}"),
                      allow_files=True)
    assert api_stub.arrived[-1].authorization == f"Bearer {TOKEN}"


def test_the_cli_registers_with_a_newline_terminated_token_file(api_stub, tmp_path):
    """Issue 19: this died with ``ValueError: Invalid header value`` and printed the token."""
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "kc").write_text(kubeconfig(api_stub.url, "    tokenFile: token"))
    run = subprocess.run([sys.executable, "-m", "kfold", "cluster", "register", "edge", "--tenant", "acme",
                          "--kubeconfig", str(tmp_path / "kc"), "--allow-files", "--registry-dir",
                          str(tmp_path / "reg"), "-o", "json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)[0]["name"] == "edge" and "Traceback" not in run.stderr


@pytest.mark.parametrize("content, problem", [
    ("", "it is empty"),
    ("\n  \n", "it is empty"),
    (f"{TOKEN} extra\n", "it contains whitespace or control characters inside the token (U+0020)"),
    (f"{TOKEN}\x00x", "U+0000"),
], ids=["empty", "blank", "inner-space", "nul"])
def test_a_token_file_no_trim_can_fix_is_refused_without_showing_it(registry, api_stub, tmp_path, content, problem):
    (tmp_path / "token").write_text(content)
    message = refusal(registry, kubeconfig(api_stub.url, f"    tokenFile: {tmp_path / 'token'}"))
    assert f"field 'tokenFile' ({tmp_path / 'token'}) is not a usable bearer token: " in message
    assert problem in message
    assert TOKEN not in message
    assert api_stub.arrived == []


@pytest.mark.parametrize("make, reason", [
    (lambda p: None, "No such file or directory"),
    (lambda p: p.mkdir(), "Is a directory"),
    (lambda p: p.write_bytes(b"\xff\xfe" + TOKEN.encode()), "it is not UTF-8 text"),
], ids=["missing", "directory", "binary"])
def test_an_unreadable_token_file_is_refused_naming_it(registry, api_stub, tmp_path, make, reason):
    make(tmp_path / "token")
    message = refusal(registry, kubeconfig(api_stub.url, f"    tokenFile: {tmp_path / 'token'}"))
    assert f"field 'tokenFile' names {tmp_path / 'token'}, which cannot be read: {reason}" in message
    assert api_stub.arrived == []


def test_an_inline_token_with_a_newline_is_refused_not_sent(registry, api_stub):
    message = refusal(registry, kubeconfig(api_stub.url, f'    token: "{TOKEN}\\n"'))
    assert "field 'token' is not a usable bearer token" in message and TOKEN not in message


# -- certificate-authority, client-certificate, client-key (HTTPS) ---------------------------------

def written(path, text):
    path.write_text(text)
    return path


def tls_user(cert, key) -> str:
    return f"    client-certificate: {cert}\n    client-key: {key}"


def test_a_ca_and_client_certificate_files_reach_an_https_cluster(registry, https_stub, tls):
    record = registry.register("acme", "edge", kubeconfig(https_stub.url, tls_user(tls.client_cert, tls.client_key),
                                                          f"    certificate-authority: {tls.ca}"), allow_files=True)
    assert record.endpoint == https_stub.url and https_stub.paths() == ["/api/v1/nodes"]


@pytest.mark.parametrize("field, make, reason", [
    ("certificate-authority", lambda t, p: p, "which cannot be read: No such file or directory"),
    ("certificate-authority", lambda t, p: p.parent, "which cannot be read: Is a directory"),
    ("certificate-authority", lambda t, p: written(p, "not a certificate\n"), "not a usable CA certificate"),
    ("certificate-authority", lambda t, p: t.client_key, "not a usable CA certificate"),
    ("client-certificate", lambda t, p: p, "which cannot be read: No such file or directory"),
    ("client-certificate", lambda t, p: written(p, "garbage"), "not a usable certificate and key"),
    ("client-key", lambda t, p: p, "which cannot be read: No such file or directory"),
    ("client-key", lambda t, p: t.other_key, "not a usable certificate and key"),
    ("client-key", lambda t, p: t.encrypted_key, "not a usable certificate and key"),
], ids=["ca-missing", "ca-directory", "ca-garbage", "ca-is-a-key", "cert-missing", "cert-garbage",
        "key-missing", "key-mismatch", "key-encrypted"])
def test_a_bad_tls_file_is_refused_naming_the_field(registry, https_stub, tls, tmp_path, field, make, reason):
    files = {"certificate-authority": tls.ca, "client-certificate": tls.client_cert, "client-key": tls.client_key}
    files[field] = make(tls, tmp_path / "bad.pem")
    text = kubeconfig(https_stub.url, tls_user(files["client-certificate"], files["client-key"]),
                      f"    certificate-authority: {files['certificate-authority']}")
    message = refusal(registry, text)
    assert reason in message and str(files[field]) in message, message
    assert "PRIVATE KEY" not in message and "BEGIN" not in message
    assert https_stub.arrived == []


def test_an_encrypted_key_is_refused_because_kfold_cannot_type_a_pass_phrase(registry, https_stub, tls):
    text = kubeconfig(https_stub.url, tls_user(tls.client_cert, tls.encrypted_key), f"    certificate-authority: {tls.ca}")
    assert "pass phrase" in refusal(registry, text)


def test_bad_embedded_tls_data_is_refused_too(registry, https_stub, tls):
    garbage = base64.b64encode(b"not a certificate").decode()
    text = kubeconfig(https_stub.url, tls_user(tls.client_cert, tls.client_key),
                      f"    certificate-authority-data: {garbage}")
    assert "cluster 'stub' 'certificate-authority-data' is not a usable CA certificate" in refusal(registry, text)


# -- auth-provider oidc idp-certificate-authority -------------------------------------------------

def oidc_user(ca) -> str:
    claims = base64.urlsafe_b64encode(json.dumps({"sub": "x"}).encode()).decode().rstrip("=")
    return ("    auth-provider:\n      name: oidc\n      config:\n"
            f"        id-token: aGVhZA.{claims}.c2ln\n        idp-issuer-url: https://127.0.0.1:9\n"
            f"        idp-certificate-authority: {ca}")


def test_an_oidc_idp_ca_file_needs_allow_files(registry, api_stub, tls):
    with pytest.raises(KubeconfigRefused, match="field 'idp-certificate-authority' names a file on this machine"):
        registry.register("acme", "edge", kubeconfig(api_stub.url, oidc_user(tls.ca)))


def test_a_bad_oidc_idp_ca_file_is_refused(registry, api_stub, tmp_path):
    (tmp_path / "idp.pem").write_text("not a certificate")
    message = refusal(registry, kubeconfig(api_stub.url, oidc_user(tmp_path / "idp.pem")))
    assert f"auth-provider field 'idp-certificate-authority' ({tmp_path / 'idp.pem'}) is not a usable CA" in message
