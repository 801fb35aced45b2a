"""An unreachable apiserver, seen by every observer of a cluster: one ERROR naming the server and
how it was reached, DEBUG for the retries, a WARNING reminder every ``REMIND_S``, and one INFO line
when it answers again (any HTTP answer counts). No client class names in any line."""
from __future__ import annotations

import asyncio
import logging

from urllib3.exceptions import MaxRetryError, NewConnectionError

from engine.effects.io import observer as obs
from engine.effects.io.clock import ServerClock


class _Api:
    class configuration:
        host = "https://10.0.0.1:6443"


class _Resp:
    status, data, headers = 404, b"{}", {}

    def release_conn(self):
        pass

    def close(self):
        pass


def _refused():
    class CheckedHTTPSConnection:
        pass
    return MaxRetryError(None, "/api/v1/pods", reason=NewConnectionError(
        CheckedHTTPSConnection(), "Failed to establish a new connection: [Errno 111] Connection refused"))


async def test_one_error_per_cluster_then_quiet_then_recovery(monkeypatch, caplog):
    monkeypatch.setattr(obs, "_UNREACHABLE", {})
    monkeypatch.setattr(obs, "_ANSWERED", {})
    now, calls = [0.0], [0]
    answer_after = 16   # failed GETs (over both observers) before the server answers

    def open_get(*_a, **_k):
        calls[0] += 1
        if calls[0] <= answer_after:
            raise _refused()
        return _Resp()

    async def sleep(seconds):
        now[0] += 25.0   # each retry round advances the clock: a reminder falls due after 300 s
        if calls[0] > answer_after + 2:
            raise asyncio.CancelledError
        await asyncio.sleep(0)

    monkeypatch.setattr(obs, "open_get", open_get)

    async def sink(_drafts):
        return None

    observers = [obs.Observer(lambda: _Api(), "local", "v1", kind, plural, "ns", sink, ServerClock(),
                              sleep=sleep, monotonic=lambda: now[0], where="context prod of /k/config")
                 for kind, plural in (("Pod", "pods"), ("Secret", "secrets"))]
    caplog.set_level(logging.DEBUG, logger="kfold.observer")
    ends = await asyncio.gather(*(o.run() for o in observers), return_exceptions=True)   # interleaved
    assert all(isinstance(e, asyncio.CancelledError) for e in ends)
    assert all(o.failures >= 4 for o in observers)   # both failed several times: still one ERROR
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "kfold.observer"]
    errors = [m for lvl, m in lines if lvl == "ERROR" and "reach" in m]
    assert errors == ["cannot reach the apiserver of cluster local at https://10.0.0.1:6443 (context prod of "
                      "/k/config): connection refused; retrying quietly with backoff (a reminder every 300s); "
                      "check the kubeconfig's server and context, and the network"]
    reminders = [m for lvl, m in lines if lvl == "WARNING" and "still cannot reach" in m]
    assert 1 <= len(reminders) <= 2
    assert sum(lvl == "INFO" and "answers again" in m for lvl, m in lines) == 1
    assert sum(lvl == "DEBUG" for lvl, _ in lines) >= 10
    assert not any("CheckedHTTP" in m or "Errno" in m for _, m in lines)
