# Shared by the interop scripts: paths, a scratch folder, assertions.
# Each script is run by ctest as `bash <script> <build dir>`.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
pcaptool="$build/overlay/overlay-pcap"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
checks=0

for tool in "$pcaptool" tshark "$python"; do
  command -v "$tool" >/dev/null || { echo "missing $tool: build overlay-pcap and run scripts/install-deps.sh" >&2; exit 1; }
done

# tshark without the "running as root" banner.
ts() { tshark "$@" 2>/dev/null; }

# expect NAME ACTUAL EXPECTED
expect() {
  checks=$((checks + 1))
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1" >&2
    echo "  expected: $3" >&2
    echo "  actual:   $2" >&2
    exit 1
  fi
  echo "ok: $1"
}

done_checks() { echo "$checks checks passed"; }

# Plain pod frames (ICMP, TCP, UDP over IPv4 and IPv6), as a VF would send them.
make_inner_pcap() {
  "$python" "$here/make_inner.py" "$1"
}
