#!/usr/bin/env bash
# ESP in the dataplane, one core: Geneve+ESP encap (VF->uplink) and ESP+Geneve
# decap (uplink->VF), AES-128-GCM, 1,000 flows, 64 B and 1400 B frames, from
# datapath_engine_bench, next to the CPU's raw AES-GCM ceiling measured in the
# same run, twice: dpdk-test-crypto-perf (crypto_aesni_gcm) and the bench's own
# "seal only" case (the AEAD alone, timed as the ESP cases are: median burst),
# at 1400 B and at the bytes ESP encrypts for each frame (and "open only",
# the decrypt side, printed beside the decap); round after round, medians
# printed, and every ratio taken within its round (bench/report_esp.py). On a
# machine other work shares, crypto-perf's wall-clock rate includes that
# work's time and the median burst does not: the ratio to the ceiling is
# taken against the seal-only case.
# In the same rounds, DPDK's own IPsec gateway, ipsec-secgw (22.11, built once
# from the dpdk-doc package's example sources into BUILD/bench/ipsec-secgw):
# one lcore, --no-huge, transport-mode AES-128-GCM on crypto_aesni_gcm,
# net_pcap in (the same pod frames as the engine's cases: UDP 10.244.1.5 ->
# 10.244.2.7, 1,000 flows, 64 B and 1400 B with the FCS) and net_null out;
# outbound (encrypt) on them, inbound (decrypt) on the ESP packets its own
# outbound wrote. Its rate is packets per second its forwarding thread had the
# core (bench/measure.bash), so others' load does not count, like the median
# burst. Once per run, before the rounds, its outbound output goes to a pcap
# that scapy decrypts packet by packet, and its inbound must forward every
# packet (no drop): the bench never times a drop path.
# The one change to ipsec-secgw's sources: it asks for RX checksum offload,
# which net_pcap does not have, and exits; the build copy masks the offloads it
# requests with the port's capabilities (a sed on port_init, below).
#   bash bench/esp.sh            # after: cmake --build --preset release --target datapath_engine_bench
# DPU_BENCH_RUNS rounds (3 by default), DPU_BENCH_PACKETS packets per case (2,000,000),
# DPU_BENCH_SECONDS per ipsec-secgw case (3). Needs dpdk-doc, make, python3-scapy (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/knobs.bash
runs=$(bench_number DPU_BENCH_RUNS 3 1 100)
packets=$(bench_number DPU_BENCH_PACKETS 2000000 100000 1000000000)
seconds=$(bench_number DPU_BENCH_SECONDS 3 1 600)
build=build/release
bench=$build/bench/datapath_engine_bench
py=/usr/bin/python3
[[ -x $bench ]] || { echo "esp.sh: build $bench first (cmake --build --preset release --target datapath_engine_bench)" >&2; exit 1; }
need() {  # command package
  command -v "$1" > /dev/null || { echo "esp.sh: $1 is missing: install the Debian package $2 (scripts/install-deps.sh)" >&2; exit 1; }
}
need dpdk-test-crypto-perf dpdk
need make build-essential
need pkg-config pkg-config
need stdbuf coreutils
pkg-config --exists libdpdk || { echo "esp.sh: pkg-config finds no libdpdk: install libdpdk-dev (scripts/install-deps.sh)" >&2; exit 1; }
$py -c 'import scapy.layers.ipsec' 2> /dev/null ||
  { echo "esp.sh: $py cannot import scapy: install python3-scapy and python3-cryptography (scripts/install-deps.sh)" >&2; exit 1; }
examples=/usr/share/dpdk/examples
[[ -f $examples/ipsec-secgw/ipsec-secgw.c && -d $examples/common ]] ||
  { echo "esp.sh: $examples/ipsec-secgw is missing: install the Debian package dpdk-doc (scripts/install-deps.sh)" >&2; exit 1; }
out=$(mktemp -d /tmp/dpu-esp-bench.XXXXXX)
cleanup() {
  set +e
  [ -f "$out/secgw.pid" ] && kill -TERM "$(cat "$out/secgw.pid")" 2> /dev/null
  rm -rf "$out" "/var/run/dpdk/dpu-esp-bench-$$" "/var/run/dpdk/dpu-esp-secgw-$$"  # the EAL's run directories
}
trap cleanup EXIT
source bench/measure.bash

