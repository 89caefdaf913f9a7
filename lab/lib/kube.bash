# lab/lib/kube.bash — the lab's Kubernetes mode (`dpu-lab up --kube`, DL_KUBE=1
# for tests): the lab's cluster is a Kubernetes API that an operator drives
# with the real kubectl, instead of the shared cluster file. Sourced by
# lab/lib/lab.bash.
#
# What it adds to a lab:
#   - tests/fakes' fake_kube_apiserver in the fabric netns, HTTPS on
#     $DL_KUBE_IP:$DL_KUBE_PORT (a CA and a server certificate made here), with
#     --controllers (scheduler, EndpointSlices, namespace finalization), static
#     tokens and RBAC from manifests/base/agent-rbac (so the agents run with
#     exactly the grants the manifests give them), and the lab's service
#     CIDRs (both families in a dual-stack lab, IPv4 the primary: Services
#     get the cluster IPs their ipFamilyPolicy asks for, and an EndpointSlice
#     per family);
#   - a management network: bridge "kube" in the fabric netns, and per node a
#     veth "oob0" in the DPU netns ($DL_KUBE_NET.N/24), as a BlueField's
#     out-of-band port reaches the cluster's API;
#   - the Nodes node1..N (spec.podCIDR and podCIDRs, an IPv6 one too in a dual-stack lab, the
#     kubernetes.io/hostname label, status Ready with the node IP(s), on the host PF, as InternalIP) and the Namespace dpu-cni (the
#     fake serves no ServiceAccounts: the agents' token is a static token of
#     user system:serviceaccount:dpu-cni:dpu-agent, which the binding names);
#   - every dpu-agent with `clusterSource: kubernetes` (a kubeconfig with the
#     CA and the ServiceAccount's token; its pod CIDR from its Node);
#   - a kubelet stand-in (lab/lib/kubelet.bash, one process for the lab, in
#     the machine's netns): pods
#     the scheduler puts on a lab node are plumbed with dpu-cni ADD carrying the
#     pod's identity (K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID), as a
#     kubelet's runtime does; then their status gets the IP and Ready. A pod
#     being deleted gets its CNI DEL, then is removed with grace 0.
#
# A kubectl pod NAME in namespace NS is lab pod "NS.NAME" on its node (exec
# target nodeN/NS.NAME). Services and NetworkPolicies applied with kubectl
# reach the agents and their datapaths, as the cluster file's do.
#
# Files: $DL_DIR/kube/ (ca.crt, server.crt/key, tokens.csv, admin.kubeconfig,
# agent.kubeconfig, apiserver.{pid,out,err}), $DL_DIR/kubelet/ (NS.NAME: node,
# uid; kubelet.log).
#
# Functions (public):
#   dl_kube_enabled             true when the selected lab runs in Kubernetes mode
#   dl_kube_up NODES            API server, management network, Nodes (before the daemons start)
#   dl_kubelet_start            start the kubelet stand-in (after the daemons are ready)
#   dl_kubectl ARGS...          the real kubectl against the lab's API as cluster admin
#   dl_kube_api METHOD PATH [JSON]  curl the API as admin (JSON body on stdout)
#   dl_kube_pod_wait NS NAME SECONDS  the pod's IP once the kubelet stand-in made it Running

DL_KUBE_NET=10.99.0
DL_KUBE_IP=$DL_KUBE_NET.254
DL_KUBE_PORT=6443

dl_kube_enabled() { [ -f "$DL_DIR/kube/admin.kubeconfig" ]; }

dl_kube_bin() { echo "$DPU_BUILD_DIR/tests/fakes/fake_kube_apiserver"; }

_dl_kube_certs() {
  local k=$DL_DIR/kube
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dpu-lab-$DL_NAME-ca" \
    -keyout "$k/ca.key" -out "$k/ca.crt" >/dev/null 2>&1 || return 1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$k/server.key" -out "$k/server.csr" \
    >/dev/null 2>&1 || return 1
  printf 'subjectAltName=IP:%s,DNS:kubernetes.default.svc\n' "$DL_KUBE_IP" > "$k/server.ext"
  openssl x509 -req -in "$k/server.csr" -CA "$k/ca.crt" -CAkey "$k/ca.key" -CAcreateserial -days 2 \
    -extfile "$k/server.ext" -out "$k/server.crt" >/dev/null 2>&1
}

