"""Fault mapping, against both ports: what the apiserver (or the wire) says -> what the machine sees."""
from __future__ import annotations

import pytest

from engine.effects.io.fake import T2030, Fault
from engine.effects.models import CreateObject, DeleteObject, GetObject, ListObjects
from tests.contract.exec_stub import port  # noqa: F401  (fixture)

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}


def get():
    return GetObject(id="1.0", machine="pod", key="local/work/p", api_version="v1", kind="Pod", namespace="work", name="p")


def create():
    return CreateObject(id="1.0", machine="pod", key="local/work/p", api_version="v1", kind="Pod",
                        namespace="work", name="p", manifest=POD)


def delete():
    return DeleteObject(id="1.0", machine="pod", key="local/work/p", api_version="v1", kind="Pod",
                        namespace="work", name="p", uid="u1", rv="1")


def lister():
    return ListObjects(id="1.0", machine="pod", key="local/work/", api_version="v1", kind="Pod", namespace="work")


@pytest.mark.parametrize("reason, result", [("AlreadyExists", "already_exists"), ("Conflict", "conflict")],
                         ids=["already-exists", "conflict"])
async def test_a_409_is_told_apart_by_the_status_reason_alone(port, reason, result):
    port.server.faults.append(Fault(409, reason))
    out = await port.run(create())
    assert (out.result, out.status_reason, out.code) == (result, reason, 409)


async def test_a_409_without_a_status_reason_is_an_error_not_a_guess(port):
    port.server.faults.append(Fault(409, raw_body=b"<html>conflict</html>"))
    assert (await port.run(create())).result == "error"


async def test_a_404_from_a_proxy_without_a_status_is_no_proof_of_absence(port):
    port.server.faults.append(Fault(404, raw_body=b"<html>not here</html>"))
    assert (await port.run(get())).result == "error"


async def test_a_410_is_gone(port):
    port.server.faults.append(Fault(410, "Expired", "too old resource version"))
    assert (await port.run(lister())).result == "gone"


async def test_a_429_on_a_safe_read_is_retried_no_sooner_than_retry_after(port):
    port.server.faults.append(Fault(429, "TooManyRequests", headers={"Retry-After": "7"}))
    out = await port.run(get())
    assert out.result == "transient" and out.retry_after_ms >= 7000


async def test_a_500_on_a_safe_read_is_retried_with_growing_backoff(port):
    port.server.faults += [Fault(500), Fault(500)]
    first, second = await port.run(get(), attempt=0), await port.run(get(), attempt=3)
    assert first.result == second.result == "transient"
    assert 0 < first.retry_after_ms < second.retry_after_ms


async def test_a_safe_effect_out_of_attempts_goes_to_the_machine(port):
    port.server.faults.append(Fault(503, "ServiceUnavailable"))
    out = await port.run(get(), attempt=5)
    assert out.result == "transient" and out.retry_after_ms is None


@pytest.mark.parametrize("effect", [create, delete], ids=["create", "delete"])
async def test_an_unsafe_effect_is_never_scheduled_for_retry(port, effect):
    port.server.faults.append(Fault(500))
    out = await port.run(effect())
    assert out.result == "transient" and out.retry_after_ms is None
    assert len(port.server.requests) == 1


async def test_a_connection_reset_is_transient_never_not_found(port):
    port.server.faults.append(Fault(reset=True))
    out = await port.run(get())
    assert out.result == "transient" and out.code == 0


async def test_a_lost_reply_after_a_create_leaves_the_object_and_reports_transient(port):
    port.server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
    port.server.faults.append(Fault(reset=True, after_apply=True))
    out = await port.run(create())
    assert out.result == "transient"
    assert port.server.get("v1", "Pod", "work", "p") is not None


async def test_a_list_without_a_date_has_no_server_time(port):
    port.server.server_ms = None
    assert (await port.run(lister())).at is None


async def test_a_list_with_a_garbage_date_has_no_server_time(port):
    port.server.date_header = "yesterday-ish"
    out = await port.run(lister())
    assert out.result == "ok" and out.at is None


async def test_every_reply_advances_the_server_clock(port):
    port.server.server_ms = T2030 + 5_000
    out = await port.run(get())
    assert out.result == "not_found"
    assert T2030 + 5_000 <= port.clock.now_ms() < T2030 + 65_000
    assert out.at is not None and out.at >= T2030 + 5_000


async def test_every_effect_log_line_names_the_kind_and_a_failure_its_message(port, caplog):
    import logging
    caplog.set_level(logging.INFO, logger="kfold.executor")
    await port.run(create())
    port.server.faults.append(Fault(409, "AlreadyExists", "pods \"p\" already exists"))
    await port.run(create())
    lines = [r.getMessage() for r in caplog.records if r.name == "kfold.executor"]
    assert lines[0] == "effect create Pod local/work/p -> ok"
    assert lines[1].startswith("effect create Pod local/work/p -> already_exists: ") and "already exists" in lines[1]
    assert all(r.kind == "Pod" for r in caplog.records if r.name == "kfold.executor")


async def test_a_refused_connection_is_a_transient_outcome_in_words():
    import socket
    from kubernetes.client import ApiClient, Configuration
    from engine.effects.io.clock import ServerClock
    from engine.effects.io.executor import Executor
    from engine.effects.io.transport import KubeTransport
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    conf = Configuration()
    conf.host = f"http://127.0.0.1:{closed}"
    conf.retries = 0
    client = ApiClient(conf)
    sent = []
    executor = Executor(KubeTransport(lambda _c, _t: client, max_threads=1), lambda _c: ServerClock(), sent.append)
    try:
        out = await executor.run(get())
    finally:
        await executor.close()
    assert (out.result, out.message) == ("transient", "connection refused")
