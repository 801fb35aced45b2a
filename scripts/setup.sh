#!/usr/bin/env bash
# Install kfold and its test tools, and build (or reuse) the local control plane.
# Rerunnable: pip reuses its cache; the control plane build is skipped when the cached binaries
# under ${KFOLD_CACHE:-~/.cache/kfold} match the pinned versions.
set -euo pipefail
cd "$(dirname "$0")/.."
export KFOLD_CACHE="${KFOLD_CACHE:-$HOME/.cache/kfold}"
mkdir -p "$KFOLD_CACHE"

need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v curl >/dev/null || need_apt+=(curl)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -v "Running pip as the 'root' user" || true
python3 -c "import kfold, engine, journal, kubernetes, transitions, aiosqlite, freezegun, immutables" \
  || { echo "setup: kfold's Python dependencies did not install" >&2; exit 1; }

bash scripts/build_controlplane.sh
