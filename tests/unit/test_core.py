"""The fold's contract, with a toy machine: sequence discipline, purity, timers, pending effects,
in-doubt routing, messages, snapshots."""
import pytest

from engine import snapshot
from engine.core import Machines, SequenceError, fold, initial_state
from engine.effects.models import DeleteObject, GetObject
from engine.machines.base import Decision, Machine
from journal.records import Command, Deadline, EffectIssued, Observed, Outcome
from tests.harness import T0, Scenario


class Counter(Decision):
    seen: int = 0
    state: str = "idle"


class Toy(Machine):
    name = "toy"
    decision = Counter
    observes = frozenset({"Pod"})
    commands = frozenset({"toy.poke", "toy.loop"})

    def on_observed(self, ctx, rec):
        key = f"{rec.cluster}/{rec.namespace}/{rec.name}"
        d = ctx.get(key) or Counter()
        ctx.put(key, d.but(seen=d.seen + 1))
        if rec.event == "DELETED":
            ctx.emit(DeleteObject, key, api_version="v1", kind="Pod", namespace=rec.namespace, name=rec.name)

    def on_command(self, ctx, rec):
        if rec.name == "toy.loop":
            ctx.tell("toy", "k", "again")
            return
        ctx.set_timer(rec.target, "wake", ctx.now + 1000)
        ctx.tell("echo", rec.target, "hello", n=1)

    def on_message(self, ctx, key, message, args):
        ctx.tell("toy", key, "again")

    def on_deadline(self, ctx, key, name):
        ctx.put(key, Counter(state=f"woke:{name}"))

    def on_outcome(self, ctx, rec, effect):
        ctx.put(effect.key, Counter(state=f"outcome:{rec.result}"))

    def on_in_doubt(self, ctx, effect):
        ctx.emit(GetObject, effect.key, api_version="v1", kind="Pod", namespace=effect.namespace, name=effect.name)


class Echo(Machine):
    name = "echo"
    decision = Counter

    def on_message(self, ctx, key, message, args):
        ctx.put(key, Counter(state=message, seen=args["n"]))


MACHINES = Machines([Toy(), Echo()])


def pod(name, event="MODIFIED", at=T0, seq=-1):
    return Observed(seq=seq, at=at, cluster="c", api_version="v1", kind="Pod", namespace="ns", name=name, event=event)


def test_a_record_must_follow_the_last_sequence_number_exactly():
    s, _ = fold(initial_state(), pod("a", seq=1), MACHINES)
    with pytest.raises(SequenceError, match="gap"):
        fold(s, pod("a", seq=3), MACHINES)
    with pytest.raises(SequenceError, match="repeat"):
        fold(s, pod("a", seq=1), MACHINES)


def test_fold_leaves_the_previous_state_untouched():
    s1, _ = fold(initial_state(), pod("a", seq=1), MACHINES)
    s2, _ = fold(s1, pod("a", seq=2), MACHINES)
    assert s1.table("toy")["c/ns/a"].seen == 1
    assert s2.table("toy")["c/ns/a"].seen == 2


def test_the_same_records_give_byte_identical_states_and_effects():
    def run():
        sc = Scenario(MACHINES)
        for i in range(20):
            sc.feed(pod(f"p{i % 3}", event="DELETED" if i % 5 == 0 else "MODIFIED", at=T0 + i))
        return snapshot.dump(sc.state), sc.transcript()
    assert run() == run()


def test_effect_ids_derive_from_the_causing_record_and_stay_pending_until_the_outcome():
    sc = Scenario(MACHINES)
    sc.feed(pod("a"))
    (eff,) = sc.feed(pod("a", event="DELETED"))
    assert eff.id == "2.0" and eff.machine == "toy"
    assert [e.id for e in sc.state.in_doubt()] == ["2.0"]
    sc.outcome(eff, "not_found", T0)
    assert len(sc.state.pending) == 0
    assert sc.decision("toy", "c/ns/a").state == "outcome:not_found"


def test_a_late_duplicate_outcome_decides_nothing():
    sc = Scenario(MACHINES)
    (eff,) = sc.feed(pod("a", event="DELETED"))
    sc.outcome(eff, "ok", T0)
    before = sc.state.table("toy")
    sc.outcome(eff, "not_found", T0)
    assert sc.state.table("toy") == before


def test_an_in_doubt_effect_goes_back_to_its_machine_which_re_observes():
    sc = Scenario(MACHINES)
    (eff,) = sc.feed(pod("a", event="DELETED"))
    (reread,) = sc.feed(Command(at=T0, name="effect.in_doubt", args={"effect_id": eff.id}))
    assert reread.type == "get" and reread.key == eff.key
    assert eff.id not in sc.state.pending


def test_unissued_effects_are_told_apart_from_effects_in_doubt():
    sc = Scenario(MACHINES, issue_effects=False)
    (eff,) = sc.feed(pod("a", event="DELETED"))
    assert sc.state.unissued() == [eff] and sc.state.in_doubt() == []
    sc.feed(EffectIssued(at=T0, effect=eff.model_dump(mode="json")))
    assert sc.state.in_doubt() == [eff] and sc.state.unissued() == []


