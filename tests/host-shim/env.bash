# tests/host-shim/env.bash — a throwaway "host" for integration tests: its own
# network namespace with a fake SR-IOV PF (VFs are veths, described by a fake
# sysfs tree), the fake DPU API and a real host-shim, wired by a generated config.
#
# HOW TO USE (system tests of host-shim and dpu-cni; root only):
#
#   source "$DPU_SOURCE_DIR/tests/host-shim/env.bash"
#   export DPU_BUILD_DIR=/work/build-x          # build targets: host-shim fake_dpu_api hostshim-client
#   dir=$(mktemp -d /tmp/mytest.XXXXXX)
#   trap 'hostshim_env_down; rm -rf "$dir"' EXIT  # tears down even when the test fails
#   hostshim_env_up "$dir" || exit 1            # returns when host-shim answers STATUS ok
#   pod=$(hostshim_pod_netns_add pod1)          # -> /run/netns/<id>-pod1 (deleted by env_down)
#   hostshim_exec env CNI_COMMAND=ADD CNI_CONTAINERID=c1 CNI_NETNS="$pod" CNI_IFNAME=eth0 \
#       CNI_PATH=/x "$DPU_BUILD_DIR/cni/dpu-cni" < conf.json
#   ip -n "$(basename "$pod")" addr show eth0
#   hostshim_assert_clean                       # no records, no DPU pod attachments, all VFs home
#
# Where things run: the VFs live in the HOST netns ($HOST_NETNS, a dedicated
# netns, not the machine's own, so tests never touch the machine's links and
# can run in parallel), and host-shim runs there, in the same netns as the VFs
# (the host netns) — it must: it finds the VFs by name there and moves them
# from there. The dpu-cni binary (built at <build>/cni/dpu-cni) only talks to
# host-shim's unix socket, whose path it reads from the network config field
# "socket" (default /run/dpu-cni/host-shim.sock — give it "$HOSTSHIM_SOCKET").
# Run dpu-cni, and any runtime that calls it (libcni driver, podman with the CNI
# backend), in the host netns too, as on a real node: `hostshim_exec <cmd>`
# does that (it is `ip netns exec $HOST_NETNS`). (A unix socket path works from
# any netns, so a runtime left in the machine's netns also works: host-shim
# moves the VF between any two namespaces.) Pod netns are created by the test:
# `ip netns add`, or hostshim_pod_netns_add (deleted by hostshim_env_down).
# A veth "VF" is destroyed with the pod netns it is in (a real VF would return
# to the host): after deleting a pod netns holding one, call hostshim_repair_vfs
# before hostshim_assert_clean.
#
# Exported by hostshim_env_up:
#   HOSTSHIM_SOCKET   host-shim's CNI socket (unix, reachable from any netns)
#   HOSTSHIM_CONFIG   the generated host-shim config (JSON)
#   HOSTSHIM_LOG      host-shim's log file;   FAKE_DPU_LOG  the fake DPU's stderr
#   HOSTSHIM_STATE_DIR  records (vfs/*.json) and checkpoint.pb, on tmpfs (/dev/shm/<id>-state)
#   HOSTSHIM_PID, FAKE_DPU_PID
#   FAKE_DPU_URL      http://127.0.0.1:9443 — reachable only inside $HOST_NETNS
#   SYSFS_ROOT        the fake sysfs tree;  HOSTSHIM_PF=p0  HOSTSHIM_NUM_VFS=8
#   HOSTSHIM_VF_PREFIX=p0  VF i is the netdev p0v<i> (representor pf0vf<i>), PCI $(fake_sysfs_vf_pci i):
#                     VF 0 = 0000:3b:00.2 ... VF 5 = 0000:3b:00.7, VF 6 = 0000:3b:01.0, VF 7 = 0000:3b:01.1
#   The management port is the last VF, renamed dpu-mgmt, address .2 of the pod CIDR,
#   routes to 10.244.0.0/16 and 10.96.0.0/12 via .1; the pod pool is VFs 0..N-2.
#   HOST_NETNS        the host netns name (/run/netns/$HOST_NETNS)
#   HOSTSHIM_ENV_ID   unique id of this env (prefix of its netns names)
#   HOSTSHIM_CLIENT   the hostshim-client binary (raw CniRequests, see hostshim_client.cpp)
# Knobs (set before hostshim_env_up): HOSTSHIM_NUM_VFS (8; the last VF is
# reserved for the management port), HOSTSHIM_POD_CIDR (10.244.1.0/24),
# HOSTSHIM_DPU_TIMEOUT_MS (1500), HOSTSHIM_HEALTH_INTERVAL_MS (200),
# HOSTSHIM_RECONCILE_INTERVAL_MS (600000: no periodic sweep during a test; the
# sweeps at each reconnect, after a failed detach and in GC still run),
# HOSTSHIM_TLS (unset: http; "tls": https, host-shim checks the fake DPU's
# certificate against a CA made for the env; "mtls": also a client certificate
# that the fake DPU requires). Certificates go to <dir>/tls (openssl CLI).
# HOSTSHIM_DPU ("fake", the default: tests/fakes/fake_dpu_api; "agent": the real
# dpu-agent with a generated cluster file (one node, node1, podCIDR
# $HOSTSHIM_POD_CIDR), representors pf0vf<i> for the fake sysfs VFs, pod MTU 1400
# (underlayMTU 1458), API on the same URL inside $HOST_NETNS, state on tmpfs,
# programming tests/fakes fake-dataplane). In agent mode FAKE_DPU_PID is the
# agent's pid, FAKE_DPU_LOG its log, DPU_AGENT_STATE_DIR its state and
# FAKE_DATAPLANE_PID the fake dataplane's; hostshim_dpu_control maps the fake's
# test controls onto the real processes (see there; /test/fail has no mapping).
#
# Helpers:
#   hostshim_exec CMD...            run CMD in the host netns
#   hostshim_pod_netns_add NAME     create netns <id>-NAME, print its path
#   hostshim_list_vfs               "<vf index> <netdev> present|missing|management ..." per VF
#   hostshim_list_records           allocation records, one JSON per line
#   hostshim_list_dpu_attachments   "<kind> <sandbox>/<ifname> vf<i> <ip> <network>" per DPU attachment
#   hostshim_list_dpu_attachments_while_down   the same lines, read while the DPU side is down on purpose
#                                   (fake: GET /test/attachments; agent: the stopped agent's checkpoint)
#   hostshim_dpu_attach_stray SANDBOX VF   an attachment made on the DPU behind host-shim's back
#   hostshim_dpu_control PATH       POST to the fake DPU: /test/reboot, /test/down?seconds=5&mode=hang, ...
#                                   (agent mode: reboot = kill -9 + wiped state + restart, new boot id;
#                                   down&mode=hang = SIGSTOP; down&mode=refuse = kill; up = SIGCONT or
#                                   restart on the same state; unhealthy?on=1 = fake dataplane stopped,
#                                   so Health.ready is false; fail = unmappable, returns 3)
#   hostshim_dpu_kill / hostshim_dpu_start   stop the DPU side for good / start it again (either mode)
#   hostshim_dpu_mode_is MODE       true when HOSTSHIM_DPU (default fake) is MODE
#   hostshim_skip_unless_fake WHY   in agent mode: skip the test (skip_test; for tests needing /test/fail)
#   hostshim_client ARGS...         hostshim-client --socket $HOSTSHIM_SOCKET ARGS...
#   hostshim_wait_returns [SECONDS] wait until the VFs of answered DELs are home (records not "returning")
#   hostshim_assert_clean           (waits for returns, then) fail (and say what is left) unless no pod record, no pod
#                                   attachment on the fake DPU, and every pool VF home and down
#   hostshim_repair_vfs             recreate veth VFs destroyed with a deleted pod netns
#   hostshim_restart [-9]           stop host-shim (SIGTERM, or SIGKILL with -9) and start it again
#   hostshim_start / hostshim_stop [-9]
#   hostshim_env_down               stop everything, delete the netns (also pod ones), keep $dir

