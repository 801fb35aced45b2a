"""Pod machine rules the mutation survivors showed unpinned (issue 34, item 3).

A create's manifest may not name another namespace than its key's; a delete is never sent without
a complete fence (uid and resourceVersion preconditions: DESIGN.md, "only objects kfold owns are
deleted, fenced"); a read refused while fencing a delete fails that delete with the server's reason.
"""
from __future__ import annotations

from tests.harness import T0
from tests.scenario.test_pod_world import SECOND, answers, ask_delete, deletes, one, pod, world


def test_a_manifest_naming_another_namespace_is_refused_before_anything_is_sent(frozen_world):
    s = world()
    manifest = {"metadata": {"namespace": "elsewhere"}, "spec": {}}
    effects = s.command("probe.tell", T0, machine="pod", key="local/ns/s1-g1", message="create",
                        args={"reply_to": "probe", "reply_key": "s1", "manifest": manifest,
                              "session": "s1", "generation": 1})
    assert effects == ()
    [(message, args)] = answers(s)
    assert message == "pod_create_failed" and "names pod elsewhere/s1-g1" in args["reason"]


def test_a_pod_seen_without_a_resource_version_is_read_before_its_delete(frozen_world):
    """A DELETE is sent only with both preconditions; an observation missing one gives a quorum read."""
    s = world()
    s.observe(pod("A", ""), T0)
    read = one(ask_delete(s, T0), "get")
    assert deletes(s) == []
    d = one(s.outcome(read, "ok", T0 + SECOND, obj=pod("A", "4")), "delete")
    assert (d.uid, d.rv) == ("A", "4")


def test_a_read_refused_while_fencing_a_delete_fails_that_delete_with_the_reason(frozen_world):
    s = world()
    read = one(ask_delete(s, T0), "get")
    s.outcome(read, "forbidden", T0 + SECOND, status_reason="Forbidden",
              message='pods "s1-g1" is forbidden: User "kfold" cannot get')
    [(message, args)] = answers(s)
    assert message == "pod_delete_failed" and args["pod"] == "local/ns/s1-g1"
    assert "could not read pod ns/s1-g1 to fence its delete" in args["reason"] and "cannot get" in args["reason"]
    assert deletes(s) == []
