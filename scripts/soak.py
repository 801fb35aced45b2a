#!/usr/bin/env python3
"""The churn soak and the fault soak (issue 51; docs/testing.md "Soak"): one ``kfold run`` on the
local control plane for the whole run, N Sessions under seeded churn at a stated rate, sampled
every 10 s, with the issue's targets computed at the end and plotted.

    nice -n 10 .venv/bin/python scripts/soak.py --sessions 50 --minutes 5 --rate 1 --seed 1
    nice -n 10 .venv/bin/python scripts/soak.py --sessions 300 --minutes 60 --rate 5 --seed 1 \\
        --plot docs/images/soak-churn.svg                                   # the issue's churn row
    ... --faults kill9,term,lost,apiserver,etcd,compact --fault-every 600    # the fault soak

Needs the local control plane (scripts/controlplane.sh start; the watch cache off, its default, so
a compaction makes watches meet 410 Gone). Writes samples.jsonl, summary.json (and the plot) into
--out. Exit 0: every oracle held (and with --gate, every target); 1: an oracle or a gated target
failed (the reasons printed); 2: bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from tests.e2e.soak import FAULTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--sessions", type=int, default=50, help="Sessions churned (default 50)")
    ap.add_argument("--minutes", type=float, default=5.0, help="churn this long (default 5)")
    ap.add_argument("--rate", type=float, default=1.0, help="operations per second (default 1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples of /metrics (default 10)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of each kfold lifetime left out of the growth fits (default 600, or a fifth of a run under 50 minutes)")
    ap.add_argument("--window", type=float, default=None,
                    help="seconds per window compared with the first (default 600, or a fifth of a run under 50 minutes)")
    ap.add_argument("--bound", type=float, default=90.0, help="seconds an operation may take to settle (default 90)")
    ap.add_argument("--faults", default="", help=f"comma-separated, in turn: {', '.join(FAULTS)} (default none)")
    ap.add_argument("--fault-every", type=float, default=600.0, help="seconds between faults (+-25%%, seeded)")
    ap.add_argument("--keep-snapshots", type=int, default=4, help="kfold's journal.retention.keep_snapshots")
    ap.add_argument("--snapshot-every", type=int, default=5000, help="kfold's journal.snapshot_every")
    ap.add_argument("--out", type=Path, default=None, help="directory for samples.jsonl and summary.json")
    ap.add_argument("--plot", type=Path, default=None, help="write the plot (SVG) here")
    ap.add_argument("--gate", action="store_true", help="a missed target fails the run too (exit 1)")
    args = ap.parse_args()
    faults = tuple(f for f in args.faults.split(",") if f)
    bad = [f for f in faults if f not in FAULTS]
    if bad or args.sessions < 1 or args.minutes <= 0 or args.rate <= 0:
        what = f"unknown fault {bad[0]!r} (known: {', '.join(FAULTS)})" if bad else \
            "--sessions, --minutes and --rate must be positive"
        print(f"soak.py: {what}", file=sys.stderr)
        return 2
    duration = args.minutes * 60
    short = duration < 50 * 60
    warmup = args.warmup if args.warmup is not None else (duration / 5 if short else 600.0)
    window = args.window if args.window is not None else (duration / 5 if short else 600.0)

    from kubernetes import client
    from tests.e2e.conftest import Daemon, discard_namespace
    from tests.e2e.drills import drill_admin
    from tests.e2e.soak import Soak, plot, summarize

    cp, admin = drill_admin()
    ns = f"soak-{args.seed}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": ns}})
    out = args.out or Path(tempfile.mkdtemp(prefix="kfold-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "samples.jsonl").write_text("")
    params = {"seed": args.seed, "sessions": args.sessions, "minutes": args.minutes, "rate": args.rate,
              "faults": list(faults), "fault_every_s": args.fault_every, "bound_s": args.bound,
              "warmup_s": warmup, "window_s": window, "keep_snapshots": args.keep_snapshots,
              "snapshot_every": args.snapshot_every}
    print(f"soak: {json.dumps(params)}; namespace {ns}; out {out}", flush=True)
    daemon = Daemon(out, cp["kubeconfig"], [ns], extra={
        "journal": {"path": str(out / "journal.db"), "snapshot_every": args.snapshot_every,
                    "retention": {"keep_snapshots": args.keep_snapshots}},
        "log": {"format": "plain", "level": "warning"}})
    soak = Soak(admin, ns, lambda: daemon.start(), args.seed, sessions=args.sessions, rate=args.rate,
                duration_s=duration, sample_s=args.sample_s, bound_s=args.bound, faults=faults,
                fault_every_s=args.fault_every, out=out, log=lambda m: print(m, flush=True))
    t = time.monotonic()
    try:
        result = soak.run()
    finally:
        discard_namespace(admin, ns)
    summary = summarize(soak.samples, warmup, window, args.keep_snapshots, args.snapshot_every, soak.settles,
                        faults=[f["t"] for f in result["faults"]])
    doc = {"params": params, "result": result, "summary": summary, "wall_s": round(time.monotonic() - t, 1)}
    (out / "summary.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    if args.plot:
        title = (f"kfold soak: {args.sessions} Sessions, {args.rate:g} ops/s, {args.minutes:g} min, seed {args.seed}"
                 + (f", faults {','.join(faults)}" if faults else ""))
        plot(soak.samples, summary, args.plot, title)
    print(report(doc), flush=True)
    broken = result["violations"] or result["failures"]
    return 1 if broken or (args.gate and not summary["ok"]) else 0


def report(doc: dict) -> str:
    r, s = doc["result"], doc["summary"]
    lines = [f"soak: {r['ops']} operations ({r['skipped']} ticks found no settled Session), "
             f"{len(r['faults'])} faults {[f['kind'] for f in r['faults']]}, {r['watch_events']} watch events, "
             f"relists {r['watch_relists']}, replay --check {r['replay']}"]
    for key, fits in sorted(s["growth"].items()):
        for f in fits:
            lines.append(f"  {key:18} life {f['life']}: mean {f['mean']:.4g}, "
                         f"{f['lo_pct_per_h']:+.2f}..{f['hi_pct_per_h']:+.2f} %/h {'ok' if f['ok'] else 'MISS'}")
    lines.append(f"  journal: {s['journal']}")
    for w in s["windows"]:
        lines.append("  window " + ", ".join(f"{k} {v}" for k, v in w.items()))
    for v in r["violations"] + r["failures"]:
        lines.append(f"FAILED: {v}")
    lines.append(f"targets: {'all met' if s['ok'] else 'missed: ' + '; '.join(s['misses'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
