#!/bin/sh
# install-cni: puts dpu-cni on a host for the kubelet, from the host DaemonSet
# (manifests/base/host/daemonset.yaml; installed as /usr/libexec/dpu-cni/install-cni
# in the dpu-cni-host image). POSIX sh: the image has no bash.
#
#   install-cni install --plugin FILE --bin-dir DIR --conflist FILE --conf-dir DIR --socket PATH [--timeout S]
#       copy the plugin into DIR, wait until host-shim answers on PATH, then
#       write the conflist into the conf dir; both atomically (a rename in the
#       same directory), so the kubelet never reads half a file, and the
#       network is declared only when a CNI ADD can be served
#   install-cni keep --conflist FILE --conf-dir DIR --socket PATH [--interval S]
#       puts the conflist back whenever it is missing or changed while
#       host-shim answers (another installer rewriting the CNI config dir)
#   install-cni probe --socket PATH [--plugin FILE]
#       exit 0 when host-shim answers on PATH (whatever it says about the DPU)
#   install-cni uninstall --bin-dir DIR --conf-dir DIR [--conflist-name NAME]
#       removes what install put there
#
# "Answers" is decided by the plugin itself: CNI STATUS through the socket.
# dpu-cni reports an unreachable host-shim with the message "host-shim is
# unreachable" (cni/src/plugin.cpp); any other answer came from host-shim.
set -eu

cmd=${1:-}
[ $# -gt 0 ] && shift
plugin=/usr/bin/dpu-cni bin_dir="" conflist="" conf_dir="" socket=/run/dpu-cni/host-shim.sock
timeout=0 interval=10 name=""
while [ $# -gt 0 ]; do
  case $1 in
    --plugin) plugin=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --conflist) conflist=$2; shift 2 ;;
    --conf-dir) conf_dir=$2; shift 2 ;;
    --socket) socket=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --conflist-name) name=$2; shift 2 ;;
    *) echo "install-cni: unknown argument '$1' (see the header of install-cni)" >&2; exit 2 ;;
  esac
done

log() { echo "install-cni: $*" >&2; }
need() { [ -n "$2" ] || { log "$cmd needs $1"; exit 2; }; }

# Copies SRC to DIR/NAME through a temporary file in DIR and a rename.
atomic_copy() {
  src=$1 dir=$2 dest=$3 mode=$4
  tmp="$dir/.$dest.tmp.$$"
  cp "$src" "$tmp" && chmod "$mode" "$tmp" && mv -f "$tmp" "$dir/$dest" || { rm -f "$tmp"; return 1; }
}

answers() {
  out=$(printf '{"cniVersion":"1.1.0","name":"install-cni-probe","type":"dpu-cni","socket":"%s"}' "$socket" |
        CNI_COMMAND=STATUS CNI_PATH=/nonexistent "$plugin" 2>/dev/null) && return 0
  case $out in
    *"host-shim is unreachable"*|"") return 1 ;;
    *) return 0 ;;
  esac
}

conflist_name() { [ -n "$name" ] && echo "$name" || basename "$conflist"; }

# A runtime skips a config it cannot parse and the node silently has no
# network: refuse one that is not a conflist naming dpu-cni, before anything
# is written.
check_conflist() {
  command -v jq >/dev/null 2>&1 || return 0
  jq -e '(.cniVersion | type == "string") and (.name | type == "string") and
         (.plugins | type == "array" and length > 0) and any(.plugins[]; .type == "dpu-cni")' \
    "$conflist" >/dev/null 2>&1 && return 0
  log "$conflist is not a CNI conflist with cniVersion, name and a plugins list holding {\"type\": \"dpu-cni\"}"
  exit 1
}

case $cmd in
  probe)
    answers ;;
  install)
    need --bin-dir "$bin_dir"; need --conflist "$conflist"; need --conf-dir "$conf_dir"
    [ -x "$plugin" ] || { log "the plugin $plugin is not an executable file"; exit 1; }
    [ -r "$conflist" ] || { log "the conflist $conflist cannot be read"; exit 1; }
    check_conflist
    [ -d "$bin_dir" ] && [ -d "$conf_dir" ] || { log "$bin_dir or $conf_dir is not a directory (check the hostPath mounts)"; exit 1; }
    atomic_copy "$plugin" "$bin_dir" "$(basename "$plugin")" 0755
    log "installed $bin_dir/$(basename "$plugin")"
    waited=0
    until answers; do
      if [ "$timeout" -gt 0 ] && [ "$waited" -ge "$timeout" ]; then
        log "host-shim did not answer on $socket within ${timeout}s; the conflist is not written"
        exit 1
      fi
      [ $((waited % 10)) -eq 0 ] && log "waiting for host-shim to answer on $socket"
      sleep 1
      waited=$((waited + 1))
    done
    atomic_copy "$conflist" "$conf_dir" "$(conflist_name)" 0644
    log "host-shim answers; wrote $conf_dir/$(conflist_name)" ;;
  keep)
    need --conflist "$conflist"; need --conf-dir "$conf_dir"
    trap 'exit 0' TERM INT
    while :; do
      if ! cmp -s "$conflist" "$conf_dir/$(conflist_name)" && answers; then
        atomic_copy "$conflist" "$conf_dir" "$(conflist_name)" 0644
        log "restored $conf_dir/$(conflist_name)"
      fi
      sleep "$interval" &
      wait $! || true
    done ;;
  uninstall)
    need --bin-dir "$bin_dir"; need --conf-dir "$conf_dir"
    rm -f "$bin_dir/dpu-cni" "$conf_dir/${name:-10-dpu-cni.conflist}"
    log "removed $bin_dir/dpu-cni and $conf_dir/${name:-10-dpu-cni.conflist}" ;;
  *)
    echo "usage: install-cni install|keep|probe|uninstall [options] (see the header of install-cni)" >&2
    exit 2 ;;
esac
