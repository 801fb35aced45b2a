"""Config files: a good one loads; a bad one fails with the file, the field and the fix."""
from __future__ import annotations

from pathlib import Path

import pytest

from kfold.daemon.config import ConfigError, ExecutorConfig, read_config

EXAMPLE = Path(__file__).resolve().parents[2] / "kfold" / "data" / "config.example.yaml"
MINIMAL = "namespaces: [sessions]\nbase_domain: sessions.example.com\n"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(text)
    return p


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        read_config(path)
    return str(err.value)


def test_the_shipped_example_is_valid():
    cfg = read_config(EXAMPLE)
    # neutral: nothing of anyone's bound or trusted, cluster-internal endpoints
    assert cfg.namespaces == ("kfold-sessions",) and cfg.repos.bindings == () and cfg.repos.credentials == ()
    assert cfg.base_domain is None


def test_the_shipped_example_runs_the_executor_at_the_measured_default():
    # The example is the ConfigMap `kfold manifests` installs: it says the measured default
    # (docs/config.md), whatever that is; an install must not run with another count unknowingly.
    assert read_config(EXAMPLE).executor.threads == ExecutorConfig().threads == 64


def test_a_minimal_file_gets_documented_defaults(tmp_path):
    cfg = read_config(write(tmp_path, MINIMAL))
    assert (cfg.journal.snapshot_every, cfg.journal.retention.keep_snapshots, cfg.deadlines.watch_idle_seconds, cfg.http.host_port) == (None, 4, 70, ("0.0.0.0", 8080))


def test_base_domain_may_be_left_out_for_cluster_internal_sessions(tmp_path):
    from kfold.daemon.boot import configure_command
    cfg = read_config(write(tmp_path, "namespaces: [sessions]\n"))
    assert cfg.base_domain is None
    assert configure_command(cfg, 0).args["base_domain"] == ""   # the session machine: no Ingress
    assert "leave base_domain out" in error_of(write(tmp_path, "namespaces: [sessions]\nbase_domain: local\n"))


def test_the_events_level_reaches_the_session_machine(tmp_path):
    from kfold.daemon.boot import configure_command
    assert configure_command(read_config(write(tmp_path, MINIMAL)), 0).args["event_level"] == "Normal"
    cfg = read_config(write(tmp_path, MINIMAL + "events:\n  level: Warning\n"))
    assert configure_command(cfg, 0).args["event_level"] == "Warning"


def test_cli_overrides_win_over_the_file(tmp_path):
    cfg = read_config(write(tmp_path, MINIMAL), {"journal.path": "/tmp/j.db", "cluster.context": None})
    assert cfg.journal.path == "/tmp/j.db"


@pytest.mark.parametrize("text, field, hint", [
    ("base_domain: a.example.com\n", "field namespaces", "required"),
    (MINIMAL + "repos:\n  bindings:\n    - url: not-a-url\n", "field repos.bindings[0].url", "https://host/path.git"),
    (MINIMAL + "repos:\n  bindings:\n    - url: https://me:pw@github.com/x.git\n", "field repos.bindings[0].url", "environment variable"),
    (MINIMAL + "journl:\n  path: x\n", "field journl", "unknown field"),
    (MINIMAL + "log:\n  format: xml\n", "field log.format", "'plain' or 'json'"),
    (MINIMAL + "http:\n  listen: eighty\n", "field http.listen", "HOST:PORT"),
    (MINIMAL + "journal:\n  snapshot_every: 0\n", "field journal.snapshot_every", "must be 1 or more (got 0)"),
    ("namespaces: [ok, Bad_NS]\nbase_domain: x.example.com\n", "field namespaces[1]: 'Bad_NS'", "DNS label"),
    (MINIMAL + "workspace:\n  storage_class: fast\n  size: lots\n", "field workspace.size", "'1Gi'"),
    (MINIMAL + "workspace:\n  storage_class: Fast SSD\n", "field workspace.storage_class", "DNS subdomain"),
    (MINIMAL + "workspace:\n  access_mode: RWO\n", "field workspace.access_mode", "ReadWriteOnce"),
    (MINIMAL + "events:\n  level: warnings\n", "field events.level", "'Normal' or 'Warning'"),
], ids=["missing-namespaces", "bad-url", "password-in-url", "typo", "log-format", "listen", "snapshot", "namespace-name",
        "workspace-size", "workspace-class", "workspace-access", "events-level"])
