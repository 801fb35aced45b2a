#!/usr/bin/env bash
# Install kfold and its test tools into the project's own virtual environment (.venv in the
# checkout, or $KFOLD_VENV), with the Debian packages the venv and the tests need. Nothing else:
# the control plane and promtool are built by the command that needs them (scripts/build.sh, run
# by scripts/demo.sh and scripts/test.sh).
#
# Nothing is installed into the system interpreter (PEP 668 refuses that on Debian, Ubuntu and
# Fedora, and it would mix kfold's pins with the distribution's packages). The venv is built with
# $KFOLD_PYTHON when set (CI sets /usr/bin/python3, Debian's own, the oldest supported), else the
# first python3 >= 3.11 found on PATH; versions come from constraints.txt, so a fresh machine
# installs what the tests last passed with. Rerunnable: an up-to-date venv is kept (a stamp of
# pyproject.toml + constraints.txt) and pip reuses its cache. Its last line says which.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

. scripts/buildlib.sh   # apt_install: as root, or the command to run
log() { echo "setup: $*" >&2; }

# The interpreter the venv is built from: $KFOLD_PYTHON if set, else python3 if it is >= 3.11,
# else python3.13/3.12/3.11 on PATH (outside the project venv).
find_python() {
  local c v
  if [ -n "${KFOLD_PYTHON:-}" ]; then
    c="$KFOLD_PYTHON"
    if ! v=$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
      echo "setup: KFOLD_PYTHON=$c is not a working Python interpreter; unset it or point it at python3 >= 3.11" >&2
      exit 1
    fi
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then command -v "$c"; return; fi
    echo "setup: kfold needs Python >= 3.11; KFOLD_PYTHON=$c is $v. Point KFOLD_PYTHON at python3 >= 3.11 or unset it." >&2
    exit 1
  fi
  # The project's own venv (first on PATH once venv.sh is sourced) is never its own base.
  local path_no_venv=":$PATH:"
  path_no_venv=${path_no_venv//":$KFOLD_VENV/bin:"/:}
  for c in python3 python3.13 python3.12 python3.11; do
    c=$(PATH=$path_no_venv command -v "$c") || continue
    v=$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then echo "$c"; return; fi
    found="$c $v"
  done
  echo "setup: kfold needs Python >= 3.11; found ${found:-no python3 on PATH}. Install it (Debian 12: apt-get install python3; elsewhere pyenv install 3.11) and rerun." >&2
  exit 1
}

# Checked first: without a usable interpreter nothing else is worth installing.
found=""
base=""
base_id=""
if [ -n "${KFOLD_PYTHON:-}" ] || [ ! -x "$KFOLD_PY" ]; then
  base=$(find_python)
  base_id=$("$base" -c 'import sys; print(sys.executable, sys.version.split()[0])')
fi
# A venv built from another interpreter than the one KFOLD_PYTHON names is rebuilt (CI must test
# the interpreter it names, not whichever built the venv first); without KFOLD_PYTHON an existing
# venv is kept, whatever python3 is first on PATH now.
if [ -n "${KFOLD_PYTHON:-}" ] && [ -x "$KFOLD_PY" ] && [ "$(cat "$KFOLD_VENV/.kfold-python" 2>/dev/null)" != "$base_id" ]; then
  echo "setup: $KFOLD_VENV was built from $(cat "$KFOLD_VENV/.kfold-python" 2>/dev/null || echo 'another interpreter'); rebuilding it with $base_id" >&2
  rm -rf "$KFOLD_VENV"
fi

need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v curl >/dev/null || need_apt+=(curl)
command -v git >/dev/null || need_apt+=(git)
# Headless Chromium drives `kfold ui` in tests/browser (a real browser over the DevTools protocol).
command -v chromium >/dev/null || need_apt+=(chromium)
# Graphviz's dot lays out the state diagrams (`kfold diagrams`, `kfold ui`, docs/diagrams/*.svg).
command -v dot >/dev/null || need_apt+=(graphviz)
# The container image (scripts/build_image.sh, tests/e2e/test_image.py) is built as root with
# Debian's mmdebstrap and umoci (looked up in the system's bin dirs too), and the Containerfile's
# with buildah (tests/e2e/test_containerfile.py); without root the build itself says what to install.
if [ "$(id -u)" -eq 0 ]; then
  for tool in mmdebstrap umoci buildah; do
    PATH="$PATH:/usr/bin:/bin" command -v "$tool" >/dev/null || need_apt+=("$tool")
  done
fi
[ ${#need_apt[@]} -eq 0 ] || apt_install "${need_apt[@]}"


want_stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
made=kept
if [ ! -x "$KFOLD_PY" ] || [ "$(cat "$KFOLD_VENV/.kfold-stamp" 2>/dev/null)" != "$want_stamp" ] \
   || ! "$KFOLD_PY" -c "import kfold" >/dev/null 2>&1; then
  if [ ! -x "$KFOLD_PY" ]; then
    # Debian splits ensurepip out of the interpreter: without python3-venv, `-m venv` fails.
    if ! "$base" -c "import ensurepip, venv" >/dev/null 2>&1; then
      ver=$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
      apt_install "python$ver-venv"
    fi
    echo "setup: creating $KFOLD_VENV with $base_id" >&2
    "$base" -m venv "$KFOLD_VENV"
    echo "$base_id" > "$KFOLD_VENV/.kfold-python"
  fi
  "$KFOLD_PY" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
  echo "$want_stamp" > "$KFOLD_VENV/.kfold-stamp"
  made=ready
fi
"$KFOLD_PY" -c "import kfold, engine, journal, kubernetes, transitions, aiosqlite, freezegun, immutables" \
  || { echo "setup: kfold's Python dependencies did not install into $KFOLD_VENV" >&2; exit 1; }
if [ "$made" = kept ]; then
  echo "setup: $KFOLD_VENV kept (up to date)" >&2
else
  echo "setup: $KFOLD_VENV ready ($("$KFOLD_PY" -c 'import sys; print("Python", sys.version.split()[0])'), constraints.txt's pins)" >&2
fi
