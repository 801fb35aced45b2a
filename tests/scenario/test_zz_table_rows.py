"""docs/architecture.md shows, for every dispatch table row, its handler and what it emitted over
the scenario suite, and the suite reaches every row (``tests/table_rows.py``). Collected last (the
name) so the whole suite has run; over part of it, skipped. ``python scripts/table_rows.py``
writes the block again."""
from __future__ import annotations

import os

import pytest

from tests import table_rows


@pytest.fixture
def whole_suite(request):
    if not getattr(request.config, "_kfold_whole_scenario_suite", False):
        pytest.skip("the table rows are observed over the whole scenario suite (run tests/scenario)")


def test_the_scenario_suite_reaches_every_row_of_every_table(whole_suite, _table_rows):
    assert table_rows.unreached(_table_rows) == []


def test_the_architecture_doc_shows_each_rows_handler_and_what_it_emitted(whole_suite, _table_rows):
    block = table_rows.render(_table_rows)
    if os.environ.get("KFOLD_WRITE_TABLE_ROWS"):
        table_rows.write(block)
    assert table_rows.current() == block, "docs/architecture.md's table rows are stale: run `python scripts/table_rows.py`"
