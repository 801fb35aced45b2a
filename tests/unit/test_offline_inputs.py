"""A file that is not a journal, given to an offline command: one line saying what the file is
(compressed, an archive, an executable, a damaged SQLite file) and what to do, exit 2, from every
command alike, never its bytes parsed as JSON lines; ``kfold ui`` says so before it prints a URL."""
from __future__ import annotations

import asyncio
import gzip
import io
import subprocess
import sys
import zipfile

import pytest

from journal.jsonl import read_jsonl
from journal.sqlite import SqliteJournal
from kfold.cli import main
from tests.golden_facts import GOLDEN

TEXT = GOLDEN.read_bytes()


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("journal.jsonl", TEXT)
    return out.getvalue()


FILES = {
    "gzip": (gzip.compress(TEXT), "it is gzip-compressed data; decompress it first (gunzip -k FILE)"),
    "zip": (_zip(), "it is a zip archive; unpack the journal from it first (unzip FILE)"),
    "elf": (open(sys.executable, "rb").read(4096), "it is an executable (ELF)"),
    "binary": (bytes(range(256)) * 4, "it is binary data, neither SQLite nor text"),
    "wal": (b"\x37\x7f\x06\x82" + bytes(60), "it is a SQLite write-ahead log (the -wal file beside a journal)"),
    "damaged-sqlite": (b"SQLite format 3\x00" + bytes(range(256)) * 4, "a SQLite file SQLite cannot read"),
}
COMMANDS = {"replay": ["replay", "{}"], "trace": ["trace", "{}", "demo"], "export": ["export", "{}", "-o", "/dev/null"],
            "repos": ["repos", "--journal", "{}"]}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", FILES)
def test_a_file_that_is_not_a_journal_is_named_for_what_it_is(tmp_path, capsys, kind, command):
    data, says = FILES[kind]
    path = tmp_path / f"journal.{kind}"
    path.write_bytes(data)
    code = main([a.format(path) for a in COMMANDS[command]])
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = err.splitlines()
    assert line.startswith(f"kfold {command}: {path}: ") and says in line
    assert "not JSON" not in line and "surrogates" not in line


def test_a_text_file_is_still_read_as_an_export(tmp_path, capsys):
    path = tmp_path / "golden.jsonl"
    path.write_bytes(TEXT)
    assert main(["replay", str(path)]) == 0


@pytest.mark.parametrize("kind", ["gzip", "damaged-sqlite"])
def test_kfold_ui_refuses_a_file_that_is_not_a_journal_before_it_prints_a_url(tmp_path, kind):
    data, says = FILES[kind]
    path = tmp_path / f"journal.{kind}"
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "kfold", "ui", str(path), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    [line] = done.stderr.splitlines()
    assert line.startswith(f"kfold ui: {path}: ") and says in line


def test_kfold_ui_refuses_a_bad_first_record_before_it_prints_a_url(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"seq": 1, "name": "x"}\n')
    done = subprocess.run([sys.executable, "-m", "kfold", "ui", str(path), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"kfold ui: {path}: line 1: field rec: Field required")


@pytest.mark.parametrize("flags, says", [
    (["--follow"], "is an export (JSONL), which is complete as written"),
    (["--follow", "--until", "5"], "--follow and --until: pick one"),
], ids=["an-export", "with-until"])
def test_kfold_ui_follow_needs_a_sqlite_journal_and_no_until(tmp_path, flags, says):
    path = tmp_path / "golden.jsonl"
    path.write_bytes(TEXT)
    if "--until" in flags:   # a SQLite journal: only the flags are refused
        path = tmp_path / "j.db"

        async def go() -> None:
            j = SqliteJournal(str(path))
            await j.open()
            await j.append(list(read_jsonl(GOLDEN))[:5])
            await j.close()
        asyncio.run(go())
    done = subprocess.run([sys.executable, "-m", "kfold", "ui", str(path), "--listen", "127.0.0.1:0", *flags],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("kfold ui: ") and says in line
