#!/usr/bin/env bash
# The main job, end to end on this machine: build what the demo runs (the project's venv, etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager and kwok; cached, side by side: scripts/build.sh),
# start a local kube-apiserver + etcd + scheduler + kwok, install kfold's CRDs, run `kfold run` with a
# journal, create the sample Session (examples/session.yaml), watch it come up and go away, then
# print the journal's replay summary and check it. Leaves the control plane running
# (`bash scripts/controlplane.sh stop` stops it).
#
# On the real node when it can (root, and scripts/build_node.sh's binaries and images in the cache):
# the control plane starts with KFOLD_REAL_NODE=1 and its node (scripts/node.sh; kubectl is built
# too), the Session runs the node's test app and, once Ready, its app's answer through the Session's
# Service ClusterIP is printed (fetched from the node's network namespace). KFOLD_REAL_NODE=0 keeps
# the kwok demo; KFOLD_REAL_NODE=1 insists on the real node (exit 1 naming what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}

# Why the real node cannot run here (nothing: it can).
no_real_node() {
  [[ $(id -u) == 0 ]] || { echo "it needs root"; return; }
  local b
  for b in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr runc cni/bridge images/pause.oci.tar images/testapp.oci.tar; do
    [[ -e $CACHE/bin/$b ]] || { echo "$CACHE/bin/$b is not built (bash scripts/build_node.sh)"; return; }
  done
}
real=0
if [[ ${KFOLD_REAL_NODE:-} == 0 ]]; then echo "demo: on kwok's fake nodes (KFOLD_REAL_NODE=0)" >&2
else
  why=$(no_real_node)
  if [[ -z $why ]]; then real=1
  elif [[ ${KFOLD_REAL_NODE:-} == 1 ]]; then echo "demo: KFOLD_REAL_NODE=1, but the real node cannot run: $why" >&2; exit 1
  else echo "demo: on kwok's fake nodes: the real node cannot run ($why)" >&2; fi
fi
if [[ $real == 1 ]]; then
  echo "demo: on the real node (KFOLD_REAL_NODE=0 runs the kwok demo instead)" >&2
  export KFOLD_REAL_NODE=1
  bins="kube-apiserver kube-scheduler kube-controller-manager kubectl"   # node.sh asks kubectl for the node
else
  export KFOLD_REAL_NODE=0
  bins="kube-apiserver kube-scheduler kube-controller-manager"
fi
KFOLD_K8S_BINS=${KFOLD_K8S_BINS:-$bins} bash scripts/build.sh venv controlplane
. scripts/venv.sh
eval "$(bash scripts/controlplane.sh start | grep '^export ')"
work=$(mktemp -d /tmp/kfold-demo.XXXXXX)
args=()
if [[ $real == 1 ]]; then
  eval "$(bash scripts/node.sh env)"
  args=(--image "$KFOLD_NODE_TESTAPP_IMAGE" --fetch "bash scripts/node.sh exec curl -sS -m 2")
fi
"$KFOLD_PY" scripts/demo.py --kubeconfig "$KUBECONFIG" --workdir "$work" "${args[@]}"
echo
echo "== kfold replay $work/journal.db --check"
"$KFOLD_PY" -m kfold replay "$work/journal.db" --check