_dl_kubeconfig() {  # USER TOKEN
  cat <<EOF
apiVersion: v1
kind: Config
clusters: [{name: $DL_NAME, cluster: {server: "https://$DL_KUBE_IP:$DL_KUBE_PORT", certificate-authority: $DL_DIR/kube/ca.crt}}]
users: [{name: $1, user: {token: $2}}]
contexts: [{name: $DL_NAME, context: {cluster: $DL_NAME, user: $1}}]
current-context: $DL_NAME
EOF
}

dl_kubectl() {
  ip netns exec "$(dl_fabric_ns)" kubectl --kubeconfig "$DL_DIR/kube/admin.kubeconfig" \
    --cache-dir "$DL_DIR/kube/cache" --request-timeout 30s "$@"
}

dl_kube_api() {
  local method=$1 path=$2 body=${3:-} ctype=${DL_KUBE_CTYPE:-application/json}
  local args=(-s --max-time 10 -X "$method" --cacert "$DL_DIR/kube/ca.crt"
              -H "Authorization: Bearer $(cat "$DL_DIR/kube/admin.token")" -H 'Accept: application/json')
  [ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
  ip netns exec "$(dl_fabric_ns)" curl "${args[@]}" "https://$DL_KUBE_IP:$DL_KUBE_PORT$path"
}

dl_kube_up() {
  local nodes=$1 k=$DL_DIR/kube fab n tool
  for tool in kubectl openssl; do
    command -v "$tool" >/dev/null || { dl_die "--kube needs $tool (scripts/install-deps.sh)"; return 1; }
  done
  [ -x "$(dl_kube_bin)" ] || { dl_die "not built: $(dl_kube_bin) (cmake --build $DPU_BUILD_DIR --target fake_kube_apiserver)"; return 1; }
  [ "$nodes" -le 50 ] || return 1
  mkdir -p "$k" "$DL_DIR/kubelet" || return 1
  _dl_kube_certs || { dl_die "openssl could not make the API server's certificates"; return 1; }
  openssl rand -hex 16 > "$k/admin.token"
  openssl rand -hex 16 > "$k/agent.token"
  # kube-apiserver's --token-auth-file: the admin, and the agents' ServiceAccount
  # (the user name and groups a ServiceAccount token authenticates as).
  {
    echo "$(cat "$k/admin.token"),kubernetes-admin,uid-admin,\"system:masters,system:authenticated\""
    echo "$(cat "$k/agent.token"),system:serviceaccount:dpu-cni:dpu-agent,uid-dpu-agent,\"system:serviceaccounts,system:serviceaccounts:dpu-cni,system:authenticated\""
  } > "$k/tokens.csv"
  _dl_kubeconfig kubernetes-admin "$(cat "$k/admin.token")" > "$k/admin.kubeconfig"
  _dl_kubeconfig dpu-agent "$(cat "$k/agent.token")" > "$k/agent.kubeconfig"
  # The management network.
  fab=$(dl_fabric_ns)
  ip -n "$fab" link add kube type bridge || return 1
  ip -n "$fab" addr add "$DL_KUBE_IP/24" dev kube
  ip -n "$fab" link set kube up
  for (( n = 1; n <= nodes; n++ )); do
    ip link add oob0 netns "$(dl_node_ns "$n" dpu)" type veth peer name "k$n" netns "$fab" || return 1
    ip -n "$(dl_node_ns "$n" dpu)" addr add "$DL_KUBE_NET.$n/24" dev oob0
    ip -n "$(dl_node_ns "$n" dpu)" link set oob0 up
    ip -n "$fab" link set "k$n" master kube
    ip -n "$fab" link set "k$n" up
  done
  local rbac=$DL_SOURCE_DIR/manifests/base/agent-rbac service_cidrs=$DL_SERVICE_CIDR
  # kube-apiserver's --service-cluster-ip-range: the primary family first.
  dl_dual_stack && service_cidrs+=",$DL_SERVICE_CIDR6"
  dl_spawn "$k/apiserver.pid" "$fab" "$k/apiserver.err" "$(dl_kube_bin)" --bind "$DL_KUBE_IP" --port "$DL_KUBE_PORT" \
    --cert "$k/server.crt" --key "$k/server.key" --token-auth-file "$k/tokens.csv" \
    --rbac "$rbac/clusterrole.yaml" --rbac "$rbac/clusterrolebinding.yaml" --controllers \
    --service-cidr "$service_cidrs" || return 1
  dl_wait 15 grep -q '^listening ' "$k/apiserver.err" ||
    { dl_die "fake_kube_apiserver did not start:"; tail -n 20 "$k/apiserver.err" >&2; return 1; }
  # What an installer does first: the namespace. (The fake serves no
  # ServiceAccounts: tokens.csv stands for the agents' ServiceAccount token.)
  local out
  out=$(dl_kubectl create namespace dpu-cni 2>&1) ||
    { dl_die "kubectl could not create the dpu-cni namespace: $out"; return 1; }
  for (( n = 1; n <= nodes; n++ )); do dl_kube_register_node "$n" || return 1; done
}

# A Node as its kubelet registers it: labels, the pod CIDR the controller
# manager would assign, then (status subresource) its address and Ready.
dl_kube_register_node() {
  local n=$1 name out
  name=$(dl_node_name "$n")
  out=$(dl_kubectl apply -f - 2>&1 <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name, kubernetes.io/os: linux, dpu-cni.io/lab: "$DL_NAME"}
spec:
  podCIDR: $(dl_pod_cidr "$n")
  podCIDRs: [$(dl_pod_cidrs "$n")]
EOF
) || { dl_die "kubectl could not register Node $name: $out"; return 1; }
  local ip6=""
  dl_dual_stack && ip6=$(dl_node_ip6 "$n")
  out=$(dl_kubectl patch node "$name" --subresource=status --type=merge -p "$(jq -nc --arg ip "$(dl_node_ip "$n")" \
    --arg ip6 "$ip6" --arg name "$name" '{status: {addresses: ([{type: "InternalIP", address: $ip}]
      + (if $ip6 == "" then [] else [{type: "InternalIP", address: $ip6}] end) + [{type: "Hostname", address: $name}]),
      conditions: [{type: "Ready", status: "True", reason: "KubeletReady", message: "dpu-lab node"}]}}')" 2>&1) ||
    { dl_die "kubectl could not set the status of Node $name: $out"; return 1; }
}

