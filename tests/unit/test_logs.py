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
