#!/usr/bin/env bash
# Re-pin constraints.txt: resolve pyproject.toml's dependencies (with the test and bench extras)
# afresh in a throwaway venv and write the exact versions. Commit the result with the change that
# needed it; scripts/setup.sh installs exactly these.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$(command -v python3)" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check -e '.[test,bench]'
{
  echo "# Pinned versions of kfold's runtime, test and bench dependencies (pip constraints), used by scripts/setup.sh."
  echo "# Regenerate after changing pyproject.toml: bash scripts/lock.sh"
  "$tmp/venv/bin/pip" freeze --exclude-editable | grep -v '^-e'
} > constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) pins"
