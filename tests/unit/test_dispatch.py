"""Each machine's one dispatch table (engine.machines.base.Dispatch) and the one retry policy
(engine.backoff): an unknown (phase, event) pair is a typed error naming both, a pair has one
handler, and the policy answers as each request's bounds say."""
from __future__ import annotations

import pytest

from engine import backoff
from engine.machines.base import Dispatch, IllegalTransition, UnknownEvent, ignore
from engine.machines.base import Table
from engine.machines.pod.machine import DISPATCH as POD, POD_KEYS, Budget, PodMachine
from engine.machines.pod.machine import PHASES as POD_PHASES
from engine.machines.repo.machine import DISPATCH as REPO, REPO_KEYS
from engine.machines.session.machine import DISPATCH as SESSION, UNTRACKED
from engine.machines.session.model import PHASES as SESSION_PHASES
from engine.seams import CreatePod, DeletePod, MESSAGES, PodCreated


class Odd:
    """An event no machine knows."""


@pytest.mark.parametrize("table", [POD, REPO, SESSION], ids=lambda t: t.machine)
def test_an_unknown_pair_is_a_typed_error_naming_both(table):
    with pytest.raises(UnknownEvent) as err:
        table.handler("nowhere", Odd)
    assert isinstance(err.value, IllegalTransition)
    assert (err.value.machine, err.value.phase, err.value.event) == (table.machine, "nowhere", "Odd")
    assert "Odd" in str(err.value) and "'nowhere'" in str(err.value)


def test_a_second_row_for_one_pair_is_refused():
    with pytest.raises(ValueError, match="two rows for event Odd in phase 'a'"):
        Dispatch("toy", [("a", Odd, ignore), (("b", "a"), Odd, ignore)])


def test_a_row_naming_neither_a_phase_nor_a_declared_kind_is_refused():
    phases = Table("toy", ["idle", "busy"], [("go", "idle", "busy")], "idle")
    Dispatch("toy", [("idle", Odd, ignore), ("absent", Odd, ignore)], phases=phases, kinds=("absent",))
    with pytest.raises(ValueError, match="'create', which is neither a phase of 'toy' nor a declared kind"):
        Dispatch("toy", [(("idle", "create"), Odd, ignore)], phases=phases, kinds=("absent",))


def test_every_message_a_machine_can_receive_has_a_row_in_every_phase():
    phases = {"pod": POD_KEYS, "repo": REPO_KEYS, "session": SESSION_PHASES + (UNTRACKED,)}
    for (machine, _name), model in MESSAGES.items():
        table = {"pod": POD, "repo": REPO}.get(machine, SESSION)
        for phase in phases[machine] if model is not MESSAGES[("pod", "ensure_namespace")] else ("namespace",):
            assert table.handler(phase, model), (machine, phase, model.__name__)


@pytest.mark.parametrize("table", [POD, REPO, SESSION], ids=lambda t: t.machine)
def test_a_table_keys_on_its_machines_phases_and_names_every_other_key_for_what_it_is(table):
    keys = {phase for phase, _event, _handler in table.pairs()}
    assert keys == set(table.table.states) | set(table.kinds)
    assert not set(table.table.states) & set(table.kinds)


def test_the_pod_table_routes_by_the_pods_phase_not_by_its_operation():
    assert set(POD_PHASES) == {"idle", "creating", "confirming", "deleting", "reading", "terminating"}
    for phase in ("creating", "confirming"):
        assert POD.handler(phase, CreatePod).__name__ == "_create_again"
    assert POD.handler("creating", DeletePod).__name__ == "_delete_during_create"   # a refused create's backoff ends
    assert POD.handler("confirming", DeletePod).__name__ == "_delete_after_create"
    for phase in ("deleting", "reading", "terminating"):
        assert POD.handler(phase, CreatePod).__name__ == "_create_while_deleting"
    for operation in ("create", "delete"):
        with pytest.raises(UnknownEvent):
            POD.handler(operation, CreatePod)
    assert POD.handler("idle", Budget) is ignore
    assert PodMachine.questions == frozenset({"uid"})


def test_a_reply_for_a_session_kfold_no_longer_tracks_releases_only_a_created_pod():
    assert SESSION.handler(UNTRACKED, PodCreated).__name__ == "created_for_none"
    assert SESSION.handler("Creating", PodCreated).__qualname__ == "pod_created"
    assert SESSION.handler("Ready", PodCreated).__qualname__ == "pod_created_late"


# -- the one retry policy -----------------------------------------------------------------------

def test_a_timed_request_waits_the_backoff_on_server_time_or_the_servers_hint():
    assert backoff.next_try(backoff.POD_READ, 1, now=10_000) == 10_000 + backoff.BASE_MS
    assert backoff.next_try(backoff.POD_READ, 3, now=0) == 4 * backoff.BASE_MS
    assert backoff.next_try(backoff.POD_READ, 30, now=0) == backoff.CAP_MS
    assert backoff.next_try(backoff.POD_READ, 1, now=0, hint_ms=7_000) == 7_000
    assert backoff.next_try(backoff.NAMESPACE, 1, now=0) == 2 * backoff.BASE_MS   # its step: delay_ms(n)


def test_without_server_time_a_few_repeats_at_once_then_fail_or_wait():
    for n in range(1, backoff.MAX_UNTIMED + 1):
        assert backoff.next_try(backoff.SESSION_CREATE, n) == backoff.AT_ONCE
    assert backoff.next_try(backoff.SESSION_CREATE, backoff.MAX_UNTIMED + 1) == backoff.FAIL
    assert backoff.next_try(backoff.SESSION_REREAD, backoff.MAX_UNTIMED + 1) == backoff.WAIT
    assert backoff.next_try(backoff.NAMESPACE, 4) == backoff.AT_ONCE


@pytest.mark.parametrize("policy", [backoff.NAMESPACE, backoff.REPO_OP, backoff.ENDPOINT], ids=lambda p: p.name)
def test_a_limited_request_is_terminal_at_its_limit_whatever_the_clock(policy):
    assert backoff.next_try(policy, policy.limit - 1, now=0) != backoff.FAIL
    assert backoff.next_try(policy, policy.limit, now=0) == backoff.FAIL
    assert backoff.next_try(policy, policy.limit) == backoff.FAIL
    assert backoff.exhausted(policy, policy.limit) and not backoff.exhausted(policy, policy.limit - 1)


def test_an_untimed_policy_never_waits_on_the_clock():
    assert backoff.next_try(backoff.REPO_OP, 1, now=5_000) == backoff.AT_ONCE
    assert backoff.next_try(backoff.ENDPOINT, 0, now=5_000) == backoff.AT_ONCE
