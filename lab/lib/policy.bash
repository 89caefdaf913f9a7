# lab/lib/policy.bash — what NetworkPolicy reads, in the lab's cluster file
# (file cluster source, docs/policy.md "The lab"): namespaces with labels,
# pods with their namespace, labels and container ports, and NetworkPolicies.
# Every agent reloads the file; each compiles the policies for its own pods.
# Sourced by lab/lib/lab.bash.
#
# A pod of namespace NS other than default is the lab pod NS.NAME (as in
# Kubernetes mode), so x/a and y/a can share a node; its CNI ADD carries
# K8S_POD_NAMESPACE=NS and K8S_POD_NAME=NAME, which is how the agent ties the
# attachment to the pod's entry.
#
# State, under the services dir (so that dpu-lab apply stages it with the
# services): namespaces/NAME (the entry, JSON), netpols/NS.NAME (the entry,
# JSON: the decoder's output less kind), pod-meta/nN-POD (namespace, name,
# node, addresses and labels, JSON; its container ports are pod-ports/nN-POD,
# shared with services.bash's named ports).
#
# Functions (public):
#   dl_ns_add NAME [KEY=VALUE...]       create or replace namespace NAME with these labels
#   dl_label_ns NAME KEY=VALUE|KEY-...  change a namespace's labels (one it does not list exists with none)
#   dl_pod_add_labelled N POD [--ns NS] [--labels K=V,...] [--port [NAME:]N[/PROTO]]...
#                                       dl_pod_add, with the pod's entry in the cluster file written before
#                                       its CNI ADD (so its rules come with its port) and its address after;
#                                       prints the address. The lab pod is POD, or NS.POD outside default.
#   dl_label_pod N POD KEY=VALUE|KEY-...
#   dl_pod_meta_del N POD               forget the pod's entry (dl_pod_del calls it)
#   _dl_compose_policy_objects DIR      the namespaces, pods and networkPolicies sections (dl_compose_cluster_file)
#   _dl_apply_namespace / _dl_apply_netpol  one decoded object of dpu-lab apply