def test_a_bad_field_is_named_with_its_file_and_a_fix(tmp_path, text, field, hint):
    path = write(tmp_path, text)
    msg = error_of(path)
    assert msg.startswith(f"kfold: config {path}: {field}")
    assert hint in msg


def test_broken_yaml_names_the_line(tmp_path):
    msg = error_of(write(tmp_path, "namespaces: [a\nbase_domain: x\n"))
    assert "not valid YAML at line" in msg


def test_a_missing_file_says_what_to_pass(tmp_path):
    msg = error_of(tmp_path / "nope.yaml")
    assert "cannot read" in msg and "--config" in msg


@pytest.mark.parametrize("text, line", [
    ("namespaces: sessions\n", "field namespaces: must be a list (e.g. [a, b], or one '- item' per line) (got 'sessions')"),
    (MINIMAL + "executor:\n  threads: many\n", "field executor.threads: must be a whole number (got 'many')"),
    (MINIMAL + "executor:\n  threads: 2.5\n", "field executor.threads: must be a whole number (got 2.5)"),
    (MINIMAL + "leader:\n  enabled: maybe\n", "field leader.enabled: must be true or false (got 'maybe')"),
    (MINIMAL + "leader:\n  retry_seconds: 0\n", "field leader.retry_seconds: must be more than 0 (got 0)"),
    (MINIMAL + "cluster: local\n", "field cluster: must be a mapping of its fields (see docs/config.md) (got 'local')"),
    (MINIMAL + "tenants: [acme]\n", "field tenants: must be a mapping ('key: value' lines) (got ['acme'])"),
    ("namespaces: []\n", "field namespaces: needs at least 1 item(s) (got [])"),
], ids=["tuple", "int", "fraction", "bool", "gt", "model", "dict", "empty"])
def test_a_wrong_type_is_said_in_kfolds_words(tmp_path, text, line):
    path = write(tmp_path, text)
    assert error_of(path) == f"kfold: config {path}: {line}"


@pytest.mark.parametrize("text, field, meant", [
    (MINIMAL + "journl:\n  path: x\n", "journl", "journal"),
    (MINIMAL + "journal:\n  pathh: x\n", "journal.pathh", "journal.path"),
    (MINIMAL + "repos:\n  bindings:\n    - uri: https://h/x.git\n", "repos.bindings[0].uri", "repos.bindings[0].url"),
    (MINIMAL + "registry:\n  limits:\n    edge@acme: {qpss: 5}\n", "registry.limits.edge@acme.qpss",
     "registry.limits.edge@acme.qps"),
], ids=["top", "nested", "in-a-list", "in-a-mapping"])
def test_an_unknown_field_asks_did_you_mean(tmp_path, text, field, meant):
    path = write(tmp_path, text)
    assert f"kfold: config {path}: field {field}: unknown field; did you mean {meant}?" in error_of(path).splitlines()


def test_an_unknown_field_nothing_resembles_lists_the_fields_there(tmp_path):
    msg = error_of(write(tmp_path, MINIMAL + "journal:\n  retention:\n    zzz: 1\n"))
    assert msg.endswith("field journal.retention.zzz: unknown field; the fields here are archive_dir, keep_snapshots "
                        "(docs/config.md)")


def test_a_bad_value_from_a_flag_blames_the_flag_not_the_file(tmp_path):
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError) as err:
        read_config(path, {"namespaces": ["Bad_NS"]}, {"namespaces": "-n/--namespace"})
    assert str(err.value) == ("kfold: -n/--namespace: 'Bad_NS' is not a namespace name (a DNS label: lower-case "
                              "letters, digits and '-'); e.g. 'team-a'")
    assert str(path) not in str(err.value)


def test_kfold_run_blames_a_bad_namespace_flag(tmp_path):
    import subprocess
    import sys
    path = write(tmp_path, MINIMAL + f"journal:\n  path: {tmp_path / 'j.db'}\n")
    run = subprocess.run([sys.executable, "-m", "kfold", "run", "--config", str(path), "-n", "team-a,Bad_NS"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == ["kfold: -n/--namespace: 'Bad_NS' is not a namespace name (a DNS label: "
                                       "lower-case letters, digits and '-'); e.g. 'team-a'"]
