# `host-shim --config FILE` with a bad file exits 1 at once, naming the field.
set -u
bin=$1
dir=$(mktemp -d /tmp/hostshim-badconfig.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_field() {  # expect_field FIELD JSON
  echo "$2" > "$dir/c.json"
  out=$(timeout 5 "$bin" --config "$dir/c.json" 2>&1); rc=$?
  [ $rc = 1 ] || fail "exit $rc for a bad $1: $out"
  grep -qF "$1" <<<"$out" || fail "message does not name $1: $out"
  echo "ok: $out"
}
expect_field "pfs" '{"dpu": {"url": "http://x"}}'
expect_field "pfs[0].vfs" '{"pfs": [{"name": "p0", "vfs": "9-1"}], "dpu": {"url": "http://x"}}'
expect_field "dpu.url" '{"pfs": [{"name": "p0", "vfs": "0-1"}], "dpu": {"url": "x"}}'
expect_field "managementPort.vf" '{"pfs": [{"name": "p0", "vfs": "0-1"}], "dpu": {"url": "http://x", "insecure": true}, "managementPort": {"vf": 1}}'
rm -f "$dir/c.json"
out=$("$bin" --config "$dir/nosuch.json" 2>&1); [ $? = 1 ] && grep -q nosuch <<<"$out" || fail "missing file: $out"
out=$("$bin" 2>&1); [ $? = 2 ] || fail "no arguments should print usage"
echo PASS
