#!/usr/bin/env bash
# The host DaemonSet's CNI install as the rendered manifests run it: the
# commands and volume mounts of overlays/dpu-nodes and overlays/openshift
# (their bin and conf dirs differ), each mounted path standing for what the
# volume is on a node (a directory per hostPath), against a real host-shim
# (tests/host-shim/env.bash). The image's paths stand for the build's files
# (manifests/images.txt: install-cni is host-shim/tools/install-cni.sh,
# /usr/bin/dpu-cni the build's plugin). Proves, watching both host dirs with
# inotify:
#   - the init container copies dpu-cni at once and writes no conflist while
#     host-shim does not answer, then writes it as soon as host-shim answers;
#   - both files appear by a rename into the directory (IN_MOVED_TO), never
#     by writing the final name, so the kubelet never reads half a file;
#   - the long-lived cni-conf container puts back a conflist that was removed
#     or rewritten, and never touches the bin dir;
#   - the install guide's uninstall command leaves both host dirs as they
#     were before the install: nothing of ours.
# Root (host-shim's env uses network namespaces).
#   host_install_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root (host-shim's test env)"; exit 77; fi
export DPU_BUILD_DIR=$build
source "$src/tests/host-shim/env.bash"
PY=/usr/bin/python3
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }
poll() {  # SECONDS CMD...
  local end=$(( SECONDS + $1 )); shift
  until "$@" >/dev/null 2>&1; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.05; done
}
work=$(mktemp -d /tmp/dpu-host-install.XXXXXX)
pids=()
cleanup() {
  hostshim_env_down
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# inotify, from /usr/bin/python3's ctypes: one "EVENT NAME" line per event in DIR
# (appended: the test empties OUT between its phases).
watch_dir() {  # DIR OUT
  "$PY" -u - "$1" >> "$2" <<'PY' &
import ctypes, os, struct, sys
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.inotify_init()
names = {0x2: "MODIFY", 0x8: "CLOSE_WRITE", 0x40: "MOVED_FROM", 0x80: "MOVED_TO", 0x100: "CREATE", 0x200: "DELETE"}
libc.inotify_add_watch(fd, sys.argv[1].encode(), sum(names))
print("ready", flush=True)
while True:
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        wd, mask, cookie, length = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + length].rstrip(b"\0").decode()
        for bit, what in names.items():
            if mask & bit:
                print(what, name, flush=True)
        i += 16 + length
PY
  pids+=($!)
  poll 10 grep -q '^ready' "$2"
}
# written_in_place LOG NAME: NAME was created or written under its own name.
written_in_place() { grep -qE "^(CREATE|MODIFY|CLOSE_WRITE) $2\$" "$1"; }
# watched DIR OUT: OUT holds every event in DIR so far. A marker file is made and
# removed in DIR, and its removal awaited in OUT (inotify reports in order).
# events OUT: OUT without the marker's lines.
watched() { : > "$1/.watched"; rm -f "$1/.watched"; poll 10 grep -qx "DELETE .watched" "$2"; }
events() { grep -v ' \.watched$' "$1"; }

mkdir -p "$work/env"
hostshim_env_up "$work/env" || { echo "FAIL: host-shim's env did not come up"; exit 1; }
# Not answering yet: host-shim's socket directory is bound into the pod, the socket moved aside.
mv "$HOSTSHIM_SOCKET" "$HOSTSHIM_SOCKET.away"
answering() { mv "$HOSTSHIM_SOCKET.away" "$HOSTSHIM_SOCKET"; }

