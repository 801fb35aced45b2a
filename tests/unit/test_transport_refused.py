"""A request refused by the registry's client before sending is ``Refused`` (nothing happened),
while a failure after sending is a ``TransportError`` (in doubt)."""
import pytest

from engine.effects.io.transport import KubeTransport, Refused, Request, TransportError
from kfold.registry.errors import OutOfBounds


class ClientThatRefuses:
    def param_serialize(self, *a, **k):
        raise OutOfBounds("namespace other is outside the bound of cluster c")


class ClientThatResets:
    def param_serialize(self, method, path, **k):
        return method, path, {}, None, None

    def call_api(self, *a, **k):
        raise ConnectionResetError("connection reset by peer")


REQ = Request(cluster="c", tenant="t", method="DELETE", path="/api/v1/namespaces/other/pods/p")


async def test_an_out_of_bounds_request_is_refused_not_in_doubt():
    t = KubeTransport(lambda cluster, tenant: ClientThatRefuses())
    with pytest.raises(Refused, match="outside the bound"):
        await t.call(REQ)
    await t.close()


async def test_a_reset_after_sending_is_in_doubt():
    t = KubeTransport(lambda cluster, tenant: ClientThatResets())
    with pytest.raises(TransportError, match="ConnectionResetError"):
        await t.call(REQ)
    await t.close()


def test_clients_from_the_registry_never_retry_behind_kfolds_back():
    from kubernetes.client import ApiClient, Configuration
    from kfold.registry.client import tuned
    client = ApiClient(tuned(Configuration()))
    retries = client.rest_client.pool_manager.connection_pool_kw["retries"]
    assert retries is False or retries.total is False
