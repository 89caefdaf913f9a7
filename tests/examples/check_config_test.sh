#!/usr/bin/env bash
# Every example configuration in the repository passes its daemon's
# --check-config, so what an operator copies from the docs starts. Each
# example is mapped to its daemon below; a new one that is not fails the test
# until it is. Also: --check-config is the one spelling of the validate flag
# (the old --check is refused), a bad field fails it, and dpu-agent refuses
# ipsec: true (encryption on, pod MTU lowered for ESP) and the example's
# IPsec block in its keys and on modes.
# No root needed: validation reads the files only.
#
#   check_config_test.sh SOURCE_DIR HOST_SHIM DPU_AGENT DPU_DATAPLANE
set -uo pipefail
src=$1
declare -A bin=([host-shim]=$2 [dpu-agent]=$3 [dpu-dataplane]=$4)
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$(( FAILURES + 1 )); }
pass() { echo "ok: $*"; }
work=$(mktemp -d /tmp/check-config.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Which daemon reads which example (paths relative to the source tree).
daemon_of() {
  case $1 in
    host-shim/examples/*) echo host-shim ;;
    dpu-agent/control/examples/cluster.yaml) echo "-" ;;   # the file cluster source's data, read by a running agent
    dpu-agent/control/examples/*) echo dpu-agent ;;
    dpu-agent/datapath/dataplane_*.yaml) echo dpu-dataplane ;;
    *) echo "?" ;;
  esac
}

# make_tls: a CA and a certificate and key under every name the examples use.
make_tls() {
  [ -d "$work/tls" ] && return 0
  command -v openssl >/dev/null || { fail "openssl is not installed (scripts/install-deps.sh)"; return 1; }
  mkdir -p "$work/tls"
  (cd "$work/tls" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=example-ca \
      -keyout ca.key -out ca.pem &&
    for n in host agent dpu server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$n" -keyout "$n.key" -out "$n.csr" &&
        openssl x509 -req -in "$n.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -out "$n.pem" || exit 1
    done) >/dev/null 2>&1 || { fail "could not make test certificates with openssl"; return 1; }
}

cd "$src" || exit 1
examples=$(find . \( -path ./build -o -path ./.git -o -path ./tests \) -prune -o -type f \( -path '*/examples/*' -o -name 'dataplane_*.yaml' \) -print |
           sed 's|^\./||' | sort)
[ -n "$examples" ] || fail "no example configurations found under $src"
for f in $examples; do
  d=$(daemon_of "$f")
  case $d in
    -) continue ;;
    \?) fail "$f: no daemon is known to read this example; map it in $(basename "$0")"; continue ;;
  esac
  # The examples name TLS files where a node keeps them (/etc/dpu-cni/tls); they
  # are checked against a copy that names this test's own, made with openssl.
  cfg=$f
  if grep -q '/etc/dpu-cni/tls/' "$f"; then
    make_tls || continue
    cfg=$work/$(basename "$f")
    sed "s|/etc/dpu-cni/tls/|$work/tls/|g" "$f" > "$cfg"
  fi
  out=$("${bin[$d]}" --config "$cfg" --check-config 2>&1); rc=$?
  [ "$rc" = 0 ] && pass "$d --check-config $f: $out" || fail "$d --check-config $f: exit $rc: $out"
done

# One spelling: the old --check of the dataplane (and any other) is an unknown argument.
for d in host-shim dpu-agent dpu-dataplane; do
  "${bin[$d]}" --config /dev/null --check >/dev/null 2>&1; rc=$?
  [ "$rc" = 2 ] && pass "$d refuses --check (exit 2)" || fail "$d --check: exit $rc, expected 2 (unknown argument)"
done

# A bad field fails --check-config and names the field.
sed 's/^  url: .*/  url: ftp:\/\/169.254.0.2/' host-shim/examples/host-shim.yaml > "$work/host-shim.yaml"
out=$("${bin[host-shim]}" --config "$work/host-shim.yaml" --check-config 2>&1); rc=$?
[ "$rc" != 0 ] && grep -q "dpu.url" <<< "$out" && pass "host-shim --check-config names a bad field: $out" ||
  fail "host-shim --check-config with a bad dpu.url: exit $rc: $out"
sed 's/^workers: .*/workers: -1/' dpu-agent/datapath/dataplane_lab.yaml > "$work/dataplane.yaml"
out=$("${bin[dpu-dataplane]}" --config "$work/dataplane.yaml" --check-config 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "workers" <<< "$out" && pass "dpu-dataplane --check-config names a bad field: $out" ||
  fail "dpu-dataplane --check-config with workers -1: exit $rc: $out"

# ipsec: true turns encryption on and lowers the pod MTU for ESP.
sed 's/^ipsec: false/ipsec: true/' dpu-agent/control/examples/agent.yaml > "$work/agent.yaml"
grep -q '^ipsec: true' "$work/agent.yaml" || fail "the agent example has no 'ipsec: false' line to flip"
out=$("${bin[dpu-agent]}" --config "$work/agent.yaml" --check-config 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "IPsec on" <<< "$out" && grep -q "pod MTU 1408" <<< "$out" &&
  pass "dpu-agent --check-config with ipsec: true: $out" || fail "dpu-agent --check-config with ipsec: true: exit $rc: $out"

# The example's IPsec block, uncommented (mode keys, with a PSK): checked, and
# its files with it; then the same block with mode on.
sed -e '/^ipsec: false/d' -e 's/^# ipsec:/ipsec:/' -e 's/^#   \([a-zA-Z]\)/  \1/' \
    -e "s|^  stateDir: .*|  stateDir: $work/ipsec|" -e "s|^  pskFile: .*|  pskFile: $work/psk|" \
    dpu-agent/control/examples/agent.yaml > "$work/agent-ipsec.yaml"
grep -q '^  mode: keys' "$work/agent-ipsec.yaml" || fail "the agent example has no commented ipsec block to enable"
/usr/bin/python3 -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())' > "$work/psk"
out=$("${bin[dpu-agent]}" --config "$work/agent-ipsec.yaml" --check-config 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "IPsec keys" <<< "$out" && grep -q "pod MTU 1408" <<< "$out" &&
  pass "dpu-agent --check-config with the example's ipsec block: $out" || fail "the example's ipsec block: exit $rc: $out"
echo "c2hvcnQ=" > "$work/psk"
out=$("${bin[dpu-agent]}" --config "$work/agent-ipsec.yaml" --check-config 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "config.ipsec.pskFile: IPsec PSK file $work/psk decodes to 5 bytes" <<< "$out" &&
  pass "dpu-agent --check-config checks the PSK file: $out" || fail "a short PSK: exit $rc: $out"
sed -i 's/^  mode: keys/  mode: on/' "$work/agent-ipsec.yaml"
/usr/bin/python3 -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())' > "$work/psk"
out=$("${bin[dpu-agent]}" --config "$work/agent-ipsec.yaml" --check-config 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "IPsec on" <<< "$out" && grep -q "pod MTU 1408" <<< "$out" &&
  pass "dpu-agent --check-config with the ipsec block in mode on: $out" || fail "dpu-agent --check-config with mode on: exit $rc: $out"

[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo PASS
