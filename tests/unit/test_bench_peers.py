"""The bench's kopf peer is the async one (issue 38), and bench_plot.py draws the curve as an SVG."""
from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASYNC_PEER = ROOT / "scripts" / "peer_kopf_async.py"
PLOT = ROOT / "scripts" / "bench_plot.py"
FIXTURE = ROOT / "tests" / "data" / "bench" / "curve_small.json"


def _kopf_handlers(tree: ast.Module) -> list[ast.AST]:
    """Top-level functions decorated with ``@kopf.on.<something>(...)``."""
    def is_kopf_on(d: ast.expr) -> bool:
        f = d.func if isinstance(d, ast.Call) else d
        return isinstance(f, ast.Attribute) and ast.unparse(f).startswith("kopf.on.")
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(is_kopf_on(d) for d in n.decorator_list)]


def test_async_peer_handlers_are_coroutines_on_kubernetes_asyncio_without_sleeps():
    tree = ast.parse(ASYNC_PEER.read_text())
    handlers = _kopf_handlers(tree)
    names = {h.name for h in handlers}
    assert {"configure", "create", "pod_ready", "delete"} <= names
    assert [h.name for h in handlers if not isinstance(h, ast.AsyncFunctionDef)] == []
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "kubernetes_asyncio" in imported and "kubernetes" not in imported
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not {c for c in calls if c.endswith("sleep")}


def test_async_peer_imports_and_registers_coroutine_handlers():
    pytest.importorskip("kopf", reason="the bench extra: pip install -c constraints.txt -e '.[bench]'")
    pytest.importorskip("kubernetes_asyncio", reason="the bench extra")
    spec = importlib.util.spec_from_file_location("peer_kopf_async", ASYNC_PEER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name in ("configure", "close", "create", "pod_ready", "delete"):
        assert inspect.iscoroutinefunction(getattr(mod, name)), name
    pod = mod.pod_for("s1", {"image": "img:1", "apps": [{"name": "web", "ports": [{"port": 8080}]}]})
    assert pod["metadata"]["name"] == "s1-g1"
    assert [c["name"] for c in pod["spec"]["containers"]] == ["workspace", "app-web"]


def test_bench_plot_renders_an_svg_of_the_curve(tmp_path):
    pytest.importorskip("matplotlib", reason="the bench extra: pip install -c constraints.txt -e '.[bench]'")
    out = tmp_path / "curve.svg"
    proc = subprocess.run([sys.executable, str(PLOT), str(FIXTURE), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = "".join(root.itertext())
    for label in ("kfold", "kopf-async", "floor", "operator CPU per Session (ms)", "time to all Ready (s)"):
        assert label in text
    again = tmp_path / "again.svg"
    subprocess.run([sys.executable, str(PLOT), str(FIXTURE), "-o", str(again)], check=True, capture_output=True)
    assert again.read_bytes() == out.read_bytes()   # reproducible: the SVG changes only with the figures


@pytest.mark.parametrize("content", ["not json", json.dumps({"runs": []})])
def test_bench_plot_refuses_bad_input_in_one_line(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = subprocess.run([sys.executable, str(PLOT), str(bad), "-o", str(tmp_path / "x.svg")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "bench_peer.py --json" in proc.stderr
    assert not (tmp_path / "x.svg").exists()


def test_bench_peer_ratios_and_curve_use_the_async_peer():
    spec = importlib.util.spec_from_file_location("bench_peer", ROOT / "scripts" / "bench_peer.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    runs = [{"n": n, "contestant": who, "ok": True, "all_ready_s": t * n, "operator_cpu_ms_per_session": 10.0 * t}
            for n in (100, 300) for who, t in (("kfold", 1.0), ("kopf-async", 2.0), ("kopf-sync", 4.0), ("floor", 0.5))]
    summary = bench.summarize(runs)
    rows = {(r["n"], r["contestant"]): r for r in bench.curve(summary)}
    assert rows[(300, "kfold")]["vs_kopf-async"]["all_ready_s"] == 0.5
    assert rows[(300, "kfold")]["vs_floor"]["operator_cpu_ms_per_session"] == 2.0
    md = bench.markdown(summary, "test machine")
    assert "| kfold/kopf-async | kfold/floor |" in md
    assert "| 300 | kfold/kopf-async | 0.50x |" in md
    assert bench.identity("kopf-sync") == bench.identity("kopf-async") == "kopf"
