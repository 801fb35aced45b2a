"""`bash scripts/demo.sh` on the real node: the sample Session runs the node's test app and its
app's answer through the Session's Service ClusterIP is printed, then the usual stop, delete and
replay check. It runs on the real-node set's instance (already up: its start is a no-op)."""
from __future__ import annotations

import re
import subprocess

from tests.realnode.conftest import REPO


def test_the_demo_prints_the_apps_answer_through_its_service(node):
    out = subprocess.run(["bash", "scripts/demo.sh"], cwd=REPO, env=node["env"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "demo: on the real node" in out.stderr
    assert re.search(r"http://10\.96\.\d+\.\d+:8080/ \(Service demo, port tcp-8080\) answers: 'app-web 8080', "
                     r"[\d.]+ s after the Session was created", out.stdout), out.stdout
    assert "Session demo is gone" in out.stdout
    assert "check: every journaled effect matches the current code" in out.stdout
