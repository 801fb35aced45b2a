"""``kfold run``'s executor feeds each cluster's server clock from that cluster's own replies
(issue 33, item 11; DESIGN invariant 2, one server clock per cluster): a registered cluster whose
clock is an hour behind the home cluster's never moves the home clock, and an outcome from it is
stamped on its own clock."""
from __future__ import annotations

from email.utils import formatdate

from engine.effects.io.clock import ServerClocks
from engine.effects.io.executor import Backoff
from engine.effects.io.transport import Request, Response
from engine.effects.models import GetObject
from kfold.daemon.boot import executor_factory
from tests.harness import T0

HOME_MS, EDGE_MS = T0, T0 - 3_600_000   # the registered cluster's clock runs an hour behind


def _date(ms: int) -> str:
    return formatdate(ms / 1000, usegmt=True)


class TwoApiservers:
    """Each cluster's apiserver answers with its own Date."""

    def __init__(self) -> None:
        self.sent: list[Request] = []

    async def call(self, req: Request) -> Response:
        self.sent.append(req)
        at = EDGE_MS if req.cluster == "edge@acme" else HOME_MS
        return Response(200, {"Date": _date(at)}, {"kind": "Pod", "metadata": {"name": "demo-g1", "uid": "u"}})

    async def close(self) -> None:
        pass


def _read(cluster: str, tenant: str = "") -> GetObject:
    return GetObject(id=f"1.{cluster}", machine="session", key=f"{cluster}/sb/demo", cluster=cluster, tenant=tenant,
                     api_version="v1", kind="Pod", namespace="sb", name="demo-g1")


async def test_each_clusters_replies_feed_its_own_server_clock():
    clocks = ServerClocks(home="local")
    transport = TwoApiservers()
    executor = executor_factory(transport, clocks, env={}, backoff=Backoff(), metrics=None)(_sink)
    home = await executor.run(_read("local"))
    edge = await executor.run(_read("edge@acme", "acme"))
    assert [r.cluster for r in transport.sent] == ["local", "edge@acme"]
    assert abs(clocks.now_ms("local") - HOME_MS) < 60_000, "the home clock is the home apiserver's"
    assert abs(clocks.now_ms("edge@acme") - EDGE_MS) < 60_000, "the registered cluster's clock is its own"
    assert abs(home.at - HOME_MS) < 60_000 and abs(edge.at - EDGE_MS) < 60_000, "each outcome on its cluster's clock"


async def _sink(_outcome) -> None:
    pass
