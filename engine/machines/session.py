"""Placeholder: the session machine (being written)."""
from engine.machines.base import Machine


class SessionMachine(Machine):
    name = "session"
