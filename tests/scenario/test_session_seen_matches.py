"""session.seen.matches: an observed Service or Ingress is taken for published, with no write, only
when it already says everything kfold's manifest sets: its labels, owner and spec (a replace would
change nothing). Labels others added and fields the apiserver filled in are not compared."""
from __future__ import annotations

from engine.machines.session import seen
from engine.machines.session.seen import SeenEndpoint

_OWNER = [{"apiVersion": "kfold.dev/v1", "kind": "Session", "name": "s1", "uid": "u-1"}]
_LABELS = {"app.kubernetes.io/managed-by": "kfold", "kfold.dev/session": "s1", "app.kubernetes.io/part-of": "s1"}
_SPEC = {"selector": {"kfold.dev/session": "s1"}, "ports": [{"name": "app", "port": 8080}]}
_MANIFEST = {"metadata": {"name": "s1", "labels": _LABELS, "ownerReferences": _OWNER}, "spec": _SPEC}


def _seen(labels: dict, spec: dict | None = None) -> SeenEndpoint:
    return SeenEndpoint(uid="u-svc", rv="7", owned=True,
                        shape={"metadata": {"labels": labels, "ownerReferences": _OWNER}, "spec": spec or _SPEC})


def test_an_endpoint_saying_what_the_manifest_sets_matches_extra_labels_and_filled_fields_aside():
    extra = {**_LABELS, "team": "x"}
    assert seen.matches(_seen(extra, {**_SPEC, "clusterIP": "10.0.0.9"}), _MANIFEST)


def test_an_endpoint_lacking_or_changing_a_label_kfold_sets_does_not_match():
    lacking = {k: v for k, v in _LABELS.items() if k != "app.kubernetes.io/part-of"}
    assert not seen.matches(_seen(lacking), _MANIFEST)
    assert not seen.matches(_seen({**_LABELS, "app.kubernetes.io/part-of": "other"}), _MANIFEST)
