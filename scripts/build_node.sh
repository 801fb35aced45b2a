#!/usr/bin/env bash
# build_node.sh - build a real Kubernetes node (kubelet, kube-proxy, containerd) from Go modules.
#
# Builds into ${KFOLD_CACHE:-$HOME/.cache/kfold}/bin/ (next to the control plane):
#   kubelet, kube-proxy  k8s.io/kubernetes/cmd/<name>/app at the control plane's K8S_VERSION, in the
#                        same kind of wrapper module build_controlplane.sh uses ($CACHE/src/k8s-node,
#                        staging modules pinned to v0.<minor>.<patch>: scripts/buildlib.sh
#                        k8s_module); shares its Go build cache.
#   containerd, containerd-shim-runc-v2, ctr
#                        github.com/containerd/containerd/v2/cmd/... (plain `go install`; static,
#                        without the btrfs/devmapper/zfs snapshotters, which need cgo or tools).
#   runc                 github.com/opencontainers/runc with cgo and seccomp: Debian's gcc,
#                        libseccomp-dev and pkg-config, installed with apt-get when missing (as root;
#                        otherwise the command to run). Debian 12's runc 1.1.5 fails every sandbox containerd 2.4
#                        asks for ("can't get final child's PID from pipe: EOF"), its crun 1.8.1
#                        refuses the spec ("unknown version specified").
#   cni/bridge, cni/host-local, cni/loopback, cni/portmap
#                        github.com/containernetworking/plugins (plain `go install`).
#   images/pause.oci.tar     the pod sandbox image localhost/kfold/pause:<PAUSE_VERSION>: one static
#                        Go binary that waits for SIGTERM/SIGINT and reaps orphans (what
#                        registry.k8s.io/pause does), so no sandbox image is ever pulled.
#   images/testapp.oci.tar   localhost/kfold/testapp:<TESTAPP_VERSION>, a small app for the real-node
#                        tests (scripts/node/testapp: serves HTTP on the ports its container's
#                        identity names; see docs/session-api.md "Container identity").
# Both images are OCI archives assembled by umoci (as scripts/build_image.sh does for kfold's) with
# sorted tars and fixed mtimes, named by io.containerd.image.name for `ctr images import` (Debian's
# umoci, installed with apt-get when missing, as for runc).
# iptables, conntrack and ip (what node.sh and kube-proxy run on the host) come from Debian,
# installed with apt-get when missing as root (a node runs only as root).
# Each piece is skipped when bin/.<name>.version holds the same pin. A lock serialises builds.
# Usage: build_node.sh [k8s] [containerd] [runc] [cni] [images]   (default: all)
# Env: KFOLD_CACHE (cache root), BUILD_P (go build -p, default 2), FORCE=1 (rebuild).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/syspath.sh"
. "$(dirname "${BASH_SOURCE[0]}")/buildlib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# ---- pins ----
K8S_VERSION=$(sed -n 's/^K8S_VERSION=\([^ ]*\).*/\1/p' "$HERE/build_controlplane.sh")  # the control plane's
CONTAINERD_VERSION=v2.4.2     # github.com/containerd/containerd/v2
RUNC_VERSION=v1.5.3          # github.com/opencontainers/runc
CNI_VERSION=v1.10.0           # github.com/containernetworking/plugins
PAUSE_VERSION=3.10-kfold1     # localhost/kfold/pause
TESTAPP_VERSION=$(sha256sum "$HERE/node/testapp/main.go" | cut -c1-12)

CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}
BIN=$CACHE/bin
SRC=$CACHE/src
mkdir -p "$BIN" "$SRC" "$BIN/cni" "$BIN/images"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
P=${BUILD_P:-2}
log() { echo "[build_node] $(date +%T) $*" >&2; }
lock_cache node-build   # held until this script exits

build_k8s() {
  up_to_date kubelet "$K8S_VERSION" && up_to_date kube-proxy "$K8S_VERSION" \
    && { log "kubelet kube-proxy $K8S_VERSION cached"; return; }
  need_go "kubelet kube-proxy"
  local d=$SRC/k8s-node b ld t0
  k8s_module "$d" k8s-node
  k8s_main "$d" kubelet 'NewKubeletCommand(context.Background())' '"context"'
  k8s_main "$d" kube-proxy 'NewProxyCommand()'
  (cd "$d" && go mod tidy)
  ld=$(k8s_ldflags)
  for b in kubelet kube-proxy; do
    up_to_date "$b" "$K8S_VERSION" && continue
    t0=$SECONDS
    (cd "$d" && go build -p "$P" -trimpath -ldflags "$ld" -o "$BIN/$b" "./cmd/$b")
    stamp "$b" "$K8S_VERSION"
    log "$b $K8S_VERSION built in $((SECONDS - t0))s"
  done
}

