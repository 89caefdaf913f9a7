#!/usr/bin/env bash
# Regenerates every golden file with its scapy script into a temporary folder and
# compares it with the committed one: a change of either side shows up here.
set -euo pipefail
python=${1:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
count=0
for gen in "$here"/gen_*.py; do
  name=$(basename "$gen" .py)
  name=${name#gen_}
  "$python" "$gen" "$tmp/$name.golden"
  if ! diff -u "$here/$name.golden" "$tmp/$name.golden" > "$tmp/$name.diff"; then
    echo "golden $name.golden is stale: regenerate with $python $gen $here/$name.golden" >&2
    head -20 "$tmp/$name.diff" >&2
    status=1
  fi
  count=$((count + 1))
done
if [ "$count" -eq 0 ]; then
  echo "no golden generators found in $here" >&2
  exit 1
fi
echo "$count golden files checked"
exit $status
