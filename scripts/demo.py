"""Drive the README demo: install CRDs, start `kfold run`, create the sample Session, show its
phases until Ready, stop it, show it go away. Uses the admin kubeconfig of the local control plane.

With ``--image`` (the real node's test app, scripts/demo.sh) the Session runs that image and, once
Ready, each declared port is fetched through the Session's Service ClusterIP with ``--fetch`` (a
command prefix that reaches the Service CIDR: ``bash scripts/node.sh exec curl ...``); the answer is
printed with the time from the Session's create to its first byte."""
from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, utils

REPO = Path(__file__).resolve().parents[1]
NS = "kfold-demo"
GVP = ("kfold.dev", "v1alpha1")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--image", help="the Session's spec.image (default: examples/session.yaml's)")
    ap.add_argument("--fetch", help="command prefix fetching a URL from where ClusterIPs answer")
    args = ap.parse_args()
    work = Path(args.workdir)
    api = admin(args.kubeconfig)
    install(api)
    cfg = work / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "cluster": {"name": "local", "kubeconfig": args.kubeconfig}, "namespaces": [NS],
        "base_domain": "sessions.localtest", "journal": {"path": str(work / "journal.db")},
        "http": {"listen": "127.0.0.1:18089"}, "log": {"format": "plain", "level": "info"}}))
    logf = open(work / "kfold.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kfold", "run", "--config", str(cfg)], cwd=REPO,
                            stdout=logf, stderr=subprocess.STDOUT)
    try:
        return demo(api, proc, args.image, args.fetch.split() if args.fetch else None)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            if shutil.which("py-spy"):  # show where it hangs, for the bug report
                subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)])
            proc.kill()
            raise
        print(f"kfold run exited {proc.returncode}; log: {work / 'kfold.log'}")


def admin(kubeconfig: str) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def install(api: client.ApiClient) -> None:
    from kfold.daemon.manifests import crds
    docs = crds() + [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}]
    for doc in docs:
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            if not all(e.status == 409 for e in exc.api_exceptions):
                raise
    time.sleep(1)


def demo(api: client.ApiClient, proc: subprocess.Popen, image: str | None, fetch: list[str] | None) -> int:
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    session = yaml.safe_load((REPO / "examples" / "session.yaml").read_text())
    session["metadata"]["namespace"] = NS
    if image:
        session["spec"]["image"] = image
    try:
        co.delete_namespaced_custom_object(*GVP, NS, "sessions", "demo")
        time.sleep(2)
    except client.exceptions.ApiException:
        pass
    time.sleep(2)  # let kfold finish its initial lists
    print("== creating Session demo")
    created = time.monotonic()
    co.create_namespaced_custom_object(*GVP, NS, "sessions", session)
    if not follow(co, "Ready", proc):
        return 1
    pods = [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="kfold.dev/session=demo").items]
    svc = core.read_namespaced_service("demo", NS)
    print(f"   pod(s): {pods}; service ports: {[p.port for p in svc.spec.ports]}")
    if fetch and not answers(fetch, svc, created):
        return 1
    print("== stopping Session demo (spec.stopped=true)")
    co.patch_namespaced_custom_object(*GVP, NS, "sessions", "demo", {"spec": {"stopped": True}})
    if not follow(co, "Stopped", proc):
        return 1
    for _ in range(60):
        left = [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="kfold.dev/session=demo").items]
        if not left:
            break
        time.sleep(0.5)
    print(f"   pods left: {left}")
    print("== deleting Session demo (finalizer runs the teardown first)")
    co.delete_namespaced_custom_object(*GVP, NS, "sessions", "demo")
    for _ in range(60):
        if not co.list_namespaced_custom_object(*GVP, NS, "sessions")["items"]:
            print("   Session demo is gone")
            return 0
        time.sleep(0.5)
    print("timed out waiting for the Session's finalizer")
    return 1


def answers(fetch: list[str], svc: Any, created: float, timeout: float = 60) -> bool:
    """Each Service port answers through the ClusterIP: its first answer is printed."""
    for port in svc.spec.ports:
        url, end = f"http://{svc.spec.cluster_ip}:{port.port}/", time.monotonic() + timeout
        while True:
            got = subprocess.run([*fetch, url], capture_output=True, text=True)
            if got.returncode == 0:
                print(f"   {url} (Service demo, port {port.name or port.port}) answers: {got.stdout.strip()!r}, "
                      f"{time.monotonic() - created:.1f} s after the Session was created")
                break
            if time.monotonic() > end:
                print(f"   {url} did not answer within {timeout:.0f} s: {got.stderr.strip()}")
                return False
            time.sleep(0.2)
    return True


def follow(co, want: str, proc, timeout: float = 60) -> bool:
    seen, end = None, time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            print(f"kfold run exited early ({proc.returncode})")
            return False
        st = co.get_namespaced_custom_object(*GVP, NS, "sessions", "demo").get("status", {})
        now = (st.get("phase"), st.get("generation"), st.get("podName"))
        if now != seen:
            print(f"   phase={now[0]} generation={now[1]} pod={now[2]}")
            seen = now
        if st.get("phase") == want:
            return True
        time.sleep(0.3)
    print(f"timed out waiting for phase {want}")
    return False


if __name__ == "__main__":
    sys.exit(main())
