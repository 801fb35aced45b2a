#!/usr/bin/env python3
"""Record what a real kubelet answers about kfold's pods: the fixtures of tests/data/kubelet/.

    python scripts/record_kubelet.py                 # every case
    python scripts/record_kubelet.py image_missing   # only these
    python scripts/record_kubelet.py --list

Needs a control plane with its real node (KFOLD_REAL_NODE=1 bash scripts/controlplane.sh start;
KUBECONFIG and KFOLD_NODE_TESTAPP_IMAGE as ``controlplane.sh env`` and ``node.sh env`` print them).
Each case creates one pod built by kfold's own builder (``session.manifests.pod`` from a validated
spec: the containers, env references, restartPolicy and volumes kfold sends) in a namespace of its
own, polls it (``kubectl get -o json``) every half second for the case's time, and writes each
status that differs from the one before (phase, conditions and container states, times left out)
as the pod object the apiserver returned, managedFields dropped. tests/scenario/test_kubelet_answers.py
feeds them to the session machine as watch events. The case names say what the pod meets; CASES
gives the spec, any Secret it reads and how long to watch.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "tests" / "data" / "kubelet"

from engine.machines.session import manifests as mf  # noqa: E402
from engine.machines.session.spec import validate  # noqa: E402

SESSION = "rec"


def _exit_env(value: str) -> dict[str, Any]:
    return {"env": [{"name": "TESTAPP_EXIT", "secretRef": {"name": "rec-env", "key": "exit"}}], "secret": value}


# case -> (spec overrides, seconds to watch, what it shows)
CASES: dict[str, tuple[dict[str, Any], float, str]] = {
    "image_missing": ({"image": "localhost/kfold/absent:1"}, 75,
                      "an image no registry serves: ErrImagePull, then ImagePullBackOff, in turn"),
    "image_never_pulled": ({"image": "localhost/kfold/absent:1", "imagePullPolicy": "Never"}, 15,
                           "imagePullPolicy Never and no such image on the node: ErrImageNeverPull"),
    "secret_key_missing": ({"env": [{"name": "TOKEN", "secretRef": {"name": "rec-env", "key": "absent"}}],
                            "secret": "x"}, 20,
                           "an env reference to a key its Secret lacks: CreateContainerConfigError"),
    "apps_end": ({**_exit_env("app-done=0,app-bad=1"), "apps": [{"name": "done"}, {"name": "bad"}, {"name": "web"}]},
                 20, "app done exits 0, app bad exits 1, app web and the workspace run on: the pod stays Running"),
    "workspace_ends": ({**_exit_env("workspace=3"), "apps": [{"name": "web"}]}, 20,
                       "the workspace container exits 3 while app web runs on: the pod stays Running"),
    "all_end": ({**_exit_env("0"), "apps": [{"name": "web"}]}, 20,
                "every container exits 0: the pod Succeeded"),
}


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
    p = subprocess.run([os.environ.get("KFOLD_KUBECTL", "kubectl"), *args], input=stdin, capture_output=True,
                       text=True, timeout=60)
    if check and p.returncode:
        raise SystemExit(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def manifest(case: str, namespace: str) -> tuple[dict[str, Any], str | None]:
    over = dict(CASES[case][0])
    secret = over.pop("secret", None)
    raw = {"image": os.environ["KFOLD_NODE_TESTAPP_IMAGE"], "apps": [{"name": "web", "ports": [{"port": 8080}]}],
           **over}
    spec = validate(raw, "local", ("local",), SESSION)
    if not hasattr(spec, "apps"):
        raise SystemExit(f"case {case}: {spec.message}")
    return mf.pod(SESSION, namespace, 1, spec, identity=True), secret


def _shape(obj: dict[str, Any]) -> str:
    """What a status says, times and restart-free noise left out: a new one is recorded."""
    st = obj.get("status") or {}
    conds = sorted((c.get("type"), c.get("status"), c.get("reason")) for c in st.get("conditions") or ())
    states = []
    for c in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        for kind, s in (c.get("state") or {}).items():
            states.append((c.get("name"), kind, s.get("reason"), s.get("message"), s.get("exitCode"), c.get("ready")))
    return json.dumps([st.get("phase"), st.get("podIP"), conds, sorted(states, key=str)], default=str)


def record(case: str) -> Path:
    ns = f"kubelet-{case.replace('_', '-')}"
    kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true")
    kubectl("create", "namespace", ns)
    for _ in range(60):   # pods need the default ServiceAccount the controller manager makes
        if kubectl("get", "serviceaccount", "default", "-n", ns, check=False):
            break
        time.sleep(0.5)
    pod, secret = manifest(case, ns)
    if secret is not None:
        kubectl("create", "secret", "generic", "rec-env", "-n", ns, f"--from-literal=exit={secret}")
    kubectl("create", "-f", "-", stdin=json.dumps(pod))
    seen, out, end = "", [], time.monotonic() + CASES[case][1]
    while time.monotonic() < end:
        obj = json.loads(kubectl("get", "pod", pod["metadata"]["name"], "-n", ns, "-o", "json"))
        obj["metadata"].pop("managedFields", None)
        if _shape(obj) != seen:
            seen = _shape(obj)
            out.append(obj)
            print(f"{case}: {len(out)} {seen[:160]}", file=sys.stderr)
        time.sleep(0.5)
    kubectl("delete", "namespace", ns, "--wait=false")
    version = json.loads(kubectl("get", "nodes", "-o", "json"))["items"][0]["status"]["nodeInfo"]
    path = OUT / f"{case}.json"
    path.write_text(json.dumps({"case": case, "shows": CASES[case][2],
                                "kubelet": version.get("kubeletVersion"),
                                "runtime": version.get("containerRuntimeVersion"),
                                "observations": out}, indent=1, sort_keys=True) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        for name, (_, secs, shows) in CASES.items():
            print(f"{name:20} {secs:4.0f} s  {shows}")
        return 0
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        print(f"record_kubelet: no case {unknown[0]!r}; --list names them", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    for case in args.cases or CASES:
        print(record(case))
    return 0


if __name__ == "__main__":
    sys.exit(main())
