#!/usr/bin/env bash
# The whole test suite: unit, scenario (time-frozen), contract, and e2e against a real
# kube-apiserver + etcd started here. First builds what the tests use (the venv, the control plane
# with kubectl, promtool; cached, side by side: scripts/build.sh). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh venv controlplane promtool
. scripts/venv.sh
bash scripts/controlplane.sh start --fresh   # an empty etcd: nothing an earlier run left
trap 'bash scripts/controlplane.sh stop || true' EXIT
echo "test.sh: pytest on $("$KFOLD_PY" -c 'import sys; print(sys.version.split()[0], "from", sys.base_prefix)')" >&2
set +e
"$KFOLD_PY" -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$rc"
