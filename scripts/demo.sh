#!/usr/bin/env bash
# The main job, end to end on this machine: build what the demo runs (the project's venv, etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager and kwok; cached, side by side: scripts/build.sh),
# start a local kube-apiserver + etcd + scheduler + kwok, install kfold's CRDs, run `kfold run` with a
# journal, create the sample Session (examples/session.yaml), watch it come up and go away, then
# print the journal's replay summary and check it. Leaves the control plane running
# (`bash scripts/controlplane.sh stop` stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
KFOLD_K8S_BINS=${KFOLD_K8S_BINS:-kube-apiserver kube-scheduler kube-controller-manager} bash scripts/build.sh venv controlplane
. scripts/venv.sh
eval "$(bash scripts/controlplane.sh start | grep '^export ')"
work=$(mktemp -d /tmp/kfold-demo.XXXXXX)
"$KFOLD_PY" scripts/demo.py --kubeconfig "$KUBECONFIG" --workdir "$work"
echo
echo "== kfold replay $work/journal.db --check"
"$KFOLD_PY" -m kfold replay "$work/journal.db" --check
