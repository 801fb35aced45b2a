"""Throw-away TLS material for HTTPS stubs, made with the ``openssl`` CLI (scripts/setup.sh installs it).

``make(dir)`` writes a CA, a server certificate for 127.0.0.1 signed by it, a client certificate
signed by it (with its key), a second unrelated key, and the same client key encrypted with a pass
phrase; it returns their paths. EC P-256 keys: the whole set takes well under a second.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Material:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_key: Path
    encrypted_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(d: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
    (d / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext", cwd=d)


def make(d: Path) -> Material:
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=kfold-test-ca",
             cwd=d)
    _signed(d, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _signed(d, "client", "/CN=kfold-test-client", "extendedKeyUsage=clientAuth\n")
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key", cwd=d)
    _openssl("pkey", "-in", "client.key", "-aes256", "-passout", "pass:kfold-test", "-out", "encrypted.key", cwd=d)
    return Material(d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key",
                    d / "other.key", d / "encrypted.key")
