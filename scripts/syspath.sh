# Sourced by kfold's scripts: system tools that root uses (chroot, mount, unshare, ...) live in the
# sbin dirs, which a minimal environment (PATH=/usr/bin:/bin, as cron or `env -i` give) leaves out.
# They are looked up there too, after everything already on PATH.
for _d in /usr/local/sbin /usr/sbin /sbin; do
  case ":$PATH:" in *":$_d:"*) ;; *) PATH="$PATH:$_d" ;; esac
done
unset _d
export PATH
