"""``kfold diagrams [--format mermaid|svg] [-o DIR] [--machine NAME] [--update-readme FILE]``.

Draws each machine's transition table (``kfold.offline.diagrams``; SVG is laid out by Graphviz's ``dot``,
and without it the command says what to install and exits 2). Without ``-o``, Mermaid goes to
stdout (SVG too, for one ``--machine``); with ``-o DIR``, one ``<machine>.mmd`` or ``<machine>.svg``
per table. ``--update-readme`` rewrites the generated block of a Markdown file in place.
"""
from __future__ import annotations

import sys
from pathlib import Path


EXAMPLES = """examples:
  kfold diagrams --machine session               # Mermaid on stdout
  kfold diagrams --format svg -o docs/diagrams/  # one SVG per machine
  kfold diagrams --update-readme README.md

exit codes: 0 drawn; 2 bad arguments (an unknown machine, SVG of several to stdout) or a file that
cannot be written."""


def register(sub) -> None:
    import argparse
    p = sub.add_parser("diagrams", help="draw the state machines' transition tables (Mermaid or SVG)",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=("mermaid", "svg"), default="mermaid", help="Mermaid text (default) or SVG")
    p.add_argument("-o", "--output", metavar="DIR", default=None, help="write one file per machine into DIR")
    p.add_argument("--machine", default=None, help="only this machine's table (e.g. session)")
    p.add_argument("--highlight", default=None, metavar="STATE", help="mark this state")
    p.add_argument("--update-readme", metavar="FILE", default=None,
                   help="rewrite the generated diagrams block of FILE (Markdown) from the tables")
    p.set_defaults(func=run)


def run(args) -> int:
    from kfold.offline import diagrams

    found = diagrams.tables()
    if args.update_readme:
        path = Path(args.update_readme)
        try:
            path.write_text(diagrams.update_readme(path.read_text(), found))
        except (OSError, ValueError) as exc:
            print(f"kfold diagrams: {path}: {exc}", file=sys.stderr)
            return 2
        print(f"kfold diagrams: {path}: {len(found)} diagrams written", file=sys.stderr)
        return 0
    if args.machine:
        if args.machine not in found:
            print(f"kfold diagrams: no machine table named {args.machine!r}; known: {', '.join(found)}", file=sys.stderr)
            return 2
        found = {args.machine: found[args.machine]}
    draw = diagrams.svg if args.format == "svg" else diagrams.mermaid
    try:
        return _write(args, found, draw)
    except diagrams.DotMissing as exc:
        print(f"kfold diagrams: {exc}", file=sys.stderr)
        return 2


def _write(args, found, draw) -> int:
    suffix = ".svg" if args.format == "svg" else ".mmd"
    if args.output is None:
        if args.format == "svg" and len(found) > 1:
            print("kfold diagrams: SVG to stdout needs one --machine (or write them all with -o DIR)", file=sys.stderr)
            return 2
        for name, table in found.items():
            text = draw(table, args.highlight)
            sys.stdout.write(text if args.format == "svg" else f"%% {name}\n{text}\n")
        return 0
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in found.items():
        (out / f"{name}{suffix}").write_text(draw(table, args.highlight))
        print(out / f"{name}{suffix}")
    return 0