for overlay in dpu-nodes openshift; do
  r=$work/render-$overlay
  node "$src/tests/deploy/render.js" "$src/manifests/overlays/$overlay" "$r" || { fail "$overlay does not render"; continue; }
  # The containers of the host DaemonSet, as shell words: init install-cni, then cni-conf.
  node -e '
    const YAML = require(process.argv[1]);
    const fs = require("fs");
    const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJSON());
    const ds = docs.find((d) => d && d.kind === "DaemonSet" && d.metadata.name === "dpu-cni-host");
    const pod = ds.spec.template.spec;
    const image = { "/usr/libexec/dpu-cni/install-cni": process.argv[3], "/usr/bin/dpu-cni": process.argv[4] };
    const q = (s) => "'"'"'" + String(s).replace(/'"'"'/g, "'"'"'\\'"'"''"'"'") + "'"'"'";
    for (const c of [...pod.initContainers, ...pod.containers]) {
      if (!/install-cni$/.test(c.command[0])) continue;
      const mounts = (c.volumeMounts || []).map((m) => {
        const v = pod.volumes.find((x) => x.name === m.name);
        return `${m.mountPath}=${v.hostPath ? "hostPath:" + v.hostPath.path : v.configMap ? "configMap" : "other"}`;
      });
      console.log(`${c.name} ${q(mounts.join(" "))} ${c.command.map((w) => q(image[w] || w)).join(" ")}`);
    }' "$src/tests/deploy/node_modules/yaml" "$r/rendered.yaml" "$src/host-shim/tools/install-cni.sh" "$build/cni/dpu-cni" \
    > "$r/containers" || { fail "$overlay: no host DaemonSet"; continue; }
  host=$work/host-$overlay   # the node's file system: what the hostPath volumes are
  mkdir -p "$host"
  # run_container NAME [ARGS]: its command, each mounted path in its words
  # replaced by what the volume is on this "node" ($host for a hostPath,
  # host-shim's env for /run/dpu-cni, the rendered ConfigMap's files).
  run_container() {
    local line mounts m at what to extra=("${@:2}")
    line=$(grep "^$1 " "$r/containers") || return 1
    eval "set -- $line"
    mounts=$2; shift 2
    local words=("$@")
    for m in $mounts; do
      at=${m%%=*} what=${m#*=}
      case $what in
        hostPath:/run/dpu-cni) to=$(dirname "$HOSTSHIM_SOCKET") ;;
        hostPath:*) to=$host${what#hostPath:}; mkdir -p "$to" ;;
        configMap) to=$(dirname "$(ls "$r"/configmaps/dpu-cni-host-config-*/host-shim.yaml)") ;;
        *) continue ;;
      esac
      words=("${words[@]/#$at/$to}")
    done
    exec "${words[@]}" "${extra[@]}"  # (run in the background: its pid is the command's)
  }
  bin_dir=$(grep -o "'--bin-dir' '[^']*'" "$r/containers" | head -1 | cut -d"'" -f4)
  conf_dir=$(grep -o "'--conf-dir' '[^']*'" "$r/containers" | head -1 | cut -d"'" -f4)
  bin_host=$host$(grep -o "$bin_dir=hostPath:[^ ']*" "$r/containers" | head -1 | cut -d: -f2)
  conf_host=$host$(grep -o "$conf_dir=hostPath:[^ ']*" "$r/containers" | head -1 | cut -d: -f2)
  mkdir -p "$bin_host" "$conf_host"
  echo "other plugin" > "$bin_host/bridge"; echo '{"other": "config"}' > "$conf_host/99-other.conflist"
  before=$(cd "$host" && find . -type f | sort | xargs sha256sum)
  watch_dir "$bin_host" "$work/bin-$overlay.events"
  watch_dir "$conf_host" "$work/conf-$overlay.events"

  run_container install-cni > "$work/install-$overlay.log" 2>&1 &
  installer=$!
  pids+=("$installer")
  if poll 20 test -x "$bin_host/dpu-cni" && poll 20 grep -q "waiting for host-shim" "$work/install-$overlay.log"; then
    [ ! -e "$conf_host/10-dpu-cni.conflist" ] &&
      pass "$overlay: dpu-cni is in ${bin_host#$host}, no conflist in ${conf_host#$host} while host-shim does not answer" ||
      fail "$overlay: a conflist was written before host-shim answered"
  else
    fail "$overlay: install-cni did not copy the plugin and wait: $(cat "$work/install-$overlay.log")"
  fi
  answering
  wait "$installer" && pass "$overlay: install-cni finished once host-shim answered: $(tail -1 "$work/install-$overlay.log")" ||
    fail "$overlay: install-cni failed: $(cat "$work/install-$overlay.log")"
  cmp -s "$bin_host/dpu-cni" "$build/cni/dpu-cni" && cmp -s "$conf_host/10-dpu-cni.conflist" \
    "$(ls "$r"/configmaps/dpu-cni-host-config-*/10-dpu-cni.conflist)" &&
    pass "$overlay: the plugin and the ConfigMap's conflist are on the host" || fail "$overlay: the installed files differ"
  watched "$bin_host" "$work/bin-$overlay.events" && watched "$conf_host" "$work/conf-$overlay.events" ||
    fail "$overlay: an inotify watcher did not report its marker file within 10 s"
  for f in "bin dpu-cni" "conf 10-dpu-cni.conflist"; do
    set -- $f
    if grep -q "^MOVED_TO $2\$" "$work/$1-$overlay.events" && ! written_in_place "$work/$1-$overlay.events" "$2"; then
      pass "$overlay: $2 appeared by a rename, never written in place ($(events "$work/$1-$overlay.events" | grep -c .) events)"
    else
      fail "$overlay: $2 was not renamed into place: $(events "$work/$1-$overlay.events" | tr '\n' ';')"
    fi
  done

  # The long-lived container keeps the conflist, and never writes the bin dir.
  : > "$work/bin-$overlay.events"
  # (--interval: 1 s, not the default 10 s; --plugin: the image's /usr/bin/dpu-cni, install-cni's default)
  run_container cni-conf --interval 1 --plugin "$build/cni/dpu-cni" > "$work/keep-$overlay.log" 2>&1 &
  pids+=($!)
  rm -f "$conf_host/10-dpu-cni.conflist"
  poll 30 test -e "$conf_host/10-dpu-cni.conflist" && pass "$overlay: cni-conf put back a removed conflist" ||
    fail "$overlay: cni-conf did not restore the conflist: $(cat "$work/keep-$overlay.log")"
  echo '{"cniVersion": "1.0.0", "name": "someone-else", "plugins": [{"type": "bridge"}]}' > "$conf_host/10-dpu-cni.conflist"
  restored() { grep -q '"type": "dpu-cni"' "$conf_host/10-dpu-cni.conflist"; }
  poll 30 restored && pass "$overlay: cni-conf put back a rewritten conflist" || fail "$overlay: the rewritten conflist stayed"
  kill "${pids[-1]}" 2>/dev/null; wait "${pids[-1]}" 2>/dev/null
  watched "$bin_host" "$work/bin-$overlay.events" || fail "$overlay: the bin dir's inotify watcher did not report its marker file within 10 s"
  [ -z "$(events "$work/bin-$overlay.events")" ] && pass "$overlay: cni-conf never touched the bin dir" ||
    fail "$overlay: the bin dir changed while cni-conf ran: $(events "$work/bin-$overlay.events" | tr '\n' ';')"

  # Uninstall as the guide says for this shape: nothing of ours is left.
  doc=$src/docs/install-kubernetes.md
  [ "$overlay" = openshift ] && doc=$src/docs/install-openshift.md
  cmd=$(grep -o 'install-cni uninstall --bin-dir [^ `]* --conf-dir [^ `]*' "$doc" | head -1)
  [ -n "$cmd" ] || fail "$doc gives no install-cni uninstall command"
  set -- $cmd
  [ "$4" = "${bin_host#$host}" ] && [ "$6" = "${conf_host#$host}" ] ||
    fail "$overlay: the guide uninstalls from $4 and $6, the manifests install into ${bin_host#$host} and ${conf_host#$host}"
  sh "$src/host-shim/tools/install-cni.sh" uninstall --bin-dir "$host$4" --conf-dir "$host$6" >/dev/null 2>&1
  after=$(cd "$host" && find . -type f | sort | xargs sha256sum)
  [ "$before" = "$after" ] && pass "$overlay: after \`$cmd\` the host dirs are as before the install" ||
    fail "$overlay: uninstall left: $(diff <(echo "$before") <(echo "$after") | tr '\n' ';')"
  # For the next shape: host-shim not answering again.
  mv "$HOSTSHIM_SOCKET" "$HOSTSHIM_SOCKET.away"
done

[ "$FAILURES" -eq 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