# --- ipsec-secgw: built once, cached in the build directory --------------------
sgw_dir=$build/bench/ipsec-secgw
secgw=$sgw_dir/ipsec-secgw/build/ipsec-secgw
if [[ ! -x $secgw || $examples/ipsec-secgw/ipsec-secgw.c -nt $secgw ]]; then
  echo "== building ipsec-secgw from $examples into $sgw_dir" >&2
  rm -rf "$sgw_dir"; mkdir -p "$sgw_dir"
  cp -r "$examples/ipsec-secgw" "$examples/common" "$sgw_dir/"
  # port_init: request only the RX offloads the port has (net_pcap has no checksum offload).
  sed -i 's/^\tdev_info.rx_offload_capa &= dev_rx_offload;$/&\n\tlocal_port_conf.rxmode.offloads \&= dev_info.rx_offload_capa;/' \
    "$sgw_dir/ipsec-secgw/ipsec-secgw.c"
  grep -q 'local_port_conf.rxmode.offloads &= dev_info.rx_offload_capa' "$sgw_dir/ipsec-secgw/ipsec-secgw.c" ||
    { echo "esp.sh: ipsec-secgw.c: port_init no longer has the line the RX offload mask goes after; update the sed in bench/esp.sh" >&2; exit 1; }
  make -C "$sgw_dir/ipsec-secgw" -j2 > "$sgw_dir/make.log" 2>&1 ||
    { tail -20 "$sgw_dir/make.log" >&2; echo "esp.sh: building ipsec-secgw failed (log: $sgw_dir/make.log)" >&2; exit 1; }
fi

# The pod frames of the engine's ESP cases (in memory without the 4-byte FCS),
# one per flow, and the gateway's configuration: outbound SA 7 protects them
# (transport mode), inbound SA 7 decrypts them, both routed to port 1.
key=de:ad:be:ef:de:ad:be:ef:de:ad:be:ef:de:ad:be:ef:de:ad:be:ef  # AES-128 key + 4-byte salt
$py - "$out" <<'EOF'
import sys
from scapy.all import IP, UDP, Ether, Raw, wrpcap
for frame in (64, 1400):
    wrpcap("%s/plain-%d.pcap" % (sys.argv[1], frame),
           [Ether(src="0a:58:0a:f4:01:05", dst="0a:58:0a:f4:00:01") / IP(src="10.244.1.5", dst="10.244.2.7", ttl=64) /
            UDP(sport=1024 + i, dport=2000) / Raw(b"\x5a" * (frame - 4 - 42)) for i in range(1000)])
EOF
cat > "$out/secgw.cfg" <<EOF
sp ipv4 out esp protect 7 pri 1 dst 10.244.0.0/16 sport 0:65535 dport 0:65535
sp ipv4 in esp protect 7 pri 1 dst 10.244.0.0/16 sport 0:65535 dport 0:65535
sa out 7 aead_algo aes-128-gcm aead_key $key mode transport
sa in 7 aead_algo aes-128-gcm aead_key $key mode transport
rt ipv4 dst 10.244.0.0/16 port 1
neigh port 1 02:00:00:00:02:00
EOF

# secgw_run DIR PCAP TX [infinite]: ipsec-secgw in the background (pid in
# $sgw_pid), port 0 net_pcap reading PCAP, port 1 TX (net_null or a net_pcap
# writer); out: port 0 protected (plaintext in, ESP out); in: port 0
# unprotected (ESP in). Statistics every second on $out/secgw.fifo.
secgw_run() {
  local dir=$1 pcap=$2 tx=$3 rx="net_pcap0,rx_pcap=$2" mask=0x2
  [ "${4:-}" = infinite ] && rx+=",infinite_rx=1"
  [ "$dir" = in ] && mask=0x1
  rm -f "$out/secgw.fifo"; mkfifo "$out/secgw.fifo"
  stdbuf -oL "$secgw" -l 1 --no-huge --no-pci -m 1024 --file-prefix="dpu-esp-secgw-$$" --log-level='*:error' \
    --vdev "$rx" --vdev "$tx" --vdev crypto_aesni_gcm0 -- \
    -p 0x3 -u "$mask" --config "(0,0,1),(1,0,1)" -f "$out/secgw.cfg" -t 1 > "$out/secgw.fifo" 2> "$out/secgw.err" &
  sgw_pid=$!
  echo "$sgw_pid" > "$out/secgw.pid"
}
# The check: outbound writes its ESP packets to a pcap (read once); then
# inbound on those. Both must forward all 1,000 frames, and scapy must decrypt
# every outbound packet back to its frame's IP packet.
secgw_check() {  # size
  local fd line sent=0 dropped=0 n=0
  for dir in out in; do
    if [ $dir = out ]; then
      secgw_run out "$out/plain-$1.pcap" "net_pcap1,tx_pcap=$out/esp-$1.pcap"
    else
      secgw_run in "$out/esp-$1.pcap" "net_null1,no-rx=1"
    fi
    exec {fd}< "$out/secgw.fifo"
    while IFS= read -r -t 60 -u "$fd" line; do
      case $line in
        "Total packets sent:"*) set -- "$1" $line; sent=$5 ;;
        "Total packets dropped:"*) set -- "$1" $line; dropped=$5; n=$((n + 1))
          [ "$sent" -ge 1000 ] || [ $n -ge 20 ] && break ;;
      esac
    done
    kill -INT "$sgw_pid" 2> /dev/null; cat <&"$fd" > /dev/null; exec {fd}<&-; wait "$sgw_pid" || true; rm -f "$out/secgw.pid"
    if [ "$sent" != 1000 ] || [ "$dropped" != 0 ]; then
      cat "$out/secgw.err" >&2
      echo "esp.sh: ipsec-secgw $dir at $1 B sent $sent of 1000 packets, dropped $dropped: its figures would time a drop path" >&2
      exit 1
    fi
    sent=0 dropped=0 n=0
  done
  $py - "$out/plain-$1.pcap" "$out/esp-$1.pcap" "$key" <<'EOF' || { echo "esp.sh: ipsec-secgw's outbound at $1 B is not the ESP of its input" >&2; exit 1; }
