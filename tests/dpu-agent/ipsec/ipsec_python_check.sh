#!/bin/bash
# The independent check of the IPsec key derivation: two nodes' key files (made
# by the agent's own key store, epochs 1..3 and 1..2) and a PSK; the C++
# library (ipsec-derive) and ipsec_keys.py (python3-cryptography, HKDF written
# from RFC 5869, the derivation from docs/ipsec.md) compute every SA key, salt
# and SPI of both directions and every pair of epochs, with and without the
# PSK, for AES-128 and AES-256; the two outputs must be identical. Also checks
# the SPI rules (never 0..255, the epochs in the top byte) on the Python side.
#
# usage: ipsec_python_check.sh IPSEC_DERIVE PYTHON SCRIPT
set -euo pipefail
TOOL=$1 PY=$2 SCRIPT=$3
source "$(dirname "$(readlink -f "$0")")/../../support/shell.bash"
"$PY" -c 'import cryptography.hazmat.primitives.asymmetric.x25519' 2>/dev/null ||
  skip_test "$PY has no cryptography module (Debian package python3-cryptography)"

DIR=$(mktemp -d /tmp/ipsec-python-check.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TOOL" make-keys "$DIR/a.json" node-a 3
"$TOOL" make-keys "$DIR/b.json" node-b 2
[ "$(stat -c %a "$DIR/a.json")" = 600 ] || fail "the key file is not mode 0600"
"$PY" -c 'import base64,os; print(base64.b64encode(os.urandom(32)).decode())' > "$DIR/psk"

checked=0
for bits in 128 256; do
  for psk in none "$DIR/psk"; do
    opts=(--key-bits "$bits")
    [ "$psk" = none ] || opts+=(--psk "$psk")
    "$TOOL" derive "node-a=$DIR/a.json" "node-b=$DIR/b.json" "${opts[@]}" > "$DIR/cpp.txt"
    "$PY" "$SCRIPT" "node-a=$DIR/a.json" "node-b=$DIR/b.json" "${opts[@]}" > "$DIR/py.txt"
    lines=$(wc -l < "$DIR/py.txt")
    [ "$lines" = 12 ] || fail "expected 12 SAs (2 directions x 3 x 2 epochs), python printed $lines"
    diff <(sort "$DIR/cpp.txt") <(sort "$DIR/py.txt") > "$DIR/diff.txt" ||
      fail "C++ and Python disagree (AES-$bits, psk $psk):$(echo; cat "$DIR/diff.txt")"
    "$PY" - "$DIR/py.txt" "$bits" <<'PY' || fail "SPI or key shape wrong (AES-$bits)"
import json, sys
bits = int(sys.argv[2])
spis = set()
for line in open(sys.argv[1]):
    sa = json.loads(line)
    spi = int(sa["spi"], 16)
    assert spi >= 256, sa
    assert spi >> 28 == sa["receiver_epoch"] & 0xF and (spi >> 24) & 0xF == sa["sender_epoch"] & 0xF, sa
    assert len(sa["key"]) == bits // 4 and len(sa["salt"]) == 8, sa
    spis.add((sa["to"], spi))
assert len(spis) == 12
PY
    checked=$((checked + lines))
  done
done
# The PSK matters: the keys with it are not the keys without it.
"$PY" "$SCRIPT" "node-a=$DIR/a.json" "node-b=$DIR/b.json" > "$DIR/nopsk.txt"
"$PY" "$SCRIPT" "node-a=$DIR/a.json" "node-b=$DIR/b.json" --psk "$DIR/psk" > "$DIR/psk.txt"
"$PY" - "$DIR/nopsk.txt" "$DIR/psk.txt" <<'PY' || fail "a key is the same with and without the PSK"
import json, sys
a = {json.loads(l)["key"] for l in open(sys.argv[1])}
b = {json.loads(l)["key"] for l in open(sys.argv[2])}
assert len(a) == len(b) == 12 and not a & b
PY
echo "PASS: $checked SAs computed alike by the C++ library and ipsec_keys.py"
