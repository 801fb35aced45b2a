#!/usr/bin/env bash
# controlplane.sh start|stop|status|env|compact - run kfold's local Kubernetes control plane.
#
# Binaries come from scripts/build_controlplane.sh (${KFOLD_CACHE:-~/.cache/kfold}/bin).
# Everything listens on 127.0.0.1; each instance keeps its state (certs, etcd data, logs, pids,
# kubeconfig) in its own directory, $KFOLD_CP_DIR: by default $CACHE/cp for the default ports and
# $CACHE/cp-<apiserver port> for any other port set (two instances cannot share that port), so
# instances on different ports run side by side and each `stop` stops only its own processes. A
# control plane started on non-default ports before instances had their own directory is found
# in $CACHE/cp while its kubeconfig names this apiserver port. Components:
#   etcd                    client :23790 (plain http), peer :23800
#   kube-apiserver          https :26443, --watch-cache=false by default (see "compact");
#                           --endpoint-reconciler-type=none (a loopback advertise address is
#                           rejected by the endpoint reconciler)
#   kube-scheduler          :26259 (leader election off) - binds pods to the fake nodes
#   kube-controller-manager :26257, only if built (Deployments/ReplicaSets, GC, namespace
#                           deletion, default ServiceAccounts)
#   kwok                    :26247, fakes the kubelet for nodes annotated
#                           kwok.x-k8s.io/node=fake: Ready nodes (a node Lease renewed every
#                           10 s, --node-lease-duration-seconds=40, as kwokctl runs it; without
#                           it the controller manager saw no heartbeat within its 50 s grace,
#                           marked every node NotReady and every pod on it Ready=False for good) and
#                           Running/Ready pods with a podIP from 10.244.0.0/16; stages from
#                           scripts/controlplane/kwok-stages.yaml
# Two fake nodes (kfold-node-1, kfold-node-2; 32 cpu / 256Gi / 110 pods, no taints) are created;
# KFOLD_NODE_PODS gives each room for more pods (a soak of more Sessions than 220).
# Admission: ServiceAccount plugin is DISABLED so pods can be created in a brand-new
# namespace without racing the controller-manager's `default` ServiceAccount creation
# (pods get no serviceAccountName and no token volume).
# Auth: client certs from a local CA; $KFOLD_CP_DIR/kubeconfig is admin (O=system:masters).
#
#   start    idempotent; waits for /readyz and Ready nodes, then prints the env. `start --fresh`
#            stops a running one and starts on an empty etcd (certs and logs kept): what a test
#            run starts from, so nothing an earlier run or bench left (thousands of pods for the
#            garbage collector to walk) slows or changes it
#   stop     kills the processes recorded in $KFOLD_CP_DIR/run/*.pid (keeps data; `stop --wipe` deletes it)
#   status   shows which components are running
#   env      prints shell exports (KUBECONFIG, KFOLD_APISERVER, KFOLD_ETCD, KFOLD_CP_DIR)
#   restart COMPONENT  stops one component (etcd, kube-apiserver, kube-scheduler,
#            kube-controller-manager, kwok) and starts it again with its usual arguments, waiting
#            until it serves; the rest keep running (a fault for scripts/soak.py)
#   compact  compacts etcd to its current revision (physical) via the v3 JSON gateway and
#            prints it. With the watch cache off, a later watch from any older
#            resourceVersion gets HTTP 200 + {"type":"ERROR","object":{Status code 410,
#            reason Expired}} (the python client raises ApiException(status=410)).
# Real node (KFOLD_REAL_NODE=1, root): this instance serves one real node instead of kwok's fake
# ones (scripts/node.sh: containerd, kubelet, kube-proxy in a network namespace of their own, joined
# by a veth). `start` first creates that namespace and veth, then binds and advertises the apiserver
# on the veth's host side (KFOLD_CP_ADDRESS, 10.250.0.1: the address pods and the kubelet reach),
# turns on what an in-cluster client needs (ServiceAccount admission, so pods get a token; the lease
# endpoint reconciler, so the `kubernetes` Service 10.96.0.1 has that endpoint; a kubelet client
# certificate, so `kubectl logs`/`attach` reach the kubelet), starts neither kwok nor its nodes (no
# fake node a real pod could land on), and last starts the node and waits for it to be Ready.
# `stop` stops the node first (no shim, mount, namespace or route is left). The apiserver's serving
# certificate names 127.0.0.1, 10.250.0.1 and 10.96.0.1 in either mode.
# Ports override: KFOLD_ETCD_PORT, KFOLD_ETCD_PEER_PORT, KFOLD_APISERVER_PORT,
# KFOLD_SCHEDULER_PORT, KFOLD_KCM_PORT, KFOLD_KWOK_PORT. KFOLD_WATCH_CACHE=true turns the
# apiserver watch cache back on: old-RV watches are then served from memory and compaction
# does NOT cause a 410 (only RVs older than the cache's start do).
# Sizing (e.g. scripts/bench_peer.py at N >= 1,000): KFOLD_APISERVER_ARGS and KFOLD_ETCD_ARGS are
# extra flags (split on spaces) appended to kube-apiserver's and etcd's, read by `start` only;
# unset (the default), both run as above. E.g.
#   KFOLD_APISERVER_ARGS='--max-requests-inflight=800 --max-mutating-requests-inflight=400' \
#   KFOLD_ETCD_ARGS='--quota-backend-bytes=8589934592' bash scripts/controlplane.sh start
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/syspath.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}
BIN=$CACHE/bin
ETCD_PORT=${KFOLD_ETCD_PORT:-23790}
ETCD_PEER_PORT=${KFOLD_ETCD_PEER_PORT:-23800}
API_PORT=${KFOLD_APISERVER_PORT:-26443}
SCHED_PORT=${KFOLD_SCHEDULER_PORT:-26259}
KCM_PORT=${KFOLD_KCM_PORT:-26257}
KWOK_PORT=${KFOLD_KWOK_PORT:-26247}
if [[ -n ${KFOLD_CP_DIR:-} ]]; then
  CP=$KFOLD_CP_DIR
