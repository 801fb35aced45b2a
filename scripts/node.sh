#!/usr/bin/env bash
# node.sh net-up|start|stop|status|env|exec - a real Kubernetes node for kfold's control plane.
#
# containerd, kubelet and kube-proxy (scripts/build_node.sh, in ${KFOLD_CACHE:-~/.cache/kfold}/bin)
# run in a network and mount namespace of their own, as kind runs a node in a container:
#   netns     kfold-node (KFOLD_NODE_NETNS), joined to the host by one veth pair:
#             host side kfold-h0 10.250.0.1/30 (the control plane's address for pods and the kubelet,
#             KFOLD_CP_ADDRESS), node side kfold-n0 10.250.0.2/30 (the node's InternalIP).
#             Inside: the CNI bridge kfold-br0 with the pod CIDR 10.245.0.0/24 (its gateway .1),
#             kube-proxy's iptables rules for the Service CIDR 10.96.0.0/16, ip_forward on.
#             The host gains one route, the pod CIDR via the node's veth (so pods reach the
#             apiserver without masquerading); it goes with the veth. Nothing is forwarded or
#             masqueraded to any other interface: the host's own ip_forward and iptables are untouched.
#   mountns   every mount containerd and the kubelet make (overlay rootfs, volumes, tmpfs for
#             tokens) lives in the node's mount namespace (`ip netns exec` makes one, / a slave of
#             the host's), so they go with its last process. /run/containerd, /var/lib/cni and
#             /var/log/containers are private tmpfs there.
#   cgroups   every process of the node (containerd, shims, containers, kubelet, kube-proxy) is
#             under the cgroup /kfold-node in each v1 hierarchy: cgroupfs driver, kubelet
#             cgroupRoot /kfold-node, failCgroupV1: false (docs/install.md).
#   state     $KFOLD_CACHE/node/ (config, containerd root/state and socket, kubelet root, logs).
# Images come only from this machine: the pause and test-app images of build_node.sh and kfold's
# (scripts/build_image.sh) are imported with `ctr -n k8s.io images import`; containerd resolves
# every registry host through one hosts.toml whose server is 127.0.0.1:9 (refused locally), so a
# reference to any other host fails on this machine.
#
#   net-up   creates the namespace and the veth (idempotent): controlplane.sh runs it before it
#            binds the apiserver to KFOLD_CP_ADDRESS
#   start    net-up, then containerd, image import, kubelet (client certificate from the control
#            plane's CA), kube-proxy; waits for the node to be Ready. Needs a running control plane
#            started with KFOLD_REAL_NODE=1 (`controlplane.sh start` does that and calls this).
#   stop     kills every process in the node's cgroups (shims and containers too), removes the
#            cgroups and the namespace (the veth and route go with it), deletes the runtime state.
#            Works after kill -9 of anything; leaves no shim, mount, namespace or route.
#   status   what runs; exit 1 when the node is not up
#   exec     CMD...: run CMD in the node's network namespace (e.g. curl a ClusterIP)
#   kubelet-stop, kubelet-start
#            the kubelet alone (SIGTERM; started again in the node's cgroups and namespaces):
#            a kubelet restart, or a node NotReady while its containers run on
# Env: KFOLD_CACHE, KFOLD_CP_DIR (the control plane's state, default $KFOLD_CACHE/cp),
#      KFOLD_NODE_INDEX (0: the names and addresses above; i: scripts/nodenet.sh's set i, one per
#      control plane instance), KFOLD_NODE_NAME (kfold-real-1), KFOLD_NODE_NETNS, KFOLD_NODE_IMAGES (extra OCI
#      archives to import, space separated; kfold's image is imported when built).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/syspath.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}
BIN=$CACHE/bin
CP=${KFOLD_CP_DIR:-$CACHE/cp}
PKI=$CP/pki
N=$CACHE/node
NAME=${KFOLD_NODE_NAME:-kfold-real-1}
. "$HERE/nodenet.sh"
NETNS=$NODE_NETNS
HOST_IF=$NODE_HOST_IF
NODE_IF=$NODE_NODE_IF
HOST_IP=$NODE_HOST_IP
NODE_IP=$NODE_NODE_IP
POD_CIDR=$NODE_POD_CIDR
POD_GW=$NODE_POD_GW
SVC_CIDR=10.96.0.0/16
CGROUP=$NODE_CGROUP
API_PORT=${KFOLD_APISERVER_PORT:-26443}
API=https://$HOST_IP:$API_PORT
SOCK=$N/containerd/containerd.sock
# The OCI runtime: build_node.sh's runc (1.5, from Go modules) by default; Debian 12's runc 1.1.5
# fails every pod sandbox of containerd 2.4 ("can't get final child's PID from pipe: EOF") and its
# crun 1.8.1 refuses the spec ("unknown version specified"). KFOLD_NODE_RUNTIME=NAME|PATH overrides.
RUNTIME=${KFOLD_NODE_RUNTIME:-$BIN/runc}
[[ $RUNTIME == */* ]] || RUNTIME=$(command -v "$RUNTIME" || echo "$RUNTIME")
PAUSE_IMAGE=localhost/kfold/pause:$(cat "$BIN/.pause.oci.tar.version" 2>/dev/null || echo missing)

log() { echo "[node] $(date +%T) $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
in_ns() { ip netns exec "$NETNS" "$@"; }
ns_exists() { [[ -e /run/netns/$NETNS ]]; }
. "$HERE/buildlib.sh"   # NODE_HOST_TOOLS
hierarchies() { local h; for h in /sys/fs/cgroup/*/; do [[ -e $h/cgroup.procs ]] && echo "${h%/}"; done; }

preflight() {
  [[ $(id -u) == 0 ]] || die "the real node needs root (network namespace, veth, mounts, cgroups): run as root or set KFOLD_REAL_NODE=0"
  local b
  for b in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr cni/bridge cni/host-local cni/loopback; do
    [[ -x $BIN/$b ]] || die "$BIN/$b not built: run bash scripts/build_node.sh"
  done
  [[ -x $RUNTIME ]] || die "OCI runtime $RUNTIME not found: run bash scripts/build_node.sh (or set KFOLD_NODE_RUNTIME)"
  for b in "${NODE_HOST_TOOLS[@]}"; do
    command -v "${b#*:}" >/dev/null || die "'${b#*:}' not found: apt-get install -y ${b%%:*}"
  done
  [[ -f $PKI/ca.key ]] || die "no control plane CA in $PKI: start the control plane first (KFOLD_REAL_NODE=1 bash scripts/controlplane.sh start)"
  [[ -d /sys/fs/cgroup/memory ]] || die "no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory (cgroup v2-only hosts need the kubelet's default failCgroupV1 and another cgroup setup)"
}

cmd_net_up() {
  [[ $(id -u) == 0 ]] || die "the real node needs root (network namespace and veth)"
  if ! ns_exists; then
    ip netns add "$NETNS"
    log "created network namespace $NETNS"
  fi
  if ! ip link show "$HOST_IF" >/dev/null 2>&1; then
    ip link add "$HOST_IF" type veth peer name "$NODE_IF" netns "$NETNS"
    ip addr add "$HOST_IP/30" dev "$HOST_IF"
    ip link set "$HOST_IF" up
    in_ns ip addr add "$NODE_IP/30" dev "$NODE_IF"
    in_ns ip link set "$NODE_IF" up
    in_ns ip link set lo up
    ip route add "$POD_CIDR" via "$NODE_IP" dev "$HOST_IF"
    # The node's own connections to a ClusterIP need a route before kube-proxy's OUTPUT DNAT
    # rewrites them (the namespace has no default route); the host forwards nothing it gets.
    in_ns ip route add "$SVC_CIDR" dev "$NODE_IF"
    log "veth $HOST_IF ($HOST_IP) <-> $NODE_IF ($NODE_IP); route $POD_CIDR via $NODE_IP"
  fi
  # Forwarding between the bridge and the veth, inside the node only; bridged pod traffic passes
  # kube-proxy's iptables (br_netfilter), as on any node.
  in_ns sysctl -qw net.ipv4.ip_forward=1
  in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || modprobe br_netfilter 2>/dev/null \
    || log "net.bridge.bridge-nf-call-iptables is not settable (no br_netfilter): pods reach Services of other pods only"
}

gen_node_certs() {
  mkdir -p "$N/pki"
  [[ -f $N/pki/kubelet.crt && $N/pki/kubelet.crt -nt $PKI/ca.crt ]] && return
  local name subj
  for name in kubelet kube-proxy; do
    case $name in
      kubelet) subj="/O=system:nodes/CN=system:node:$NAME" ;;
      kube-proxy) subj="/CN=system:kube-proxy" ;;
    esac
    openssl req -newkey rsa:2048 -nodes -keyout "$N/pki/$name.key" -out "$N/pki/$name.csr" -subj "$subj" 2>/dev/null
    printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=digitalSignature,keyEncipherment" > "$N/pki/client.ext"
    openssl x509 -req -in "$N/pki/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -days 3650 -out "$N/pki/$name.crt" -extfile "$N/pki/client.ext" 2>/dev/null
    rm -f "$N/pki/$name.csr"
  done
  # The kubelet's serving certificate (apiserver -> kubelet for logs, attach, exec).
  openssl req -newkey rsa:2048 -nodes -keyout "$N/pki/kubelet-serving.key" -out "$N/pki/kubelet-serving.csr" \
    -subj "/O=system:nodes/CN=system:node:$NAME" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:$NODE_IP,DNS:$NAME" "extendedKeyUsage=serverAuth" \
    "keyUsage=digitalSignature,keyEncipherment" > "$N/pki/serving.ext"
  openssl x509 -req -in "$N/pki/kubelet-serving.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -out "$N/pki/kubelet-serving.crt" -extfile "$N/pki/serving.ext" 2>/dev/null
  rm -f "$N/pki/kubelet-serving.csr"
}