def test_timers_fire_once_at_their_due_server_time_and_stale_deadlines_are_ignored():
    sc = Scenario(MACHINES)
    sc.feed(Command(at=T0, name="toy.poke", target="k"))
    assert sc.state.next_due() == T0 + 1000
    assert sc.advance_to(T0 + 999) == []
    assert sc.decision("toy", "k") is None
    sc.advance_to(T0 + 1000)
    assert sc.decision("toy", "k").state == "woke:wake"
    stale = Deadline(at=T0 + 2000, timer="toy:k:wake", machine="toy", key="k", name="wake", due=T0 + 1000)
    sc.feed(Command(at=T0 + 1500, name="toy.poke", target="k"))  # re-armed for T0+2500
    sc.feed(stale)
    assert sc.decision("toy", "k").state == "woke:wake" and sc.state.next_due() == T0 + 2500


def test_messages_reach_other_machines_within_the_same_step():
    sc = Scenario(MACHINES)
    sc.feed(Command(at=T0, name="toy.poke", target="k"))
    assert sc.decision("echo", "k").state == "hello"


def _refusal(sc: Scenario, key: str) -> str:
    q = sc.state.quarantine.get(key)
    assert q is not None, f"{key} is not quarantined: {dict(sc.state.quarantine)}"
    return q.error


def test_a_message_loop_is_a_fold_error_not_a_hang():
    sc = Scenario(MACHINES)
    (log,) = sc.feed(Command(at=T0, name="toy.loop"))
    assert "message loop" in _refusal(sc, "//#toy.loop") and log.level == "error"
    assert sc.decision("toy", "k") is None


def test_an_unknown_command_is_an_error_naming_the_known_ones():
    sc = Scenario(MACHINES)
    sc.feed(Command(at=T0, name="toy.nope"))
    assert "unknown command 'toy.nope'" in _refusal(sc, "//#toy.nope") and "toy.poke" in _refusal(sc, "//#toy.nope")


def test_an_outcome_for_an_unknown_machine_is_an_error():
    sc = Scenario(MACHINES)
    (eff,) = sc.feed(pod("a", event="DELETED"))
    bogus = Outcome(at=T0, effect_id=eff.id, machine="nope", key=eff.key, result="ok")
    sc.feed(bogus)
    assert "unknown machine 'nope'" in _refusal(sc, eff.key)
    assert eff.id not in sc.state.pending  # consumed: the key is not held by it


def test_a_snapshot_plus_the_tail_equals_the_full_replay():
    full = Scenario(MACHINES)
    recs = [pod(f"p{i % 4}", event="DELETED" if i % 3 == 0 else "MODIFIED", at=T0 + i) for i in range(30)]
    for r in recs[:15]:
        full.feed(r)
    snap = snapshot.dump(full.state)
    for r in recs[15:]:
        full.feed(r)
    resumed = snapshot.load(snap, MACHINES)
    tail = full.records[len(full.records) - (full.state.seq - resumed.seq):]
    for r in tail:
        resumed, _ = fold(resumed, r, MACHINES)
    assert snapshot.dump(resumed) == snapshot.dump(full.state)


def test_a_record_without_server_time_gives_handlers_no_now():
    seen = []

    class Peek(Machine):
        name = "peek"
        commands = frozenset({"peek"})

        def on_command(self, ctx, rec):
            seen.append(ctx.now)

    sc = Scenario(Machines([Peek()]))
    sc.feed(Command(at=T0, name="peek"))
    sc.feed(Command(at=None, name="peek"))
    assert seen == [T0, None]


def test_the_fold_step_is_what_machines_are_typed_against():
    from engine.core import StepContext
    from engine.machines.base import Ctx
    assert isinstance(StepContext(initial_state()), Ctx)


def test_now_on_a_cluster_is_the_records_time_only_when_that_clusters_clock_stamped_it():
    """Clusters' clocks may be hours apart (kfold sim, seed 37): a due time for one cluster is only
    computed from a record its own clock stamped; a record of unknown origin answers for any."""
    from engine.core import StepContext
    ctx = StepContext(initial_state())
    ctx._begin(Observed(at=T0, cluster="local", api_version="v1", kind="Pod", namespace="ns", name="p",
                        event="ADDED"))
    assert (ctx.now_on("local"), ctx.now_on("east"), ctx.now_on("")) == (T0, None, T0)
    ctx._begin(EffectIssued(at=T0 + 5, effect={"id": "1.0", "cluster": "east"}))
    assert (ctx.now_on("east"), ctx.now_on("local")) == (T0 + 5, None)
    ctx._begin(Command(at=T0 + 7, name="toy.poke"))
    assert ctx.now_on("east") == T0 + 7 and ctx.now_on("local") == T0 + 7


def test_an_in_doubt_command_is_on_the_clock_of_its_effects_cluster():
    """Soak seed 30138: after a restart, recovery stamped ``effect.in_doubt`` on the home cluster's
    clock, and the pod machine armed a delete budget on east (an hour ahead) from it: it fired at
    once. The daemon stamps it on the effect's cluster's clock, and the fold reads it so."""
    from immutables import Map
    from engine.core import Pending, State, StepContext
    effect = GetObject(id="1.0", machine="pod", key="east/team/p", cluster="east", api_version="v1", kind="Pod",
                       namespace="team", name="p")
    ctx = StepContext(State(seq=1, pending=Map({"1.0": Pending(effect, issued=True)})))
    ctx._begin(Command(at=T0, name="effect.in_doubt", args={"effect_id": "1.0"}))
    assert (ctx.now_on("east"), ctx.now_on("local")) == (T0, None)
