# lab/lib/nat.bash — a NAT in front of a node (docs/ipsec.md "NAT traversal"): DPUs in another site,
# whose underlay reaches the others only through address translation. Sourced by lab/lib/lab.bash.
#
# Node N behind a NAT (`dpu-lab up --nat nodeN`, DL_NAT="N ..."): its uplink does not join the fabric
# bridge but netns NAME-natN, a router with nftables (table ip dpulab):
#   private side  uplink0 in the DPU netns: 10.200.N.2/24, the node's tunnel IP; "priv0" in the NAT
#                 netns: 10.200.N.1/24, the DPU netns' default route
#   public side   "pub0" in the NAT netns: 192.168.100.(200+N)/24 on the fabric bridge (its port
#                 "natN"): the node's ipsec.natAddress, which it publishes
#   DL_NAT_MODE   static (default): one to one, everything to the public address goes to the node,
#                 everything from the node leaves from it, ports kept.
#                 masquerade: what the node sends leaves from the public address with its UDP and TCP
#                 source ports moved to 14500-14599; nothing comes in but what the NAT's connection
#                 tracking expects (replies to what the node sent) — the node must speak first.
# Every node's agent then runs with ipsec natTraversal: true and natKeepaliveSeconds DL_NAT_KEEPALIVE
# (default 20). The NATed node's host PF (north–south) is not wired through the NAT.
#
# State: $DL_DIR/nN/nat holds node N's mode (present: N is behind a NAT).
#
# Functions (public):
#   dl_nat_node N                   true when node N is behind a NAT
#   dl_nat_mode N                   static | masquerade
#   dl_nat_address N                the NAT's public address (node N's natAddress)
#   dl_nat_ns N                     the NAT's netns
#   dl_nat_up N                     the NAT's netns, its wires and rules (dl_node_wires_up calls it)
#   dl_nat_check                    DL_NAT and DL_NAT_MODE are usable (dl_up calls it)
#   dl_nat_record                   writes $DL_DIR/nN/nat for each node of DL_NAT (dl_up calls it)

dl_nat_node() { [ -n "${DL_DIR:-}" ] && [ -s "$DL_DIR/n$1/nat" ]; }
dl_nat_mode() { cat "$DL_DIR/n$1/nat"; }
dl_nat_address() { echo "192.168.100.$(( 200 + $1 ))"; }
dl_nat_ns() { echo "$DL_NAME-nat$1"; }
_dl_nat_private() { echo "10.200.$1"; }

dl_nat_check() {
  local nodes=$1 n
  [ -n "${DL_NAT:-}" ] || return 0
  [[ "${DL_NAT_MODE:-static}" =~ ^(static|masquerade)$ ]] ||
    { dl_die "DL_NAT_MODE (--nat-mode) must be static or masquerade, not '${DL_NAT_MODE}'"; return 1; }
  [ "${DL_IPSEC:-false}" != false ] && [ "${DL_IPSEC}" != "{mode: off}" ] ||
    { dl_die "--nat needs IPsec (--ipsec): only ESP in UDP 4500 crosses the NAT"; return 1; }
  [[ "${DL_NAT_KEEPALIVE:-20}" =~ ^[0-9]+$ ]] && [ "${DL_NAT_KEEPALIVE:-20}" -le 3600 ] ||
    { dl_die "DL_NAT_KEEPALIVE must be 0..3600 seconds, not '${DL_NAT_KEEPALIVE}'"; return 1; }
  command -v nft >/dev/null || { dl_die "nft is not installed (scripts/install-deps.sh: nftables)"; return 1; }
  for n in $DL_NAT; do
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le "$nodes" ] ||
      { dl_die "--nat names node '$n': give nodeN with N in 1..$nodes"; return 1; }
  done
  [ "$(wc -w <<< "$DL_NAT")" -lt "$nodes" ] ||
    { dl_die "--nat: every node behind a NAT leaves none outside to reach them first; keep one on the fabric"; return 1; }
}

dl_nat_record() {
  local n
  for n in ${DL_NAT:-}; do
    mkdir -p "$DL_DIR/n$n" && echo "${DL_NAT_MODE:-static}" > "$DL_DIR/n$n/nat" || return 1
  done
}

# The NAT's netns: pub0 on the fabric, priv0 towards node N's uplink (created by the caller as the
# peer of uplink0, already in this netns), forwarding and the rules of its mode.
dl_nat_up() {
  local n=$1 ns fab pub priv node rules
  ns=$(dl_nat_ns "$n"); fab=$(dl_fabric_ns)
  pub=$(dl_nat_address "$n"); priv=$(_dl_nat_private "$n"); node=$(dl_tunnel_ip "$n")
  local mtu=${DL_UNDERLAY_MTU:-1500}
  ip link add pub0 netns "$ns" mtu "$mtu" type veth peer name "nat$n" netns "$fab" mtu "$mtu" || return 1
  ip -n "$ns" addr add "$pub/24" dev pub0
  ip -n "$ns" addr add "$priv.1/24" dev priv0
  _dl_no_offload "$ns" pub0
  _dl_no_offload "$ns" priv0
  _dl_no_offload "$fab" "nat$n"
  ip -n "$fab" link set "nat$n" master fabric
  ip -n "$fab" link set "nat$n" up
  ip -n "$ns" link set pub0 up
  ip -n "$ns" link set priv0 up
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 || return 1
  if [ "$(dl_nat_mode "$n")" = masquerade ]; then
    rules="add rule ip dpulab post oifname \"pub0\" ip saddr $node meta l4proto { tcp, udp } snat to $pub:14500-14599
add rule ip dpulab post oifname \"pub0\" ip saddr $node snat to $pub"
  else
    rules="add rule ip dpulab pre iifname \"pub0\" ip daddr $pub dnat to $node
add rule ip dpulab post oifname \"pub0\" ip saddr $node snat to $pub"
  fi
  ip netns exec "$ns" nft -f - <<NFT || { dl_die "node $n: the NAT's nftables rules were refused"; return 1; }
add table ip dpulab
add chain ip dpulab pre { type nat hook prerouting priority dstnat; policy accept; }
add chain ip dpulab post { type nat hook postrouting priority srcnat; policy accept; }
$rules
NFT
}