kubeconfig() { # user
  local b64="base64 -w0"
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kfold
  cluster: {server: "$API", certificate-authority-data: $($b64 < "$PKI/ca.crt")}
users:
- name: $1
  user: {client-certificate-data: $($b64 < "$N/pki/$1.crt"), client-key-data: $($b64 < "$N/pki/$1.key")}
contexts:
- name: kfold
  context: {cluster: kfold, user: $1}
current-context: kfold
EOF
}

write_config() {
  mkdir -p "$N/etc/cni" "$N/etc/certs.d/_default" "$N/logs" "$N/run" "$N/kubelet" "$N/pod-logs" "$N/cni-ipam"
  cat > "$N/etc/containerd.toml" <<EOF
# Generated by scripts/node.sh: the node's own containerd (socket, root and state under $N).
version = 3
root = "$N/containerd/root"
state = "$N/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "${KFOLD_NODE_SNAPSHOTTER:-overlayfs}"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$N/etc/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  # This host's root lacks CAP_SYS_RESOURCE: no oom_score_adj below containerd's own (the
  # sandbox's -998 fails with "failed to update /proc/self/oom_score_adj: Permission denied").
  restrict_oom_score_adj = true
  # pods' network namespaces under the state dir, not the host's /run/netns
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNTIME"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$BIN/cni"]
    conf_dir = "$N/etc/cni"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
