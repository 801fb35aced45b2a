"""A real node runs pods, Services route to them, and stopping it leaves nothing on the host."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.realnode.conftest import SCRIPTS, _run


def kubectl(node, *args: str, stdin: str | None = None, check: bool = True) -> str:
    p = subprocess.run([node["kubectl"], *args], env=node["env"], input=stdin, capture_output=True,
                       text=True, timeout=120)
    if check and p.returncode:
        raise AssertionError(f"kubectl {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def in_node(node, *cmd: str) -> subprocess.CompletedProcess:
    return _run("bash", str(SCRIPTS / "node.sh"), "exec", *cmd, env=node["env"], check=False, timeout=60)


def apply(node, *docs: dict) -> None:
    kubectl(node, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs))


def app_pod(node, name: str, ns: str, env: dict[str, str], restart: str = "Always") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": {"restartPolicy": restart, "containers": [{
                "name": "c", "image": node["KFOLD_NODE_TESTAPP_IMAGE"],
                "env": [{"name": k, "value": v} for k, v in env.items()]}]}}


def namespace(node, name: str) -> str:
    kubectl(node, "create", "namespace", name)
    for _ in range(60):  # the controller manager's default ServiceAccount, which pods need here
        if kubectl(node, "get", "serviceaccount", "default", "-n", name, check=False):
            return name
        time.sleep(0.5)
    raise AssertionError(f"namespace {name} got no default ServiceAccount")


def test_an_app_answers_through_its_service_from_the_node_and_from_a_pod(node):
    ns = namespace(node, "rn-answer")
    apply(node, app_pod(node, "web", ns, {"KFOLD_CONTAINER": "app-web", "KFOLD_APP": "web",
                                          "KFOLD_APP_PORTS": "8080/TCP,8081/TCP"}),
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
           "spec": {"selector": {"app": "web"},
                    "ports": [{"name": "a", "port": 80, "targetPort": 8080},
                              {"name": "b", "port": 81, "targetPort": 8081}]}})
    kubectl(node, "wait", "-n", ns, "--for=condition=Ready", "pod/web", "--timeout=90s")
    ip = kubectl(node, "get", "svc", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
    for port, want in ((80, "app-web 8080\n"), (81, "app-web 8081\n")):
        for _ in range(40):  # kube-proxy programs the new endpoints within a second or two
            got = in_node(node, "curl", "-sS", "-m", "3", f"http://{ip}:{port}/")
            if got.returncode == 0:
                break
            time.sleep(0.5)
        assert got.stdout == want, got.stderr
    # from a pod, through the Service's DNS-free address
    apply(node, app_pod(node, "client", ns, {"KFOLD_CONTAINER": "workspace", "TESTAPP_GET": f"http://{ip}:81/"},
                        restart="Never"))
    kubectl(node, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "pod/client", "--timeout=90s")
    assert kubectl(node, "logs", "-n", ns, "client") == "app-web 8081\n"
    # the app logs one line per port, read through the kubelet
    assert "app-web listening on 8080" in kubectl(node, "logs", "-n", ns, "web")


def test_a_container_exits_with_the_code_it_is_given(node):
    ns = namespace(node, "rn-exit")
    apply(node, app_pod(node, "bad", ns, {"KFOLD_CONTAINER": "app-bad", "TESTAPP_EXIT": "3"}, restart="Never"))
    kubectl(node, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Failed", "pod/bad", "--timeout=90s")
    state = json.loads(kubectl(node, "get", "pod", "bad", "-n", ns, "-o", "json"))["status"]["containerStatuses"][0]
    assert state["state"]["terminated"]["exitCode"] == 3


def test_a_pull_from_any_other_registry_fails_on_this_machine(node):
    ns = namespace(node, "rn-pull")
    pod = app_pod(node, "pull", ns, {})
    pod["spec"]["containers"][0]["image"] = "registry.example.com/nothing:1"
    apply(node, pod)
    for _ in range(60):
        events = kubectl(node, "get", "events", "-n", ns, "-o", "jsonpath={.items[*].message}")
        if "127.0.0.1:9" in events:
            break
        time.sleep(0.5)
    assert "127.0.0.1:9" in events and "connection refused" in events, events


def _leftovers(node) -> list[str]:
    out = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += [f"netns {line.split()[0]}" for line in netns.splitlines() if line.split()[0] == node["env"]["KFOLD_NODE_NETNS"]]
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    ours = (f"kfold-h{node['env']['KFOLD_NODE_INDEX']}", f"kfold-n{node['env']['KFOLD_NODE_INDEX']}")
    out += [f"link {line.split()[0]}" for line in links.splitlines() if line.split()[0].split("@")[0] in ours]
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    pods = node["env"]["KFOLD_NODE_POD_CIDR"].rsplit(".", 1)[0] + "."   # this node's routes, not another instance's
    out += [f"route {line}" for line in routes.splitlines() if pods in line or f"dev {ours[0]}" in line]
    mounts = Path("/proc/mounts").read_text()
    cache = node["env"].get("KFOLD_CACHE", str(Path.home() / ".cache/kfold"))
    out += [f"mount {line}" for line in mounts.splitlines() if cache in line]
    out += [f"cgroup {p}" for p in Path("/sys/fs/cgroup").glob(f"*/{node['env']['KFOLD_NODE_CGROUP']}")]
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    node_bins = ("containerd", "kubelet", "kube-proxy", "/pause", "/testapp")
    out += [f"process {line}" for line in ps.splitlines()
            if any(b in line for b in node_bins) and "<defunct>" not in line   # a zombie holds nothing
            and _this_nodes(line.split(None, 1)[0], line, cache, node["env"]["KFOLD_NODE_CGROUP"])]
    return out


def _this_nodes(pid: str, args: str, cache: str, cgroup: str) -> bool:
    """A process of this node (not of another instance's real node on the same machine): started
    from this instance's state, or still in this node's cgroup."""
    try:
        groups = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False   # gone meanwhile
    return cache in args or any(g.split(":", 2)[-1].split("/")[1:2] == [cgroup] for g in groups.splitlines())


def test_stop_after_kill_9_then_start_leaves_nothing(node):
    env = node["env"]
    pids = [p for c in Path("/sys/fs/cgroup/pids", env["KFOLD_NODE_CGROUP"]).rglob("cgroup.procs") for p in c.read_text().split()]
    assert pids, "the node runs no process in its cgroup"
    subprocess.run(["kill", "-9", *pids], check=False)
    started = _run("bash", str(SCRIPTS / "node.sh"), "start", env=env, check=False)
    assert started.returncode == 0, started.stderr
    kubectl(node, "wait", "--for=condition=Ready", f"node/{env['KFOLD_NODE_NAME']}", "--timeout=60s")
    _run("bash", str(SCRIPTS / "node.sh"), "stop", env=env)
    assert _leftovers(node) == []
    # the rest of the session gets its node back
    _run("bash", str(SCRIPTS / "node.sh"), "start", env=env)