elif [[ "$ETCD_PORT $ETCD_PEER_PORT $API_PORT $SCHED_PORT $KCM_PORT $KWOK_PORT" == "23790 23800 26443 26259 26257 26247" ]]; then
  CP=$CACHE/cp
else
  CP=$CACHE/cp-$API_PORT
  if [[ ! -d $CP ]] && grep -qs "server: https://127.0.0.1:$API_PORT\$" "$CACHE/cp/kubeconfig"; then CP=$CACHE/cp; fi
fi
WATCH_CACHE=${KFOLD_WATCH_CACHE:-false}
read -r -a APISERVER_ARGS <<< "${KFOLD_APISERVER_ARGS:-}"
read -r -a ETCD_ARGS <<< "${KFOLD_ETCD_ARGS:-}"
NODES=(kfold-node-1 kfold-node-2)
NODE_PODS=${KFOLD_NODE_PODS:-110}
REAL_NODE=${KFOLD_REAL_NODE:-0}
. "$HERE/nodenet.sh"   # NODE_HOST_IP: the veth's host side of this instance's real node (KFOLD_NODE_INDEX)
ADDRESS=127.0.0.1
[[ $REAL_NODE == 1 ]] && ADDRESS=$NODE_HOST_IP
ETCD=http://127.0.0.1:$ETCD_PORT
API=https://$ADDRESS:$API_PORT
KUBECONFIG_FILE=$CP/kubeconfig
PKI=$CP/pki