_dl_label_key_ok() {
  local k=$1 prefix name
  name=${k##*/}
  prefix=""; [ "$name" != "$k" ] && prefix=${k%/*}
  [[ "$name" =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$ ]] || return 1
  [ -z "$prefix" ] || [[ ${#prefix} -le 253 && "$prefix" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]]
}
_dl_label_value_ok() { [[ -z "$1" || "$1" =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$ ]]; }

# WHAT EDITS...: the labels' JSON object after edits K=V (set) and K- (remove),
# starting from $_DL_LABELS (a JSON object); says what to fix on a bad edit.
_dl_label_edits() {
  local what=$1 e k v out=${_DL_LABELS:-"{}"}
  shift
  for e in "$@"; do
    if [[ "$e" == *=* ]]; then
      k=${e%%=*} v=${e#*=}
      _dl_label_key_ok "$k" || { dl_die "$what: label key '$k' must be [PREFIX/]NAME, NAME 1-63 characters of a-z, A-Z, 0-9, '-', '_', '.' starting and ending alphanumeric"; return 1; }
      _dl_label_value_ok "$v" || { dl_die "$what: label $k: value '$v' must be empty or 1-63 characters of a-z, A-Z, 0-9, '-', '_', '.' starting and ending alphanumeric"; return 1; }
      [ "$k" != kubernetes.io/metadata.name ] || { dl_die "$what: kubernetes.io/metadata.name is the namespace's name and cannot be set"; return 1; }
      out=$(jq -c --arg k "$k" --arg v "$v" '. + {($k): $v}' <<< "$out")
    elif [[ "$e" == *- ]]; then
      k=${e%-}
      _dl_label_key_ok "$k" || { dl_die "$what: '$e': to remove a label give KEY- with a valid key"; return 1; }
      out=$(jq -c --arg k "$k" 'del(.[$k])' <<< "$out")
    else
      dl_die "$what: '$e' must be KEY=VALUE (set) or KEY- (remove)"; return 1
    fi
  done
  echo "$out"
}

_dl_ns_name_ok() {
  [[ "$1" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] ||
    { dl_die "namespace name '$1' must be a DNS label: 1-63 characters of a-z, 0-9 and '-', starting and ending alphanumeric"; return 1; }
}

dl_ns_add() {
  dl_kube_enabled && { dl_die "in Kubernetes mode namespaces come from kubectl (dpu-lab kubectl create namespace)"; return 1; }
  local name=${1:-} labels dir
  _dl_ns_name_ok "$name" || return 1
  shift
  for e in "$@"; do [[ "$e" == *=* ]] || { dl_die "ns add $name: label '$e' must be KEY=VALUE"; return 1; }; done
  labels=$(_DL_LABELS="{}" _dl_label_edits "ns add $name" "$@") || return 1
  dir=$(_dl_services_dir)/namespaces
  mkdir -p "$dir" && jq -cn --arg n "$name" --argjson l "$labels" '{name: $n} + (if ($l | length) > 0 then {labels: $l} else {} end)' \
    > "$dir/$name" || return 1
  dl_compose_cluster_file
}

dl_label_ns() {
  dl_kube_enabled && { dl_die "in Kubernetes mode: dpu-lab kubectl label namespace ..."; return 1; }
  local name=${1:-} f labels
  _dl_ns_name_ok "$name" || return 1
  shift
  [ $# -gt 0 ] || { dl_die "label ns $name: give KEY=VALUE or KEY- edits"; return 1; }
  f=$(_dl_services_dir)/namespaces/$name
  labels=$(_DL_LABELS=$(jq -c '.labels // {}' "$f" 2>/dev/null || echo "{}") _dl_label_edits "label ns $name" "$@") || return 1
  mkdir -p "${f%/*}" && jq -cn --arg n "$name" --argjson l "$labels" '{name: $n} + (if ($l | length) > 0 then {labels: $l} else {} end)' \
    > "$f" || return 1
  dl_compose_cluster_file
}

_dl_pod_meta() { echo "$(_dl_services_dir)/pod-meta/n$1-$2"; }

# [NAME:]N[/PROTO] -> "NAME PROTO N" (NAME "-" when none), as pod-ports holds them.
_dl_container_port() {
  local spec=$1 name="-" num proto=TCP
  [[ "$spec" == *:* ]] && { name=${spec%%:*}; spec=${spec#*:}; }
  num=${spec%%/*}
  [[ "$spec" == */* ]] && { proto=${spec#*/}; proto=${proto^^}; }
  [ "$name" = - ] || _dl_port_name_ok "$name" 2>/dev/null ||
    { dl_die "--port '$1': $(_dl_port_name_ok "$name" 2>&1)"; return 1; }
  [[ "$proto" =~ ^(TCP|UDP|SCTP)$ ]] || { dl_die "--port '$1': the protocol must be tcp, udp or sctp"; return 1; }
  [[ "$num" =~ ^[0-9]+$ ]] && [ "$num" -ge 1 ] && [ "$num" -le 65535 ] ||
    { dl_die "--port '$1' must be [NAME:]PORT[/PROTO] with PORT 1..65535, e.g. http:80/tcp"; return 1; }
  echo "$name $proto $num"
}

dl_pod_add_labelled() {
  local n=$1 name=$2 ns=default labels="" ports="" p item pod meta ip out
  shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --ns) ns=${2:-}; shift 2 ;;
      --labels) labels=${2:-}; shift 2 ;;
      --port) p=$(_dl_container_port "${2:-}") || return 1; ports+="$p"$'\n'; shift 2 ;;
      *) dl_die "pod add: unknown argument '$1' (--ns NS, --labels K=V,..., --port [NAME:]N[/PROTO])"; return 1 ;;
    esac
  done
  if dl_kube_enabled && { [ "$ns" != default ] || [ -n "$labels$ports" ]; }; then
    dl_die "in Kubernetes mode pods come from kubectl (dpu-lab kubectl run/apply) with their namespace, labels and ports"; return 1
  fi
  _dl_ns_name_ok "$ns" || return 1
  [[ "$name" =~ ^[a-z0-9][a-z0-9-]{0,30}$ ]] && [ "$name" != host ] && [ "$name" != dpu ] ||
    { dl_die "pod name '$name' must be 1-31 characters of a-z, 0-9 and '-' (and not host or dpu)"; return 1; }
  pod=$name; [ "$ns" = default ] || pod=$ns.$name
  [ -f "$DL_DIR/pods/n$n-$pod" ] && { dl_die "pod $ns/$name already exists on node$n"; return 1; }
  local items=() edits=()
  IFS=, read -r -a items <<< "$labels"
  for item in "${items[@]}"; do
    [ -n "$item" ] || continue
    [[ "$item" == *=* ]] || { dl_die "--labels: '$item' must be KEY=VALUE"; return 1; }
    edits+=("$item")
  done
  labels=$(_DL_LABELS="{}" _dl_label_edits "pod add $ns/$name" "${edits[@]}") || return 1
  if [ -n "$ports" ]; then
    local dup
    dup=$(awk '$1 != "-" { print $1 }' <<< "$ports" | sort | uniq -d | head -1)
    [ -z "$dup" ] || { dl_die "pod add $ns/$name: port name '$dup' is given twice"; return 1; }
  fi
  # The entry first, as the API server holds the pod before the kubelet runs
  # its CNI ADD: the agent has its labels when the port arrives.
  meta=$(_dl_pod_meta "$n" "$pod")
  mkdir -p "${meta%/*}" "$(_dl_pod_ports_dir)" || return 1
  jq -cn --arg ns "$ns" --arg name "$name" --arg node "$(dl_node_name "$n")" --argjson l "$labels" \
    '{namespace: $ns, name: $name, nodeName: $node, labels: $l}' > "$meta" || return 1
  printf '%s' "$ports" > "$(_dl_pod_ports_dir)/n$n-$pod"
  dl_compose_cluster_file || { rm -f "$meta"; return 1; }
  if ! ip=$(DL_K8S_NAMESPACE=$ns DL_K8S_NAME=$name dl_pod_add "$n" "$pod"); then
    rm -f "$meta" "$(_dl_pod_ports_dir)/n$n-$pod"
    dl_compose_cluster_file
    return 1
  fi
  out=$(jq -c --arg ip "$ip" '. + {ips: [$ip]}' "$meta") && echo "$out" > "$meta"
  dl_compose_cluster_file
  echo "$ip"
}

