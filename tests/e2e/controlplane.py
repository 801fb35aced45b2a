"""Helpers for kfold's end-to-end tests: a real local Kubernetes control plane.

Wraps scripts/build.sh controlplane (builds etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, kubectl and kwok from Go modules into $KFOLD_CACHE/bin, cached by version
stamp) and scripts/controlplane.sh (runs them on 127.0.0.1). Stdlib only; the
`kubernetes` client is imported lazily by kube_client().

    info = ensure_controlplane()   # {'kubeconfig', 'server', 'etcd', 'dir', 'ca', 'cert', 'key'}
    rev = compact_etcd()           # etcd compacted to `rev`; older watch RVs now get 410

A cold build takes a long time (kube-apiserver, ~20+ min on 2 cores); set
KFOLD_E2E_NO_BUILD=1 to skip the build step and fail fast if binaries are missing.
"""
from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


def pinned_k8s_version() -> str:
    """The K8S_VERSION pin from scripts/build_controlplane.sh (e.g. 'v1.37.2')."""
    for line in (SCRIPTS / "build_controlplane.sh").read_text().splitlines():
        if line.startswith("K8S_VERSION="):
            return line.split("=", 1)[1].split()[0]
    raise RuntimeError("K8S_VERSION pin not found")


def _parse_env(text: str) -> dict[str, str]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


def ensure_controlplane(build: bool | None = None) -> dict:
    """Build (if not cached) and start the control plane; idempotent and fast when running."""
    if build is None:
        build = not os.environ.get("KFOLD_E2E_NO_BUILD")
    if build:
        subprocess.run(["bash", str(SCRIPTS / "build.sh"), "controlplane"], check=True)
    out = subprocess.run(
        [str(SCRIPTS / "controlplane.sh"), "start"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    return controlplane_info(out)


def controlplane_info(env_text: str) -> dict:
    """The instance that ``controlplane.sh start|env`` printed: its kubeconfig, apiserver and etcd
    URLs, its state directory (KFOLD_CP_DIR) and the admin client certificate in its pki/."""
    env = _parse_env(env_text)
    pki = Path(env["KFOLD_CP_DIR"]) / "pki"
    return dict(
        kubeconfig=env["KUBECONFIG"],
        server=env["KFOLD_APISERVER"],
        etcd=env["KFOLD_ETCD"],
        dir=env["KFOLD_CP_DIR"],
        ca=str(pki / "ca.crt"),
        cert=str(pki / "admin.crt"),
        key=str(pki / "admin.key"),
    )


def stop_controlplane(wipe: bool = False) -> None:
    subprocess.run(
        [str(SCRIPTS / "controlplane.sh"), "stop"] + (["--wipe"] if wipe else []), check=True
    )


def compact_etcd() -> int:
    """Physically compact etcd to its current revision; returns that revision.

    The apiserver runs with --watch-cache=false, so any watch started afterwards from a
    resourceVersion older than the returned revision fails with 410 Gone (an ERROR event
    whose Status has code 410)."""
    out = subprocess.run(
        [str(SCRIPTS / "controlplane.sh"), "compact"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    return int(out.strip().splitlines()[-1])


def ssl_context(info: dict) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=info["ca"])
    ctx.load_cert_chain(info["cert"], info["key"])
    return ctx


def api_get(info: dict, path: str, timeout: float = 10):
    """GET path on the apiserver with the admin cert; returns the open HTTP response."""
    req = urllib.request.Request(info["server"] + path, headers={"Accept": "application/json"})
    return urllib.request.urlopen(req, context=ssl_context(info), timeout=timeout)


def api_get_json(info: dict, path: str) -> dict:
    with api_get(info, path) as r:
        return json.load(r)


def kube_client(info: dict):
    """A kubernetes.client.ApiClient for the admin kubeconfig (needs `pip install kubernetes`)."""
    from kubernetes import config

    return config.new_client_from_config(config_file=info["kubeconfig"])
