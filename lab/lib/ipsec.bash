# lab/lib/ipsec.bash — IPsec on a running lab (docs/ipsec.md, "Rollout"): each node's ipsec setting,
# the rollout node by node, and key rotation. Sourced by lab/lib/lab.bash.
#
# Per node N, $DL_DIR/nN/ipsec.mode holds its mode (off | keys | on) and $DL_DIR/nN/ipsec.rollout
# (present: rollout: true); without them the node runs $DL_IPSEC. $DL_DIR/ipsec.psk (made by
# `up --ipsec`, DL_IPSEC_PSK=1) is the cluster PSK every node then uses.
#
# Functions (public):
#   dl_ipsec_config N               the `ipsec:` value of node N's agent.yaml
#   dl_ipsec_set N MODE [rollout]   rewrite node N's agent config and restart its agent (hitless)
#   dl_ipsec_enable                 off|keys -> on on every node, node by node, without an outage
#   dl_ipsec_disable                on -> keys -> off on every node, node by node, without an outage
#   dl_ipsec_rotate N               start a key rotation on node N: `dpuctl ipsec rotate` (the dataplane
#                                   counts the request, the agent takes it from its next reply); with
#                                   DL_IPSEC_ROTATE_BY=signal, SIGUSR1 to the agent instead
#   dl_ipsec_epochs N               "current next previous" of node N's agent
#   dl_ipsec_encrypting N           0 or 1: node N's agent tells its dataplane to encrypt
#   dl_ipsec_last_sent N            the last ESP packet node N sent under each outbound SA that has sent,
#                                   one "SPI:SEQUENCE" a line (the sequence number's low 32 bits, as on the wire)
#   dl_ipsec_on_file PCAP SPI:SEQUENCE...  true when the capture file PCAP holds each of these ESP packets
#   dl_ipsec_caught_up PCAP         true once PCAP holds the last ESP packet nodes 1 and 2 each sent (within 10 s;
#                                   else says which it waited for)
# What each node publishes is read from its publish file, or (a --kube lab) from its Node's annotations.
# Knobs: DL_IPSEC_GRACE (gracePeriodSeconds of the lab's agents, default 5).

_dl_ipsec_initial_mode() {
  case ${DL_IPSEC:-false} in
    false) echo off ;;
    true) echo on ;;
    *) sed -E 's/^\{mode: (off|keys|on)\}$/\1/' <<< "$DL_IPSEC" ;;
  esac
}

dl_ipsec_mode() {
  local f=$DL_DIR/n$1/ipsec.mode
  if [ -s "$f" ]; then cat "$f"; else _dl_ipsec_initial_mode; fi
}

dl_ipsec_config() {
  local n=$1 mode psk="" rollout="" nat=""
  mode=$(dl_ipsec_mode "$n")
  [ -s "$DL_DIR/ipsec.psk" ] && psk=", pskFile: $DL_DIR/ipsec.psk"
  [ -e "$DL_DIR/n$n/ipsec.rollout" ] && rollout=", rollout: true"
  # A lab with a NAT (nat.bash): ESP in UDP on every node; the NATed node says where it is reached.
  if [ "$mode" != off ] && compgen -G "$DL_DIR/n*/nat" >/dev/null; then
    nat=", natTraversal: true, natKeepaliveSeconds: ${DL_NAT_KEEPALIVE:-20}"
    dl_nat_node "$n" && nat+=", natAddress: $(dl_nat_address "$n")"
  fi
  if [ "$mode" = off ] && [ -z "$psk" ] && [ -z "$rollout" ] && [ ! -s "$DL_DIR/n$n/ipsec.mode" ]; then
    echo "${DL_IPSEC:-false}"
    return
  fi
  echo "{mode: $mode, gracePeriodSeconds: ${DL_IPSEC_GRACE:-5}, rotationPeriodSeconds: 0$psk$rollout$nat}"
}

# The PSK of `up --ipsec`: 32 random bytes, base64, readable by root only.
dl_ipsec_make_psk() {
  [ -s "$DL_DIR/ipsec.psk" ] && return 0
  (umask 077 && head -c 32 /dev/urandom | base64 > "$DL_DIR/ipsec.psk")
}

