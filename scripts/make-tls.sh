#!/usr/bin/env bash
# The certificates of the host <-> DPU link, made with the openssl command
# line: one CA, the agents' server certificate and one client certificate per
# host node.
#
#   scripts/make-tls.sh DIR --server-ip IP[,IP...] [--server-dns NAME[,NAME...]] [--days N] NODE...
#
# Writes into DIR (created if missing; a CA already there is reused, so more
# nodes can be added later):
#   ca.pem ca.key            the CA (keep ca.key off the nodes)
#   server.pem server.key    dpu-agent's api.tls cert/key; its subjectAltName
#                            lists every --server-ip and --server-dns
#   NODE.pem NODE.key        host-shim's dpu.certFile/keyFile for the host of
#                            Kubernetes node NODE: CN=NODE and DNS:NODE, the
#                            identity the agent of that node accepts
# Keys are ECDSA P-256. The agent takes api.tls.clientCA = ca.pem, host-shim
# dpu.caFile = ca.pem.
set -euo pipefail

usage() {
  echo "usage: $0 DIR --server-ip IP[,IP...] [--server-dns NAME[,NAME...]] [--days N] NODE..." >&2
  exit 2
}
[ $# -ge 1 ] || usage
dir=$1; shift
ips="" names="" days=365 nodes=()
while [ $# -gt 0 ]; do
  case $1 in
    --server-ip) [ $# -ge 2 ] || usage; ips=$2; shift 2 ;;
    --server-dns) [ $# -ge 2 ] || usage; names=$2; shift 2 ;;
    --days) [ $# -ge 2 ] || usage; days=$2; shift 2 ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) nodes+=("$1"); shift ;;
  esac
done
[ -n "$ips$names" ] || { echo "$0: give the agent's address with --server-ip (or --server-dns)" >&2; exit 2; }
[[ "$days" =~ ^[1-9][0-9]*$ ]] || { echo "$0: --days must be a positive number, not '$days'" >&2; exit 2; }
for node in "${nodes[@]}"; do
  [[ "$node" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] ||
    { echo "$0: '$node' is not a Kubernetes node name (lowercase letters, digits, '-' and '.')" >&2; exit 2; }
done

mkdir -p "$dir"
cd "$dir"
log=$(mktemp)
trap 'rm -f "$log" ./*.csr ./*.ext' EXIT
run() { "$@" >>"$log" 2>&1 || { echo "$0: $* failed:" >&2; cat "$log" >&2; exit 1; }; }
newkey() { run openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -subj "/CN=$2" "${@:3}"; }
sign() {  # sign NAME EXTFILE
  run openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" -extfile "$2" -out "$1.pem"
}

if [ ! -s ca.pem ] || [ ! -s ca.key ]; then
  newkey ca dpu-cni-ca -x509 -days "$days" -out ca.pem
fi
san=()
IFS=, read -ra list <<< "$ips"
for ip in "${list[@]}"; do [ -n "$ip" ] && san+=("IP:$ip"); done
IFS=, read -ra list <<< "$names"
for name in "${list[@]}"; do [ -n "$name" ] && san+=("DNS:$name"); done
newkey server dpu-agent -out server.csr
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$(IFS=,; echo "${san[*]}")" > server.ext
sign server server.ext
for node in "${nodes[@]}"; do
  newkey "$node" "$node" -out "$node.csr"
  printf 'subjectAltName=DNS:%s\nextendedKeyUsage=clientAuth\n' "$node" > "$node.ext"
  sign "$node" "$node.ext"
done
chmod 600 ./*.key
