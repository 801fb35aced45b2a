"""``kfold run`` as its ServiceAccount on the real apiserver (issue 33, item 10): a Session re-read
refused for good (its Role no longer grants ``get`` on sessions) is not repeated at once (on a
backoff, or dropped when the watch brings the Session: kfold's own status write does), and is
reported once (a log line, a Warning Event on the Session); the Session converges (its finalizer
added again, Ready). Before, the refused read was sent again at once: 1700 GETs in 10 s.

The re-read is brought about as a user would: the Session's finalizer is taken off and the Session
changed again while kfold is paused (SIGSTOP), so kfold's re-add, fenced by the resourceVersion it
saw, meets 409 Conflict, and kfold reads the Session again before retrying."""
from __future__ import annotations

import os
import signal
import time

from kubernetes import client

from engine.machines.session.model import FINALIZER
from kfold.daemon.manifests import RULES
from tests.e2e.conftest import install_rbac, service_account_kubeconfig, wait_for
from tests.e2e.test_metrics_limits import metrics, sample
from tests.e2e.test_session_lifecycle import GROUP, PLURAL, VERSION, WEB, session_manifest

WINDOW_S = 10.0
MAX_GETS = 10   # one backoff from 1 s doubling: 1+2+4 s... at most a handful in 10 s, not hundreds


def _role(admin, namespace: str, session_verbs: list[str]) -> None:
    rules = [dict(r, verbs=session_verbs) if "sessions" in r["resources"] else r for r in RULES]
    client.RbacAuthorizationV1Api(admin).patch_namespaced_role("kfold", namespace, {"rules": rules})


def _gets(daemon, code: str) -> float:
    return sample(metrics(daemon), "kfold_client_requests_total",
                  f'{{cluster="local",verb="get",resource="sessions",code="{code}"}}') or 0.0


def test_a_lasting_refusal_of_a_session_read_backs_off_and_clears(admin, cp, namespace, daemon_factory, tmp_path):
    install_rbac(admin, "kfold-e2e", [namespace])
    verbs = next(r["verbs"] for r in RULES if "sessions" in r["resources"])
    _role(admin, namespace, [v for v in verbs if v != "get"])
    kubeconfig = service_account_kubeconfig(admin, cp, "kfold-e2e", tmp_path / "sa.kubeconfig")
    daemon = daemon_factory(str(kubeconfig), [namespace]).start()
    co = client.CustomObjectsApi(admin)
    read = lambda: co.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")  # noqa: E731
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:   # kfold sees the create and the change together: its finalizer patch names the first version
        co.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, session_manifest(namespace, [WEB]))
        co.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo",
                                          {"metadata": {"labels": {"e2e": "touched"}}})
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)

    wait_for(lambda: _gets(daemon, "403") >= 1, 20, what="a refused Session read")
    first = _gets(daemon, "403")
    time.sleep(WINDOW_S)
    refused = _gets(daemon, "403") - first
    assert refused <= MAX_GETS, f"{refused:.0f} refused Session reads in {WINDOW_S:.0f} s: no backoff"
    log = daemon.log.read_text()
    assert log.count("could not read Session") == 1, "a lasting refusal is reported once"
    events = [e for e in client.CoreV1Api(admin).list_namespaced_event(namespace).items if e.reason == "ReadFailed"]
    assert len(events) == 1 and events[0].involved_object.kind == "Session" and "forbidden" in events[0].message

    _role(admin, namespace, verbs)
    wait_for(lambda: FINALIZER in (read()["metadata"].get("finalizers") or []), 30,
             what="the finalizer added again")
    wait_for(lambda: read().get("status", {}).get("phase") == "Ready", 45, what="Session demo Ready")
