"""/readyz names what it waits for; unknown paths and methods are refused."""
from types import SimpleNamespace

from kfold.daemon.http import HttpServer, Metrics, routes_for


def observer(kind, synced):
    return SimpleNamespace(cluster="local", namespace="ns", kind=kind, synced=synced, restarts={"gone": 2},
                           optional=False)


def test_readyz_waits_for_every_initial_list_and_names_the_missing_ones():
    routes = routes_for(SimpleNamespace(_tasks=[]), [observer("Pod", True), observer("Session", False)], Metrics())
    assert routes["/readyz"]() == (503, "text/plain", "waiting for initial list: local/ns/Session\n")


def test_metrics_count_watch_restarts_by_reason():
    text = Metrics().render([observer("Pod", True)], journal_bytes=10, skew_ms=None, seq=3)
    assert 'kfold_watch_restarts_total{cluster="local",kind="Pod",namespace="ns",reason="gone"} 2.0' in text
    assert "kfold_state_seq 3.0" in text


def test_only_get_on_known_paths_is_served():
    server = HttpServer("127.0.0.1", 0, {"/healthz": lambda: (200, "text/plain", "ok\n")})
    assert server._route(["POST", "/healthz"])[0] == 405
    assert server._route(["GET", "/nope"])[0] == 404
    assert server._route(["GET", "/healthz?x=1"]) == (200, "text/plain", "ok\n")