# In the machine's netns, not the fabric's: the pods' netns it adds must be
# visible to everyone (ip netns exec gives its command a mount namespace of its
# own, where `ip netns add` would mount them); it reaches the API through
# dl_kube_api. Detached like dl_spawn's daemons; its command line names $DL_DIR.
dl_kubelet_start() {
  local pidfile=$DL_DIR/kubelet/kubelet.pid
  rm -f "$pidfile"
  dl_record proc "$pidfile"
  setsid -f bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" bash "$DL_LIB_DIR/kubelet.bash" "$DL_DIR/lab.env" \
    >>"$DL_DIR/kubelet/kubelet.log" 2>&1 </dev/null
  dl_wait 15 test -f "$DL_DIR/kubelet/ready" ||
    { dl_die "the kubelet stand-in did not start:"; tail -n 20 "$DL_DIR/kubelet/kubelet.log" >&2; return 1; }
}

dl_kube_pod_wait() {
  local ns=$1 name=$2 secs=$3
  dl_wait "$secs" _dl_kube_pod_running "$ns" "$name" || return 1
  dl_kube_api GET "/api/v1/namespaces/$ns/pods/$name" | jq -r .status.podIP
}
# (curl, not kubectl: it is polled.)
_dl_kube_pod_running() {
  dl_kube_api GET "/api/v1/namespaces/$1/pods/$2" | jq -e '.status.phase == "Running" and .status.podIP != null' >/dev/null
}
