"""The registry holds a credential read: N reaches cost O(1) store reads, and a rotation is noticed
within ``credential_refresh_s``, or soon after a 401 (issue 33 item 7; kfold.registry.reach).

The store counts its reads; the monotonic clock is the test's. The wire-level version (a stub
apiserver serving the Secrets, ``kfold run``'s transport) is tests/contract/test_registry_held_secrets.py.
"""
import threading

import pytest

from kfold.registry import (
    CredentialMissing, Kubeconfig, MemoryCredentials, NotRegistered, Registration, RegistrationIndex, Registry,
)
from kfold.registry.reach import CREDENTIAL_REFRESH_S, UNAUTHORIZED_REREAD_S

KUBECONFIG = """apiVersion: v1
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: %s}}]
"""


class CountingStore(MemoryCredentials):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, ref):
        self.reads += 1
        return super().get(ref)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def world(tmp_path):
    index, store, clock = RegistrationIndex(tmp_path), CountingStore(), Clock()
    index.update("acme", lambda rs: (Registration(name="edge", tenant="acme", registered_at=1),))
    store.put("acme.edge", Kubeconfig(KUBECONFIG % "old"))
    registry = Registry(index, store, monotonic=clock)
    yield registry, store, clock, index
    registry.close()


def token(client) -> str:
    return client.configuration.api_key["BearerToken"]


def test_n_reaches_read_the_credential_once(world):
    registry, store, clock, _ = world
    clients = {id(registry.reach("acme", "edge")) for _ in range(500)}
    assert len(clients) == 1
    assert store.reads == 1


def test_a_rotated_credential_is_used_once_the_refresh_interval_has_passed(world):
    registry, store, clock, _ = world
    first = registry.reach("acme", "edge")
    store.put("acme.edge", Kubeconfig(KUBECONFIG % "new"))
    clock.t += CREDENTIAL_REFRESH_S - 1
    assert registry.reach("acme", "edge") is first and store.reads == 1
    clock.t += 1
    rotated = registry.reach("acme", "edge")
    assert rotated is not first and token(rotated) == "Bearer new" and store.reads == 2
    assert registry.reach("acme", "edge") is rotated and store.reads == 2


def test_the_same_credential_read_again_keeps_its_client(world):
    registry, store, clock, _ = world
    first = registry.reach("acme", "edge")
    clock.t += CREDENTIAL_REFRESH_S
    assert registry.reach("acme", "edge") is first and store.reads == 2


def test_a_401_makes_the_next_reach_read_again_but_a_lasting_401_costs_one_read_per_interval(world):
    registry, store, clock, _ = world
    first = registry.reach("acme", "edge")
    store.put("acme.edge", Kubeconfig(KUBECONFIG % "new"))   # the old token was revoked first
    first.note_request("GET", "http://127.0.0.1:9/api/v1/namespaces/sb/pods", 401)
    for _ in range(100):                                     # within the interval: no read per request
        assert registry.reach("acme", "edge") is first
    assert store.reads == 1
    clock.t += UNAUTHORIZED_REREAD_S
    rotated = registry.reach("acme", "edge")
    assert token(rotated) == "Bearer new" and store.reads == 2
    rotated.note_request("GET", "http://127.0.0.1:9/api/v1/namespaces/sb/pods", 401)   # still refused
    for _ in range(100):
        registry.reach("acme", "edge")
    clock.t += UNAUTHORIZED_REREAD_S
    registry.reach("acme", "edge")
    assert store.reads == 3


def test_a_re_registration_seen_in_the_index_reads_the_new_credential_at_once(world):
    """``kfold cluster register`` in another process rewrites the record (a new ``registered_at``)."""
    registry, store, clock, index = world
    first = registry.reach("acme", "edge")
    store.put("acme.edge", Kubeconfig(KUBECONFIG % "new"))
    index.update("acme", lambda rs: (Registration(name="edge", tenant="acme", registered_at=2),))
    assert token(registry.reach("acme", "edge")) == "Bearer new" and first is not registry.reach("acme", "edge")


def test_a_deregistration_applies_at_once_and_a_destroyed_credential_at_the_next_read(world):
    registry, store, clock, index = world
    registry.reach("acme", "edge")
    index.update("acme", lambda rs: ())
    with pytest.raises(NotRegistered):
        registry.reach("acme", "edge")
    index.update("acme", lambda rs: (Registration(name="edge", tenant="acme", registered_at=1),))
    registry.reach("acme", "edge")
    store.destroy("acme.edge")
    clock.t += CREDENTIAL_REFRESH_S
    with pytest.raises(CredentialMissing):
        registry.reach("acme", "edge")
    assert registry.clients() == []


def test_concurrent_reaches_that_find_the_read_due_share_one_read(world):
    registry, store, clock, _ = world

    class SlowStore(CountingStore):
        def get(self, ref):
            gate.wait(0.2)
            return super().get(ref)

    gate = threading.Event()
    slow = SlowStore()
    slow.put("acme.edge", Kubeconfig(KUBECONFIG % "old"))
    registry.set_credentials(slow)
    threads = [threading.Thread(target=registry.reach, args=("acme", "edge")) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert slow.reads == 1
