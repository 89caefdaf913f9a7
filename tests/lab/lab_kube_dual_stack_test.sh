#!/usr/bin/env bash
# Lab e2e: a dual-stack lab in Kubernetes mode (`dpu-lab up --kube
# --dual-stack`): the fake API server has both service CIDRs, 10.96.0.0/12
# (the primary) and fd00:10:96::/112, as a dual-stack kube-apiserver's
# --service-cluster-ip-range. 2 nodes; backends a1 and a2 on node1, the client
# b on node2, all made with kubectl; the backends answer "NAME PEER-IP:PEER-PORT"
# on both families (who_server.py). Proves:
#   - the pods report an address of each family (status.podIPs);
#   - `kubectl apply` of a PreferDualStack Service: the API server gives it a
#     cluster IP of each family (ipFamilies [IPv4, IPv6]) and its EndpointSlice
#     controller an IPv4 and an IPv6 slice with the backends' addresses of each
#     family; the `kubernetes` Service stays single-stack IPv4;
#   - b (node2) reaches the backends through the IPv6 cluster IP over TCP:
#     every connection answered, by both backends, which see b's own IPv6
#     address; the IPv4 cluster IP beside it;
#   - `kubectl patch` to SingleStack releases the IPv6 cluster IP: the Service
#     keeps its IPv4 one, its IPv6 slice goes and the IPv6 cluster IP stops
#     answering;
#   - kubectl shows the real server's refusal of a RequireDualStack Service
#     whose IPv6 cluster IP is outside the range.
# (lab_kube covers the rest of Kubernetes mode on an IPv4 lab.)
source "$(dirname "$0")/common.bash" kds
PY=/usr/bin/python3
[ -x "$PY" ] || skip_test "Debian's python3 (/usr/bin/python3) is not installed (scripts/install-deps.sh)"
for _tool in kubectl openssl; do command -v "$_tool" >/dev/null || skip_test "$_tool is not installed"; done
export DL_KUBE=1 DL_DUAL_STACK=1 DL_VFS=4
lab_test_up 2 0
k() { dl_kubectl "$@"; }

pod() {  # NAME NODE LABEL
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: $3}}
spec:
  nodeSelector: {kubernetes.io/hostname: $2}
  containers: [{name: main, image: registry.k8s.io/pause:3.10}]
EOF
}
out=$( { pod a1 node1 web; echo ---; pod a2 node1 web; echo ---; pod b node2 client; } | k apply -f - 2>&1) &&
  pass "kubectl apply of three pods" || fail "kubectl apply of three pods: $out"
for p in a1 a2 b; do
  dl_kube_pod_wait default $p 60 >/dev/null ||
    fail "pod $p is not Running with an IP after 60 s: $(tail -n 5 "$DL_DIR/kubelet/kubelet.log")"
done
ips() { k get pod "$1" -o jsonpath='{.status.podIPs[*].ip}'; }
read -r a1_4 a1_6 <<< "$(ips a1)"; read -r a2_4 a2_6 <<< "$(ips a2)"; read -r b_4 b_6 <<< "$(ips b)"
[[ "$a1_6" == fd00:10:244:1:* && "$a2_6" == fd00:10:244:1:* && "$b_6" == fd00:10:244:2:* && "$b_4" == 10.244.2.* ]] &&
  pass "podIPs of both families: a1 $a1_4 $a1_6, a2 $a2_4 $a2_6, b $b_4 $b_6" ||
  fail "podIPs: a1 '$a1_4 $a1_6', a2 '$a2_4 $a2_6', b '$b_4 $b_6'"

for p in a1 a2; do
  dl_spawn "$DL_DIR/server-$p.pid" "$(dl_pod_ns 1 "default.$p")" "$DL_DIR/server-$p.log" \
    "$PY" "$LAB_TESTS/who_server.py" "$p" 8080 8080 "0.0.0.0,::" || fail "could not start a server in pod $p"
done

out=$(k apply -f - 2>&1 <<EOF
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ipFamilyPolicy: PreferDualStack
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
EOF
) && pass "kubectl apply of a PreferDualStack Service: $out" || fail "kubectl apply of Service web: $out"
svc=$(k get service web -o json)
vip=$(jq -r '.spec.clusterIPs[0]' <<< "$svc") vip6=$(jq -r '.spec.clusterIPs[1]' <<< "$svc")
[[ "$vip" == 10.* && "$vip6" == fd00:10:96::* && "$(jq -c .spec.ipFamilies <<< "$svc")" == '["IPv4","IPv6"]' &&
   "$(jq -r .spec.clusterIP <<< "$svc")" == "$vip" ]] &&
  pass "the API server gave web a cluster IP of each family: $vip, $vip6 (ipFamilies IPv4, IPv6)" ||
  fail "Service web's spec: $(jq -c .spec <<< "$svc")"