# shellcheck source=../fakes/fake-sysfs.bash
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../fakes/fake-sysfs.bash"
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../support/shell.bash"

hostshim_exec() { ip netns exec "$HOST_NETNS" "$@"; }

hostshim_client() { "$HOSTSHIM_CLIENT" --socket "$HOSTSHIM_SOCKET" "$@"; }

_hostshim_wait() {  # _hostshim_wait SECONDS CMD... : poll CMD until it succeeds
  local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ $(( $(date +%s%N) / 1000000 )) -ge $deadline ] && return 1
    sleep 0.05
  done
}

_hostshim_curl() {
  local tls=()
  if [ -n "${HOSTSHIM_TLS:-}" ]; then tls=(--cacert "$HOSTSHIM_ENV_DIR/tls/ca.pem"); fi
  if [ "${HOSTSHIM_TLS:-}" = mtls ]; then
    tls+=(--cert "$HOSTSHIM_ENV_DIR/tls/node1.pem" --key "$HOSTSHIM_ENV_DIR/tls/node1.key")
  fi
  hostshim_exec curl -sf "${tls[@]}" "$@"
}

_hostshim_dpu_get() { _hostshim_curl --max-time 2 -H 'Accept: application/json' "$FAKE_DPU_URL$1"; }

hostshim_dpu_mode_is() { [ "${HOSTSHIM_DPU:-fake}" = "$1" ]; }

