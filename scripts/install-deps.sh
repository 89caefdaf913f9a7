#!/usr/bin/env bash
# Installs every Debian 12 package that the build, the tests and the benchmarks need.
# Idempotent and non-interactive: it installs only what is missing, so a second run is fast.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  clang llvm lld libclang-rt-14-dev
  # libraries the components link
  libssl-dev openssl
  libipsec-mb-dev
  dpdk dpdk-dev libdpdk-dev
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev
  libprotobuf-dev protobuf-compiler
  libcpprest-dev
  libbpf-dev libxdp-dev
  nlohmann-json3-dev libyaml-cpp-dev
  libpcap-dev bpftool
  catch2
  # independent implementations the tests compare against
  python3 python3-scapy python3-protobuf python3-cryptography tshark
  python3-prometheus-client
  # the real CNI runtime library (libcni 1.1.2, built offline with Debian's Go),
  # the reference plugins, podman with the CNI backend
  golang-go golang-github-appc-cni-dev containernetworking-plugins podman runc busybox-static
  # peers and traffic for the datapath, the lab and the benchmarks
  openvswitch-switch openvswitch-switch-dpdk iperf3
  # DPDK's example sources: bench/esp.sh builds ipsec-secgw from them
  dpdk-doc
  # instructions per packet on the hit path (bench/datapath_callgrind.sh); where a
  # forwarder's time per packet goes (DPU_BENCH_PROFILE=1 bash bench/datapath.sh)
  valgrind linux-perf
  # lab and system tests; a DNS server and client behind a Service (lab_services_dns:
  # dnsmasq-base is the binary without a system service)
  iproute2 ethtool procps jq curl iputils-ping dnsmasq-base bind9-dnsutils
  # a hung system test prints its daemons' threads before it is ended (tests/host-shim/system/lib.bash)
  gdb
  # the NAT in front of a lab node (dpu-lab up --nat, lab_ipsec_natt)
  nftables
  # container images (images/build.sh) and their test
  buildah debootstrap
)

# The manifests' offline checks (tests/deploy) run Node.js with npm packages
# pinned by tests/deploy/package-lock.json; a machine with another Node.js
# (e.g. from nodesource, which bundles npm) keeps it.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
# Only installing needs root: a user's run with everything present ends above.
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: ${#missing[@]} packages are missing (${missing[*]}); run as root to install them (it calls apt-get)" >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer for it.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
