#!/usr/bin/env bash
# build_promtool.sh - build promtool (checks and unit-tests deploy/prometheus rules) from the
# prometheus Go module into ${KFOLD_CACHE:-$HOME/.cache/kfold}/bin/promtool.
# Skipped when bin/.promtool.version holds the same pin (FORCE=1 rebuilds); built under the
# cache's promtool lock (scripts/buildlib.sh). A cold build compiles much of
# client-go and the cloud SDKs of service discovery: 52 min at -p 1 on 2 loaded cores; run it in the
# background. Env: KFOLD_CACHE, BUILD_P (go build -p, default 2).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/syspath.sh"
. "$(dirname "${BASH_SOURCE[0]}")/buildlib.sh"

# github.com/prometheus/prometheus v0.316.0 is Prometheus 3.16.0 (probe: go mod download -json MODULE@VERSION)
PROMETHEUS_VERSION=v0.316.0

CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}
BIN=$CACHE/bin
mkdir -p "$BIN"
log() { echo "[build_promtool] $(date +%T) $*" >&2; }

lock_cache promtool   # held until this script exits
if [[ -z "${FORCE:-}" && -x "$BIN/promtool" && "$(cat "$BIN/.promtool.version" 2>/dev/null)" == "$PROMETHEUS_VERSION" ]]; then
  log "promtool $PROMETHEUS_VERSION cached"; exit 0
fi
need_go promtool
t0=$SECONDS
GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS= GOBIN=$BIN \
  go install -p "${BUILD_P:-2}" -trimpath -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
echo "$PROMETHEUS_VERSION" > "$BIN/.promtool.version"
log "promtool $PROMETHEUS_VERSION built in $((SECONDS - t0))s"