hostshim_skip_unless_fake() {
  hostshim_dpu_mode_is fake && return 0
  skip_test "under HOSTSHIM_DPU=${HOSTSHIM_DPU}: $*"
}

hostshim_dpu_control() {
  hostshim_dpu_mode_is agent || { _hostshim_curl --max-time 5 -X POST "$FAKE_DPU_URL$1" >/dev/null; return; }
  case $1 in
    /test/reboot*)
      # A DPU reboot: the agent dies with its state (new boot id); the dataplane restarts too.
      _hostshim_agent_stop -9
      rm -rf "$DPU_AGENT_STATE_DIR"
      [ -n "${FAKE_DATAPLANE_PID:-}" ] && kill -USR1 "$FAKE_DATAPLANE_PID" 2>/dev/null
      _hostshim_agent_start ;;
    /test/down*mode=refuse*)
      _hostshim_agent_stop -9 ;;           # connection refused at once
    /test/down*)
      kill -STOP "$FAKE_DPU_PID" ;;        # accepts connections, never answers
    /test/up*)
      if [ -n "${FAKE_DPU_PID:-}" ] && kill -0 "$FAKE_DPU_PID" 2>/dev/null; then kill -CONT "$FAKE_DPU_PID"
      else _hostshim_agent_start; fi ;;
    /test/unhealthy*on=0*)
      _hostshim_dataplane_start || return 1
      _hostshim_wait 10 _hostshim_agent_ready ;;
    /test/unhealthy*)
      _hostshim_dataplane_stop ;;          # the agent reports "not connected to the dataplane"
    /test/dataplane-state*)
      # The fake dataplane reports the port PORT_UNAVAILABLE (or no longer):
      # the agent's dataplane_state becomes "port unavailable: STATE".
      local id state
      id=$(sed -n 's/.*[?&]id=\([^&]*\).*/\1/p' <<<"$1"); state=$(sed -n 's/.*[?&]state=\([^&]*\).*/\1/p' <<<"$1")
      [ -n "$id" ] || { echo "hostshim_dpu_control: $1 needs id= in agent mode" >&2; return 3; }
      local f=$HOSTSHIM_ENV_DIR/port-unavailable
      { grep -v "^$id " "$f" 2>/dev/null; [ "$state" = programmed ] || echo "$id $state"; } > "$f.tmp"
      mv "$f.tmp" "$f" ;;
    *)
      echo "hostshim_dpu_control: $1 has no mapping onto the real dpu-agent" >&2; return 3 ;;
  esac
}

hostshim_dpu_kill() {
  if hostshim_dpu_mode_is agent; then _hostshim_agent_stop -9; return; fi
  [ -n "${FAKE_DPU_PID:-}" ] || return 0
  _hostshim_end "$FAKE_DPU_PID"; FAKE_DPU_PID=
}

hostshim_dpu_start() {
  if hostshim_dpu_mode_is agent; then _hostshim_agent_start; return; fi
  ip netns exec "$HOST_NETNS" "$DPU_BUILD_DIR/tests/fakes/fake_dpu_api" --listen "$FAKE_DPU_URL" \
    --pod-cidr "$HOSTSHIM_POD_CIDR_IN_USE" --vfs "$HOSTSHIM_NUM_VFS" "${_HOSTSHIM_FAKE_TLS[@]}" >>"$FAKE_DPU_LOG" 2>&1 &
  export FAKE_DPU_PID=$!
  if ! _hostshim_wait 10 _hostshim_dpu_get /v1/health; then
    echo "hostshim_env: the fake DPU did not answer; log:" >&2; tail -n 20 "$FAKE_DPU_LOG" >&2; return 1
  fi
}

