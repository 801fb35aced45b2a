"""``registry.credentials: secrets`` over the wire: N requests to a registered cluster cost O(1)
Secret GETs on the home apiserver, and a rotated Secret is used (issue 33 item 7).

Two stub apiservers (registry_stub): the home cluster serves kfold's credential Secret, the
registered cluster ``edge`` serves pods to the tokens it accepts. The registry is built from a
config file by ``open_registry`` and requests go through ``kfold run``'s transport
(``KubeTransport(client_for(...))``, one ``reach`` per request), exactly as the executor sends
them. The Secret GETs are counted where they arrive (the home stub) and where kfold counts them
(the home client's ``requests``, i.e. ``kfold_client_requests_total`` on /metrics).
"""
from __future__ import annotations

import base64
import textwrap

import pytest

from engine.effects.io.transport import KubeTransport, Request
from kfold.daemon.config import read_config
from kfold.daemon.clusters import client_for, open_registry
from kfold.registry.index import RegistrationIndex
from kfold.registry.records import Registration
from kfold.registry.reach import CREDENTIAL_REFRESH_S, UNAUTHORIZED_REREAD_S
from tests.contract.registry_stub import ApiStub, start

SECRET = ("kfold", "kfold-cluster.acme.edge")
PODS = Request(cluster="edge@acme", tenant="acme", method="GET", path="/api/v1/namespaces/sb/pods")
N = 40


class Clock:
    t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def stubs():
    home, edge = start(ApiStub(tokens={"home-token"})), start(ApiStub(tokens={"old"}))
    yield home, edge
    for stub in (home, edge):
        stub.server.shutdown()
        stub.server.server_close()


def store(home: ApiStub, edge: ApiStub, token: str) -> None:
    """What ``kfold cluster register`` leaves in the Secret: the kubeconfig, base64 under ``kubeconfig``."""
    home.secrets[SECRET] = {"kubeconfig": base64.b64encode(edge.kubeconfig(token).encode()).decode()}


@pytest.fixture
def wired(stubs, tmp_path):
    home, edge = stubs
    (tmp_path / "home.kubeconfig").write_text(home.kubeconfig("home-token"))
    RegistrationIndex(tmp_path / "registry" / "index").update(
        "acme", lambda _: (Registration(name="edge", tenant="acme", namespaces=("sb",), registered_at=1),))
    store(home, edge, "old")
    (tmp_path / "config.yaml").write_text(textwrap.dedent(f"""\
        cluster: {{name: local, kubeconfig: {tmp_path / 'home.kubeconfig'}}}
        registry: {{dir: {tmp_path / 'registry'}, credentials: secrets, secrets_namespace: kfold}}
        namespaces: [team]
        tenants: {{team: acme}}
        journal: {{path: {tmp_path / 'journal.db'}}}
        """))
    registry, home_client = open_registry(read_config(str(tmp_path / "config.yaml")))
    registry.monotonic = clock = Clock()
    transport = KubeTransport(client_for(registry, "local"), max_threads=4)
    yield home, edge, registry, home_client, transport, clock
    registry.close()


def secret_gets(home: ApiStub) -> int:
    return sum(1 for a in home.arrived if a.path == "/api/v1/namespaces/kfold/secrets/kfold-cluster.acme.edge")


async def requests(transport: KubeTransport, n: int = N) -> list[int]:
    return [(await transport.call(PODS)).status for _ in range(n)]


async def test_n_requests_to_a_registered_cluster_cost_one_secret_get(wired):
    home, edge, registry, home_client, transport, _clock = wired
    assert await requests(transport) == [200] * N
    assert len(edge.arrived) == N
    assert secret_gets(home) == 1
    assert home_client.requests[("get", "secrets", "200")] == 1, "what /metrics shows"


async def test_a_rotated_secret_is_used_after_the_refresh_interval_while_the_old_token_still_works(wired):
    home, edge, registry, _home_client, transport, clock = wired
    await requests(transport, 3)
    edge.tokens = {"old", "new"}
    store(home, edge, "new")
    clock.t += CREDENTIAL_REFRESH_S - 1
    await requests(transport, 3)
    assert {a.authorization for a in edge.arrived} == {"Bearer old"}
    clock.t += 1
    assert await requests(transport) == [200] * N
    assert edge.arrived[-1].authorization == "Bearer new"
    assert secret_gets(home) == 2


async def test_a_secret_rotated_after_the_old_token_was_revoked_is_read_after_the_first_401(wired):
    home, edge, registry, _home_client, transport, clock = wired
    await requests(transport, 3)
    edge.tokens = {"new"}                     # revoked first, then the Secret is updated
    store(home, edge, "new")
    assert await requests(transport) == [401] * N, "within UNAUTHORIZED_REREAD_S of the last read"
    assert secret_gets(home) == 1, "a 401 does not cost a read per request"
    clock.t += UNAUTHORIZED_REREAD_S
    assert await requests(transport) == [200] * N
    assert edge.arrived[-1].authorization == "Bearer new"
    assert secret_gets(home) == 2


async def test_a_lasting_401_costs_one_secret_get_per_interval_not_per_request(wired):
    home, edge, registry, _home_client, transport, clock = wired
    edge.tokens = set()
    for _ in range(5):
        assert await requests(transport, 10) == [401] * 10
        clock.t += UNAUTHORIZED_REREAD_S
    assert secret_gets(home) == 5
