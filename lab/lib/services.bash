# lab/lib/services.bash — Kubernetes Services of the lab (file cluster source):
# a Service and its one EndpointSlice, written into $DL_DIR/cluster.yaml in
# the file source's format (dpu-agent/control/src/file_source.cpp) the way
# the EndpointSlice controller would write them: slices labelled for the
# service, each slice port named as its service port and numbered as the
# endpoint's target port, endpoints with their conditions, node and pod. A
# target port given by name is resolved per pod from the pod's named ports
# (dl_service_pod_ports, a pod spec's containerPorts), so endpoints whose
# numbers differ go into separate slices, one per set of numbers, as the
# controller does; a pod without the name backs nothing for that port. Every
# agent reloads the file and compiles them into the dataplane
# (docs/services.md). Sourced by lab/lib/lab.bash.
#
# Services and EndpointSlices may also come from a kubectl-style YAML file
# (dl_apply): decoded by `dpu-agent --decode`, the Kubernetes source's own
# decoder, and written as the same cluster file entries, one per object.
#
# State: $DL_DIR/services/NAME.svc and NAME.eps (the service entry, and one
# line per slice), pod-ports/nN-POD (named ports), applied/service.NS.NAME and
# applied/slice.NS.NAME (applied objects: one entry each, a JSON flow
# mapping); dl_write_cluster_file and every verb here rewrite cluster.yaml
# from the nodes and these.
#
# Functions (public):
#   dl_service_add NAME [--ip IP] --port PROTO/PORT[:TARGET]... [--node-port N] [--affinity SECONDS]
#                  [--itp Local] [--etp Local] [--backends NODE/POD[=STATE],...]
#                        create or replace service NAME in namespace default: cluster IP IP (default: the
#                        first free 10.96.0.X from .10; in a dual-stack lab also an IPv6 one, the first free
#                        fd00:10:96::X from ::a, or the one a second --ip gives: clusterIPs [IPv4, IPv6],
#                        ipFamilies [IPv4, IPv6], ipFamilyPolicy PreferDualStack), each --port a TCP/UDP/SCTP port (tcp/80:8080 or
#                        80/TCP:8080; TARGET, a number or a port name such as http, defaults to PORT);
#                        --node-port makes it type NodePort with
#                        node port N (30000-32767) on its first port; backends as in dl_service_backends
#   dl_service_backends NAME NODE/POD[=STATE],...
#                        replace its endpoints (an empty list: none); a dual-stack service gets an IPv6 slice
#                        beside each IPv4 one (NAME-lab-v6...), with the pods' IPv6 addresses. STATE: ready (default),
#                        terminating (serving and terminating) or unready (neither ready nor serving)
#   dl_service_pod_ports N POD NAME=PORT[/PROTO],...
#                        the pod's named ports (PROTO tcp by default), which resolve target ports
#                        given by name; rewrites the slices of every service (an empty list: none)
#   dl_service_del NAME  remove the service and its slices (idempotent), or an applied Service default/NAME
#   dl_service_list      "NAME CLUSTER-IP PORTS BACKENDS" per service (PORTS: a node port as
#                        tcp/80:8080@30080; CLUSTER-IP: IPV4,IPV6 for a dual-stack service); an applied one
#                        outside namespace default as NS/NAME, its
#                        backends NODE/POD (an endpoint without a pod: its address)
#   dl_apply FILE        create or replace the Services, EndpointSlices, Namespaces and NetworkPolicies
#                        of a kubectl-style YAML or JSON file (multi-document or a List); the whole file or
#                        nothing (Namespaces and NetworkPolicies: policy.bash)
#   dl_delete FILE       remove the objects it names (absent ones: said, not an error)
#   dl_service_ip NAME   its (IPv4) cluster IP;  dl_service_ip6 NAME: its IPv6 one (dual stack; else empty)
#   dl_service_ips NAME  its cluster IPs as the list shows them (IPV4 or IPV4,IPV6)
#   dl_service_raw NAME SERVICE [SLICE]
#                        write service NAME's entry (and its slice's) into the cluster file as given, one YAML
#                        flow mapping each, unchecked: how a test hands the agents an object they must refuse

# (dl_apply works on a copy, _DL_SERVICES_DIR, and swaps it in when the whole file passed.)
_dl_services_dir() { echo "${_DL_SERVICES_DIR:-$DL_DIR/services}"; }

_dl_service_name_ok() {
  [[ "$1" =~ ^[a-z]([a-z0-9-]{0,40}[a-z0-9])?$ ]] ||
    { dl_die "service name '$1' must be 1-42 characters of a-z, 0-9 and '-', starting with a letter"; return 1; }
}

_dl_service_field() {  # NAME FIELD: a field of the lab's own record of the service
  sed -n "s/^# $2=//p" "$(_dl_services_dir)/$1.svc" 2>/dev/null
}