build_containerd() {
  up_to_date containerd "$CONTAINERD_VERSION" && { log "containerd $CONTAINERD_VERSION cached"; return; }
  need_go containerd
  local t0=$SECONDS m=github.com/containerd/containerd/v2 v
  v=${CONTAINERD_VERSION#v}
  GOFLAGS= GOBIN=$BIN go install -p "$P" -trimpath -tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs" \
    -ldflags "-s -w -X $m/version.Version=$v -X $m/version.Revision=goproxy-$CONTAINERD_VERSION -X $m/version.Package=$m" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$m/cmd/ctr@$CONTAINERD_VERSION"
  stamp containerd "$CONTAINERD_VERSION"
  log "containerd, containerd-shim-runc-v2, ctr $CONTAINERD_VERSION built in $((SECONDS - t0))s"
}

build_runc() {
  up_to_date runc "$RUNC_VERSION" && { log "runc $RUNC_VERSION cached"; return; }
  need_go runc
  apt_need runc gcc:gcc libseccomp-dev:/usr/include/seccomp.h pkg-config:pkg-config
  local t0=$SECONDS
  GOFLAGS= CGO_ENABLED=1 GOBIN=$BIN go install -p "$P" -trimpath -tags seccomp \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" "github.com/opencontainers/runc@$RUNC_VERSION"
  stamp runc "$RUNC_VERSION"
  log "runc $RUNC_VERSION built in $((SECONDS - t0))s"
}

build_cni() {
  up_to_date cni/bridge "$CNI_VERSION" && { log "CNI plugins $CNI_VERSION cached"; return; }
  need_go "CNI plugins"
  local t0=$SECONDS m=github.com/containernetworking/plugins
  GOFLAGS= GOBIN=$BIN/cni go install -p "$P" -trimpath -ldflags "-s -w" \
    "$m/plugins/main/bridge@$CNI_VERSION" "$m/plugins/ipam/host-local@$CNI_VERSION" \
    "$m/plugins/main/loopback@$CNI_VERSION" "$m/plugins/meta/portmap@$CNI_VERSION"
  stamp cni/bridge "$CNI_VERSION"
  log "CNI plugins $CNI_VERSION built in $((SECONDS - t0))s"
}

# oci_image NAME TAG BINARY OUT: an OCI archive holding one static binary at /NAME, its entrypoint.
oci_image() {
  local name=$1 tag=$2 binary=$3 out=$4 w epoch=1735689600 created
  apt_need "the node's images" umoci:umoci
  created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
  w=$(mktemp -d "$BIN/images/tmp.XXXXXX")
  mkdir -p "$w/root"
  install -m 0755 "$binary" "$w/root/$name"
  tar --sort=name --format=gnu --numeric-owner --owner=0 --group=0 --mtime="@$epoch" -C "$w/root" -cf "$w/layer.tar" "$name"
  umoci init --layout "$w/oci"
  umoci new --image "$w/oci:$tag"
  umoci raw add-layer --image "$w/oci:$tag" --history.created "$created" \
    --history.created_by "scripts/build_node.sh: /$name" "$w/layer.tar"
  umoci config --image "$w/oci:$tag" --no-history --created "$created" --os linux \
    --architecture "$(go env GOARCH)" --config.entrypoint "/$name" --config.workingdir / \
    --config.user 65532:65532
  umoci gc --layout "$w/oci"
  sed -i "s#\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",#&\"annotations\":{\"io.containerd.image.name\":\"localhost/kfold/$name:$tag\",\"org.opencontainers.image.ref.name\":\"$tag\"},#" "$w/oci/index.json"
  grep -q io.containerd.image.name "$w/oci/index.json" || { log "ERROR: could not name the image in $w/oci/index.json"; exit 1; }
  find "$w/oci" -exec touch -h -d "@$epoch" {} +
  tar --sort=name --format=gnu --numeric-owner --owner=0 --group=0 --mtime="@$epoch" --mode=go-w \
    -C "$w/oci" -cf "$out.tmp" oci-layout index.json blobs
  mv "$out.tmp" "$out"
  rm -rf "$w"
}

# go_image NAME VERSION WHAT: scripts/node/NAME/main.go built static into bin/images/NAME.oci.tar
#   (localhost/kfold/NAME:VERSION), unless its stamp holds VERSION.
go_image() {
  local name=$1 version=$2 d=$SRC/$1
  up_to_date "images/$name.oci.tar" "$version" && { log "$3 image cached"; return; }
  need_go "$3 image"
  mkdir -p "$d"
  cp "$HERE/node/$name/main.go" "$d/main.go"
  printf 'module kfold.local/%s\n\ngo 1.26.0\n' "$name" > "$d/go.mod"
  (cd "$d" && GOFLAGS= go build -trimpath -ldflags "-s -w" -o "$d/$name" .)
  oci_image "$name" "$version" "$d/$name" "$BIN/images/$name.oci.tar"
  stamp "images/$name.oci.tar" "$version"
  log "$3 image localhost/kfold/$name:$version built"
}

build_images() {
  go_image pause "$PAUSE_VERSION" pause
  go_image testapp "$TESTAPP_VERSION" "test app"
}

# node.sh's preflight needs each of these; installing them here lets a fresh machine's first
# `test.sh` run the real-node set without a step of its own.
node_tools() {
  [[ $(id -u) == 0 ]] || return 0
  apt_need "the node" "${NODE_HOST_TOOLS[@]}"
}

node_tools
for what in ${*:-k8s containerd runc cni images}; do "build_$what"; done
log "done: kubelet kube-proxy containerd runc $(ls "$BIN/cni" | tr '\n' ' ')$(ls "$BIN/images" | tr '\n' ' ')"
