#!/usr/bin/env bash
# build_image.sh - kfold's container image as an OCI archive, built without a container daemon.
#
#   bash scripts/build_image.sh [-o FILE]      # prints the archive's path on stdout
#
# Two layers, both plain sorted tars with fixed owners and mtimes:
#   1. base: Debian (bookworm) from Debian's own packages by mmdebstrap: the Essential:yes set plus
#      deploy/image/packages.txt (python3.11; the list Containerfile installs too), merged /usr,
#      no docs/man/locales, the stdlib precompiled, user "nonroot" 65532:65532 (the Deployment's
#      runAsUser/fsGroup in kfold/daemon/manifests.py), /var/lib/kfold (the journal volume) owned by it.
#   2. app: the kfold wheel (built here from the checkout) and exactly the versions constraints.txt
#      pins, installed into /usr/local/lib/python3.11/dist-packages, precompiled by the image's
#      own interpreter (unchecked-hash .pyc: nothing is written at run time), /usr/local/bin/kfold.
# umoci assembles the OCI layout (gzip layers, config: user 65532:65532, entrypoint kfold, cmd
# `run --config /etc/kfold/config.yaml`, PYTHONDONTWRITEBYTECODE=1, org.opencontainers.image.*
# labels); the layout is tarred (sorted, fixed mtimes) into the archive. index.json names the image
# (io.containerd.image.name) so `ctr images import`, `kind load image-archive` and `k3d image import`
# tag it as ${KFOLD_IMAGE_NAME:-localhost/kfold:<version>}, the default of `kfold manifests`.
#
# Reproducible: SOURCE_DATE_EPOCH (default: the time of the last commit touching the inputs; the
# base layer uses the last commit of this script) fixes every timestamp, so the same inputs give the
# same manifest digest. "Inputs" are this script, pyproject.toml, constraints.txt, README.md (the
# wheel's long description), engine/, journal/, kfold/, and the Debian packages mmdebstrap got: the
# base is built once per base key and reused, so Debian's point releases change it only with
# KFOLD_IMAGE_REFRESH=1 (or on a machine with an empty cache). See docs/image.md.
#
# Cached under ${KFOLD_CACHE:-~/.cache/kfold}/image/: a warm run (same input hash) is a hash and a
# print. Needs root (mmdebstrap's root mode, chroot) and Debian's mmdebstrap + umoci (setup.sh
# installs them). Env: FORCE=1 rebuilds the app layer, KFOLD_IMAGE_REFRESH=1 the base too,
# KFOLD_IMAGE_NAME, KFOLD_IMAGE_SOURCES (apt source lines for mmdebstrap, one per line, instead of
# its default mirrors; e.g. Debian's snapshot archive at a fixed date for the same base anywhere).
set -euo pipefail
umask 022
CALLER_DIR=$PWD
cd "$(dirname "$0")/.."
. scripts/venv.sh
export LC_ALL=C TZ=UTC

log() { echo "[build_image] $(date +%T) $*" >&2; }
die() { echo "build_image: $*" >&2; exit 1; }

OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output) OUT=$(cd "$CALLER_DIR" && realpath -m -- "${2:?-o needs a file}"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (usage: build_image.sh [-o FILE])" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap's root mode and chroot): run it as root or with sudo"
# Each tool with the Debian package that has it (PATH includes the sbin dirs: scripts/venv.sh).
for tool_pkg in mmdebstrap:mmdebstrap umoci:umoci tar:tar sha256sum:coreutils chroot:coreutils flock:util-linux; do
  tool=${tool_pkg%%:*}
  command -v "$tool" >/dev/null || die "'$tool' not found on PATH or in /usr/sbin, /sbin: apt-get install -y ${tool_pkg#*:} (bash scripts/setup.sh installs mmdebstrap and umoci as root)"
done
[ -x "$KFOLD_PY" ] || die "no project venv at $KFOLD_VENV: run bash scripts/setup.sh first"

SUITE=bookworm
PYV=3.11                      # bookworm's python3; pip installs cp311 wheels for it
UID_GID=65532:65532           # kfold/daemon/manifests.py: runAsUser / fsGroup
DEB_ARCH=$(dpkg --print-architecture)
case "$DEB_ARCH" in amd64) PY_ARCH=x86_64 ;; arm64) PY_ARCH=aarch64 ;; *) die "unsupported architecture $DEB_ARCH" ;; esac
GLIBC_MINOR=36                # bookworm's glibc 2.36: the newest manylinux tag its python takes
SOURCES=${KFOLD_IMAGE_SOURCES:-}  # empty: mmdebstrap's default mirrors for the suite (main, -updates, -security)
VERSION=$("$KFOLD_PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
DESCRIPTION=$("$KFOLD_PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["description"])')
NAME=${KFOLD_IMAGE_NAME:-localhost/kfold:$VERSION}
INPUTS=(scripts/build_image.sh pyproject.toml constraints.txt README.md engine journal kfold)
PACKAGE_LIST=deploy/image/packages.txt   # the Debian packages on the Essential set (Containerfile reads it too)
mapfile -t PACKAGES < <(sed 's/#.*//' "$PACKAGE_LIST" | tr -s ' \t' '\n' | sed '/^$/d')
[ ${#PACKAGES[@]} -gt 0 ] || die "$PACKAGE_LIST names no package"

CACHE=${KFOLD_CACHE:-$HOME/.cache/kfold}
IMG=$CACHE/image
mkdir -p "$IMG"
exec 9>"$IMG/.lock"
flock 9                       # one build at a time per cache

# ---- epochs, revision and input hash ----
in_git() { git rev-parse --is-inside-work-tree >/dev/null 2>&1; }
commit_time() { in_git && git log -1 --format=%ct -- "$@" 2>/dev/null || true; }
FALLBACK_EPOCH=1735689600     # 2025-01-01: outside git (a source tarball)
APP_EPOCH=${SOURCE_DATE_EPOCH:-$(commit_time "${INPUTS[@]}")}
APP_EPOCH=${APP_EPOCH:-$FALLBACK_EPOCH}
BASE_EPOCH=${SOURCE_DATE_EPOCH:-$(commit_time scripts/build_image.sh "$PACKAGE_LIST")}
BASE_EPOCH=${BASE_EPOCH:-$FALLBACK_EPOCH}
REVISION=unknown
if in_git; then
  REVISION=$(git log -1 --format=%H -- "${INPUTS[@]}")
  [ -z "$(git status --porcelain -- "${INPUTS[@]}")" ] || REVISION="$REVISION-dirty"
fi
CREATED=$(date -u -d "@$APP_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

mapfile -t FILES < <(find "${INPUTS[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' | sort)
BASE_KEY=$(printf '%s\n' "$(sha256sum < scripts/build_image.sh)" "${PACKAGES[*]}" "$BASE_EPOCH" "$DEB_ARCH" "$SOURCES" | sha256sum | cut -c1-16)
KEY=$(printf '%s\n' "$BASE_KEY" "$APP_EPOCH" "$REVISION" "$NAME" "$(sha256sum "${FILES[@]}")" | sha256sum | cut -c1-16)
BASE=$IMG/base-$BASE_KEY.tar
ARCHIVE=$IMG/kfold-$VERSION-$KEY.oci.tar

finish() {
  ln -sfn "$(basename "$ARCHIVE")" "$IMG/kfold.oci.tar"
  if [ -n "$OUT" ]; then cp "$ARCHIVE" "$OUT"; log "copied to $OUT"; fi
  echo "$ARCHIVE"
}
if [ -s "$ARCHIVE" ] && [ -z "${FORCE:-}${KFOLD_IMAGE_REFRESH:-}" ]; then
  log "cached: $NAME $(cat "$ARCHIVE.digest") ($(du -h "$ARCHIVE" | cut -f1), key $KEY)"
  finish; exit 0
fi

T0=$SECONDS
WORK=$(mktemp -d "$IMG/tmp.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# ---- layer 1: the Debian base ----
if [ ! -s "$BASE" ] || [ -n "${KFOLD_IMAGE_REFRESH:-}" ]; then
  log "base: mmdebstrap $SUITE (essential + ${PACKAGES[*]}) ..."
  nonroot="${UID_GID%%:*}"
  SOURCE_DATE_EPOCH=$BASE_EPOCH mmdebstrap --quiet --mode=root --variant=essential --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"' \
    --customize-hook="echo 'nonroot:x:$nonroot:$nonroot:nonroot:/home/nonroot:/usr/sbin/nologin' >> \"\$1/etc/passwd\"" \
    --customize-hook="echo 'nonroot:x:$nonroot:' >> \"\$1/etc/group\"" \
    --customize-hook="echo 'nonroot:!:::::::' >> \"\$1/etc/shadow\"" \
    --customize-hook="install -d -m 0750 -o $nonroot -g $nonroot \"\$1/home/nonroot\" \"\$1/var/lib/kfold\"" \
    --customize-hook='install -d -m 0755 "$1/etc/kfold"' \
    --customize-hook="chroot \"\$1\" python$PYV -m compileall -q -j1 --invalidation-mode unchecked-hash /usr/lib/python$PYV >/dev/null" \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f '\${Package} \${Version}\n' > \"$WORK/packages.txt\"" \
    "$SUITE" "$WORK/base.tar" ${SOURCES:+-} <<< "$SOURCES" 2> "$WORK/mmdebstrap.log" \
    || { tail -n 30 "$WORK/mmdebstrap.log" >&2; die "mmdebstrap failed (log above; it needs Debian's mirrors, KFOLD_IMAGE_SOURCES sets them)"; }
  rm -f "$IMG"/base-*.tar "$IMG"/base-*.packages
  mv "$WORK/packages.txt" "${BASE%.tar}.packages"
  mv "$WORK/base.tar" "$BASE"
  log "base: $(wc -l < "${BASE%.tar}.packages") Debian packages, $(du -h "$BASE" | cut -f1) ($((SECONDS - T0))s)"
else
  log "base: cached $(basename "$BASE")"
fi

# ---- layer 2: kfold and its pinned dependencies ----
T1=$SECONDS
mkdir -p "$WORK/src" "$WORK/wheel" "$WORK/root"
cp --parents -r "${FILES[@]}" "$WORK/src/"          # exactly the hashed files: no stale build/ dirs
SOURCE_DATE_EPOCH=$APP_EPOCH "$KFOLD_PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/wheel" "$WORK/src" \
  || die "pip wheel of the checkout failed"
WHEEL=$(ls "$WORK"/wheel/kfold-"$VERSION"-*.whl)
tar -xf "$BASE" -C "$WORK/root"
SITE=/usr/local/lib/python$PYV/dist-packages      # on Debian's python3 sys.path
platforms=()
for m in $(seq "$GLIBC_MINOR" -1 17); do platforms+=(--platform "manylinux_2_${m}_$PY_ARCH"); done
platforms+=(--platform "manylinux2014_$PY_ARCH")
[ "$PY_ARCH" = aarch64 ] || platforms+=(--platform "manylinux_2_5_$PY_ARCH" --platform "manylinux1_$PY_ARCH")
"$KFOLD_PY" -m pip install -q --disable-pip-version-check --no-compile --no-warn-script-location \
  --target "$WORK/root$SITE" --only-binary=:all: --implementation cp --python-version "$PYV" \
  --abi "cp${PYV/./}" "${platforms[@]}" -c constraints.txt "$WHEEL" \
  || die "pip install of $WHEEL with constraints.txt's pins (cp${PYV/./} manylinux wheels) failed"
rm -rf "$WORK/root$SITE/bin"                         # scripts with the build venv's shebang
rm -f "$WORK/root$SITE"/kfold-*.dist-info/direct_url.json   # names the temporary wheel path
sed -i '/direct_url\.json/d' "$WORK/root$SITE"/kfold-*.dist-info/RECORD
install -d "$WORK/root/usr/local/bin"
printf '#!/usr/bin/python%s -s\nimport sys\nfrom kfold.cli import main\nsys.exit(main())\n' "$PYV" > "$WORK/root/usr/local/bin/kfold"
chmod 0755 "$WORK/root/usr/local/bin/kfold"
chroot "$WORK/root" "python$PYV" -m compileall -q -j1 --invalidation-mode unchecked-hash "$SITE" >/dev/null \
  || die "precompiling $SITE with the image's python$PYV failed"
got=$(chroot "$WORK/root" /usr/local/bin/kfold --version) || die "kfold --version fails inside the new root filesystem"
[ "$got" = "kfold $VERSION" ] || die "kfold --version inside the image says '$got', expected 'kfold $VERSION'"
tar --sort=name --format=gnu --numeric-owner --owner=0 --group=0 --mtime="@$APP_EPOCH" \
  -C "$WORK/root" -cf "$WORK/app.tar" usr/local
log "app: kfold $VERSION + pinned dependencies, $(du -h "$WORK/app.tar" | cut -f1) ($((SECONDS - T1))s)"

# ---- OCI layout and archive ----
T2=$SECONDS
L=$WORK/oci
umoci init --layout "$L"
umoci new --image "$L:$VERSION"
umoci raw add-layer --image "$L:$VERSION" --history.created "$CREATED" \
  --history.created_by "mmdebstrap --variant=essential $SUITE + ${PACKAGES[*]} (scripts/build_image.sh)" "$BASE"
umoci raw add-layer --image "$L:$VERSION" --history.created "$CREATED" \
  --history.created_by "pip install kfold-$VERSION (constraints.txt) into $SITE; compileall (scripts/build_image.sh)" "$WORK/app.tar"
label() { printf -- '--config.label=org.opencontainers.image.%s=%s\n' "$1" "$2"; }
mapfile -t LABELS < <(label title kfold; label description "$DESCRIPTION"; label version "$VERSION";
                      label revision "$REVISION"; label created "$CREATED")
umoci config --image "$L:$VERSION" --no-history --created "$CREATED" --os linux --architecture "$DEB_ARCH" \
  --config.user "$UID_GID" --config.workingdir / \
  --config.entrypoint /usr/local/bin/kfold \
  --config.cmd run --config.cmd --config --config.cmd /etc/kfold/config.yaml \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env LANG=C.UTF-8 --config.env HOME=/home/nonroot \
  --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 \
  --config.exposedports 8080/tcp --config.volume /var/lib/kfold \
  "${LABELS[@]}"
umoci gc --layout "$L"
# index.json is not content-addressed: name the image for containerd/docker importers, keep the tag.
"$KFOLD_PY" - "$L/index.json" "$NAME" "$VERSION" <<'EOF'
import json, sys
path, name, tag = sys.argv[1:]
index = json.load(open(path))
(manifest,) = index["manifests"]
manifest["annotations"] = {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}
open(path, "w").write(json.dumps(index, sort_keys=True, separators=(",", ":")))
open(path + ".digest", "w").write(manifest["digest"])
EOF
DIGEST=$(cat "$L/index.json.digest"); rm "$L/index.json.digest"
find "$L" -exec touch -h -d "@$APP_EPOCH" {} +
tar --sort=name --format=gnu --numeric-owner --owner=0 --group=0 --mtime="@$APP_EPOCH" --mode=go-w \
  -C "$L" -cf "$WORK/image.tar" oci-layout index.json blobs
rm -f "$IMG"/kfold-*.oci.tar "$IMG"/kfold-*.oci.tar.digest "$IMG/kfold.oci.tar"
mv "$WORK/image.tar" "$ARCHIVE"
echo "$DIGEST" > "$ARCHIVE.digest"
log "image: $NAME $DIGEST, $(du -h "$ARCHIVE" | cut -f1) archive, $(du -sh "$WORK/root" | cut -f1) unpacked ($((SECONDS - T2))s oci, $((SECONDS - T0))s total)"
finish
