"""A cluster without the Repo CRD runs Sessions (issue 36 item 6), on the real apiserver.

The CRDs are cluster-scoped, so one test cannot remove the Repo CRD from the shared apiserver
without breaking every other test on it. Instead ``KFOLD_TEST_ABSENT_KIND=Repo`` (a test-only hook,
kfold.daemon.boot._absent_version) points kfold's Repo watch at a version of kfold.dev the
apiserver does not serve (same group and plural, so the RBAC for repos allows it): the apiserver
answers its list exactly as on a cluster without the CRD (404 NotFound). kfold runs with the trimmed ServiceAccount RBAC of ``kfold manifests``.
"""
from __future__ import annotations

import time

from tests.e2e.test_install import _refusals
from tests.e2e.conftest import install_rbac, service_account_kubeconfig
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, World, session_manifest


def test_without_the_repo_resource_kfold_is_ready_and_runs_a_session_warning_once(
        admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    d = daemon_factory(str(kubeconfig), [namespace])
    started = time.monotonic()
    d.start(wait_ready=False, env={"KFOLD_TEST_ABSENT_KIND": "Repo"})
    d.wait_ready(timeout=30)   # /readyz 200: it never was before this fix
    ready_after = time.monotonic() - started
    w = World(admin, namespace)
    w.co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
    assert w.phase_is("Ready", 1)["podName"] == "demo-g1"
    time.sleep(3)  # the Repo watch would have retried a few times by now, were it still retrying fast
    log = d.log.read_text()
    about = [ln for ln in log.splitlines() if "does not serve Repo" in ln]
    assert len(about) == 1 and "WARNING" in about[0] and "checking again every 60" in about[0], about
    repo_errors = [ln for ln in log.splitlines() if "Repo" in ln and ("ERROR" in ln or "retrying in" in ln)]
    assert not repo_errors, repo_errors
    assert _refusals(log) == [], "the trimmed RBAC refused a request"   # a 403 status, not a timestamp's ,403
    assert ready_after < 30
