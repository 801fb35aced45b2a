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
# part is a stamp check. The venv is made beside the Go builds, of which up to KFOLD_BUILD_JOBS
# (default 2, one per core of a small machine: one's module fetches and link wait while the other
# compiles) run at once, the longest first; each Go build runs under its lock in the shared
# cache, so two builds at once never build the same part together. Each part's output goes to a
# log of its own, shown (its tail) when the part fails; the other parts are then stopped.
# KFOLD_SKIP_CONTROLPLANE=1 and KFOLD_SKIP_PROMTOOL=1 leave those parts out (their tests then fail
# or skip, naming the build).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/syspath.sh
export KFOLD_CACHE="${KFOLD_CACHE:-$HOME/.cache/kfold}"
JOBS=${KFOLD_BUILD_JOBS:-2}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "build: KFOLD_BUILD_JOBS=$JOBS is not a positive number; unset it or set e.g. 2" >&2; exit 2; }

# Each part and the command that makes it, in start order: the longest Go build first. The venv
# (pip, mostly waiting on downloads and disk) starts at once, beside the Go builds, and takes no
# slot of theirs; a bad interpreter is then reported in seconds, not after the compiles.
declare -A COMMAND=(
  [venv]="bash scripts/setup.sh"
  [promtool]="bash scripts/build_promtool.sh"
  [k8s]="bash scripts/build_controlplane.sh k8s"
  [kwok]="bash scripts/build_controlplane.sh kwok"
  [etcd]="bash scripts/build_controlplane.sh etcd"
)
ORDER=(venv promtool k8s kwok etcd)
declare -A SKIP=([etcd]=KFOLD_SKIP_CONTROLPLANE [kwok]=KFOLD_SKIP_CONTROLPLANE [k8s]=KFOLD_SKIP_CONTROLPLANE
                 [promtool]=KFOLD_SKIP_PROMTOOL)

want=()
for part in "$@"; do
  if [[ $part == controlplane ]]; then want+=(etcd kwok k8s)
  elif [[ -n ${COMMAND[$part]:-} ]]; then want+=("$part")
  else echo "build: unknown part '$part'; the parts are ${ORDER[*]} and controlplane (etcd kwok k8s)" >&2; exit 2
  fi
done
[[ ${#want[@]} -gt 0 ]] || { echo "usage: $0 PART... (${ORDER[*]}, controlplane)" >&2; exit 2; }
queue=()
for part in "${ORDER[@]}"; do
  [[ " ${want[*]} " == *" $part "* ]] || continue
  skip=${SKIP[$part]:-}
  if [[ -n $skip && ${!skip:-} == 1 ]]; then echo "build: $part skipped ($skip=1)" >&2; continue; fi
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

echo "build: making ${queue[*]} (Go builds $JOBS at a time; logs in $logs)" >&2
failed=""
go_running=0
while [[ ${#queue[@]} -gt 0 || ${#part_of[@]} -gt 0 ]]; do
  while [[ -z $failed && ${#queue[@]} -gt 0 && ( ${queue[0]} == venv || $go_running -lt $JOBS ) ]]; do
    part=${queue[0]}; queue=("${queue[@]:1}")
    ${COMMAND[$part]} > "$logs/$part.log" 2>&1 < /dev/null &
    part_of[$!]=$part; t0_of[$part]=$SECONDS
    [[ $part == venv ]] || go_running=$((go_running + 1))
  done
  [[ ${#part_of[@]} -gt 0 ]] || break
  rc=0; wait -n -p done_pid || rc=$?
  part=${part_of[$done_pid]}; unset "part_of[$done_pid]"
  [[ $part == venv ]] || go_running=$((go_running - 1))
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
