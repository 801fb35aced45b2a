# Sourced by kfold's scripts: the project's own virtual environment, never the system interpreter.
# KFOLD_VENV overrides the location (default: .venv in the checkout). After `scripts/setup.sh`,
# "$KFOLD_PY" is the venv's python and the venv's bin/ is first on PATH for the calling script.
KFOLD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KFOLD_VENV="${KFOLD_VENV:-$KFOLD_ROOT/.venv}"
KFOLD_PY="$KFOLD_VENV/bin/python"
export KFOLD_VENV
export PATH="$KFOLD_VENV/bin:$PATH"
. "$KFOLD_ROOT/scripts/syspath.sh"
