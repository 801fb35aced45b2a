"""``kfold manifests [--namespace kfold] [--image ...] [--config FILE] [--replicas N] [--part crds|namespaces|app]
[--kustomize DIR]``: print a complete install, or write it as a kustomize base."""
from __future__ import annotations

import argparse
import sys


EXAMPLES = """examples:
  kfold manifests | kubectl apply -f -
  kfold manifests -n kfold-system --config my-config.yaml --image registry.example/kfold:1.2 > install.yaml
  kfold manifests --replicas 3 --config ha-config.yaml | kubectl apply --dry-run=server -f -

exit codes: 0 printed; 2 bad arguments or a config file kfold cannot use."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("manifests", help="print the in-cluster install (RBAC, CRDs, Deployment)",
                              epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--namespace", default="kfold", help="namespace kfold runs in (default: kfold)")
    from kfold.daemon.manifests import DEFAULT_IMAGE
    p.add_argument("--image", default=DEFAULT_IMAGE,
                   help=f"container image (default: {DEFAULT_IMAGE}, what scripts/build_image.sh builds)")
    p.add_argument("--config", help="config file to ship in the ConfigMap (default: the example)")
    p.add_argument("--replicas", type=int, default=1,
                   help="daemons to run (default 1: a Deployment); more: a StatefulSet with a journal per "
                        "replica, which needs `leader: {enabled: true}` in the config")
    p.add_argument("--part", choices=("all", "crds", "namespaces", "app"), default="all",
                   help="crds: the CRDs; namespaces: kfold's and the watched ones; app: everything else "
                        "(`--part app | kubectl delete -f -` uninstalls kfold and keeps the Sessions); default all")
    p.add_argument("--kustomize", metavar="DIR",
                   help="write a kustomize base to DIR (crds.yaml, namespaces.yaml, kfold.yaml, kustomization.yaml) instead of printing")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kfold.daemon.config import ConfigError, read_config
    from kfold.daemon.manifests import InstallError, install, render, write_kustomize
    text = None
    if args.config:
        try:
            read_config(args.config)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        with open(args.config) as fh:
            text = fh.read()
    if args.replicas < 1:
        print(f"kfold manifests: --replicas {args.replicas}: give 1 or more", file=sys.stderr)
        return 2
    from kfold.daemon.manifests import PARTS
    parts = PARTS if args.part == "all" else (args.part,)
    try:
        if args.kustomize:
            write_kustomize(args.kustomize, args.namespace, args.image, text, args.replicas)
            return 0
        docs = install(args.namespace, args.image, text, replicas=args.replicas, parts=parts)
    except (InstallError, OSError) as exc:
        print(f"kfold manifests: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(docs))
    return 0
