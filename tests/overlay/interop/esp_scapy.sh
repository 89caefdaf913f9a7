# scapy and we agree on ESP both ways: scapy decrypts what we encrypt, and we
# decrypt what scapy encrypts (its own IVs), for AES-GCM-128/256, transport and
# tunnel mode, with and without 64-bit extended sequence numbers — including a
# run that crosses the 2^32 boundary, where only our receiver's inference of the
# high half (RFC 4303 Appendix A) gets the ICV right.
source "$(dirname "$0")/common.bash" "$@"
make_inner_pcap "$scratch/inner.pcap"
"$pcaptool" geneve-encap -i "$scratch/inner.pcap" -o "$scratch/geneve.pcap" --vni 9 \
  --src-ip 192.168.100.1 --dst-ip 192.168.100.2 --ovn-option 1:2 2>/dev/null

key128=000102030405060708090a0b0c0d0e0f
key256=${key128}101112131415161718191a1b1c1d1e1f
salt=a0a1a2a3
for bits in 128 256; do
  keymat=$([ "$bits" = 128 ] && echo "$key128$salt" || echo "$key256$salt")
  for mode in transport tunnel; do
    for esn in off on; do
      tag="aes-$bits $mode esn-$esn"
      args=(--spi 0x2002 --key "$keymat" --mode "$mode")
      [ "$mode" = tunnel ] && args+=(--tunnel-src 172.16.0.1 --tunnel-dst 172.16.0.2)
      seq=1
      # With ESN, start two packets below 2^32 so the run crosses into the next epoch.
      [ "$esn" = on ] && { args+=(--esn); seq=$((0xfffffffe)); }
      "$pcaptool" esp-encrypt -i "$scratch/geneve.pcap" -o "$scratch/ours.pcap" "${args[@]}" --seq "$seq" 2>/dev/null
      out=$("$python" "$here/esp_scapy.py" decrypt "$scratch/ours.pcap" "$scratch/geneve.pcap" "$keymat" "$mode" "$esn" "$seq")
      expect "$tag: scapy decrypts ours" "$out" "ok"
      "$python" "$here/esp_scapy.py" encrypt "$scratch/geneve.pcap" "$scratch/theirs.pcap" "$keymat" "$mode" "$esn" "$seq"
      "$pcaptool" esp-decrypt -i "$scratch/theirs.pcap" -o "$scratch/plain.pcap" "${args[@]}" --seq "$seq" 2>/dev/null
      expect "$tag: we decrypt scapy's" "$(ts -r "$scratch/plain.pcap" -x | md5sum)" "$(ts -r "$scratch/geneve.pcap" -x | md5sum)"
    done
  done
done
done_checks
