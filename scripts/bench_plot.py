"""The cost curve of scripts/bench_peer.py's JSON as an SVG: per contestant, CPU per Session and time
to all Ready against N (log scale), drawn by matplotlib (the bench extra).

    .venv/bin/python scripts/bench_plot.py bench.json -o docs/images/bench-curve.svg

The JSON is bench_peer.py's ``--json`` output (its ``curve`` rows; older files: its ``summary``).
The SVG is reproducible: no date in its metadata, fixed element ids.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PANELS = [   # (summary key, y-axis label)
    ("operator_cpu_ms_per_session", "operator CPU per Session (ms)"),
    ("all_ready_s", "time to all Ready (s)"),
]
STYLE = {"kfold": ("#1f77b4", "o"), "kfold-warnings": ("#aec7e8", "D"), "kopf-async": ("#d62728", "s"), "kopf-sync": ("#ff9896", "v"),
         "floor": ("#7f7f7f", "^")}


def rows_of(doc: dict) -> list[dict]:
    """The curve's rows ``{"n", "contestant", key: value...}`` of a bench_peer.py JSON document."""
    if doc.get("curve"):
        return list(doc["curve"])
    out = []
    for key, s in (doc.get("summary") or {}).items():
        who, _, n = key.partition("@")
        out.append({"n": int(n), "contestant": who, **s})
    return out


def render(doc: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter
    plt.rcParams["svg.hashsalt"] = "bench-curve"   # stable ids: the SVG diffs only when the figures do
    plt.rcParams["svg.fonttype"] = "none"          # text as text: smaller, searchable
    rows = rows_of(doc)
    ns = sorted({r["n"] for r in rows})
    who_all = list(dict.fromkeys(r["contestant"] for r in rows))
    fig, axes = plt.subplots(1, len(PANELS), figsize=(10, 4), constrained_layout=True)
    for ax, (key, label) in zip(axes, PANELS):
        for who in who_all:
            pts = sorted((r["n"], r[key]) for r in rows if r["contestant"] == who and r.get(key) is not None)
            if not pts:
                continue
            color, marker = STYLE.get(who, (None, "x"))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=who)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ns))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("Sessions created at once (N, log scale)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"scripts/bench_peer.py: the cost curve ({doc.get('machine', 'machine not recorded')})", fontsize=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", help="scripts/bench_peer.py --json output")
    ap.add_argument("-o", "--output", default="docs/images/bench-curve.svg", help="the SVG to write")
    args = ap.parse_args(argv)
    try:
        doc = json.loads(Path(args.json).read_text())
    except (OSError, ValueError) as exc:
        print(f"bench_plot: {args.json}: not a readable bench_peer.py JSON file ({exc}); "
              "write one with scripts/bench_peer.py --json PATH", file=sys.stderr)
        return 2
    if not isinstance(doc, dict) or not rows_of(doc):
        print(f"bench_plot: {args.json}: no curve or summary in it; write one with scripts/bench_peer.py --json PATH",
              file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench_plot: matplotlib is missing; install the bench extra: "
              ".venv/bin/pip install -c constraints.txt -e '.[bench]'", file=sys.stderr)
        return 2
    render(doc, Path(args.output))
    print(f"bench_plot: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