# --- agent mode: the real dpu-agent and tests/fakes fake-dataplane ---
_hostshim_agent_ready() { _hostshim_dpu_get /v1/health | jq -e .ready >/dev/null; }

_hostshim_dataplane_start() {
  rm -f "$HOSTSHIM_ENV_DIR/dataplane.sock"
  # The port limit is lab_ports' subject (the real dataplane); here the churn
  # scenarios' detaches may trail their ADDs, so the fake has room for them.
  "$DPU_BUILD_DIR/tests/fakes/fake-dataplane" --socket "$HOSTSHIM_ENV_DIR/dataplane.sock" --port-capacity 1024 \
    --port-unavailable "$HOSTSHIM_ENV_DIR/port-unavailable" >>"$HOSTSHIM_ENV_DIR/fake-dataplane.log" 2>&1 &
  export FAKE_DATAPLANE_PID=$!
  _hostshim_wait 10 test -S "$HOSTSHIM_ENV_DIR/dataplane.sock" ||
    { echo "hostshim_env: fake-dataplane did not start; log:" >&2; tail -n 20 "$HOSTSHIM_ENV_DIR/fake-dataplane.log" >&2; return 1; }
}

_hostshim_dataplane_stop() {
  [ -n "${FAKE_DATAPLANE_PID:-}" ] || return 0
  _hostshim_end "$FAKE_DATAPLANE_PID"; FAKE_DATAPLANE_PID=
}

_hostshim_agent_start() {
  ip netns exec "$HOST_NETNS" "$DPU_BUILD_DIR/dpu-agent/control/dpu-agent" --config "$HOSTSHIM_ENV_DIR/dpu-agent.yaml" \
    >>"$HOSTSHIM_ENV_DIR/dpu-agent.stderr" 2>&1 &
  export FAKE_DPU_PID=$!
  # Up when the API answers; ready once it has synced the cluster file and programmed the dataplane.
  if ! _hostshim_wait 10 _hostshim_agent_ready; then
    echo "hostshim_env: dpu-agent is not ready: $(_hostshim_dpu_get /v1/health); log:" >&2
    tail -n 20 "$FAKE_DPU_LOG" "$HOSTSHIM_ENV_DIR/dpu-agent.stderr" >&2 2>/dev/null; return 1
  fi
}

_hostshim_agent_stop() {  # [-9]
  [ -n "${FAKE_DPU_PID:-}" ] || return 0
  kill -CONT "$FAKE_DPU_PID" 2>/dev/null
  _hostshim_end "$FAKE_DPU_PID" "${1:-}"
  FAKE_DPU_PID=
}

# The agent's config and the one-node cluster file, from the env's settings.
_hostshim_agent_config() {
  local dir=$1 pod_cidr=$2 tls_yaml=""
  cat > "$dir/cluster.yaml" <<YAML
nodes:
  - {name: node1, tunnelIP: 192.168.50.1, podCIDR: $pod_cidr}
  - {name: node2, tunnelIP: 192.168.50.2, podCIDR: 10.244.200.0/24}
YAML
  if [ -n "${HOSTSHIM_TLS:-}" ]; then
    tls_yaml="  tls: {cert: $dir/tls/server.pem, key: $dir/tls/server.key"
    [ "$HOSTSHIM_TLS" = mtls ] && tls_yaml="$tls_yaml, clientCA: $dir/tls/ca.pem"
    tls_yaml="$tls_yaml}"
  fi
  cat > "$dir/dpu-agent.yaml" <<YAML
nodeName: node1
tunnelIP: 192.168.50.1
representors:
  - {pf: 0, vfCount: $HOSTSHIM_NUM_VFS, name: "pf0vf{vf}"}
podCIDR: $pod_cidr
clusterCIDRs: [10.244.0.0/16]
serviceCIDRs: [10.96.0.0/12]
underlayMTU: 1458                # pod MTU 1400, what the host-shim tests expect
clusterSource: {type: file, path: $dir/cluster.yaml}
api:
  address: 127.0.0.1
  port: 9443
$tls_yaml
dataplaneSocket: $dir/dataplane.sock
stateDir: $DPU_AGENT_STATE_DIR
log: {level: debug, file: $FAKE_DPU_LOG}
YAML
}

