"""Placeholder: the repo machine (being written)."""
from engine.machines.base import Machine


class RepoMachine(Machine):
    name = "repo"
