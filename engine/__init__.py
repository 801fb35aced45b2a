"""The pure fold: records in, state and effects out.

Reads no clock, no network, no disk, no environment, no randomness (checked by import-linter and
tests/unit/test_layering.py). ``engine.effects.io.executor`` and ``engine.effects.io.observer`` are the
I/O side and are never imported from here.
"""
from engine.core import FoldError, SequenceError, State, fold, fold_all, fold_many, initial_state

__all__ = ["FoldError", "SequenceError", "State", "fold", "fold_all", "fold_many", "initial_state"]