# A CA, a server certificate for 127.0.0.1 and node1's client certificate, for TLS runs.
_hostshim_make_tls() {
  local d=$1
  bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/make-tls.sh" "$d" --server-ip 127.0.0.1 --days 2 node1 ||
    { echo "hostshim_env_up: scripts/make-tls.sh failed" >&2; return 1; }
}

hostshim_list_dpu_attachments() {
  _hostshim_dpu_get /v1/attachments |
    jq -r '.attachments[]? | "\(.kind) \(.sandboxId // "")/\(.ifname // "") vf\(.vfIndex // 0) \(.ips[0].address // "") \(.network // "")"'
}

# While /test/down holds, the DPU's API answers nothing; what it still holds
# is its state: the fake's (a test control that ignores "down"), or the
# killed agent's checkpoint, which it loads again when it starts.
hostshim_list_dpu_attachments_while_down() {
  local fmt='.attachments[]? | "\(.kind) \(.sandboxId // "")/\(.ifname // "") vf\(.vfIndex // 0) \(.ips[0].address // "") \(.network // "")"'
  if hostshim_dpu_mode_is fake; then
    _hostshim_curl --max-time 2 -H 'Accept: application/json' "$FAKE_DPU_URL/test/attachments" | jq -r "$fmt"
    return
  fi
  if [ -n "${FAKE_DPU_PID:-}" ] && kill -0 "$FAKE_DPU_PID" 2>/dev/null; then
    echo "hostshim_list_dpu_attachments_while_down: dpu-agent is running (hang mode?): use hostshim_list_dpu_attachments" >&2
    return 1
  fi
  local cp="$DPU_AGENT_STATE_DIR/agent-checkpoint.pb" proto
  proto="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../proto"
  [ -f "$cp" ] || { echo "hostshim_list_dpu_attachments_while_down: no $cp" >&2; return 1; }
  # protoc prints the text format: one "attachments { ... }" block per
  # attachment, its own fields at depth 1 (an ip's address at depth 2).
  protoc --decode=dpu.checkpoint.v1.AgentCheckpoint -I "$proto" dpu/checkpoint/v1/checkpoint.proto <"$cp" |
    awk '
      function field(line) { sub(/^[^:]*: /, "", line); gsub(/"/, "", line); return line }
      depth == 0 && /^attachments \{/ { depth = 1; kind = sb = ifn = ip = net = ""; vf = 0; next }
      depth == 0 { next }
      /\{$/ { depth++; block = $1; next }
      /^ *\}$/ { if (--depth == 0) print kind, sb "/" ifn, "vf" vf, ip, net; next }
      depth == 1 && $1 == "kind:" { kind = field($0) }
      depth == 1 && $1 == "sandbox_id:" { sb = field($0) }
      depth == 1 && $1 == "ifname:" { ifn = field($0) }
      depth == 1 && $1 == "vf_index:" { vf = field($0) }
      depth == 1 && $1 == "network:" { net = field($0) }
      depth == 2 && block == "ips" && $1 == "address:" && ip == "" { ip = field($0) }'
}

hostshim_dpu_attach_stray() {
  _hostshim_curl --max-time 5 -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' \
    -d "{\"kind\": \"POD\", \"sandboxId\": \"$1\", \"ifname\": \"eth0\", \"network\": \"dpu-test\", \"pfIndex\": 0, \"vfIndex\": $2}" \
    "$FAKE_DPU_URL/v1/attachments" >/dev/null
}

hostshim_list_records() {
  local f
  # A record may go between the glob and the read (a return finishing).
  for f in "$HOSTSHIM_STATE_DIR"/vfs/*.json; do [ -e "$f" ] && cat "$f" 2>/dev/null; done
  return 0
}

hostshim_list_vfs() {
  local i name
  for (( i = 0; i < HOSTSHIM_NUM_VFS; i++ )); do
    name=$(fake_sysfs_vf_name "$HOSTSHIM_VF_PREFIX" "$i")
    if ip -n "$HOST_NETNS" link show "$name" >/dev/null 2>&1; then echo "$i $name present"
    elif [ $i = $(( HOSTSHIM_NUM_VFS - 1 )) ] && ip -n "$HOST_NETNS" link show dpu-mgmt >/dev/null 2>&1; then
      echo "$i $name management (renamed dpu-mgmt)"
    else echo "$i $name missing"; fi
  done
}

hostshim_repair_vfs() {
  # The pod pool only: the last VF is the management port (renamed dpu-mgmt).
  fake_sysfs_repair "$SYSFS_ROOT" "$HOSTSHIM_PF" $(( HOSTSHIM_NUM_VFS - 1 )) "$HOSTSHIM_VF_PREFIX" "$HOST_NETNS"
}

# DEL answers once the VF is out of service; host-shim moves it home in the
# background, its record marked "returning" until then. Waits (up to SECONDS,
# default 10) until no return is in flight; returns that are stuck (the record
# names a "problem") are not waited for. 1 on timeout.
hostshim_wait_returns() {
  local deadline=$(( $(date +%s%N) / 1000000 + ${1:-10} * 1000 ))
  while hostshim_list_records | grep '"returning":true' | grep -v '"problem"' >/dev/null; do
    [ $(( $(date +%s%N) / 1000000 )) -lt $deadline ] || return 1
    sleep 0.02
  done
}

hostshim_assert_clean() {
  local bad=0 left
  hostshim_wait_returns 10 || echo "hostshim_assert_clean: returns still in flight after 10 s" >&2
  left=$(hostshim_list_records | grep -v '"owner":"management"')
  if [ -n "$left" ]; then echo "left behind: allocation records: $left" >&2; bad=1; fi
  left=$(hostshim_list_dpu_attachments | grep '^POD ')
  if [ -n "$left" ]; then echo "left behind: fake-DPU attachments: $left" >&2; bad=1; fi
  # Two ip(8) runs for all VFs: their links, and the links with a global address.
  local i name line
  local -A flags=() addressed=()
  while read -r line; do
    name=${line#*: }; name=${name%%:*}; name=${name%%@*}
    flags[$name]="${line%%>*}>"
  done < <(ip -n "$HOST_NETNS" -o link show)
  while read -r _ name _; do addressed[$name]=1; done < <(ip -n "$HOST_NETNS" -o addr show scope global)
  for (( i = 0; i < HOSTSHIM_NUM_VFS - 1; i++ )); do
    name=${HOSTSHIM_VF_PREFIX}v$i
    if [ -z "${flags[$name]:-}" ]; then
      echo "left behind: VF $i ($name) is not in the host netns" >&2; bad=1
    elif [[ ${flags[$name]} == *[\<,]UP[,\>]* ]]; then
      echo "left behind: VF $i ($name) is up" >&2; bad=1
    elif [ -n "${addressed[$name]:-}" ]; then
      echo "left behind: VF $i ($name) keeps an address" >&2; bad=1
    fi
  done
  return $bad
}

hostshim_pod_netns_add() {
  local ns="$HOSTSHIM_ENV_ID-$1"
  ip netns add "$ns" || return 1
  ip -n "$ns" link set lo up
  echo "/run/netns/$ns"
}

_hostshim_status_known() {
  local out
  out=$(hostshim_client status 2>/dev/null)
  [ -n "$out" ] && ! grep -q "not checked yet" <<<"$out"
}

hostshim_start() {
  ip netns exec "$HOST_NETNS" "$DPU_BUILD_DIR/host-shim/host-shim" --config "$HOSTSHIM_CONFIG" \
    >>"$HOSTSHIM_ENV_DIR/host-shim.stderr" 2>&1 &
  HOSTSHIM_PID=$!
  export HOSTSHIM_PID
  if ! _hostshim_wait 10 test -S "$HOSTSHIM_SOCKET"; then
    echo "hostshim_env: host-shim did not create $HOSTSHIM_SOCKET within 10 s; log:" >&2
    tail -n 20 "$HOSTSHIM_ENV_DIR/host-shim.stderr" "$HOSTSHIM_LOG" >&2 2>/dev/null
    return 1
  fi
  # Ready when STATUS answers from a finished health poll (at env_up the
  # caller also requires it to be ok; after a restart the DPU may be down on purpose).
  if ! _hostshim_wait 10 _hostshim_status_known; then
    echo "hostshim_env: host-shim does not answer STATUS ok: $(hostshim_client status 2>&1)" >&2
    return 1
  fi
}

# _hostshim_end PID [-9]: ends one of the env's daemons (SIGTERM, or SIGKILL
# with -9) and reaps it; one that has not exited 10 s after SIGTERM is killed,
# and the test's log says so, so that a daemon stuck in its shutdown never
# hangs a test's teardown.
_hostshim_end() {
  local pid=$1 i
  [ -n "$pid" ] || return 0
  if [ "${2:-}" = -9 ]; then kill -9 "$pid" 2>/dev/null; else kill "$pid" 2>/dev/null; fi
  for (( i = 0; i < 200; i++ )); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "hostshim_env: $(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid) did not exit 10 s after SIGTERM: killed" >&2
    kill -9 "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  return 0
}

hostshim_stop() {
  [ -n "${HOSTSHIM_PID:-}" ] || return 0
  _hostshim_end "$HOSTSHIM_PID" "${1:-}"
  HOSTSHIM_PID=
}

hostshim_restart() { hostshim_stop "${1:-}"; hostshim_start; }

hostshim_env_up() {
  local dir=$1
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then echo "usage: hostshim_env_up EXISTING_DIR" >&2; return 2; fi
  if [ "$(id -u)" != 0 ]; then echo "hostshim_env_up: needs root (network namespaces)" >&2; return 2; fi
  if [ -z "${DPU_BUILD_DIR:-}" ]; then echo "hostshim_env_up: set DPU_BUILD_DIR to the build directory" >&2; return 2; fi
  local bin dpu_bins
  case ${HOSTSHIM_DPU:=fake} in
    fake) dpu_bins=("$DPU_BUILD_DIR/tests/fakes/fake_dpu_api") ;;
    agent) dpu_bins=("$DPU_BUILD_DIR/dpu-agent/control/dpu-agent" "$DPU_BUILD_DIR/tests/fakes/fake-dataplane") ;;
    *) echo "hostshim_env_up: HOSTSHIM_DPU must be fake or agent, not '$HOSTSHIM_DPU'" >&2; return 2 ;;
  esac
  export HOSTSHIM_DPU
  for bin in "$DPU_BUILD_DIR/host-shim/host-shim" "${dpu_bins[@]}" \
             "$DPU_BUILD_DIR/tests/host-shim/hostshim-client"; do
    [ -x "$bin" ] || { echo "hostshim_env_up: $bin is not built" >&2; return 2; }
  done
  dir=$(cd "$dir" && pwd)
  export HOSTSHIM_ENV_DIR=$dir
  export HOSTSHIM_ENV_ID="hs$$x$RANDOM"
  export HOST_NETNS="$HOSTSHIM_ENV_ID-host"
  export HOSTSHIM_NUM_VFS=${HOSTSHIM_NUM_VFS:-8}
  export HOSTSHIM_PF=p0
  export HOSTSHIM_VF_PREFIX=p0
  export SYSFS_ROOT="$dir/sysfs"
  export HOSTSHIM_SOCKET="$dir/host-shim.sock"
  export HOSTSHIM_CONFIG="$dir/host-shim.json"
  # tmpfs, as /run is on a normal host: records live as long as the pods they
  # describe (until reboot), and a crash-safe write costs microseconds, not the
  # ~15 ms an fsync costs on this machine's disk.
  export HOSTSHIM_STATE_DIR="/dev/shm/$HOSTSHIM_ENV_ID-state"
  export HOSTSHIM_LOG="$dir/host-shim.log"
  export FAKE_DPU_LOG="$dir/fake_dpu_api.log"
  hostshim_dpu_mode_is agent && FAKE_DPU_LOG="$dir/dpu-agent.log"
  export DPU_AGENT_STATE_DIR="/dev/shm/$HOSTSHIM_ENV_ID-agent"
  export FAKE_DPU_URL="http://127.0.0.1:9443"
  local tls_json=""
  _HOSTSHIM_FAKE_TLS=()
  if [ -n "${HOSTSHIM_TLS:-}" ]; then
    _hostshim_make_tls "$dir/tls" || return 1
    FAKE_DPU_URL="https://127.0.0.1:9443"
    tls_json=", \"caFile\": \"$dir/tls/ca.pem\""
    _HOSTSHIM_FAKE_TLS=(--tls-cert "$dir/tls/server.pem" --tls-key "$dir/tls/server.key")
    if [ "$HOSTSHIM_TLS" = mtls ]; then
      tls_json="$tls_json, \"certFile\": \"$dir/tls/node1.pem\", \"keyFile\": \"$dir/tls/node1.key\""
      _HOSTSHIM_FAKE_TLS+=(--client-ca "$dir/tls/ca.pem")
    fi
  fi
  export HOSTSHIM_CLIENT="$DPU_BUILD_DIR/tests/host-shim/hostshim-client"
  local pod_cidr=${HOSTSHIM_POD_CIDR:-10.244.1.0/24}
  export HOSTSHIM_POD_CIDR_IN_USE=$pod_cidr
  local last=$(( HOSTSHIM_NUM_VFS - 1 ))

  ip netns add "$HOST_NETNS" || return 1
  ip -n "$HOST_NETNS" link set lo up
  fake_sysfs_create "$SYSFS_ROOT" "$HOSTSHIM_PF" "$HOSTSHIM_NUM_VFS" "$HOSTSHIM_VF_PREFIX" "$HOST_NETNS" || return 1

  cat > "$HOSTSHIM_CONFIG" <<JSON
{
  "socket": "$HOSTSHIM_SOCKET",
  "stateDir": "$HOSTSHIM_STATE_DIR",
  "sysfsRoot": "$SYSFS_ROOT",
  "pfs": [{"name": "$HOSTSHIM_PF", "index": 0, "vfs": "0-$last", "reservedVfs": "$last"}],
  "dpu": {"url": "$FAKE_DPU_URL", "timeoutMs": ${HOSTSHIM_DPU_TIMEOUT_MS:-1500},
          "healthIntervalMs": ${HOSTSHIM_HEALTH_INTERVAL_MS:-200},
          "reconcileIntervalMs": ${HOSTSHIM_RECONCILE_INTERVAL_MS:-600000}$tls_json},
  "managementPort": {"pf": 0, "vf": $last, "ifname": "dpu-mgmt",
                     "clusterCidrs": ["10.244.0.0/16"], "serviceCidrs": ["10.96.0.0/12"]},
  "log": {"file": "$HOSTSHIM_LOG", "level": "debug"}
}
JSON

  if hostshim_dpu_mode_is agent; then
    _hostshim_agent_config "$dir" "$pod_cidr" || return 1
    _hostshim_dataplane_start || return 1
  fi
  hostshim_dpu_start || return 1
  hostshim_start || return 1
  if ! _hostshim_wait 10 hostshim_client status; then
    echo "hostshim_env_up: STATUS is not ok: $(hostshim_client status 2>&1)" >&2; return 1
  fi
  # The management port comes up from the first health poll on.
  if ! _hostshim_wait 10 ip -n "$HOST_NETNS" -4 -o addr show dev dpu-mgmt scope global; then
    echo "hostshim_env_up: the management port dpu-mgmt got no address; log:" >&2
    tail -n 20 "$HOSTSHIM_LOG" >&2; return 1
  fi
}

hostshim_env_down() {
  [ -n "${HOST_NETNS:-}" ] || return 0
  hostshim_stop
  if hostshim_dpu_mode_is agent; then
    _hostshim_agent_stop
    _hostshim_dataplane_stop
    [ -n "${HOSTSHIM_KEEP_STATE:-}" ] || rm -rf "$DPU_AGENT_STATE_DIR"
  else
    hostshim_dpu_kill
  fi
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep "^$HOSTSHIM_ENV_ID-"); do
    [ "$ns" = "$HOST_NETNS" ] || ip netns del "$ns" 2>/dev/null
  done
  fake_sysfs_destroy "$SYSFS_ROOT" "$HOSTSHIM_PF" "$HOSTSHIM_NUM_VFS" "$HOSTSHIM_VF_PREFIX" "$HOST_NETNS"
  ip netns del "$HOST_NETNS" 2>/dev/null
  rm -f "$HOSTSHIM_SOCKET"
  # Keep the state for a failed test's post-mortem only when asked.
  [ -n "${HOSTSHIM_KEEP_STATE:-}" ] || rm -rf "$HOSTSHIM_STATE_DIR"
  HOST_NETNS=
}
