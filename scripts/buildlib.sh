# Sourced by kfold's Go build scripts (build_controlplane.sh, build_promtool.sh).
# The caller sets CACHE (the cache root) and BIN (where the binaries go) and defines log().
#
# lock_cache NAME: hold $BIN/.NAME.lock (flock) until unlock_cache or the script's exit, so two
#   builds at once (two setups, two checkouts sharing ~/.cache/kfold, or caches sharing one bin/
#   through a symlink) never build NAME into it together: the second waits, then finds NAME
#   cached. A build checks its stamp only after taking the lock.
# need_go: Go is needed only when something is rebuilt; found off PATH in its usual homes too.

lock_cache() {
  mkdir -p "$BIN"
  exec {KFOLD_LOCK_FD}>"$BIN/.$1.lock"
  if ! flock -n "$KFOLD_LOCK_FD"; then
    local t0=$SECONDS
    log "waiting for another build of $1 into $BIN to finish"
    flock "$KFOLD_LOCK_FD"
    log "waited $((SECONDS - t0))s for another build of $1"
  fi
}

unlock_cache() { exec {KFOLD_LOCK_FD}>&-; }

need_go() {
  command -v go >/dev/null && return
  local d
  for d in /usr/local/go/bin /usr/lib/go/bin "$HOME/go/bin" "$HOME/.local/go/bin"; do
    [[ -x $d/go ]] && { export PATH="$d:$PATH"; return; }
  done
  log "ERROR: Go is needed to build $1 (not cached in $CACHE/bin) and no 'go' was found; install Go >= 1.26 (the official release into /usr/local/go, or a distribution package that new) and rerun"
  exit 1
}
