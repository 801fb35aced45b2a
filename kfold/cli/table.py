"""What the listing commands print (kubectl's ``-o``): an aligned table with upper-case headers, or
the same rows as JSON or YAML.

Contract: ``table(rows, columns)`` takes dicts and the keys to show, in order; a missing or empty
cell shows ``-``; a header is its key upper-cased with ``_`` as ``-``. ``dump`` keeps key order.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

OUTPUTS = ("table", "wide", "json", "yaml")


def aligned(lines: Sequence[Sequence[str]]) -> str:
    """Rows of cells, each column as wide as its widest cell, two spaces apart."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def table(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    header = [c.upper().replace("_", "-") for c in columns]
    return aligned([header] + [[_cell(r.get(c)) for c in columns] for r in rows])


def _cell(value: Any) -> str:
    if value in (None, ""):
        return "-"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def dump(data: Any, output: str) -> str:
    """``data`` as indented JSON or block YAML."""
    if output == "yaml":
        import yaml
        return yaml.safe_dump(data, sort_keys=False).rstrip()
    return json.dumps(data, indent=2, sort_keys=False, default=str)
