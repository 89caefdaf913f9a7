# tshark decrypts and authenticates our ESP (AES-GCM-128 and -256, transport and
# tunnel mode, both crypto backends) given the SA, finds the Geneve packet inside,
# and flags a tampered packet that our decrypt also refuses.
source "$(dirname "$0")/common.bash" "$@"
make_inner_pcap "$scratch/inner.pcap"
"$pcaptool" geneve-encap -i "$scratch/inner.pcap" -o "$scratch/geneve.pcap" --vni 0x123456 \
  --src-ip 192.168.100.1 --dst-ip 192.168.100.2 --ovn-option 5:7
n=$(ts -r "$scratch/geneve.pcap" -T fields -e frame.number | wc -l)

key128=000102030405060708090a0b0c0d0e0f
key256=${key128}101112131415161718191a1b1c1d1e1f
salt=a0a1a2a3
gcm='AES-GCM with 16 octet ICV [RFC4106]'

# decode PCAP SRC DST SPI KEY+SALT FIELDS...: tshark with one SA, fields per packet.
decode() {
  local pcap=$1 src=$2 dst=$3 spi=$4 keymat=$5
  shift 5
  ts -r "$pcap" -o esp.enable_encryption_decode:TRUE -o esp.enable_authentication_check:TRUE \
    -o "uat:esp_sa:\"IPv4\",\"$src\",\"$dst\",\"$spi\",\"$gcm\",\"0x$keymat\",\"NULL\",\"\"" \
    -T fields -E separator='|' "$@"
}

backends=$("$pcaptool" --list-backends)
for backend in $backends; do
  for bits in 128 256; do
    keymat=$([ "$bits" = 128 ] && echo "$key128$salt" || echo "$key256$salt")
    for mode in transport tunnel; do
      tag="$backend aes-$bits $mode"
      args=(--spi 0x1001 --key "$keymat" --mode "$mode" --backend "$backend")
      src=192.168.100.1 dst=192.168.100.2
      if [ "$mode" = tunnel ]; then
        args+=(--tunnel-src 172.16.0.1 --tunnel-dst 172.16.0.2)
        src=172.16.0.1 dst=172.16.0.2
      fi
      "$pcaptool" esp-encrypt -i "$scratch/geneve.pcap" -o "$scratch/esp.pcap" "${args[@]}" 2>/dev/null
      out=$(decode "$scratch/esp.pcap" "$src" "$dst" 0x00001001 "$keymat" -e esp.icv_good | sort -u)
      expect "$tag: tshark authenticates every ICV" "$out" "1"
      out=$(decode "$scratch/esp.pcap" "$src" "$dst" 0x00001001 "$keymat" -e esp.sequence | tr '\n' ' ')
      expect "$tag: sequence numbers 1..$n" "$out" "$(seq -s ' ' 1 "$n") "
      out=$(decode "$scratch/esp.pcap" "$src" "$dst" 0x00001001 "$keymat" -e geneve.vni -e geneve.option.unknown.data | sort -u)
      expect "$tag: the decrypted payload is our Geneve packet" "$out" "0x123456|00050007"
      "$pcaptool" esp-decrypt -i "$scratch/esp.pcap" -o "$scratch/plain.pcap" "${args[@]}" 2>/dev/null
      expect "$tag: our decrypt restores every frame" "$(ts -r "$scratch/plain.pcap" -x | md5sum)" \
        "$(ts -r "$scratch/geneve.pcap" -x | md5sum)"
    done
  done
done

# A flipped ciphertext byte: tshark reports a bad ICV and our decrypt drops the packet.
"$pcaptool" esp-encrypt -i "$scratch/geneve.pcap" -o "$scratch/esp.pcap" --spi 0x1001 --key "$key128$salt" 2>/dev/null
"$python" - "$scratch/esp.pcap" "$scratch/tampered.pcap" <<'PY'
import sys
from scapy.all import Ether, rdpcap, wrpcap
pkts = list(rdpcap(sys.argv[1]))
raw = bytearray(bytes(pkts[0]))
raw[60] ^= 0x01          # inside the ciphertext of the first packet
pkts[0] = Ether(bytes(raw))
wrpcap(sys.argv[2], pkts)
PY
out=$(decode "$scratch/tampered.pcap" 192.168.100.1 192.168.100.2 0x00001001 "$key128$salt" -e esp.icv_bad | head -1)
expect "tampered packet: tshark flags the ICV" "$out" "1"
set +e
msg=$("$pcaptool" esp-decrypt -i "$scratch/tampered.pcap" -o "$scratch/t.pcap" --spi 0x1001 --key "$key128$salt" 2>&1)
rc=$?
set -e
expect "tampered packet: our decrypt exits 3 (drops)" "$rc" "3"
expect "tampered packet: dropped for its ICV" "$(grep -c 'packet 1: dropped: ESP ICV check failed' <<<"$msg")" "1"
done_checks
