"""Progress on long offline work: shown on a terminal (records done / total, rate, time left),
erased at the end, and absent when stderr is not a terminal."""
from __future__ import annotations

import io

from kfold.offline import progress
from kfold.cli import main
from tests.golden_facts import GOLDEN, golden

TOTAL = len(golden())


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_sees_done_total_rate_and_time_left(monkeypatch):
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    monkeypatch.delenv("KFOLD_PROGRESS", raising=False)
    out = Tty()
    assert list(progress.counted(range(5), str(GOLDEN), "replay", stream=out)) == [0, 1, 2, 3, 4]
    text = out.getvalue()
    assert f"kfold replay: 4/{TOTAL} records ({round(400 / TOTAL)}%)" in text
    assert "/s, " in text and " left" in text
    assert text.endswith("\r\x1b[K")  # erased at the end


def test_not_a_terminal_gets_nothing(monkeypatch):
    monkeypatch.delenv("KFOLD_PROGRESS", raising=False)
    out = io.StringIO()
    assert list(progress.counted(range(3), str(GOLDEN), "export", stream=out)) == [0, 1, 2]
    assert out.getvalue() == ""


def test_replay_export_and_check_report_progress_when_forced(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KFOLD_PROGRESS", "1")
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    for argv, label in ((["replay", str(GOLDEN)], "kfold replay: "),
                        (["replay", str(GOLDEN), "--check"], "kfold replay --check: "),
                        (["export", str(GOLDEN), "-o", str(tmp_path / "x.jsonl")], "kfold export: ")):
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert f"{label}{TOTAL}/{TOTAL} records" in err or f"{label}{TOTAL - 1}/{TOTAL} records" in err, err


def test_the_total_of_a_sqlite_journal_is_its_head_capped_by_until(tmp_path):
    from tests.unit.test_replay_cli import scenario, write_journal
    sc = scenario()
    path = tmp_path / "j.sqlite"
    write_journal(path, sc.records)
    assert progress.journal_size(str(path)) == len(sc.records)
    assert progress.journal_size(str(path), until=3) == 3


def test_a_phase_without_a_count_is_named_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv("KFOLD_PROGRESS", raising=False)
    tty, pipe = Tty(), io.StringIO()
    for out in (tty, pipe):
        progress.status("kfold replay", "verifying the checksum chain", stream=out)
        progress.clear(stream=out)
    assert tty.getvalue() == "\r\x1b[Kkfold replay: verifying the checksum chain\r\x1b[K"
    assert pipe.getvalue() == ""
