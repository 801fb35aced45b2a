"""Placeholder: the pod machine (being written)."""
from engine.machines.base import Machine


class PodMachine(Machine):
    name = "pod"