dl_label_pod() {
  local n=$1 pod=$2 meta labels out
  shift 2
  meta=$(_dl_pod_meta "$n" "$pod")
  [ -f "$DL_DIR/pods/n$n-$pod" ] || { dl_die "no pod '$pod' on node$n"; return 1; }
  [ -f "$meta" ] || { dl_die "pod $pod on node$n has no cluster file entry (it was made without dpu-lab pod add); recreate it"; return 1; }
  [ $# -gt 0 ] || { dl_die "label pod: give KEY=VALUE or KEY- edits"; return 1; }
  labels=$(_DL_LABELS=$(jq -c '.labels' "$meta") _dl_label_edits "label pod node$n/$pod" "$@") || return 1
  out=$(jq -c --argjson l "$labels" '.labels = $l' "$meta") && echo "$out" > "$meta" || return 1
  dl_compose_cluster_file
}

dl_pod_meta_del() {
  local meta; meta=$(_dl_pod_meta "$1" "$2")
  [ -f "$meta" ] || return 0
  rm -f "$meta"
  dl_compose_cluster_file
}

# The lab pods of namespace NS, as NODE/POD.
_dl_pods_of_ns() {
  local f
  for f in "$(_dl_services_dir)"/pod-meta/n*; do
    [ -e "$f" ] || continue
    [ "$(jq -r .namespace "$f")" = "$1" ] || continue
    f=${f##*/n}; echo "node${f%%-*}/${f#*-}"
  done
}

_dl_compose_policy_objects() {
  local dir=$1 f ports
  if compgen -G "$dir/namespaces/*" >/dev/null; then
    echo "namespaces:"
    for f in "$dir"/namespaces/*; do echo "  - $(cat "$f")"; done
  fi
  if compgen -G "$dir/pod-meta/n*" >/dev/null; then
    echo "pods:"
    for f in "$dir"/pod-meta/n*; do
      ports=$(awk '{ printf "%s{%s\"containerPort\": %s, \"protocol\": \"%s\"}", (NR > 1 ? ", " : ""),
                     ($1 == "-" ? "" : "\"name\": \"" $1 "\", "), $3, $2 }' "$dir/pod-ports/${f##*/}" 2>/dev/null)
      jq -c --argjson p "[$ports]" '. + (if ($p | length) > 0 then {containers: [{name: "lab", ports: $p}]} else {} end)' "$f" |
        sed 's/^/  - /'
    done
  fi
  if compgen -G "$dir/netpols/*" >/dev/null; then
    echo "networkPolicies:"
    for f in "$dir"/netpols/*; do echo "  - $(cat "$f")"; done
  fi
}

# One decoded Namespace (dpu-lab apply); prints what was done.
_dl_apply_namespace() {
  local o=$1 name=$2 f entry state=created
  f=$(_dl_services_dir)/namespaces/$name
  entry=$(jq -c '{name} + ((.labels // {}) | del(."kubernetes.io/metadata.name") | if length > 0 then {labels: .} else {} end)' <<< "$o") || return 1
  [ -f "$f" ] && { state=configured; [ "$(cat "$f")" = "$entry" ] && state=unchanged; }
  mkdir -p "${f%/*}" && echo "$entry" > "$f" || return 1
  echo "namespace $name $state"
}

# One decoded NetworkPolicy (dpu-lab apply); prints what was done.
_dl_apply_netpol() {
  local o=$1 ns=$2 name=$3 f entry state=created
  f=$(_dl_services_dir)/netpols/$ns.$name
  entry=$(jq -c 'del(.kind, .where)' <<< "$o") || return 1
  [ -f "$f" ] && { state=configured; [ "$(cat "$f")" = "$entry" ] && state=unchanged; }
  mkdir -p "${f%/*}" && echo "$entry" > "$f" || return 1
  echo "networkpolicy $ns/$name $state"
}

# dpu-lab delete of a Namespace or NetworkPolicy (KIND NS NAME).
_dl_delete_policy_object() {
  local dir f pods; dir=$(_dl_services_dir)
  case $1 in
    NetworkPolicy)
      f=$dir/netpols/$2.$3
      if [ -f "$f" ]; then rm -f "$f"; echo "networkpolicy $2/$3 deleted"
      else echo "networkpolicy $2/$3 not found (nothing to delete)"; fi ;;
    Namespace)
      pods=$(_dl_pods_of_ns "$3" | tr '\n' ' ')
      [ -z "$pods" ] || { dl_die "namespace $3 still has pods ${pods% }: delete them first (dpu-lab pod del NODE POD)"; return 1; }
      [ "$3" != default ] || { dl_die "namespace default cannot be deleted"; return 1; }
      if [ -f "$dir/namespaces/$3" ]; then
        rm -f "$dir/namespaces/$3" "$dir"/netpols/"$3".*
        echo "namespace $3 deleted (with its network policies)"
      else echo "namespace $3 not found (nothing to delete)"; fi ;;
  esac
}