log() { echo "[controlplane] $(date +%T) $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
kcurl() { curl -sS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
# running NAME: its pid file names a live process that is really that component (a pid left by a
# killed session may have been reused by an unrelated process).
running() {
  local f=$CP/run/$1.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  # Read the whole cmdline first, then match in the shell: no pipeline, so no early-exiting
  # reader can SIGPIPE the writer and turn a running component into "exited" under pipefail.
  local cmd
  cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$BIN/$1"* ]]
}

gen_certs() {
  # A CA made before the node's address and kubelet client existed: add what is missing.
  if [[ -f $PKI/admin.crt ]] && { ! openssl x509 -in "$PKI/apiserver.crt" -noout -text | grep -q "IP Address:$NODE_HOST_IP" \
       || [[ ! -f $PKI/apiserver-kubelet-client.crt ]]; }; then
    log "adding the node's address and the kubelet client certificate to $PKI"
    rm -f "$PKI/admin.crt"
    mv "$PKI/ca.crt" "$PKI/ca.keep.crt"; mv "$PKI/ca.key" "$PKI/ca.keep.key"
  fi
  [[ -f $PKI/admin.crt ]] && return
  log "generating certificates in $PKI"
  mkdir -p "$PKI"
  (
    cd "$PKI"
    if [[ -f ca.keep.crt ]]; then mv ca.keep.crt ca.crt; mv ca.keep.key ca.key
    else openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=kfold-ca" 2>/dev/null; fi
    cert() { # name subject [extfile]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -out "$1.crt" ${3:+-extfile "$3"} 2>/dev/null
      rm -f "$1.csr"
    }
    printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:$NODE_HOST_IP,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      "extendedKeyUsage=serverAuth" "keyUsage=digitalSignature,keyEncipherment" > apiserver.ext
    printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=digitalSignature,keyEncipherment" > client.ext
    cert apiserver "/CN=kube-apiserver" apiserver.ext
    cert admin "/O=system:masters/CN=kfold-admin" client.ext
    cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client.ext
    [[ -f sa.key ]] || openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

write_kubeconfig() {
  local b64="base64 -w0"
  cat > "$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kfold
  cluster:
    server: $API
    certificate-authority-data: $($b64 < "$PKI/ca.crt")
users:
- name: kfold-admin
  user:
    client-certificate-data: $($b64 < "$PKI/admin.crt")
    client-key-data: $($b64 < "$PKI/admin.key")
contexts:
- name: kfold
  context: {cluster: kfold, user: kfold-admin}
current-context: kfold
EOF
}

# spawn NAME BINARY ARGS... : start detached, log to logs/NAME.log, pid in run/NAME.pid
spawn() {
  local name=$1; shift
  running "$name" && return
  [[ -x $1 ]] || die "$1 not built; run bash scripts/build.sh controlplane"
  echo "--- [controlplane] $(date '+%F %T') starting $name" >> "$CP/logs/$name.log"
  setsid nohup "$@" >> "$CP/logs/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" > "$CP/run/$name.pid"
  # Until the forked shell has exec'd the binary, /proc/PID/cmdline still names this script, and
  # `running` would call a starting component exited. Wait for the exec (or the death) first.
  for ((i = 0; i < 200; i++)); do
    running "$name" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  log "started $name (pid $pid)"
}

wait_for() { # component description timeout-seconds command...
  local comp=$1 what=$2 t=$3; shift 3
  for ((i = 0; i < t * 4; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    running "$comp" || { tail -5 "$CP/logs/$comp.log" >&2; die "$comp exited (see $CP/logs/$comp.log)"; }
    sleep 0.25
  done
  die "timed out after ${t}s waiting for $what (see $CP/logs/)"
}

node_json() {
  cat <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$1",
 "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
 "labels":{"type":"kwok","kubernetes.io/hostname":"$1","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64"}},
 "spec":{},
 "status":{"allocatable":{"cpu":"32","memory":"256Gi","pods":"$NODE_PODS"},
           "capacity":{"cpu":"32","memory":"256Gi","pods":"$NODE_PODS"},
           "nodeInfo":{"architecture":"amd64","operatingSystem":"linux","kubeletVersion":"fake"}}}
EOF
}

node_ready() {
  kcurl -f "$API/api/v1/nodes/$1" | python3 -c '
import json,sys
c={x["type"]:x["status"] for x in json.load(sys.stdin)["status"].get("conditions",[])}
sys.exit(0 if c.get("Ready")=="True" else 1)'
}

cmd_env() {
  cat <<EOF
export KUBECONFIG=$KUBECONFIG_FILE
export KFOLD_APISERVER=$API
export KFOLD_ETCD=$ETCD
export KFOLD_CP_DIR=$CP
EOF
}

cmd_start() {
  local t0=$SECONDS
  mkdir -p "$CP/logs" "$CP/run" "$CP/etcd"
  gen_certs
  write_kubeconfig
  spawn etcd "$BIN/etcd" --name kfold --data-dir "$CP/etcd" \
    --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "kfold=http://127.0.0.1:$ETCD_PEER_PORT" \
    --listen-metrics-urls "" --log-level warn ${ETCD_ARGS[@]+"${ETCD_ARGS[@]}"}
  wait_for etcd etcd 30 curl -sf "$ETCD/health"
  local mode_args=(--disable-admission-plugins=ServiceAccount --endpoint-reconciler-type=none)
  if [[ $REAL_NODE == 1 ]]; then
    KFOLD_CP_DIR=$CP bash "$HERE/node.sh" net-up
    mode_args=(--endpoint-reconciler-type=lease
      --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt"
      --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
      --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP)
  fi
  spawn kube-apiserver "$BIN/kube-apiserver" \
    --bind-address="$ADDRESS" --advertise-address="$ADDRESS" --secure-port="$API_PORT" \
    --etcd-servers="$ETCD" --watch-cache="$WATCH_CACHE" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC \
    --allow-privileged=true --profiling=false "${mode_args[@]}" ${APISERVER_ARGS[@]+"${APISERVER_ARGS[@]}"}
  wait_for kube-apiserver "apiserver /readyz" 120 kcurl -f "$API/readyz"
  spawn kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KUBECONFIG_FILE" \
    --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
    --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false
  if [[ -x $BIN/kube-controller-manager ]]; then
    spawn kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KUBECONFIG_FILE" \
      --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
      --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
      --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
      --use-service-account-credentials=false \
      --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key"
  fi
  if [[ $REAL_NODE == 1 ]]; then
    KFOLD_CP_DIR=$CP bash "$HERE/node.sh" start
    log "control plane and node ready in $((SECONDS - t0))s ($API)"
    cmd_env
    return
  fi
  spawn kwok "$BIN/kwok" --kubeconfig="$KUBECONFIG_FILE" -c "$HERE/controlplane/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=10.240.0.1 --cidr=10.244.0.0/16 --server-address="127.0.0.1:$KWOK_PORT" \
    --node-lease-duration-seconds=40
  local n
  for n in "${NODES[@]}"; do
    kcurl -f "$API/api/v1/nodes/$n" >/dev/null 2>&1 ||
      node_json "$n" | kcurl -f -X POST -H 'Content-Type: application/json' \
        --data-binary @- "$API/api/v1/nodes" >/dev/null
  done
  for n in "${NODES[@]}"; do wait_for kwok "node $n Ready" 60 node_ready "$n"; done
  log "control plane ready in $((SECONDS - t0))s ($API)"
  cmd_env
}

cmd_stop() {
  # SIGTERM everything but etcd at once, wait (<=10s, then SIGKILL), then etcd the same way.
  local group name pid pids
  if [[ -d $CACHE/node/run ]] || { [[ $REAL_NODE == 1 ]] && [[ -e /run/netns/$NODE_NETNS ]]; }; then KFOLD_CP_DIR=$CP bash "$HERE/node.sh" stop; fi
  for group in "kwok kube-controller-manager kube-scheduler kube-apiserver" etcd; do
    pids=()
    for name in $group; do
      pid=$(cat "$CP/run/$name.pid" 2>/dev/null) || continue
      rm -f "$CP/run/$name.pid"
      kill "$pid" 2>/dev/null && { pids+=("$pid"); log "stopping $name (pid $pid)"; }
    done
    for pid in "${pids[@]}"; do
      for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
    done
  done
  if [[ ${1:-} == --wipe ]]; then rm -rf "$CP"; log "wiped $CP"; fi
}

# restart COMPONENT: stop that one process (SIGTERM, then SIGKILL after 10 s) and start it again
# with the arguments `start` gives it, waiting until it serves; the others keep running. A fault
# for the soak (scripts/soak.py): their clients see connections reset and re-establish.
cmd_restart() {
  local name=$1 pid
  case $name in
    etcd|kube-apiserver|kube-scheduler|kube-controller-manager|kwok) ;;
    *) echo "usage: $0 restart etcd|kube-apiserver|kube-scheduler|kube-controller-manager|kwok" >&2; exit 2 ;;
  esac
  running "$name" || die "$name is not running (start the control plane first: $0 start)"
  pid=$(cat "$CP/run/$name.pid")
  rm -f "$CP/run/$name.pid"
  log "restarting $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  cmd_start >/dev/null
  if [[ $name == etcd ]]; then   # the apiserver reconnects by itself; wait until it serves again
    wait_for kube-apiserver "apiserver /readyz after the etcd restart" 120 kcurl -f "$API/readyz"
  fi
}

cmd_status() {
  local name rc=0
  local comps=(etcd kube-apiserver kube-scheduler kube-controller-manager kwok)
  [[ $REAL_NODE == 1 ]] && comps=("${comps[@]:0:4}")
  for name in "${comps[@]}"; do
    if running "$name"; then echo "$name: running (pid $(cat "$CP/run/$name.pid"))"
    else echo "$name: stopped"; [[ $name == kube-controller-manager ]] || rc=1; fi
  done
  if [[ $REAL_NODE == 1 ]]; then KFOLD_CP_DIR=$CP bash "$HERE/node.sh" status || rc=1; fi
  return $rc
}

cmd_compact() {
  local rev
  rev=$(curl -sf -X POST "$ETCD/v3/kv/range" -d '{"key":"AA=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  local out
  out=$(curl -s -X POST "$ETCD/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}")
  # already compacted to this revision (idle cluster) is fine
  [[ $out == *'"header"'* || $out == *"has been compacted"* ]] || die "compaction failed: $out"
  echo "$rev"
}

case ${1:-} in
  start)
    case ${2:-} in
      "") if cmd_status >/dev/null 2>&1; then cmd_env; else cmd_start; fi ;;
      --fresh) cmd_stop; rm -rf "$CP/etcd"; log "emptied $CP/etcd"; cmd_start ;;
      *) echo "usage: $0 start [--fresh]" >&2; exit 2 ;;
    esac ;;
  stop) cmd_stop "${2:-}" ;;
  status) cmd_status ;;
  env) cmd_env ;;
  compact) cmd_compact ;;
  restart) cmd_restart "${2:-}" ;;
  *) echo "usage: $0 start [--fresh]|stop [--wipe]|status|env|compact|restart COMPONENT" >&2; exit 2 ;;
esac
