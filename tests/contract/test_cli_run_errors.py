"""``kfold run`` meeting bad input or an unusable environment: one line on stderr naming the thing
and the fix, exit 2, no traceback, no hang (each run is a real ``python -m kfold run`` process with
a timeout). An unreachable apiserver: one ERROR naming server and context, quiet retries, and a line
when it answers again."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

TIMEOUT = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kubeconfig(path: Path, server: str, user: dict | None = None, context: str = "dev") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}},
                     {"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user or {"token": "not-a-real-token"}}]}))
    return path


def _config(tmp: Path, **fields) -> Path:
    doc = {"cluster": {"name": "local", "kubeconfig": str(_kubeconfig(tmp / "kc.yaml", "https://127.0.0.1:1"))},
           "namespaces": ["demo"], "journal": {"path": str(tmp / "j" / "journal.db")},
           "http": {"listen": f"127.0.0.1:{_free_port()}"}, "log": {"format": "plain"}}
    for dotted, value in fields.items():
        node, *rest = dotted.split("__")
        if rest:
            doc.setdefault(node, {})[rest[0]] = value
        else:
            doc[node] = value
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return {**env, **extra}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfold", "run", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env or _env())


def _refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_a_port_in_use_is_one_line_and_exit_2_without_a_hang(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        proc = _run("--config", str(_config(tmp_path, http__listen=f"127.0.0.1:{port}")))
    _refused(proc, f"127.0.0.1:{port}", "already in use", "http.listen")
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("flag, field", [("--listen", "http.listen"), ("--metrics-listen", "metrics.listen")])
def test_a_port_in_use_given_by_a_flag_names_the_flag_and_the_field(tmp_path, flag, field):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _run("--config", str(_config(tmp_path)), flag, f"127.0.0.1:{port}")
    line = _refused(proc, f"{field} 127.0.0.1:{port} is already in use", flag)
    assert line.startswith("kfold run: ")


@pytest.mark.parametrize("flag", ["--listen", "--metrics-listen"])
def test_a_listen_flag_that_is_not_host_port_is_blamed_on_the_flag(tmp_path, flag):
    line = _refused(_run("--config", str(_config(tmp_path)), flag, "eighty"), f"kfold: {flag}: ", "HOST:PORT", "eighty")
    assert "config.yaml" not in line


def test_a_half_mounted_metrics_certificate_is_refused(tmp_path):
    certs = tmp_path / "tls"
    certs.mkdir()
    (certs / "tls.crt").write_text("")
    cfg = _config(tmp_path, metrics={"listen": f"127.0.0.1:{_free_port()}", "cert_dir": str(certs)})
    _refused(_run("--config", str(cfg)), f"metrics.cert_dir {certs}: tls.key is missing", "mount both")


def test_a_journal_path_that_is_a_directory(tmp_path):
    (tmp_path / "jdir").mkdir()
    _refused(_run("--config", str(_config(tmp_path)), "--journal", str(tmp_path / "jdir")),
             "is a directory", "--journal")


def test_a_journal_inside_a_regular_file_or_an_unwritable_place(tmp_path):
    (tmp_path / "afile").write_text("")
    _refused(_run("--config", str(_config(tmp_path)), "--journal", str(tmp_path / "afile" / "j.db")),
             "not a directory", "journal.path")
    _refused(_run("--config", str(_config(tmp_path)), "--journal", "/proc/kfold-test/j.db"),
             "/proc/kfold-test", "journal.path")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_a_journal_in_a_read_only_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _refused(_run("--config", str(_config(tmp_path)), "--journal", str(ro / "j.db")), "not writable")
    finally:
        ro.chmod(0o700)


def test_a_missing_or_invalid_kubeconfig(tmp_path):
    cfg = str(_config(tmp_path))
    _refused(_run("--config", cfg, "--kubeconfig", str(tmp_path / "nope.yaml")), "nope.yaml", "--kubeconfig")
    (tmp_path / "bad.yaml").write_text("clusters: [\n")
    _refused(_run("--config", cfg, "--kubeconfig", str(tmp_path / "bad.yaml")), "bad.yaml", "YAML")


def test_an_unknown_context_names_the_ones_there_are(tmp_path):
    line = _refused(_run("--config", str(_config(tmp_path)), "--context", "prod"), "'prod'", "--context")
    assert "dev, other" in line


def test_a_missing_or_invalid_config_file(tmp_path):
    _refused(_run("--config", str(tmp_path / "absent.yaml")), "absent.yaml", "--config")
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespaces: [demo]\njournal: {pathh: x}\n")
    _refused(_run("--config", str(bad)), "journal.pathh", "unknown field")


def test_kubeconfig_env_is_honoured_first_existing_file(tmp_path):
    kc = _kubeconfig(tmp_path / "from-env.yaml", "https://127.0.0.1:1")
    cfg = _config(tmp_path, cluster={"name": "local"})
    env = _env(KUBECONFIG=f"{tmp_path / 'missing.yaml'}:{kc}")
    proc = _run("--config", str(cfg), "--context", "nope", env=env)
    said, refusal = proc.stderr.strip().splitlines()   # which file was used, then why it cannot be
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "$KUBECONFIG" in said and str(kc) in said and "first existing of 2" in said
    assert str(kc) in refusal and "'nope'" in refusal
    _refused(_run("--config", str(cfg), env=_env(KUBECONFIG=str(tmp_path / "gone.yaml"))), "$KUBECONFIG", "gone.yaml")


EXEC_PLUGIN = """#!/bin/sh
touch "{marker}"
echo '{{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {{"token": "t"}}}}'
"""


def test_an_exec_plugin_needs_allow_exec_and_then_runs(tmp_path):
    marker, plugin = tmp_path / "plugin-ran", tmp_path / "plugin.sh"
    plugin.write_text(EXEC_PLUGIN.format(marker=marker))
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    _kubeconfig(tmp_path / "exec.yaml", "https://127.0.0.1:1", user=user)
    cfg = str(_config(tmp_path))
    _refused(_run("--config", cfg, "--kubeconfig", str(tmp_path / "exec.yaml")), "exec credential plugin",
             "--allow-exec")
    assert not marker.exists()
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "run", "--config", cfg, "--kubeconfig",
                             str(tmp_path / "exec.yaml"), "--allow-exec"], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "the plugin never ran"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=TIMEOUT)


class _Status404(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                           "reason": "NotFound", "message": "stub"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def log_message(self, *args) -> None:
        pass


def test_an_unreachable_apiserver_is_one_error_then_quiet_retries_then_recovery(tmp_path):
    port = _free_port()   # closed: connection refused until the listener below starts
    server_url = f"http://127.0.0.1:{port}"
    cfg = _config(tmp_path)
    doc = yaml.safe_load(cfg.read_text())
    doc["cluster"]["kubeconfig"] = str(_kubeconfig(tmp_path / "closed-port.yaml", server_url))
    cfg.write_text(yaml.safe_dump(doc))
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kfold", "run", "--config", str(cfg)], env=_env(),
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
    listener = None
    try:
        _wait_for(log, "cannot reach the apiserver", proc)
        time.sleep(4)   # several retries meanwhile
        listener = ThreadingHTTPServer(("127.0.0.1", port), _Status404)
        threading.Thread(target=listener.serve_forever, daemon=True).start()
        _wait_for(log, "answers again", proc, timeout=45)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=TIMEOUT)
        if listener is not None:
            listener.shutdown()
            listener.server_close()
    text = log.read_text()
    errors = [line for line in text.splitlines() if " ERROR " in line and "reach" in line]
    assert len(errors) == 1, text
    assert server_url in errors[0] and "context dev of" in errors[0] and "connection refused" in errors[0]
    assert "Connection" not in text and "CheckedHTTP" not in text and "Traceback" not in text, text
    # quiet while unreachable: no WARNING before it answers (after, the 404 stub draws its own lines)
    quiet = text[:text.index("answers again")]
    assert not [line for line in quiet.splitlines() if " WARNING " in line], text
    # the 404 stub serves no Pod: a built-in kind is not a missing CRD
    assert not [line for line in text.splitlines() if "/Pod" in line and "CRD" in line], text


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text():
            return
        assert proc.poll() is None, log.read_text()
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} within {timeout}s:\n{log.read_text()}")
