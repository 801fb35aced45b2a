"""The state machines, one module each. ``all_machines`` is the fold's dispatch list."""
from __future__ import annotations


def all_machines() -> list:
    from engine.machines.pod.machine import PodMachine
    from engine.machines.repo.machine import RepoMachine
    from engine.machines.session.machine import SessionMachine
    return [PodMachine(), RepoMachine(), SessionMachine()]
