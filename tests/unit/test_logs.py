"""Logs carry object keys as fields, in JSON or plain form; transitions' chatter is silenced."""
import io
import json
import logging

from kfold.daemon import logs


def emit(fmt):
    out = io.StringIO()
    logs.setup(fmt, "info", stream=out)
    logging.getLogger("kfold.executor").info("effect delete -> ok", extra={"key": "local/ns/demo-g1", "result": "ok"})
    logging.getLogger("transitions.core").info("Finished processing state Pending exit callbacks.")
    return out.getvalue().strip().splitlines()


def test_json_logs_are_one_object_per_line_with_the_object_key():
    (line,) = emit("json")
    rec = json.loads(line)
    assert rec["msg"] == "effect delete -> ok" and rec["key"] == "local/ns/demo-g1" and rec["result"] == "ok"
    assert rec["level"] == "info" and rec["logger"] == "kfold.executor"


def test_plain_logs_append_the_fields():
    (line,) = emit("plain")
    assert line.endswith("effect delete -> ok key=local/ns/demo-g1 result=ok")


def test_json_timestamps_carry_milliseconds_and_the_offset():
    import re
    (line,) = emit("json")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d", json.loads(line)["ts"])


def test_the_level_is_honoured_and_urllib3_retry_chatter_is_silenced():
    out = io.StringIO()
    logs.setup("plain", "warning", stream=out)
    logging.getLogger("kfold.executor").info("hidden at warning")
    logging.getLogger("urllib3.connectionpool").warning("Retrying (Retry(total=2)) after connection broken by "
                                                        "'NewConnectionError(<CheckedHTTPSConnection>)'")
    logging.getLogger("kfold.observer").warning("shown")
    assert out.getvalue().strip().splitlines()[-1].endswith("kfold.observer: shown")
    assert "hidden" not in out.getvalue() and "Retrying" not in out.getvalue()


def test_run_log_level_flag_overrides_the_config():
    from kfold.cli import build_parser
    from kfold.cli.commands.run import _overrides
    args = build_parser("run").parse_args(["run", "--config", "c.yaml", "--log-level", "debug", "-n", "a,b", "-n", "c"])
    over = _overrides(args)
    assert over["log.level"] == "debug" and over["namespaces"] == ["a", "b", "c"]


def test_a_recurring_problem_is_one_warning_then_debug_then_a_reminder():
    from kfold.daemon.leader import Repeats
    now = [0.0]
    out = io.StringIO()
    logs.setup("plain", "debug", stream=out)
    r = Repeats(logging.getLogger("kfold.leader"), remind_s=300, monotonic=lambda: now[0])
    for t in (0, 2, 4, 301, 303):
        now[0] = t
        r.warn("leader: lease ns/kfold: connection refused")
    levels = [line.split()[2] for line in out.getvalue().splitlines()]
    assert levels == ["WARNING", "DEBUG", "DEBUG", "WARNING", "DEBUG"]
    r.clear()
    r.warn("leader: lease ns/kfold: connection refused")
    assert out.getvalue().splitlines()[-1].split()[2] == "WARNING"
