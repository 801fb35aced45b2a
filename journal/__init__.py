"""The journal: typed records, redaction, the append-only store, and its JSONL form.

Nothing in here decides anything; the engine folds what the journal holds.
"""