EOF
  # Every registry host resolves to a port nothing listens on: a pull of anything not imported
  # fails here with "connection refused", never a request off the machine.
  cat > "$N/etc/certs.d/_default/hosts.toml" <<'EOF'
server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
EOF
  cat > "$N/etc/cni/10-kfold.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kfold",
 "plugins": [{"type": "bridge", "bridge": "kfold-br0", "isGateway": true, "ipMasq": false,
              "hairpinMode": true,
              "ipam": {"type": "host-local", "dataDir": "$N/cni-ipam",
                       "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
                       "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
  kubeconfig kubelet > "$N/etc/kubelet.kubeconfig"
  kubeconfig kube-proxy > "$N/etc/kube-proxy.kubeconfig"
  cat > "$N/etc/kubelet.yaml" <<EOF
# Generated by scripts/node.sh; docs/install.md gives each setting's reason.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP
cgroupsPerQOS: true
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
imageServiceEndpoint: unix://$SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $N/pki/kubelet-serving.crt
tlsPrivateKeyFile: $N/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $N/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 30
podPidsLimit: 4096
shutdownGracePeriod: 0s
EOF
  cat > "$N/etc/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $N/etc/kube-proxy.kubeconfig}
mode: ${KFOLD_NODE_PROXY_MODE:-iptables}
clusterCIDR: $POD_CIDR
hostnameOverride: $NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# The node's supervisor: runs in the node's network + mount namespace and cgroup; starts the three
# daemons as its children and waits. Killing it does not stop them: `stop` kills by cgroup.
inner() {
  local d dev dir type opts rest
  # `ip netns exec` mounted a fresh sysfs (the node's interfaces) without the cgroup mounts under
  # it: mount the host's hierarchies again, the same way (same hierarchies, same cgroups).
  mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
  while read -r dev dir type opts rest; do
    [[ $dir == /sys/fs/cgroup/* && ( $type == cgroup || $type == cgroup2 ) ]] || continue
    mkdir -p "$dir"
    if [[ $type == cgroup2 ]]; then mount -t cgroup2 cgroup2 "$dir"
    else mount -t cgroup -o "${opts#rw,relatime,}" cgroup "$dir"; fi
  done < /proc/1/mounts
  for d in /run/containerd /var/lib/cni /var/log/containers; do
    mkdir -p "$d"; mount -t tmpfs -o mode=0755 tmpfs "$d"
  done
  "$BIN/containerd" --config "$N/etc/containerd.toml" >> "$N/logs/containerd.log" 2>&1 &
  echo $! > "$N/run/containerd.pid"
  for ((i = 0; i < 120; i++)); do [[ -S $SOCK ]] && break; sleep 0.25; done
  echo "containerd-up" > "$N/run/phase"
  # wait for the outer script to import images before the kubelet starts
  for ((i = 0; i < 1200; i++)); do [[ -f $N/run/images-ready ]] && break; sleep 0.25; done
  kubelet &
  echo $! > "$N/run/kubelet.pid"
  "$BIN/kube-proxy" --config="$N/etc/kube-proxy.yaml" >> "$N/logs/kube-proxy.log" 2>&1 &
  echo $! > "$N/run/kube-proxy.pid"
  wait
}

kubelet() {
  PATH="$BIN:$PATH" exec "$BIN/kubelet" --config="$N/etc/kubelet.yaml" --kubeconfig="$N/etc/kubelet.kubeconfig" \
    --root-dir="$N/kubelet" --hostname-override="$NAME" --node-ip="$NODE_IP" \
    --cert-dir="$N/pki" >> "$N/logs/kubelet.log" 2>&1
}

# kubelet-stop / kubelet-start: the kubelet alone; containerd, kube-proxy and every container run on
# (a kubelet restart; a node whose kubelet is down, NotReady once the node monitor's grace passes).
cmd_kubelet_stop() {
  local pid
  alive kubelet || { log "kubelet not running"; return; }
  pid=$(cat "$N/run/kubelet.pid")
  kill "$pid"
  for ((i = 0; i < 80; i++)); do alive kubelet || break; sleep 0.25; done
  alive kubelet && die "kubelet (pid $pid) did not exit on SIGTERM"
  log "kubelet stopped"
}

cmd_kubelet_start() {
  alive kubelet && { log "kubelet already running"; return; }
  alive containerd || die "containerd is not running: bash scripts/node.sh start"
  # into the node's cgroups first, then its mount and network namespaces (containerd's)
  setsid bash -c 'for h in "${@:3}"; do echo $$ > "$h/cgroup.procs"; done; echo $$ > "$2"; exec nsenter -t "$1" -m -n "$0" __kubelet' \
    "$HERE/node.sh" "$(cat "$N/run/containerd.pid")" "$N/run/kubelet.pid" \
    $(for h in $(hierarchies); do echo "$h/$CGROUP"; done) < /dev/null >> "$N/logs/supervisor.log" 2>&1 &
  for ((i = 0; i < 120; i++)); do node_ready && alive kubelet && break; sleep 0.5; done
  alive kubelet || { tail -3 "$N/logs/kubelet.log" >&2; die "kubelet exited (see $N/logs/kubelet.log)"; }
  node_ready || die "node $NAME not Ready 60s after the kubelet started (see $N/logs/kubelet.log)"
  log "kubelet started, node $NAME Ready"
}

cgroups_make() {
  local h
  for h in $(hierarchies); do
    mkdir -p "$h/$CGROUP"
    if [[ -e $h/cpuset.cpus ]]; then
      [[ -n $(cat "$h/$CGROUP/cpuset.cpus") ]] || cat "$h/cpuset.cpus" > "$h/$CGROUP/cpuset.cpus"
      [[ -n $(cat "$h/$CGROUP/cpuset.mems") ]] || cat "$h/cpuset.mems" > "$h/$CGROUP/cpuset.mems"
    fi
  done
}

node_pids() { # every process in the node's cgroups
  local h
  for h in $(hierarchies); do
    if [[ -d $h/$CGROUP ]]; then find "$h/$CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
  done | sort -un
}

kctl() { "$BIN/kubectl" --kubeconfig "$CP/kubeconfig" "$@"; }

node_ready() {
  [[ $(kctl get node "$NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

import_images() {
  local a t0=$SECONDS archives=("$BIN/images/pause.oci.tar" "$BIN/images/testapp.oci.tar")
  [[ -s $CACHE/image/kfold.oci.tar ]] && archives+=("$CACHE/image/kfold.oci.tar")
  for a in ${KFOLD_NODE_IMAGES:-}; do archives+=("$a"); done
  for a in "${archives[@]}"; do
    "$BIN/ctr" --address "$SOCK" -n k8s.io images import --local --no-unpack=false "$a" >> "$N/logs/import.log" 2>&1 \
      || { tail -3 "$N/logs/import.log" >&2; die "ctr images import $a failed (see $N/logs/import.log)"; }
  done
  log "imported ${#archives[@]} images in $((SECONDS - t0))s: $("$BIN/ctr" --address "$SOCK" -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"
}

cmd_start() {
  local t0=$SECONDS
  preflight
  if cmd_status >/dev/null 2>&1; then log "node $NAME already up"; return; fi
  [[ -n $(node_pids) ]] && { log "cleaning up a node that did not stop"; cmd_stop; }
  cmd_net_up
  gen_node_certs
  write_config
  cgroups_make
  rm -f "$N/run/"* "$SOCK" "$SOCK.ttrpc"   # a killed containerd's socket would look like a live one
  # The supervisor joins the cgroup first, then enters the namespaces: all it starts inherit both.
  setsid bash -c 'for h in "${@:2}"; do echo $$ > "$h/cgroup.procs"; done; exec ip netns exec "$1" "$0" __inner' \
    "$HERE/node.sh" "$NETNS" $(for h in $(hierarchies); do echo "$h/$CGROUP"; done) \
    < /dev/null >> "$N/logs/supervisor.log" 2>&1 &
  wait_phase containerd-up 40
  log "containerd up ($((SECONDS - t0))s)"
  import_images
  touch "$N/run/images-ready"
  local name
  for ((i = 0; i < 240; i++)); do
    node_ready && break
    for name in containerd kubelet kube-proxy; do
      [[ ! -f $N/run/$name.pid ]] || alive "$name" \
        || { tail -3 "$N/logs/$name.log" >&2; die "$name exited (see $N/logs/$name.log)"; }
    done
    sleep 0.5
  done
  node_ready || { tail -5 "$N/logs/kubelet.log" >&2; die "node $NAME not Ready after 120s (see $N/logs/kubelet.log)"; }
  log "node $NAME Ready in $((SECONDS - t0))s ($NODE_IP, pods $POD_CIDR)"
}

wait_phase() {
  for ((i = 0; i < $2 * 4; i++)); do
    [[ $(cat "$N/run/phase" 2>/dev/null) == "$1" ]] && return
    sleep 0.25
  done
  tail -5 "$N/logs/containerd.log" >&2
  die "containerd did not start within $2s (see $N/logs/containerd.log)"
}

cmd_stop() {
  local pids h round
  for round in TERM KILL KILL KILL; do
    pids=$(node_pids)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -s "$round" $pids 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do [[ -z $(node_pids) ]] && break; sleep 0.25; done
  done
  [[ -z $(node_pids) ]] || die "processes left in the node's cgroups: $(node_pids | tr '\n' ' ')"
  for h in $(hierarchies); do
    if [[ -d $h/$CGROUP ]]; then find "$h/$CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    if [[ -d $h/$CGROUP ]]; then log "WARNING: could not remove cgroup $h/$CGROUP"; fi
  done
  if ns_exists; then ip netns del "$NETNS"; log "deleted network namespace $NETNS"; fi
  ip link del "$HOST_IF" 2>/dev/null || true
  rm -rf "$N/containerd" "$N/kubelet" "$N/run" "$N/cni-ipam" "$N/pod-logs"
  log "node $NAME stopped"
}

# alive NAME: its pid file names a live process running $BIN/NAME (not a zombie, not a reused pid)
alive() {
  local pid cmd
  pid=$(cat "$N/run/$1.pid" 2>/dev/null) || return 1
  cmd=$( (tr '\0' ' ' < "/proc/$pid/cmdline") 2>/dev/null) || return 1
  [[ $cmd == "$BIN/$1 "* ]]
}

cmd_status() {
  local rc=0 name pid
  ns_exists && echo "netns $NETNS: present" || { echo "netns $NETNS: absent"; rc=1; }
  for name in containerd kubelet kube-proxy; do
    pid=$(cat "$N/run/$name.pid" 2>/dev/null || true)
    if alive "$name"; then echo "$name: running (pid $pid)"
    else echo "$name: stopped"; rc=1; fi
  done
  return $rc
}

cmd_env() {
  cat <<EOF
export KFOLD_NODE_NAME=$NAME
export KFOLD_NODE_NETNS=$NETNS
export KFOLD_NODE_IP=$NODE_IP
export KFOLD_CP_ADDRESS=$HOST_IP
export KFOLD_NODE_INDEX=$NODE_INDEX
export KFOLD_NODE_CGROUP=$CGROUP
export KFOLD_NODE_POD_CIDR=$POD_CIDR
export KFOLD_NODE_TESTAPP_IMAGE=localhost/kfold/testapp:$(cat "$BIN/.testapp.oci.tar.version" 2>/dev/null)
EOF
}

case ${1:-} in
  net-up) cmd_net_up ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  exec) shift; in_ns "$@" ;;
  kubelet-stop) cmd_kubelet_stop ;;
  kubelet-start) cmd_kubelet_start ;;
  __inner) inner ;;
  __kubelet) kubelet ;;
  *) echo "usage: $0 net-up|start|stop|status|env|exec CMD...|kubelet-stop|kubelet-start" >&2; exit 2 ;;
esac
