"""Which Session answers for a slot does not depend on the order a table holds its keys in.

A table (an ``immutables.Map``) iterates in its keys' string-hash order, which differs between the
daemon's process and ``kfold replay``'s (``PYTHONHASHSEED``). Two records placed on one slot (the
same target cluster, namespace and name, from two home clusters) must resolve to the same key in
every process: the index built from the table and the question another machine asks agree."""
from __future__ import annotations

import itertools

from immutables import Map

from engine.core import State, StepContext
from engine.machines.session import targets
from engine.machines.session.model import SessionDecision


def _record(home: str) -> SessionDecision:
    return SessionDecision(name="demo", namespace="team", home=home, target="east", phase="Ready")


def test_a_shared_slot_resolves_to_the_same_session_whatever_the_insertion_order():
    keys = ["west/team/demo", "local/team/demo", "north/team/demo"]
    answers = set()
    for order in itertools.permutations(keys):
        table = Map()
        for k in order:
            table = table.set(k, _record(k.split("/")[0]))
        owner = targets.owner(table, "east", "team", "demo")
        ctx = StepContext(State(tables=Map({"session": table})))
        ctx._machine = "session"
        indexed = targets.lookup(ctx, "east", "team", "demo")
        answers.add((owner, indexed))
    assert answers == {("local/team/demo", "local/team/demo")}
