"""A refusal only an operator can fix (missing CRD, RBAC) is named with the fix, logged as an
error and shown by /readyz; kfold keeps retrying and recovers once it is fixed."""
import logging

import pytest

from kfold.daemon.http import Metrics, routes_for
from tests.contract.test_observer import Harness, stub  # noqa: F401 - the stub fixture
from tests.contract.watch_stub import ListReply, StatusReply, pod


@pytest.mark.parametrize("resource, named", [
    (("kfold.dev/v1alpha1", "Session", "sessions"), ("its CRD is not installed", "kfold manifests")),
    # a built-in kind has no CRD to install: a 404 means the kubeconfig points at something else
    (("v1", "Pod", "pods"), ("a built-in kind", "not a Kubernetes apiserver", "kubeconfig")),
])
async def test_a_missing_kind_is_named_with_the_fix_until_it_is_served(stub, caplog, resource, named):  # noqa: F811
    stub.lists = [StatusReply(404, "NotFound", "the server could not find the requested resource"),
                  ListReply([pod("a", "5")], rv="10")]
    h = Harness(stub, resource=resource)
    seen = []
    with caplog.at_level(logging.ERROR, logger="kfold"):
        await h.run_until(lambda: seen.append(h.observer.problem) or h.observer.synced)
    assert any(p and all(n in p for n in named) for p in seen), seen
    assert any(named[0] in r.getMessage() for r in caplog.records)
    assert h.observer.problem is None  # fixed: the problem is gone once the list succeeds


async def test_a_forbidden_list_names_the_rbac_fix_and_readyz_shows_it(stub):  # noqa: F811
    stub.lists = [StatusReply(403, "Forbidden", 'pods is forbidden: User "kfold" cannot list resource "pods"')] * 50
    h = Harness(stub)
    await h.run_until(lambda: h.observer.problem is not None)
    assert "kfold may not list/watch Pod" in h.observer.problem and "RBAC" in h.observer.problem
    status, _, body = routes_for(object(), [h.observer], Metrics())["/readyz"]()
    assert status == 503 and "cannot list resource" in body and "kfold manifests" in body


async def test_a_kind_that_may_be_absent_is_ready_without_its_crd_warns_once_and_rechecks_paced(stub, caplog):  # noqa: F811
    """``may_be_absent`` (the Repo watch): a 404 to the list is not a failure to retry fast but a
    cluster without the CRD; /readyz is 200 without it, one WARNING, re-checked every
    ``absent_recheck_s``; once the CRD is installed the kind is listed and watched as usual."""
    missing = StatusReply(404, "NotFound", "the server could not find the requested resource")
    stub.lists = [missing, missing, missing, ListReply([pod("a", "5")], rv="10")]
    h = Harness(stub, may_be_absent=True, absent_recheck_s=45.0)
    ready_while_absent = []

    def probe() -> bool:
        if h.observer.absent:
            ready_while_absent.append(routes_for(object(), [h.observer], Metrics())["/readyz"]()[:3:2])
        return h.observer.synced
    with caplog.at_level(logging.INFO, logger="kfold"):
        await h.run_until(probe)
    assert ready_while_absent and set(ready_while_absent) == {(200, "ready\n")}
    assert h.sleeps[:3] == [45.0, 45.0, 45.0] and not h.observer.absent and h.observer.problem is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "does not serve Pod" in warnings[0], warnings
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("serves Pod now" in r.getMessage() for r in caplog.records)
    assert h.observed() == [("ADDED", "a")]
