# tests/cni/system/common.bash — shared setup for dpu-cni's system tests: the
# host-shim environment (tests/host-shim/env.bash: a host netns with a fake
# SR-IOV PF, the fake DPU API and a real host-shim), a plugin directory holding
# dpu-cni next to Debian's reference plugins, and the libcni driver.
#
#   source "$(dirname "$0")/common.bash"
#   cni_env_up || exit 1          # skips (skip_test: the skip code, a visible message) unless root
#   cni_conflist NAME VERSION '<plugin object>,...'   # writes $CNI_DIR/NAME.conflist
#   drv add -conf F -netns P -id C                     # cnidriver in the host netns
#   expect_code N "what" CMD...   # CMD must print the spec's error JSON with code N
# Needs DPU_BUILD_DIR (the build with cni/dpu-cni, host-shim, the fakes and
# tests/tools/cnidriver). Everything is torn down on exit, also on failure.
set -uo pipefail

CNI_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
FAILURES=0

fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

cni_env_up() {
  if [ "$(id -u)" != 0 ]; then
    source "$CNI_SRC/tests/support/shell.bash"
    skip_test "needs root (network namespaces, host-shim)"
  fi
  : "${DPU_BUILD_DIR:?set DPU_BUILD_DIR to the build directory}"
  CNIDRIVER=${CNIDRIVER:-$DPU_BUILD_DIR/tests/tools/cnidriver}
  DPU_CNI=$DPU_BUILD_DIR/cni/dpu-cni
  local bin
  for bin in "$CNIDRIVER" "$DPU_CNI"; do
    [ -x "$bin" ] || { echo "FAIL: $bin is not built" >&2; exit 1; }
  done
  # shellcheck source=../../host-shim/env.bash
  source "$CNI_SRC/tests/host-shim/env.bash"
  CNI_DIR=$(mktemp -d /tmp/dpu-cni-sys.XXXXXX)
  trap 'cni_env_down' EXIT
  trap 'exit 130' INT TERM  # through the EXIT trap: nothing is left behind
  hostshim_env_up "$CNI_DIR" || { echo "FAIL: the host-shim environment did not come up" >&2; exit 1; }
  watchdog_start  # a hang is reported and torn down before ctest's timeout (support/shell.bash)
  mkdir -p "$CNI_DIR/plugins" "$CNI_DIR/cache"
  ln -s "$(readlink -f "$DPU_CNI")" "$CNI_DIR/plugins/dpu-cni"
  CNI_PLUGIN_PATH="$CNI_DIR/plugins:/usr/lib/cni"
}

cni_env_down() {
  local rc=$?
  watchdog_stop
  if [ "$rc" != 0 ] || [ "$FAILURES" != 0 ]; then
    echo "--- host-shim log (tail)" >&2; tail -n 30 "$HOSTSHIM_LOG" >&2 2>/dev/null
  fi
  hostshim_env_down
  rm -rf "$CNI_DIR"
}

# cni_conflist NAME VERSION PLUGINS_JSON — the network "dpunet" with these plugins.
cni_conflist() {
  echo "{\"cniVersion\":\"$2\",\"name\":\"dpunet\",\"plugins\":[$3]}" > "$CNI_DIR/$1.conflist"
  echo "$CNI_DIR/$1.conflist"
}

dpu_plugin_json() {  # the dpu-cni plugin object, with extra fields appended
  echo "{\"type\":\"dpu-cni\",\"socket\":\"$HOSTSHIM_SOCKET\",\"logFile\":\"$CNI_DIR/dpu-cni.log\",\"logLevel\":\"info\",\"capabilities\":{\"mac\":true,\"deviceID\":true,\"ips\":true}${1:+,$1}}"
}

# The libcni driver, run in the host netns as a runtime would be.
drv() {
  local verb=$1; shift
  hostshim_exec "$CNIDRIVER" "$verb" -path "$CNI_PLUGIN_PATH" -cachedir "$CNI_DIR/cache" "$@"
}

# expect_code CODE WHAT CMD... — CMD fails with the spec's error JSON carrying CODE and a details text.
expect_code() {
  local want=$1 what=$2; shift 2
  local out rc
  out=$("$@" 2>"$CNI_DIR/last.stderr"); rc=$?
  local code details
  code=$(echo "$out" | tail -n 1 | jq -r '.code' 2>/dev/null)
  details=$(echo "$out" | tail -n 1 | jq -r '.details // ""' 2>/dev/null)
  if [ "$rc" = 0 ]; then
    fail "$what: succeeded, expected code $want"
  elif [ "$code" != "$want" ]; then
    fail "$what: code '$code', expected $want; stdout: $out; stderr: $(cat "$CNI_DIR/last.stderr")"
  elif [ -z "$details" ]; then
    fail "$what: code $want but no details text"
  else
    pass "$what: code $want ($details)"
  fi
}

# Nothing left: no records, no fake-DPU pod attachments, every pool VF home, down, without addresses.
expect_clean() {
  if hostshim_assert_clean; then pass "$1: nothing left behind"; else fail "$1: state left behind"; fi
}

finish() {
  if [ "$FAILURES" != 0 ]; then echo "$FAILURES failure(s)" >&2; exit 1; fi
  echo "all passed"
}
