"""docs/cli.md has one table of exit codes for every command, and each row says what that
command's ``--help`` epilog says, code by code: neither can change without the other."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from kfold.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
HEADER = "| command | 0 | 1 | 2 | 3 |"


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every leaf command's parser by its name (``cluster register``, ...)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name in COMMANDS:
        parser = sub.choices[name]
        inner = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        out.update({f"{name} {n}": p for n, p in inner[0].choices.items()} if inner else {name: parser})
    return out


def epilog_codes(parser: argparse.ArgumentParser) -> dict[str, str]:
    """``exit codes: 0 a; 1 b; 2 c.`` of the epilog as {"0": "a", ...}."""
    text = " ".join(parser.epilog.split("exit codes:", 1)[1].split())
    return {m.group(1): m.group(2).rstrip(".") for m in re.finditer(r"(?:^|;\s)([0-3]) (.+?)(?=;\s[0-3] |$)", text)}


def docs_table() -> dict[str, dict[str, str]]:
    text = (ROOT / "docs" / "cli.md").read_text()
    assert text.count(HEADER) == 1, "docs/cli.md holds one exit-code table"
    rows = text.split(HEADER, 1)[1].strip().splitlines()[1:]
    table = {}
    for row in rows:
        if not row.startswith("|"):
            break
        cells = [c.strip() for c in row.strip("|").split("|")]
        table[cells[0].strip("`").removeprefix("kfold ")] = {str(i): c for i, c in enumerate(cells[1:]) if c != "-"}
    return table


def test_every_command_has_a_row_with_the_codes_its_help_gives():
    table, parsers = docs_table(), commands()
    assert sorted(table) == sorted(parsers), "one row per command, none missing, none extra"
    for name, parser in parsers.items():
        codes = epilog_codes(parser)
        assert set(codes) >= {"0", "2"}, f"kfold {name} --help gives no exit codes"
        assert table[name] == codes, f"kfold {name}: docs/cli.md says {table[name]}, --help says {codes}"


def test_the_epilog_parser_reads_each_code():
    p = argparse.ArgumentParser(epilog="examples:\n  x\n\nexit codes: 0 done; 1 a problem (a; b); 2 bad\narguments; 3 broken.")
    assert epilog_codes(p) == {"0": "done", "1": "a problem (a; b)", "2": "bad arguments", "3": "broken"}