# The cluster file: the nodes (dl_write_cluster_file keeps them in
# cluster.nodes.yaml) and every service with its slice.
dl_compose_cluster_file() {
  local f tmp=$DL_DIR/cluster.yaml.tmp dir
  dir=$(_dl_services_dir)
  local services=("$dir"/*.svc "$dir"/applied/service.*) slices=("$dir"/*.eps "$dir"/applied/slice.*)
  {
    cat "$DL_DIR/cluster.nodes.yaml"
    if compgen -G "$dir/*.svc" >/dev/null || compgen -G "$dir/applied/service.*" >/dev/null; then
      echo "services:"
      for f in "${services[@]}"; do if [ -e "$f" ]; then grep -v '^#' "$f"; fi; done
    fi
    if compgen -G "$dir/*.eps" >/dev/null || compgen -G "$dir/applied/slice.*" >/dev/null; then
      echo "endpointSlices:"
      for f in "${slices[@]}"; do if [ -e "$f" ]; then grep -v '^#' "$f"; fi; done
    fi
    _dl_compose_policy_objects "$dir"  # namespaces, pods, networkPolicies (policy.bash)
  } > "$tmp" && mv "$tmp" "$DL_DIR/cluster.yaml"
}

# PROTO/PORT[:TARGET] or PORT/PROTO[:TARGET] -> "PROTO PORT TARGET" (PROTO upper case).
_dl_service_port() {
  local spec=$1 a b target proto port
  target=${spec#*:}; [ "$target" = "$spec" ] && target=""
  spec=${spec%%:*}
  a=${spec%%/*}; b=${spec#*/}
  [ "$a" != "$spec" ] || { dl_die "--port '$1' must be PROTO/PORT[:TARGET], e.g. tcp/80:8080"; return 1; }
  if [[ "$a" =~ ^[0-9]+$ ]]; then port=$a proto=$b; else proto=$a port=$b; fi
  proto=${proto^^}
  [[ "$proto" =~ ^(TCP|UDP|SCTP)$ ]] || { dl_die "--port '$1': protocol must be tcp, udp or sctp"; return 1; }
  target=${target:-$port}
  [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] ||
    { dl_die "--port '$1': the port must be a number 1..65535"; return 1; }
  if [[ "$target" =~ ^[0-9]+$ ]]; then
    [ "$target" -ge 1 ] && [ "$target" -le 65535 ] ||
      { dl_die "--port '$1': the target port must be 1..65535 or a port name"; return 1; }
  else
    _dl_port_name_ok "$target" || { dl_die "--port '$1': $(_dl_port_name_ok "$target" 2>&1)"; return 1; }
  fi
  echo "$proto $port $target"
}

# Kubernetes' IANA_SVC_NAME: a container port's name, which a targetPort may give.
_dl_port_name_ok() {
  [[ "$1" =~ ^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$ && "$1" =~ [a-z] && "$1" != *--* ]] && return 0
  echo "a port name must be 1-15 characters of a-z, 0-9 and '-' with a letter, no '--' and no '-' at either end, not '$1'" >&2
  return 1
}

_dl_pod_ports_dir() { echo "$DL_DIR/services/pod-ports"; }

