#!/bin/bash
# install-cni (host-shim/tools/install-cni.sh) against the real dpu-cni and a
# real host-shim: the plugin lands in the bin dir at once, the conflist only
# once host-shim answers; both atomically; `keep` restores a removed conflist;
# `uninstall` leaves nothing. Root (host-shim's test env uses namespaces).
set -u
if [ "$(id -u)" != 0 ]; then echo "SKIP: install-cni test needs root (host-shim's test env)"; exit 77; fi
: "${DPU_BUILD_DIR:?set DPU_BUILD_DIR to the build directory}"
DPU_SOURCE_DIR=$(cd "$(dirname "$0")/../../.." && pwd)
source "$DPU_SOURCE_DIR/tests/host-shim/env.bash"
fail() { echo "FAIL: $*" >&2; tail -n 20 "$dir/env/host-shim.log" >&2 2>/dev/null; exit 1; }
pass() { echo "PASS: $*"; }
poll() {  # SECONDS CMD...: until CMD succeeds, every 50 ms
  local end=$(( $(date +%s) + $1 )); shift
  until "$@" 2>/dev/null; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.05; done
}
keeper="" installer=""
tool="$DPU_SOURCE_DIR/host-shim/tools/install-cni.sh"
dir=$(mktemp -d /tmp/install-cni.XXXXXX)
trap '[ -n "$keeper$installer" ] && kill $keeper $installer 2>/dev/null; hostshim_env_down; rm -rf "$dir"' EXIT
mkdir -p "$dir/bin" "$dir/net.d" "$dir/env"
printf '{"cniVersion":"1.0.0","name":"dpu-cni","plugins":[{"type":"dpu-cni","socket":"%s"}]}\n' \
  "$dir/env/host-shim.sock" > "$dir/10-dpu-cni.conflist"
args=(--plugin "$DPU_BUILD_DIR/cni/dpu-cni" --bin-dir "$dir/bin" --conflist "$dir/10-dpu-cni.conflist"
      --conf-dir "$dir/net.d" --socket "$dir/env/host-shim.sock")

# Before host-shim: the probe fails, install copies the plugin and waits.
! sh "$tool" probe --plugin "$DPU_BUILD_DIR/cni/dpu-cni" --socket "$dir/env/host-shim.sock" || fail "probe answered without host-shim"
sh "$tool" install "${args[@]}" 2> "$dir/install.log" &
installer=$!
poll 10 grep -q "waiting for host-shim" "$dir/install.log" || fail "install did not wait: $(cat "$dir/install.log")"
cmp -s "$dir/bin/dpu-cni" "$DPU_BUILD_DIR/cni/dpu-cni" || fail "the plugin was not copied before host-shim answered"
[ -x "$dir/bin/dpu-cni" ] || fail "the copied plugin is not executable"
[ ! -e "$dir/net.d/10-dpu-cni.conflist" ] || fail "the conflist was written before host-shim answered"

hostshim_env_up "$dir/env" || fail "host-shim env did not come up"
wait "$installer" || fail "install failed: $(cat "$dir/install.log")"
installer=""
cmp -s "$dir/net.d/10-dpu-cni.conflist" "$dir/10-dpu-cni.conflist" || fail "the conflist was not written"
[ -z "$(ls -A "$dir/bin" | grep -v '^dpu-cni$')" ] && [ -z "$(ls -A "$dir/net.d" | grep -v '^10-dpu-cni.conflist$')" ] ||
  fail "temporary files left: $(ls -A "$dir/bin" "$dir/net.d")"
sh "$tool" probe --plugin "$DPU_BUILD_DIR/cni/dpu-cni" --socket "$dir/env/host-shim.sock" || fail "probe does not see host-shim"

# keep: a conflist removed by someone else comes back.
sh "$tool" keep "${args[@]}" --interval 1 2> "$dir/keep.log" &
keeper=$!
rm -f "$dir/net.d/10-dpu-cni.conflist"
poll 10 test -e "$dir/net.d/10-dpu-cni.conflist" || fail "keep did not restore the conflist: $(cat "$dir/keep.log")"
kill "$keeper"; wait "$keeper" 2>/dev/null; keeper=""

# uninstall: nothing of ours is left.
sh "$tool" uninstall --bin-dir "$dir/bin" --conf-dir "$dir/net.d"
[ -z "$(ls -A "$dir/bin" "$dir/net.d" 2>/dev/null | grep -v ':$' | grep .)" ] || fail "uninstall left $(ls -A "$dir/bin" "$dir/net.d")"
pass "install-cni: plugin at once, conflist once host-shim answers, atomic, kept, uninstalled"