import sys
from scapy.all import ESP, IP, rdpcap
from scapy.layers.ipsec import SecurityAssociation
plain, esp = rdpcap(sys.argv[1]), rdpcap(sys.argv[2])
sa = SecurityAssociation(ESP, spi=7, crypt_algo="AES-GCM", crypt_key=bytes.fromhex(sys.argv[3].replace(":", "")))
assert len(esp) == len(plain), "%d ESP packets for %d frames" % (len(esp), len(plain))
want = sorted(bytes(p[IP].payload) for p in plain)
got = []
for p in esp:
    assert p.haslayer(ESP) and p[ESP].spi == 7, "not ESP with SPI 7: %r" % p
    got.append(bytes(sa.decrypt(p[IP]).payload))
assert sorted(got) == want, "the decrypted packets are not the frames sent"
EOF
  echo "ipsec-secgw checked at $1 B: 1000 frames out as ESP (decrypted by scapy), 1000 ESP in, none dropped" >&2
}

# One measurement: the gateway on PCAP (looped), rate over `seconds` between
# its second statistics block and the one `seconds` later; Mpps per on-CPU
# second of its forwarding thread (the main lcore), per wall second, share.
secgw_case() {  # dir size → rate
  local pcap=$out/plain-$2.pcap fd line sent=0 dropped0='' n=0 first='' last=''
  [ "$1" = in ] && pcap=$out/esp-$2.pcap
  secgw_run "$1" "$pcap" "net_null1,no-rx=1" infinite
  exec {fd}< "$out/secgw.fifo"
  while IFS= read -r -t $((seconds + 60)) -u "$fd" line; do
    case $line in
      "Total packets sent:"*) set -- "$1" "$2" $line; sent=$6 ;;
      "Total packets dropped:"*) set -- "$1" "$2" $line; n=$((n + 1))
        if [ $n = 2 ]; then
          first="$EPOCHREALTIME $(thread_ns "$sgw_pid" '^ipsec-secgw') $sent"; dropped0=$6
        elif [ $n = $((seconds + 2)) ]; then
          last="$EPOCHREALTIME $(thread_ns "$sgw_pid" '^ipsec-secgw') $sent"
          [ "$6" = "$dropped0" ] || echo "esp.sh: ipsec-secgw $1 at $2 B dropped $(($6 - dropped0)) packets while measured" >&2
          break
        fi ;;
    esac
  done
  kill -INT "$sgw_pid" 2> /dev/null; cat <&"$fd" > /dev/null; exec {fd}<&-; wait "$sgw_pid" || true; rm -f "$out/secgw.pid"
  if [ -n "$last" ]; then rate "$first" "$last"; else echo "0 0 0"; fi
}

for size in 64 1400; do secgw_check $size; done

# What ESP encrypts for a pod frame of F bytes (with the FCS): the Geneve UDP
# packet after the outer IP header (UDP 8 + Geneve 8 + OVN option 8 + the
# frame without its FCS), padded to 4 with the 2-byte trailer.
esp_bytes() { local n=$(( 8 + 16 + $1 - 4 + 2 )); echo $(( (n + 3) / 4 * 4 )); }

for run in $(seq "$runs"); do
  echo "== round $run/$runs" >&2
  dpdk-test-crypto-perf -l 0,1 --no-huge --no-pci -m 1024 --file-prefix="dpu-esp-bench-$$" \
    --vdev crypto_aesni_gcm0 --log-level=lib.eal:error -- \
    --devtype crypto_aesni_gcm --optype aead --aead-algo aes-gcm --aead-op encrypt \
    --aead-key-sz 16 --aead-iv-sz 12 --aead-aad-sz 12 --digest-sz 16 \
    --ptest throughput --total-ops 2000000 --burst-sz 32 --pool-sz 8192 \
    --buffer-sz "$(esp_bytes 64),1400,$(esp_bytes 1400)" 2>/dev/null |
    awk '$1 ~ /^[0-9]+$/ && NF >= 10 { print "CEILING", $2, $8, $9 }' >> "$out/results"
  "$bench" --packets "$packets" --only "encap VF->uplink, 1000 flows, " --only "decap uplink->VF, 1000 flows, " \
    --only "seal only" --only "open only" |
    awk -F'  +' -v run="$run" '/ESP|Geneve (en|de)cap .*, (64|1400) B|(seal|open) only/ { print "CASE\t" run "\t" $1 "\t" $2 }' >> "$out/results"
  for dir in out in; do
    for size in 64 1400; do
      echo "SECGW $run $dir $size $(secgw_case $dir $size)" | tee -a "$out/results" >&2  # Mpps per core-second, per second, share
    done
  done
done

$py bench/report_esp.py "$out/results"
