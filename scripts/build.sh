#!/usr/bin/env bash
# build.sh PART... - make the parts a command needs, side by side, one line per part with its time.
#
# Parts:
#   venv          the project's venv and the Debian packages it and the tests need (scripts/setup.sh)
#   etcd kwok k8s the local control plane (scripts/build_controlplane.sh; k8s is kube-apiserver,
#                 kube-scheduler, kube-controller-manager and kubectl, or $KFOLD_K8S_BINS)
#   controlplane  etcd kwok k8s
#   promtool      Prometheus' rule checker (scripts/build_promtool.sh)
# scripts/demo.sh asks for what the demo runs, scripts/test.sh for what the tests use. A cached
# part is a stamp check. Up to KFOLD_BUILD_JOBS parts (default 2, one per core of a small machine:
# pip's downloads and Go's module fetches wait on the network while the other compiles) run at
# once, the longest first; each Go build runs under its lock in the shared cache, so two builds
# at once never build the same part together. Each part's output goes to a log of its own, shown
# (its tail) when the part fails; the other parts are then stopped. KFOLD_SKIP_CONTROLPLANE=1 and
# KFOLD_SKIP_PROMTOOL=1 leave those parts out (their tests then fail or skip, naming the build).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/syspath.sh
export KFOLD_CACHE="${KFOLD_CACHE:-$HOME/.cache/kfold}"
JOBS=${KFOLD_BUILD_JOBS:-2}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "build: KFOLD_BUILD_JOBS=$JOBS is not a positive number; unset it or set e.g. 2" >&2; exit 2; }

# The command that makes a part. The order here is the start order: the longest build first.
command_of() {
  case $1 in
    k8s|etcd|kwok) echo "bash scripts/build_controlplane.sh $1" ;;
    promtool) echo "bash scripts/build_promtool.sh" ;;
    venv) echo "bash scripts/setup.sh" ;;
  esac
}
ORDER=(k8s venv promtool kwok etcd)

want=()
for part in "$@"; do
  case $part in
    controlplane) want+=(etcd kwok k8s) ;;
    venv|etcd|kwok|k8s|promtool) want+=("$part") ;;
    *) echo "build: unknown part '$part'; the parts are venv, etcd, kwok, k8s, controlplane, promtool" >&2; exit 2 ;;
  esac
done
[[ ${#want[@]} -gt 0 ]] || { echo "usage: $0 venv|etcd|kwok|k8s|controlplane|promtool..." >&2; exit 2; }
queue=()
for part in "${ORDER[@]}"; do
  [[ " ${want[*]} " == *" $part "* ]] || continue
  case $part in
    etcd|kwok|k8s) [[ ${KFOLD_SKIP_CONTROLPLANE:-} == 1 ]] && { echo "build: $part skipped (KFOLD_SKIP_CONTROLPLANE=1)" >&2; continue; } ;;
    promtool) [[ ${KFOLD_SKIP_PROMTOOL:-} == 1 ]] && { echo "build: $part skipped (KFOLD_SKIP_PROMTOOL=1)" >&2; continue; } ;;
  esac
  queue+=("$part")
done
[[ ${#queue[@]} -gt 0 ]] || exit 0

logs=$(mktemp -d "${TMPDIR:-/tmp}/kfold-build.XXXXXX")
declare -A part_of=() t0_of=()
# Each part runs in a process group of its own (job control), so a failure or Ctrl-C stops its
# whole tree (go and its compilers, pip) and releases its lock.
set -m
stop_all() {
  local pid
  for pid in "${!part_of[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'stop_all' EXIT
trap 'exit 130' INT TERM

# The part's own last word ("... cached", "... built in 76s", "setup: ..."), without the prefix,
# and how long it waited for another build of it.
summary() {
  local waited
  grep -E ' cached$| built in [0-9]+s$|^setup: .*(ready|kept)' "$1" | tail -1 |
    sed -E 's/^\[[a-z_]+\] [0-9:]+ //; s/^setup: //' | tr -d '\n'
  waited=$(grep -Eo 'waited [0-9]+s for another build' "$1" | tail -1) || true
  [[ -z $waited ]] || printf '; %s' "$waited"
}

echo "build: making ${queue[*]} ($JOBS at a time; logs in $logs)" >&2
failed=""
while [[ ${#queue[@]} -gt 0 || ${#part_of[@]} -gt 0 ]]; do
  while [[ -z $failed && ${#queue[@]} -gt 0 && ${#part_of[@]} -lt $JOBS ]]; do
    part=${queue[0]}; queue=("${queue[@]:1}")
    $(command_of "$part") > "$logs/$part.log" 2>&1 < /dev/null &
    part_of[$!]=$part; t0_of[$part]=$SECONDS
  done
  [[ ${#part_of[@]} -gt 0 ]] || break
  rc=0; wait -n -p done_pid || rc=$?
  part=${part_of[$done_pid]}; unset "part_of[$done_pid]"
  took=$((SECONDS - t0_of[$part]))
  if [[ $rc -eq 0 ]]; then
    printf 'build: %-9s %s (%ds)\n' "$part" "$(summary "$logs/$part.log")" "$took" >&2
  else
    printf 'build: %-9s FAILED after %ds (rc %d); the end of %s:\n' "$part" "$took" "$rc" "$logs/$part.log" >&2
    tail -n 15 "$logs/$part.log" | sed 's/^/    /' >&2
    failed="$failed $part"
    stop_all; part_of=(); queue=()
  fi
done
trap - EXIT
if [[ -n $failed ]]; then
  echo "build: failed:$failed (logs kept in $logs)" >&2
  exit 1
fi
rm -rf "$logs"
