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
# State: $DL_DIR/services/NAME.svc and NAME.eps (the service entry, and one
# line per slice), pod-ports/nN-POD (named ports); dl_write_cluster_file and
# every verb here rewrite cluster.yaml from the nodes and these.
#
# Functions (public):
#   dl_service_add NAME [--ip IP] --port PROTO/PORT[:TARGET]... [--node-port N] [--affinity SECONDS]
#                  [--itp Local] [--etp Local] [--backends NODE/POD[=STATE],...]
#                        create or replace service NAME in namespace default: cluster IP IP (default: the
#                        first free 10.96.0.X from .10), each --port a TCP/UDP/SCTP port (tcp/80:8080 or
#                        80/TCP:8080; TARGET, a number or a port name such as http, defaults to PORT);
#                        --node-port makes it type NodePort with
#                        node port N (30000-32767) on its first port; backends as in dl_service_backends
#   dl_service_backends NAME NODE/POD[=STATE],...
#                        replace its endpoints (an empty list: none). STATE: ready (default),
#                        terminating (serving and terminating) or unready (neither ready nor serving)
#   dl_service_pod_ports N POD NAME=PORT[/PROTO],...
#                        the pod's named ports (PROTO tcp by default), which resolve target ports
#                        given by name; rewrites the slices of every service (an empty list: none)
#   dl_service_del NAME  remove the service and its slices (idempotent)
#   dl_service_list      "NAME CLUSTER-IP PORTS BACKENDS" per service (PORTS: a node port as
#                        tcp/80:8080@30080)
#   dl_service_ip NAME   its cluster IP
#   dl_service_raw NAME SERVICE [SLICE]
#                        write service NAME's entry (and its slice's) into the cluster file as given, one YAML
#                        flow mapping each, unchecked: how a test hands the agents an object they must refuse

_dl_services_dir() { echo "$DL_DIR/services"; }

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
  {
    cat "$DL_DIR/cluster.nodes.yaml"
    if ls "$dir"/*.svc >/dev/null 2>&1; then
      echo "services:"
      for f in "$dir"/*.svc; do grep -v '^#' "$f"; done
      echo "endpointSlices:"
      for f in "$dir"/*.eps; do cat "$f"; done
    fi
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

_dl_free_service_ip() {
  local x ip f used=" "
  for f in "$(_dl_services_dir)"/*.svc; do [ -e "$f" ] && used+="$(sed -n 's/^# ip=//p' "$f") "; done
  for (( x = 10; x < 255; x++ )); do
    ip=10.96.0.$x
    [[ "$used" == *" $ip "* ]] || { echo "$ip"; return 0; }
  done
  dl_die "no free cluster IP left in 10.96.0.10-254"; return 1
}

dl_service_add() {
  dl_kube_enabled && { dl_die "in Kubernetes mode services come from kubectl (dpu-lab kubectl apply)"; return 1; }
  local name=${1:-} ip="" affinity="" itp="" etp="" node_port="" backends="" have_backends=0 ports=() p
  _dl_service_name_ok "$name" || return 1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --ip) ip=${2:-}; shift 2 ;;
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
  local f other
  for f in "$dir"/*.svc; do
    [ -e "$f" ] && [ "$f" != "$dir/$name.svc" ] || continue
    other=$(sed -n 's/^# ip=//p' "$f")
    [ "$other" != "$ip" ] || { dl_die "cluster IP $ip is service $(basename "$f" .svc)'s"; return 1; }
    [ -z "$node_port" ] || [ "$(sed -n 's/^# node_port=//p' "$f")" != "$node_port" ] ||
      { dl_die "node port $node_port is service $(basename "$f" .svc)'s"; return 1; }
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
  local extra=""
  [ -n "$affinity" ] && extra+=", sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: $affinity}}"
  [ -n "$itp" ] && extra+=", internalTrafficPolicy: $itp"
  [ -n "$etp" ] && extra+=", externalTrafficPolicy: $etp"
  {
    echo "# ip=$ip"
    echo "# node_port=$node_port"
    echo "# ports=$shown"
    echo "# targets=$targets"
    echo "  - {namespace: default, name: $name, type: $type, clusterIP: $ip, ports: [$spec]$extra}"
  } > "$dir/$name.svc.tmp" || return 1
  # Keep the endpoints of a replaced service unless new ones are given.
  local keep=""
  [ $have_backends = 0 ] && [ -f "$dir/$name.backends" ] && keep=$(cat "$dir/$name.backends")
  [ $have_backends = 1 ] && keep=$backends
  mv "$dir/$name.svc.tmp" "$dir/$name.svc"
  dl_service_backends "$name" "$keep"
}

dl_service_backends() {
  local name=${1:-} list=${2:-} dir item ref state n pod ip cond t pname proto target num ports sep
  dir=$(_dl_services_dir)
  [ -f "$dir/$name.svc" ] || { dl_die "no service '$name' in lab $DL_NAME (dpu-lab service add $name ...)"; return 1; }
  local targets
  read -r -a targets <<< "$(_dl_service_field "$name" targets)"
  # Slices by their ports (the endpoints' resolved numbers), in order of first use.
  local -A slice_eps=()
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
    [ -n "${slice_eps[k$ports]+x}" ] || { slice_keys+=("$ports"); slice_eps[k$ports]=""; }
    slice_eps[k$ports]+="${slice_eps[k$ports]:+, }{addresses: [$ip], conditions: $cond, nodeName: $(dl_node_name "$n"), targetRef: {kind: Pod, namespace: default, name: $pod}}"
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
    slice_keys=("$ports"); slice_eps[k$ports]=""
  fi
  local i=0 slice
  {
    for ports in "${slice_keys[@]}"; do
      i=$(( i + 1 )); slice=$name-lab; [ $i -gt 1 ] && slice+=-$i
      echo "  - {namespace: default, name: $slice, service: $name, addressType: IPv4, endpoints: [${slice_eps[k$ports]}], ports: [$ports]}"
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
  rm -f "$dir/$1.svc" "$dir/$1.eps" "$dir/$1.backends"
  dl_compose_cluster_file
}

dl_service_list() {
  local f name
  for f in "$(_dl_services_dir)"/*.svc; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .svc)
    printf '%s %s %s %s\n' "$name" "$(_dl_service_field "$name" ip)" \
      "$(_dl_service_field "$name" ports)" "$(cat "$(_dl_services_dir)/$name.backends" 2>/dev/null)"
  done
}