dl_service_pod_ports() {
  local n=$1 pod=$2 list=${3:-} item pname num proto out="" dir f
  [ -f "$DL_DIR/pods/n$n-$pod" ] || { dl_die "no pod '$pod' on node$n"; return 1; }
  local items=()
  IFS=, read -r -a items <<< "$list"
  for item in "${items[@]}"; do
    [ -n "$item" ] || continue
    [[ "$item" == *=* ]] || { dl_die "named port '$item' must be NAME=PORT[/tcp|udp|sctp]"; return 1; }
    pname=${item%%=*} num=${item#*=} proto=TCP
    [[ "$num" == */* ]] && { proto=${num#*/}; proto=${proto^^}; num=${num%%/*}; }
    _dl_port_name_ok "$pname" || return 1
    [[ "$proto" =~ ^(TCP|UDP|SCTP)$ ]] || { dl_die "named port '$item': protocol must be tcp, udp or sctp"; return 1; }
    [[ "$num" =~ ^[0-9]+$ ]] && [ "$num" -ge 1 ] && [ "$num" -le 65535 ] ||
      { dl_die "named port '$item': the port must be a number 1..65535"; return 1; }
    # Kubernetes refuses a pod with two ports of one name.
    grep -q "^$pname " <<< "$out" && { dl_die "named port '$pname' is given twice for pod $pod"; return 1; }
    out+="$pname $proto $num"$'\n'
  done
  dir=$(_dl_pod_ports_dir)
  mkdir -p "$dir" || return 1
  printf '%s' "$out" > "$dir/n$n-$pod"
  # The controller rewrites the slices of every service selecting the pod.
  for f in "$(_dl_services_dir)"/*.svc; do
    [ -e "$f" ] || continue
    dl_service_backends "$(basename "$f" .svc)" "$(cat "${f%.svc}.backends" 2>/dev/null)" || return 1
  done
}

# N POD NAME PROTO: the pod's port of that name and protocol (none: nothing printed).
_dl_pod_named_port() {
  awk -v n="$3" -v p="$4" '$1 == n && $2 == p { print $3; exit }' "$(_dl_pod_ports_dir)/n$1-$2" 2>/dev/null
}

dl_service_ip() {
  [ -f "$(_dl_services_dir)/$1.svc" ] || { dl_die "no service '$1' in lab $DL_NAME"; return 1; }
  _dl_service_field "$1" ip
}

dl_service_ip6() {
  [ -f "$(_dl_services_dir)/$1.svc" ] || { dl_die "no service '$1' in lab $DL_NAME"; return 1; }
  _dl_service_field "$1" ip6
}

dl_service_ips() {
  local ip ip6
  ip=$(dl_service_ip "$1") || return 1
  ip6=$(_dl_service_field "$1" ip6)
  echo "$ip${ip6:+,$ip6}"
}

_dl_free_service_ip() {  # [6]: the first cluster IP of the family no service holds (10.96.0.10-254; fd00:10:96::a on)
  local v6=0 x ip f key=ip last=254 used=" "
  [ "${1:-}" = 6 ] && { v6=1; key=ip6; last=65535; }
  for f in "$(_dl_services_dir)"/*.svc "$(_dl_services_dir)"/applied/service.*; do
    [ -e "$f" ] && used+="$(sed -n "s/^# $key=//p" "$f") "
  done
  for (( x = 10; x <= last; x++ )); do
    if [ $v6 = 1 ]; then ip=fd00:10:96::$(printf %x $x); else ip=10.96.0.$x; fi
    [[ "$used" == *" $ip "* ]] || { echo "$ip"; return 0; }
  done
  if [ $v6 = 1 ]; then dl_die "no free IPv6 cluster IP left in fd00:10:96::/112"; else dl_die "no free cluster IP left in 10.96.0.10-254"; fi
  return 1
}

# The IPv6 service CIDR fd00:10:96::/112, written as the lab writes its addresses: fd00:10:96::X, X 1-4 hex digits.
_dl_service_ip6_ok() { [[ "$1" =~ ^fd00:10:96::[0-9a-f]{1,4}$ ]]; }

dl_service_add() {
  dl_kube_enabled && { dl_die "in Kubernetes mode services come from kubectl (dpu-lab kubectl apply)"; return 1; }
  local name=${1:-} ip="" ip6="" affinity="" itp="" etp="" node_port="" backends="" have_backends=0 ports=() p
  _dl_service_name_ok "$name" || return 1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --ip) if [[ "${2:-}" == *:* ]]; then
              [ -z "$ip6" ] || { dl_die "--ip: one IPv6 cluster IP per service (dual stack: one per family)"; return 1; }
              ip6=${2,,}
            else
              [ -z "$ip" ] || { dl_die "--ip: one IPv4 cluster IP per service (dual stack: one per family)"; return 1; }
              ip=${2:-}
            fi
            shift 2 ;;
      --port) p=$(_dl_service_port "${2:-}") || return 1; ports+=("$p"); shift 2 ;;
      --affinity) affinity=${2:-}; shift 2 ;;
      --itp) itp=${2:-}; shift 2 ;;
      --etp) etp=${2:-}; shift 2 ;;
      --node-port) node_port=${2:-}; shift 2 ;;
      --backends) backends=${2:-}; have_backends=1; shift 2 ;;
      --backends=*) backends=${1#--backends=}; have_backends=1; shift ;;
      *) dl_die "service add: unknown argument '$1'"; return 1 ;;
    esac
  done
  [ ${#ports[@]} -gt 0 ] || { dl_die "service add $name: give at least one --port PROTO/PORT[:TARGET]"; return 1; }
  if [ -n "$affinity" ]; then
    [[ "$affinity" =~ ^[0-9]+$ ]] && [ "$affinity" -ge 1 ] && [ "$affinity" -le 86400 ] ||
      { dl_die "--affinity must be 1..86400 seconds, not '$affinity'"; return 1; }
  fi
  case $itp in ""|Cluster|Local) ;; *) dl_die "--itp must be Cluster or Local, not '$itp'"; return 1 ;; esac
  case $etp in ""|Cluster|Local) ;; *) dl_die "--etp must be Cluster or Local, not '$etp'"; return 1 ;; esac
  # Kubernetes' default node port range (the API server's --service-node-port-range).
  if [ -n "$node_port" ]; then
    [[ "$node_port" =~ ^[0-9]+$ ]] && [ "$node_port" -ge 30000 ] && [ "$node_port" -le 32767 ] ||
      { dl_die "--node-port must be 30000..32767, not '$node_port'"; return 1; }
  fi
  # Kubernetes refuses an externalTrafficPolicy on a service no external traffic reaches.
  [ -z "$etp" ] || [ -n "$node_port" ] ||
    { dl_die "--etp is only for a service with a --node-port: externalTrafficPolicy governs external traffic"; return 1; }
  local dir; dir=$(_dl_services_dir)
  mkdir -p "$dir" || return 1
  if [ -z "$ip" ]; then
    if [ -f "$dir/$name.svc" ]; then ip=$(_dl_service_field "$name" ip); else ip=$(_dl_free_service_ip) || return 1; fi
  fi
  [[ "$ip" =~ ^10\.(9[6-9]|10[0-9]|11[01])\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
    { dl_die "--ip '$ip' must be an IPv4 address in the service CIDR 10.96.0.0/12"; return 1; }
  # Dual stack: an IPv6 cluster IP beside it (kept when the service is replaced).
  if dl_dual_stack; then
    if [ -z "$ip6" ]; then
      if [ -f "$dir/$name.svc" ]; then ip6=$(_dl_service_field "$name" ip6); fi
      [ -n "$ip6" ] || ip6=$(_dl_free_service_ip 6) || return 1
    fi
    _dl_service_ip6_ok "$ip6" ||
      { dl_die "--ip '$ip6' must be an IPv6 address in the service CIDR fd00:10:96::/112, written fd00:10:96::X"; return 1; }
  elif [ -n "$ip6" ]; then
    dl_die "--ip '$ip6': lab $DL_NAME is IPv4 only (an IPv6 cluster IP needs a lab up --dual-stack)"; return 1
  fi
  local f other
  for f in "$dir"/*.svc "$dir"/applied/service.*; do
    [ -e "$f" ] && [ "$f" != "$dir/$name.svc" ] && [ "$f" != "$dir/applied/service.default.$name" ] || continue
    other=$(sed -n 's/^# ip=//p' "$f")
    [ "$other" != "$ip" ] || { dl_die "cluster IP $ip is service $(_dl_service_file_name "$f")'s"; return 1; }
    [ -z "$ip6" ] || [ "$(sed -n 's/^# ip6=//p' "$f")" != "$ip6" ] ||
      { dl_die "cluster IP $ip6 is service $(_dl_service_file_name "$f")'s"; return 1; }
    [ -z "$node_port" ] || [[ " $(sed -n 's/^# node_port=//p' "$f") " != *" $node_port "* ]] ||
      { dl_die "node port $node_port is service $(_dl_service_file_name "$f")'s"; return 1; }
  done
  local spec="" targets="" shown="" sep="" proto port target pname np="" type=ClusterIP
  [ -n "$node_port" ] && type=NodePort
  for p in "${ports[@]}"; do
    read -r proto port target <<< "$p"
    pname="${proto,,}-$port"
    np=""
    [ -n "$node_port" ] && [ -z "$sep" ] && np=", nodePort: $node_port"
    spec+="$sep{name: $pname, protocol: $proto, port: $port, targetPort: $target$np}"
    targets+="${targets:+ }$pname/$proto/$target"
    shown+="${sep:+,}${proto,,}/$port:$target${np:+@$node_port}"
    sep=", "
  done
  local extra="" ips="clusterIP: $ip"
  # Dual stack as the API server writes a PreferDualStack service in a cluster whose first family is IPv4.
  [ -n "$ip6" ] && ips+=", clusterIPs: [$ip, \"$ip6\"], ipFamilies: [IPv4, IPv6], ipFamilyPolicy: PreferDualStack"
  [ -n "$affinity" ] && extra+=", sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: $affinity}}"
  [ -n "$itp" ] && extra+=", internalTrafficPolicy: $itp"
  [ -n "$etp" ] && extra+=", externalTrafficPolicy: $etp"
  {
    echo "# ip=$ip"
    [ -n "$ip6" ] && echo "# ip6=$ip6"
    echo "# node_port=$node_port"
    echo "# ports=$shown"
    echo "# targets=$targets"
    echo "  - {namespace: default, name: $name, type: $type, $ips, ports: [$spec]$extra}"
  } > "$dir/$name.svc.tmp" || return 1
  # Keep the endpoints of a replaced service unless new ones are given.
  local keep=""
  [ $have_backends = 0 ] && [ -f "$dir/$name.backends" ] && keep=$(cat "$dir/$name.backends")
  [ $have_backends = 1 ] && keep=$backends
  mv "$dir/$name.svc.tmp" "$dir/$name.svc"
  # It replaces a Service default/NAME applied from a file.
  rm -f "$dir/applied/service.default.$name"
  dl_service_backends "$name" "$keep"
}

dl_service_backends() {
  local name=${1:-} list=${2:-} dir item ref state n pod ip cond t pname proto target num ports sep
  dir=$(_dl_services_dir)
  [ -f "$dir/applied/service.default.$name" ] &&
    { dl_die "service '$name' was applied from a file: change its EndpointSlices there (dpu-lab apply FILE)"; return 1; }
  [ -f "$dir/$name.svc" ] || { dl_die "no service '$name' in lab $DL_NAME (dpu-lab service add $name ...)"; return 1; }
  local targets dual=0
  read -r -a targets <<< "$(_dl_service_field "$name" targets)"
  [ -n "$(_dl_service_field "$name" ip6)" ] && dual=1
  # Slices by their ports (the endpoints' resolved numbers), in order of first use.
  local -A slice_eps=() slice_eps6=()
  local slice_keys=()
  local items=()
  IFS=, read -r -a items <<< "$list"
  for item in "${items[@]}"; do
    [ -n "$item" ] || continue
    ref=${item%%=*}; state=ready
    [ "$ref" != "$item" ] && state=${item#*=}
    [[ "$ref" == */* ]] || { dl_die "backend '$item' must be NODE/POD[=ready|terminating|unready]"; return 1; }
    n=$(dl_node_ref "${ref%%/*}") || return 1
    pod=${ref#*/}
    [ -f "$DL_DIR/pods/n$n-$pod" ] || { dl_die "backend '$item': no pod '$pod' on node$n"; return 1; }
    ip=$(dl_pod_ip "$n" "$pod")
    [ -n "$ip" ] || { dl_die "backend '$item': pod $pod on node$n has no IPv4 address"; return 1; }
    case $state in
      ready) cond="{ready: true, serving: true, terminating: false}" ;;
      terminating) cond="{ready: false, serving: true, terminating: true}" ;;
      unready) cond="{ready: false, serving: false, terminating: false}" ;;
      *) dl_die "backend '$item': state must be ready, terminating or unready, not '$state'"; return 1 ;;
    esac
    ports="" sep=""
    for t in "${targets[@]}"; do
      IFS=/ read -r pname proto target <<< "$t"
      num=$target
      [[ "$target" =~ ^[0-9]+$ ]] || num=$(_dl_pod_named_port "$n" "$pod" "$target" "$proto")
      [ -n "$num" ] || continue
      ports+="$sep{name: $pname, protocol: $proto, port: $num}"
      sep=", "
    done
    # (Keys carry a prefix: bash refuses an empty one, a pod with none of the ports.)
    [ -n "${slice_eps[k$ports]+x}" ] || { slice_keys+=("$ports"); slice_eps[k$ports]=""; slice_eps6[k$ports]=""; }
    slice_eps[k$ports]+="${slice_eps[k$ports]:+, }{addresses: [$ip], conditions: $cond, nodeName: $(dl_node_name "$n"), targetRef: {kind: Pod, namespace: default, name: $pod}}"
    if [ $dual = 1 ]; then
      # The controller's IPv6 slice: the pod's IPv6 address (a pod without one is in no IPv6 slice).
      ip=$(dl_pod_ip6 "$n" "$pod")
      [ -z "$ip" ] ||
        slice_eps6[k$ports]+="${slice_eps6[k$ports]:+, }{addresses: [\"$ip\"], conditions: $cond, nodeName: $(dl_node_name "$n"), targetRef: {kind: Pod, namespace: default, name: $pod}}"
    fi
  done
  # No endpoint: one empty slice with the ports given by number.
  if [ ${#slice_keys[@]} = 0 ]; then
    ports="" sep=""
    for t in "${targets[@]}"; do
      IFS=/ read -r pname proto target <<< "$t"
      [[ "$target" =~ ^[0-9]+$ ]] || continue
      ports+="$sep{name: $pname, protocol: $proto, port: $target}"
      sep=", "
    done
    slice_keys=("$ports"); slice_eps[k$ports]=""; slice_eps6[k$ports]=""
  fi
  local i slice family
  for (( i = 1; i <= ${#slice_keys[@]}; i++ )); do
    for family in "" -v6; do
      [ -z "$family" ] || [ $dual = 1 ] || continue
      slice=$name-lab$family; [ $i -gt 1 ] && slice+=-$i
      [ ! -e "$dir/applied/slice.default.$slice" ] ||
        { dl_die "EndpointSlice default/$slice was applied from a file and service $name's own slice takes that name (dpu-lab delete FILE first)"; return 1; }
    done
  done
  i=0
  {
    for ports in "${slice_keys[@]}"; do
      i=$(( i + 1 )); slice=$name-lab; [ $i -gt 1 ] && slice+=-$i
      echo "  - {namespace: default, name: $slice, service: $name, addressType: IPv4, endpoints: [${slice_eps[k$ports]}], ports: [$ports]}"
      [ $dual = 1 ] || continue
      slice=$name-lab-v6; [ $i -gt 1 ] && slice+=-$i
      echo "  - {namespace: default, name: $slice, service: $name, addressType: IPv6, endpoints: [${slice_eps6[k$ports]}], ports: [$ports]}"
    done
  } > "$dir/$name.eps.tmp" && mv "$dir/$name.eps.tmp" "$dir/$name.eps" || return 1
  echo "$list" > "$dir/$name.backends"
  dl_compose_cluster_file
}

dl_service_raw() {
  local name=$1 svc=$2 slice=${3:-} dir ip
  _dl_service_name_ok "$name" || return 1
  dir=$(_dl_services_dir)
  mkdir -p "$dir" || return 1
  # Its cluster IP stays taken for dl_service_add.
  ip=$(sed -n 's/.*clusterIP: *\([0-9.]*\).*/\1/p' <<< "$svc")
  printf '# ip=%s\n# ports=(raw)\n  - %s\n' "$ip" "$svc" > "$dir/$name.svc" || return 1
  if [ -n "$slice" ]; then echo "  - $slice" > "$dir/$name.eps"; else rm -f "$dir/$name.eps"; fi
  echo "(raw)" > "$dir/$name.backends"
  dl_compose_cluster_file
}

dl_service_del() {
  local dir; dir=$(_dl_services_dir)
  rm -f "$dir/$1.svc" "$dir/$1.eps" "$dir/$1.backends" "$dir/applied/service.default.$1"
  dl_compose_cluster_file
}

# A service file's service as the list shows it: NAME (namespace default) or NS/NAME.
_dl_service_file_name() {
  local b=${1##*/} ns
  case $b in
    service.*) b=${b#service.}; ns=${b%%.*}; b=${b#*.}; [ "$ns" = default ] && echo "$b" || echo "$ns/$b" ;;
    *) echo "${b%.svc}" ;;
  esac
}

dl_service_list() {
  local f name
  for f in "$(_dl_services_dir)"/*.svc; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .svc)
    printf '%s %s %s %s\n' "$name" "$(dl_service_ips "$name")" \
      "$(_dl_service_field "$name" ports)" "$(cat "$(_dl_services_dir)/$name.backends" 2>/dev/null)"
  done
  for f in "$(_dl_services_dir)"/applied/service.*; do
    [ -e "$f" ] || continue
    _dl_applied_row "$f" "$(_dl_service_file_name "$f")"
  done
}

# --- Services and EndpointSlices applied from a file (dpu-lab apply/delete).
# The file is decoded by `dpu-agent --decode`, the Kubernetes source's own
# decoder (defaults as the API server sets them, every refusal naming its
# document and field); jq only turns each decoded object into the cluster
# file's entry for it, with the same fields the file source reads.

# A decoded Service -> its cluster file entry. $cips: its cluster IPs (the
# object's, or those the lab allocated); $nps: the node port of each port (0: none).
_DL_JQ_SERVICE_ENTRY='
  {namespace, name}
  + (if (.labels | length) > 0 then {labels} else {} end)
  + {type}
  + (if .headless then {clusterIP: "None"}
     elif .type == "ExternalName" then {}
     else {clusterIPs: $cips} end)
  + (if .ipFamilyPolicy != "" and .ipFamilyPolicy != "SingleStack" then {ipFamilyPolicy} else {} end)
  + {ports: [.ports | to_entries[] | .key as $i | .value
             | {name, protocol, port, targetPort} + (if $nps[$i] > 0 then {nodePort: $nps[$i]} else {} end)]}
  + (if (.externalIPs | length) > 0 then {externalIPs} else {} end)
  + {sessionAffinity}
  + (if .sessionAffinity == "ClientIP"
     then {sessionAffinityConfig: {clientIP: {timeoutSeconds: .affinityTimeoutSeconds}}} else {} end)
  + {internalTrafficPolicy, externalTrafficPolicy, publishNotReadyAddresses}
  + (if (.loadBalancerIPs | length) > 0 then {loadBalancer: {ingress: [.loadBalancerIPs[] | {ip: .}]}} else {} end)'
_DL_JQ_SLICE_ENTRY='
  {namespace, name, service: .serviceName, addressType,
   endpoints: [.endpoints[] | {addresses, conditions}
               + (if .nodeName != "" then {nodeName} else {} end)
               + (if .targetRef then {targetRef} else {} end)],
   ports: [.ports[] | {name, protocol} + (if .port then {port} else {} end)]}'

# FILE VERB: the file's objects, decoded, one compact JSON object a line
# (with "where", the document; the decoder puts one without a namespace in
# "default", as kubectl does). Says why and returns false when the file cannot be decoded, holds
# no object, or holds any object the decoder refused or the lab does not take.
_dl_decode_for_apply() {
  local file=$1 verb=$2 agent out err rc bad
  agent=$(dl_bin agent) || return 1
  [ -x "$agent" ] || { dl_die "$verb: $agent is not built (it decodes the file: cmake --build)"; return 1; }
  err=$(mktemp) || return 1
  out=$("$agent" --decode "$file" 2>"$err"); rc=$?
  if [ $rc = 2 ] || ! jq -e '.objects | type == "array"' <<< "$out" >/dev/null 2>&1; then
    dl_die "$verb $file: $(sed 's/^dpu-agent: --decode: //' "$err")"; rm -f "$err"; return 1
  fi
  rm -f "$err"
  bad=$(jq -r --arg verb "$verb" '
    def ref: "\(.kind) \(if (.namespace // "") == "" then "default" else .namespace end)/\(.name)";
    (.refused[] | "\(.where): \(ref): \(.error)"),
    (.objects[] | select(.kind != "Service" and .kind != "EndpointSlice" and .kind != "Namespace" and .kind != "NetworkPolicy")
     | "\(.where): \(ref): dpu-lab \($verb) takes only Services and Namespaces (v1), EndpointSlices (discovery.k8s.io/v1)"
       + " and NetworkPolicies (networking.k8s.io/v1) (pods: dpu-lab pod add; every kind: a lab up --kube and dpu-lab kubectl \($verb))"),
    (.objects[] | select(.kind == "Namespace" and (.name | test("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$") | not))
     | "\(.where): Namespace \(.name): metadata.name must be a DNS label (1-63 characters of a-z, 0-9 and -)"),
    (.objects[] | select(.kind == "NetworkPolicy" and (.name | test("^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$") | not))
     | "\(.where): \(ref): metadata.name must be a DNS subdomain (a-z, 0-9, - and ., at most 253)"),
    (.objects[] | select(.kind != "Namespace" and .namespace != "" and (.namespace | test("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$") | not))
     | "\(.where): \(ref): metadata.namespace must be a DNS label (1-63 characters of a-z, 0-9 and -)"),
    (.objects[] | select(.kind == "Service" and (.name | test("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$") | not))
     | "\(.where): \(ref): metadata.name must be 1-63 characters of a-z, 0-9 and -, starting with a letter"),
    (.objects[] | select(.kind == "EndpointSlice" and (.name | test("^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$") | not))
     | "\(.where): \(ref): metadata.name must be a DNS subdomain (a-z, 0-9, - and ., at most 253)"),
    (.objects[] | select(.kind == "EndpointSlice" and .serviceName == "")
     | "\(.where): \(ref): metadata.labels[kubernetes.io/service-name] is required: it names the slice'"'"'s Service")
    ' <<< "$out")
  if [ -n "$bad" ]; then
    sed "s|^|dpu-lab: $verb: |" <<< "$bad" >&2
    echo "dpu-lab: $verb $file: nothing changed (fix the objects above; the file is taken whole or not at all)" >&2
    return 1
  fi
  jq -e '.objects | length > 0' <<< "$out" >/dev/null || { dl_die "$verb $file: no object in the file"; return 1; }
  jq -c '.objects[]' <<< "$out"
}

_dl_entry_of() { grep -v '^#' "$1" | sed 's/^  - //'; }  # an applied file's entry, as JSON

# The node port of a service port: given, kept from the entry it replaces
# (OLD-ENTRY, may be empty), or the first free one. The caller's $self_file
# and $replaced_file (the entries this one replaces) do not count as taken;
# $given_here (every port's given node port) and $taken_here (the ports done)
# do. Prints it, or says why not.
_dl_node_port_for() {  # GIVEN PORT PROTO OLD-ENTRY
  local np=$1 port=$2 proto=$3 old=$4 f used=" $taken_here $given_here "
  for f in "$(_dl_services_dir)"/*.svc "$(_dl_services_dir)"/applied/service.*; do
    [ -e "$f" ] && [ "$f" != "$self_file" ] && [ "$f" != "$replaced_file" ] || continue
    used+="$(sed -n 's/^# node_port=//p' "$f") "
  done
  if [ "$np" = 0 ] && [ -n "$old" ]; then
    np=$(jq -r --argjson p "$port" --arg proto "$proto" \
           '[.ports[] | select(.port == $p and .protocol == $proto) | .nodePort // 0][0] // 0' <<< "$old")
    [[ "$used" != *" $np "* ]] || np=0
  fi
  if [ "$np" = 0 ]; then
    # As the API server allocates one (it picks at random; the lab the first free).
    for (( np = 30000; np <= 32767; np++ )); do [[ "$used" == *" $np "* ]] || break; done
    [ "$np" -le 32767 ] || { echo "no free node port left in 30000-32767"; return 1; }
    echo "$np"; return 0
  fi
  [ "$np" -ge 30000 ] && [ "$np" -le 32767 ] || { echo "nodePort $np is outside the lab's node port range 30000-32767"; return 1; }
  for f in "$(_dl_services_dir)"/*.svc "$(_dl_services_dir)"/applied/service.*; do
    [ -e "$f" ] && [ "$f" != "$self_file" ] && [ "$f" != "$replaced_file" ] || continue
    [[ " $(sed -n 's/^# node_port=//p' "$f") " != *" $np "* ]] ||
      { echo "node port $np is service $(_dl_service_file_name "$f")'s"; return 1; }
  done
  [[ " $taken_here " != *" $np "* ]] || { echo "node port $np is given twice"; return 1; }
  echo "$np"
}

# The families a decoded Service with no cluster IP gets, in order ("IPv4",
# "IPv4 IPv6" or "IPv6 IPv4"), from its ipFamilyPolicy and ipFamilies as the
# API server allocates them (IPv4 is the lab's first family); or why not.
_dl_apply_families() {
  local policy fams first other got
  policy=$(jq -r '.ipFamilyPolicy' <<< "$1")
  fams=$(jq -r '.ipFamilies | join(" ")' <<< "$1")
  first=${fams%% *}
  [ -n "$first" ] || first=IPv4
  if [ "$first" = IPv4 ]; then other=IPv6; else other=IPv4; fi
  got=$first
  case $policy in
    RequireDualStack)
      dl_dual_stack || { echo "ipFamilyPolicy RequireDualStack needs a dual-stack lab (dpu-lab up --dual-stack)"; return 1; }
      got="$first $other" ;;
    PreferDualStack) dl_dual_stack && got="$first $other" ;;
  esac
  if [[ "$got" == *IPv6* ]] && ! dl_dual_stack; then
    echo "ipFamilies asks for IPv6 and the lab is IPv4 only (dpu-lab up --dual-stack)"; return 1
  fi
  [ "$got" != IPv6 ] || { echo "the lab's services all have an IPv4 cluster IP: an IPv6 single-stack service is not" \
    "supported here (ipFamilyPolicy PreferDualStack gives it both)"; return 1; }
  echo "$got"
}

# One decoded Service into the staged services dir; prints what was done.
_dl_apply_service() {
  local o=$1 where=$2 ns=$3 name=$4 dir self_file replaced_file="" old="" old_ip="" ip ip6="" ips entry verb_done one
  dir=$(_dl_services_dir)
  self_file=$dir/applied/service.$ns.$name
  local ref="Service $ns/$name"
  local old_ip6="" families cips=""
  [ -f "$self_file" ] && { old=$(_dl_entry_of "$self_file"); old_ip=$(sed -n 's/^# ip=//p' "$self_file")
                           old_ip6=$(sed -n 's/^# ip6=//p' "$self_file"); }
  # A service of the same name made by `dpu-lab service add`: replaced, with the slices the lab wrote for it.
  [ "$ns" = default ] && [ -f "$dir/$name.svc" ] &&
    { replaced_file=$dir/$name.svc; old_ip=$(_dl_service_field "$name" ip); old_ip6=$(_dl_service_field "$name" ip6); }
  ips=$(jq -r 'if .headless or .type == "ExternalName" then "none" else .clusterIPs | join(" ") end' <<< "$o")
  ip=""
  if [ "$ips" = none ]; then
    ip=""
  elif [ -z "$ips" ]; then
    # As the API server does: a service that gives no cluster IP gets one of
    # each family its ipFamilyPolicy and ipFamilies ask for, and keeps them.
    families=$(_dl_apply_families "$o") || { dl_die "apply: $where: $ref: $families"; return 1; }
    ip=$old_ip
    [ -n "$ip" ] || ip=$(_dl_free_service_ip) || return 1
    if [[ "$families" == *IPv6* ]]; then
      ip6=$old_ip6
      [ -n "$ip6" ] || ip6=$(_dl_free_service_ip 6) || return 1
    fi
    if [ "$families" = "IPv6 IPv4" ]; then cips="$ip6 $ip"; else cips="$ip${ip6:+ $ip6}"; fi
  else
    for one in $ips; do
      if [[ "$one" == *:* ]]; then
        dl_dual_stack ||
          { dl_die "apply: $where: $ref: cluster IP $one is IPv6 and the lab is IPv4 only (dpu-lab up --dual-stack)"; return 1; }
        _dl_service_ip6_ok "$one" ||
          { dl_die "apply: $where: $ref: cluster IP $one is not in the lab's IPv6 service CIDR fd00:10:96::/112 (written fd00:10:96::X)"; return 1; }
        ip6=$one
      else
        [[ "$one" =~ ^10\.(9[6-9]|10[0-9]|11[01])\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
          { dl_die "apply: $where: $ref: cluster IP $one is not in the lab's service CIDR 10.96.0.0/12$(dl_dual_stack || echo " (IPv4 only)")"; return 1; }
        ip=$one
      fi
    done
    [ -n "$ip" ] ||
      { dl_die "apply: $where: $ref: the lab's services all have an IPv4 cluster IP: add one to clusterIPs (10.96.0.0/12)"; return 1; }
    cips=$ips
    local was now
    for was in "$old_ip $ip" "$old_ip6 $ip6"; do
      now=${was#* } was=${was%% *}
      [ -z "$was" ] || [ -z "$now" ] || [ "$was" = "$now" ] ||
        { dl_die "apply: $where: $ref: its cluster IP is $was and cannot change to $now (as in Kubernetes); delete it first"; return 1; }
    done
  fi
  local f
  if [ -n "$ip" ]; then
    for f in "$dir"/*.svc "$dir"/applied/service.*; do
      [ -e "$f" ] && [ "$f" != "$self_file" ] && [ "$f" != "$replaced_file" ] || continue
      [ "$(sed -n 's/^# ip=//p' "$f")" != "$ip" ] ||
        { dl_die "apply: $where: $ref: cluster IP $ip is service $(_dl_service_file_name "$f")'s"; return 1; }
      [ -z "$ip6" ] || [ "$(sed -n 's/^# ip6=//p' "$f")" != "$ip6" ] ||
        { dl_die "apply: $where: $ref: cluster IP $ip6 is service $(_dl_service_file_name "$f")'s"; return 1; }
    done
  fi
  # Node ports: a NodePort or LoadBalancer service has one on every port.
  local nps=() taken_here="" given_here np why port proto given
  if jq -e '.type == "NodePort" or .type == "LoadBalancer"' <<< "$o" >/dev/null; then
    given_here=$(jq -r '[.ports[].nodePort // empty] | join(" ")' <<< "$o")
    while read -r port proto given; do
      why=$(_dl_node_port_for "$given" "$port" "$proto" "$old") ||
        { dl_die "apply: $where: $ref: ports $port/$proto: $why"; return 1; }
      nps+=("$why"); taken_here+=" $why"
    done < <(jq -r '.ports[] | "\(.port) \(.protocol) \(.nodePort // 0)"' <<< "$o")
  else
    mapfile -t nps < <(jq -r '.ports[] | 0' <<< "$o")
  fi
  entry=$(jq -c --argjson cips "$(jq -cn --arg l "$cips" '$l | split(" ") | map(select(. != ""))')" \
    --argjson nps "[$(IFS=,; echo "${nps[*]}")]" "$_DL_JQ_SERVICE_ENTRY" <<< "$o") || return 1
  local state=created
  [ -n "$old" ] && state=configured
  [ -n "$old" ] && [ "$old" = "$entry" ] && state=unchanged
  verb_done=""
  if [ -n "$replaced_file" ]; then
    rm -f "$dir/$name.svc" "$dir/$name.eps" "$dir/$name.backends"
    state=configured verb_done=" (replaces the one dpu-lab service add made, and its slices)"
  fi
  mkdir -p "$dir/applied" &&
    { printf '# ip=%s\n' "$ip"; [ -z "$ip6" ] || printf '# ip6=%s\n' "$ip6"
      printf '# node_port=%s\n  - %s\n' "$(tr -s ' ' <<< "${taken_here# }")" "$entry"; } > "$self_file" || return 1
  echo "service $ns/$name $state${ip:+, cluster IP $ip}${ip6:+,$ip6}$verb_done"
}

# One decoded EndpointSlice into the staged services dir; prints what was done.
_dl_apply_slice() {
  local o=$1 where=$2 ns=$3 name=$4 dir f entry old="" state=created
  dir=$(_dl_services_dir)
  f=$dir/applied/slice.$ns.$name
  if [ "$ns" = default ]; then
    local eps
    for eps in "$dir"/*.eps; do
      [ -e "$eps" ] && grep -qF "name: $name, service:" "$eps" || continue
      dl_die "apply: $where: EndpointSlice $ns/$name: the name is that of the slice the lab wrote for service $(basename "$eps" .eps) (dpu-lab service add); choose another"
      return 1
    done
  fi
  entry=$(jq -c "$_DL_JQ_SLICE_ENTRY" <<< "$o") || return 1
  [ -f "$f" ] && { old=$(_dl_entry_of "$f"); state=configured; }
  [ "$old" = "$entry" ] && state=unchanged
  mkdir -p "$dir/applied" && printf '  - %s\n' "$entry" > "$f" || return 1
  echo "endpointslice $ns/$name $state"
}

# FILE VERB: decode FILE, run VERB's function on every object against a copy
# of the services dir, and swap the copy in only when every object passed.
_dl_apply_file() {
  local file=$1 verb=$2 objects live=$DL_DIR/services stage=$DL_DIR/services.stage line
  local kind ns name where said="" out failed=0
  objects=$(_dl_decode_for_apply "$file" "$verb") || return 1
  rm -rf "$stage" && mkdir -p "$live" && cp -a "$live" "$stage" || { dl_die "$verb: cannot stage $live"; return 1; }
  local _DL_SERVICES_DIR=$stage
  while IFS= read -r line; do
    IFS=$'\t' read -r kind ns name where < <(jq -r '[.kind, (.namespace // "-"), .name, .where] | @tsv' <<< "$line")
    case $verb:$kind in
      apply:Service) out=$(_dl_apply_service "$line" "$where" "$ns" "$name") ;;
      apply:EndpointSlice) out=$(_dl_apply_slice "$line" "$where" "$ns" "$name") ;;
      apply:Namespace) out=$(_dl_apply_namespace "$line" "$name") ;;
      apply:NetworkPolicy) out=$(_dl_apply_netpol "$line" "$ns" "$name") ;;
      delete:Namespace|delete:NetworkPolicy) out=$(_dl_delete_policy_object "$kind" "$ns" "$name") ;;
      delete:*) out=$(_dl_delete_object "$kind" "$ns" "$name") ;;
    esac || { failed=1; continue; }
    said+="$out"$'\n'
  done <<< "$objects"
  _DL_SERVICES_DIR=""
  if [ $failed = 1 ]; then
    rm -rf "$stage"
    dl_die "$verb $file: nothing changed (fix the objects above; the file is taken whole or not at all)"
    return 1
  fi
  rm -rf "$live.old" && mv "$live" "$live.old" && mv "$stage" "$live" && rm -rf "$live.old" &&
    dl_compose_cluster_file || { dl_die "$verb: could not write $DL_DIR/cluster.yaml"; return 1; }
  printf '%s' "$said"
}

_dl_delete_object() {  # KIND NS NAME
  local dir; dir=$(_dl_services_dir)
  case $1 in
    Service)
      if [ -f "$dir/applied/service.$2.$3" ]; then rm -f "$dir/applied/service.$2.$3"; echo "service $2/$3 deleted"
      elif [ "$2" = default ] && [ -f "$dir/$3.svc" ]; then
        rm -f "$dir/$3.svc" "$dir/$3.eps" "$dir/$3.backends"
        echo "service $2/$3 deleted (made by dpu-lab service add, with its slices)"
      else echo "service $2/$3 not found (nothing to delete)"; fi ;;
    EndpointSlice)
      if [ -f "$dir/applied/slice.$2.$3" ]; then rm -f "$dir/applied/slice.$2.$3"; echo "endpointslice $2/$3 deleted"
      else echo "endpointslice $2/$3 not found (nothing to delete)"; fi ;;
  esac
}

dl_apply() {
  dl_kube_enabled && { dl_die "in Kubernetes mode objects go to the API server: dpu-lab kubectl apply -f ${1:-FILE}"; return 1; }
  _dl_apply_file "${1:-}" apply
}

dl_delete() {
  dl_kube_enabled && { dl_die "in Kubernetes mode objects go to the API server: dpu-lab kubectl delete -f ${1:-FILE}"; return 1; }
  _dl_apply_file "${1:-}" delete
}

# APPLIED-FILE SHOWN-NAME: its dl_service_list row.
_dl_applied_row() {
  local f=$1 entry ip ip6 ns name backends slices
  entry=$(_dl_entry_of "$f")
  ip=$(sed -n 's/^# ip=//p' "$f")
  ip6=$(sed -n 's/^# ip6=//p' "$f")
  [ -z "$ip6" ] || ip+=",$ip6"
  read -r ns name < <(jq -r '"\(.namespace) \(.name)"' <<< "$entry")
  slices=("$(_dl_services_dir)"/applied/slice.*)
  backends=""
  if [ -e "${slices[0]}" ]; then
    backends=$(for s in "${slices[@]}"; do _dl_entry_of "$s"; done | jq -rs --arg ns "$ns" --arg svc "$name" '
      [.[] | select(.namespace == $ns and .service == $svc) | .endpoints[]
       | (if .nodeName and .targetRef.kind == "Pod" then "\(.nodeName)/\(.targetRef.name)" else .addresses[0] end)
         + (if .conditions.ready then "" elif .conditions.serving and .conditions.terminating then "=terminating"
            else "=unready" end)] | join(",")')
  fi
  printf '%s %s %s %s\n' "$2" "${ip:-None}" \
    "$(jq -r '[.ports[] | "\(.protocol | ascii_downcase)/\(.port):\(.targetPort)" + (if .nodePort then "@\(.nodePort)" else "" end)] | join(",")' <<< "$entry")" \
    "$backends"
}
