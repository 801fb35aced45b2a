"""The scenario suite records, for each dispatch table row, what its handler emitted
(``tests/table_rows.py``); ``test_zz_table_rows.py``, collected last, checks docs/architecture.md
against it when the whole suite ran."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests import table_rows

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="package", autouse=True)
def _table_rows():
    """Open while the scenario package runs (the tables' handlers are wrapped), closed after it."""
    with table_rows.recording() as seen:
        yield seen


def pytest_collection_modifyitems(session, config, items):
    """Whether this session runs every scenario test: no selection by keyword, marker or node id,
    and every scenario file collected."""
    files = {Path(str(item.fspath)).resolve() for item in items}
    narrowed = config.option.keyword or config.option.markexpr or any("::" in a for a in config.args)
    tests = {p for p in HERE.glob("test_*.py") if "def test_" in p.read_text()}
    config._kfold_whole_scenario_suite = (not narrowed) and tests <= files
