#!/usr/bin/env bash
# What the arm64 (BlueField) build of the DPU side needs, on an amd64 Debian 12:
#   - Debian's cross toolchain (crossbuild-essential-arm64) and qemu-user-static,
#     which runs the DPU-side unit tests without an Arm machine;
#   - an arm64 sysroot holding Debian's arm64 -dev packages of every library the
#     DPU side links (DPDK, libbpf/libxdp, libnl-route, protobuf, cpprestsdk,
#     OpenSSL, yaml-cpp, libpcap, Catch2).
# The sysroot is extracted with mmdebstrap rather than installed with
# `dpkg --add-architecture arm64`: in bookworm libyaml-cpp-dev and libfdt-dev
# are not Multi-Arch: same, so their arm64 copies would replace the amd64 ones
# the host build needs. Extracting (no maintainer scripts) needs no arm64
# emulation and leaves the host's packages alone.
#
#   scripts/install-arm64-deps.sh [SYSROOT]     (default: build/sysroot-arm64)
# Idempotent: the sysroot is rebuilt only when the package list below changes.
# Prints the sysroot's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
sysroot=$(realpath -m "${1:-${DPU_ARM64_SYSROOT:-build/sysroot-arm64}}")

host_packages=(crossbuild-essential-arm64 qemu-user-static mmdebstrap)
# intel-ipsec-mb is x86-only: the Arm build uses the OpenSSL crypto backend.
arm64_packages=(
  libc6-dev libstdc++-12-dev
  libssl-dev libprotobuf-dev libcpprest-dev libyaml-cpp-dev nlohmann-json3-dev
  libdpdk-dev libbpf-dev libxdp-dev libnl-3-dev libnl-route-3-dev libpcap-dev zlib1g-dev
  catch2
)
mirror=${DPU_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DPU_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

if [ "$(id -u)" -ne 0 ]; then
  echo "install-arm64-deps: run as root (it calls apt-get and mmdebstrap)" >&2
  exit 1
fi

missing=()
for p in "${host_packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-arm64-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

stamp_want=$(printf '%s\n' "${arm64_packages[@]}" "$mirror" "$security" | sha256sum | cut -c1-16)
if [ -f "$sysroot/.dpu-sysroot" ] && [ "$(cat "$sysroot/.dpu-sysroot")" = "$stamp_want" ]; then
  echo "install-arm64-deps: sysroot up to date"
  echo "$sysroot"
  exit 0
fi

echo "install-arm64-deps: extracting the arm64 sysroot into $sysroot"
rm -rf "$sysroot.new"
mkdir -p "$(dirname "$sysroot")"
include=$(IFS=,; echo "${arm64_packages[*]}")
mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$include" \
  bookworm "$sysroot.new" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main"
# Debian's packages hold a few absolute symlinks (libc's linker scripts
# point at /lib/...): make them relative so they resolve inside the sysroot.
find "$sysroot.new" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$sysroot.new$target")" "$link"
done
echo "$stamp_want" > "$sysroot.new/.dpu-sysroot"
rm -rf "$sysroot"
mv "$sysroot.new" "$sysroot"
echo "install-arm64-deps: sysroot ready ($(du -sh "$sysroot" | cut -f1))"
echo "$sysroot"