[ "$(k get service kubernetes -o jsonpath='{.spec.clusterIPs} {.spec.ipFamilyPolicy}')" = '["10.96.0.1"] SingleStack' ] &&
  pass "the kubernetes Service stays single-stack IPv4" ||
  fail "the kubernetes Service: $(k get service kubernetes -o jsonpath='{.spec}')"
slices() {  # "TYPE:ADDR,ADDR TYPE:..." sorted, of Service web's EndpointSlices
  k get endpointslices -l kubernetes.io/service-name=web -o json |
    jq -r '[.items[] | .addressType + ":" + ([.endpoints[]?.addresses[]] | sort | join(","))] | sort | join(" ")'
}
want_slices="IPv4:$(printf '%s\n' "$a1_4" "$a2_4" | sort | paste -sd,) IPv6:$(printf '%s\n' "$a1_6" "$a2_6" | sort | paste -sd,)"
slices_are() { [ "$(slices)" = "$1" ]; }
check "an EndpointSlice per family: $want_slices" dl_wait 20 slices_are "$want_slices"

# "NAME PEER:PORT" -> NAME / PEER (an IPv6 peer has no brackets: the port follows the last colon).
who() { echo "${1%% *}"; }
peer() { local p=${1#* }; echo "${p%:*}"; }
http() { dl_exec node2/default.b curl -s --max-time 2 "http://$1/"; }
answers() { local out; out=$(http "$1"); [[ "$(who "$out")" =~ ^a[12]$ && "$(peer "$out")" = "$2" ]]; }
check "b (node2) reaches the Service over IPv6 at [$vip6]:80" dl_wait 20 answers "[$vip6]:80" "$b_6"
n1=0 n2=0 other=0
for _ in $(seq 1 12); do
  out=$(http "[$vip6]:80")
  case "$(who "$out") $(peer "$out")" in
    "a1 $b_6") n1=$(( n1 + 1 )) ;; "a2 $b_6") n2=$(( n2 + 1 )) ;; *) other=$(( other + 1 )); echo "  [$vip6]:80 answered '$out'" >&2 ;;
  esac
done
[ "$other" = 0 ] && [ "$n1" -gt 0 ] && [ "$n2" -gt 0 ] &&
  pass "TCP over IPv6: 12 connections b -> [$vip6]:80 all answered, by both backends (a1 $n1, a2 $n2), seeing $b_6" ||
  fail "TCP over IPv6 through [$vip6]:80: a1 $n1, a2 $n2, other $other"
check "and over IPv4 at $vip:80, seeing $b_4" dl_wait 10 answers "$vip:80" "$b_4"

# SingleStack again: the IPv6 cluster IP is released, its slice and its datapath go.
out=$(k patch service web --type=merge -p '{"spec":{"ipFamilyPolicy":"SingleStack"}}' 2>&1) ||
  fail "kubectl patch service web to SingleStack: $out"
[ "$(k get service web -o jsonpath='{.spec.clusterIPs} {.spec.ipFamilies}')" = "[\"$vip\"] [\"IPv4\"]" ] &&
  pass "SingleStack again: web keeps $vip only" || fail "web after SingleStack: $(k get service web -o jsonpath='{.spec}')"
check "its IPv6 EndpointSlice went" dl_wait 20 slices_are "${want_slices%% *}"
gone6() { ! http "[$vip6]:80" >/dev/null && ! http "[$vip6]:80" >/dev/null; }  # twice: not a lost packet
check "[$vip6]:80 no longer answers" dl_wait 20 gone6
check "$vip:80 still does" answers "$vip:80" "$b_4"

# The real server's refusal, through kubectl.
out=$(k apply -f - 2>&1 <<EOF
apiVersion: v1
kind: Service
metadata: {name: outside, namespace: default}
spec:
  ipFamilyPolicy: RequireDualStack
  clusterIP: 10.96.0.200
  clusterIPs: [10.96.0.200, "fd00:10:97::1"]
  selector: {app: web}
  ports: [{port: 80}]
EOF
) && fail "kubectl apply of a Service with an IPv6 cluster IP outside fd00:10:96::/112 succeeded: $out" ||
  { grep -qF 'failed to allocate IP fd00:10:97::1: the provided IP (fd00:10:97::1) is not in the valid range.'\
' The range of valid IPs is fd00:10:96::/112' <<< "$out" &&
      pass "kubectl shows the refusal of an IPv6 cluster IP outside the range: $out" ||
      fail "kubectl's refusal does not say why: $out"; }
finish