_dl_ipsec_metric() {
  dl_metrics "$1" agent 2>/dev/null | awk -v m="$2" '$1 == m { print $2; exit }'
}
dl_ipsec_encrypting() { _dl_ipsec_metric "$1" dpu_agent_ipsec_encrypting; }
dl_ipsec_epochs() {
  local t
  t=$(dl_metrics "$1" agent 2>/dev/null) || return 1
  for s in current next previous; do
    awk -v m="dpu_agent_ipsec_epoch{state=\"$s\"}" '$1 == m { printf "%s ", $2 }' <<< "$t"
  done
  echo
}
# A capture that holds the last packet an SA sent holds every earlier one it caught: dumpcap writes in order
# (its file every half second), so these tell when a capture has caught up with the traffic before it.
dl_ipsec_last_sent() {
  dl_dpuctl "$1" --json ipsec 2>/dev/null | jq -r '.ipsec.sas[]?.state
    | select(.direction == "OUTBOUND" and ((.packets // "0") | tonumber) > 0)
    | "\(.spi):\((.highest_sequence // "0") | tonumber % 4294967296)"'
}
dl_ipsec_on_file() {
  local pcap=$1 want filter="" got; shift
  [ $# -gt 0 ] || return 1
  for want in "$@"; do filter+="${filter:+ || }(esp.spi == ${want%%:*} && esp.sequence == ${want#*:})"; done
  got=$(tshark -r "$pcap" -Y "$filter" -T fields -e esp.spi -e esp.sequence 2>/dev/null | sort -u | grep -c .)
  [ "$got" -ge $# ]
}
dl_ipsec_caught_up() {
  local last=()
  mapfile -t last < <(dl_ipsec_last_sent 1; dl_ipsec_last_sent 2)
  [ ${#last[@]} -ge 2 ] && dl_wait 10 dl_ipsec_on_file "$1" "${last[@]}" && return 0
  echo "${1##*/} does not hold the last ESP packet of each node's outbound SA (SPI:sequence ${last[*]:-none})" >&2
  return 1
}
# What node N publishes: its mode ("" when it publishes no key). A --kube lab's agents publish on their
# Node objects (the dpu-cni.io/ipsec-mode annotation), read from the API server as the agents read them.
dl_ipsec_published_mode() {
  if dl_kube_enabled; then
    dl_kube_api GET "/api/v1/nodes/$(dl_node_name "$1")" 2>/dev/null |
      jq -r '.metadata.annotations["dpu-cni.io/ipsec-mode"] // ""'
    return
  fi
  local f="$DL_DIR/cluster.yaml.d/$(dl_node_name "$1").json"
  [ -s "$f" ] && jq -r '.ipsecMode // ""' "$f"
}

dl_ipsec_set() {
  local n=$1 mode=$2 rollout=${3:-} vfs
  [[ "$mode" =~ ^(off|keys|on)$ ]] || { dl_die "IPsec mode must be off, keys or on, not '$mode'"; return 1; }
  vfs=$(sed -n 's/^DL_VFS=//p' "$DL_DIR/lab.env")
  echo "$mode" > "$DL_DIR/n$n/ipsec.mode"
  if [ "$rollout" = rollout ]; then : > "$DL_DIR/n$n/ipsec.rollout"; else rm -f "$DL_DIR/n$n/ipsec.rollout"; fi
  dl_node_configs "$n" "$vfs" || return 1
  dl_log "node $n: IPsec $mode${rollout:+ (rollout)}; restarting its agent"
  dl_daemon_stop "$n" agent && dl_daemon_start "$n" agent
}

# Until node N publishes MODE with a key (bounded: 60 s).
_dl_ipsec_published_is() { [ "$(dl_ipsec_published_mode "$1")" = "$2" ]; }
dl_ipsec_wait_published() {
  dl_wait 60 _dl_ipsec_published_is "$1" "$2" ||
    { dl_die "node $1 did not publish IPsec mode $2 within 60 s (it publishes '$(dl_ipsec_published_mode "$1")')"; return 1; }
}
# Until node N holds an outbound SA to every other node.
_dl_ipsec_outbound_all() {
  local want=$(( $(dl_nodes | wc -l) - 1 ))
  dl_dpuctl "$1" --json ipsec 2>/dev/null |
    jq -e --argjson w "$want" '[.ipsec.sas[]? | select(.state.direction == "OUTBOUND")] | length == $w' >/dev/null
}

dl_ipsec_enable() {
  local n
  # 1. keys everywhere (rollout already set, so step 2 needs no second restart of the nodes turned on first).
  for n in $(dl_nodes); do
    [ "$(dl_ipsec_mode "$n")" = on ] && continue
    dl_ipsec_set "$n" keys rollout || return 1
  done
  for n in $(dl_nodes); do
    [ "$(dl_ipsec_mode "$n")" = on ] && continue
    dl_ipsec_wait_published "$n" keys || return 1
  done
  for n in $(dl_nodes); do
    dl_wait 60 _dl_ipsec_outbound_all "$n" || { dl_die "node $n has no outbound SA to every node after 60 s"; return 1; }
  done
  # 2. on, node by node, accepting the plaintext of the nodes not on yet.
  for n in $(dl_nodes); do
    dl_ipsec_set "$n" on rollout && dl_ipsec_wait_published "$n" on || return 1
  done
  # 3. fail closed: rollout off, node by node.
  for n in $(dl_nodes); do dl_ipsec_set "$n" on || return 1; done
}

_dl_ipsec_plaintext() { [ "$(dl_ipsec_encrypting "$1")" = 0 ]; }
dl_ipsec_disable() {
  local n grace=${DL_IPSEC_GRACE:-5}
  # 1. accept plaintext from nodes that leave, everywhere first.
  for n in $(dl_nodes); do
    [ "$(dl_ipsec_mode "$n")" = on ] && { dl_ipsec_set "$n" on rollout || return 1; }
  done
  # 2. keys, node by node: each encrypts until its peers have seen it advertise keys.
  for n in $(dl_nodes); do
    [ "$(dl_ipsec_mode "$n")" = on ] || continue
    dl_ipsec_set "$n" keys && dl_ipsec_wait_published "$n" keys || return 1
    dl_wait $(( grace * 3 + 30 )) _dl_ipsec_plaintext "$n" ||
      { dl_die "node $n still encrypts $(( grace * 3 + 30 )) s after leaving mode on"; return 1; }
  done
  # 3. off, node by node (every node sends plaintext now).
  for n in $(dl_nodes); do dl_ipsec_set "$n" off || return 1; done
}

dl_ipsec_rotate() {
  local pid
  pid=$(dl_daemon_pid "$1" agent)
  [ -n "$pid" ] || { dl_die "node $1: its agent is not running"; return 1; }
  [ "$(dl_ipsec_mode "$1")" != off ] || { dl_die "node $1 runs without IPsec (dpu-lab ipsec enable)"; return 1; }
  if [ "${DL_IPSEC_ROTATE_BY:-dpuctl}" = signal ]; then
    kill -USR1 "$pid"
  else
    dl_dpuctl "$1" ipsec rotate >/dev/null || { dl_die "node $1: dpuctl ipsec rotate failed"; return 1; }
  fi
}
