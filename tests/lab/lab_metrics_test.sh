#!/usr/bin/env bash
# Lab e2e: monitoring. 2 nodes, one pod each, traffic across the Geneve wire.
# Proves: node1's dpu-dataplane serves Prometheus text on its own endpoint
# that Prometheus's own Python parser reads, with counters typed as counters;
# the series an operator needs are there and move with the traffic — per-port
# packets and bytes of the pod's representor and of the uplink, drops by every
# reason dpuctl knows, flows in software (and none in hardware: offload none),
# slow-path setups, the conntrack table and the services — and agree with
# dpuctl; every metric the shipped Grafana dashboard queries exists; the
# dataplane's series stay up while its agent is stopped, and the agent's own
# /metrics serves again once it is back.
source "$(dirname "$0")/common.bash" metr
PY=${DPU_SCAPY_PYTHON:-/usr/bin/python3}
"$PY" -c 'import prometheus_client' 2>/dev/null ||
  { echo "SKIP: python3-prometheus-client is not installed (scripts/install-deps.sh)"; exit 77; }
DASHBOARD=$DL_SOURCE_DIR/manifests/components/monitoring/dashboard.json
lab_test_up 2 1

a=node1/pod1 b=node2/pod1
dl_reachable $a "$(dl_pod_ip 2 pod1)" 10 || fail "node1/pod1 cannot reach node2/pod1"
dl_exec $a ping -c 20 -i 0.05 -W 1 "$(dl_pod_ip 2 pod1)" >/dev/null || fail "ping node1/pod1 -> node2/pod1 lost packets"

work=$DL_DIR/metrics-test; mkdir -p "$work"
# dpuctl first: a counter the metrics show after it can only be as high or higher.
dl_dpuctl 1 --json stats --all > "$work/stats.json" || fail "dpuctl stats"
dl_metrics 1 dataplane > "$work/dp.txt" || fail "node1's dataplane endpoint does not answer on $DL_LINK_DPU_IP:$DL_METRICS_PORT"
dl_metrics 1 agent > "$work/agent.txt" || fail "node1's agent /metrics does not answer"
dl_dpuctl 1 --json ports > "$work/ports.json" || fail "dpuctl ports"
rep=$(jq -r '.ports[] | select(.role == "representor" and (.logicalPort // .logical_port // "") != "") | .name' \
  "$work/ports.json" | head -1)
[ -n "$rep" ] || fail "dpuctl ports shows no bound representor"

# Prometheus's parser reads the text; the checks run on what it parsed.
out=$("$PY" - "$work/dp.txt" "$work/agent.txt" "$work/stats.json" "$DASHBOARD" "$rep" <<'PYEOF'
import json, re, sys
from prometheus_client.parser import text_string_to_metric_families
dp_text, agent_text = open(sys.argv[1]).read(), open(sys.argv[2]).read()
stats, dashboard, rep = json.load(open(sys.argv[3])), json.load(open(sys.argv[4])), sys.argv[5]
problems = []
def parse(text, where):
    series, families = {}, {}
    for fam in text_string_to_metric_families(text):
        families[fam.name] = fam.type
        for s in fam.samples:
            series.setdefault(s.name, []).append((s.labels, s.value))
    return series, families
try:
    dp, dp_types = parse(dp_text, "dataplane")
    agent, _ = parse(agent_text, "agent")
except Exception as e:
    print("FAIL: Prometheus's parser refuses the text: %s" % e); sys.exit(0)
def value(name, **labels):
    for l, v in dp.get(name, []):
        if all(l.get(k) == x for k, x in labels.items()): return v
    return None
def need(what, ok):
    print(("ok: " if ok else "FAIL: ") + what)
for name, typ in dp_types.items():
    if not name.startswith("dpu_dataplane_"): problems.append("family %s lacks the dpu_dataplane_ prefix" % name)
counters = [n for n, t in dp_types.items() if t == "counter"]
need("%d counter families, each exposed as NAME_total" % len(counters),
     counters and all(n + "_total" in dp for n in counters))
up_rx = value("dpu_dataplane_port_receive_packets_total", port="uplink")
rep_rx = value("dpu_dataplane_port_receive_packets_total", port=rep)
rep_tx = value("dpu_dataplane_port_transmit_bytes_total", port=rep)
need("uplink received %s packets (Geneve from node2)" % up_rx, (up_rx or 0) >= 20)
need("representor %s received %s packets and sent %s bytes" % (rep, rep_rx, rep_tx), (rep_rx or 0) >= 20 and (rep_tx or 0) > 0)
reasons = sorted(c["name"] for c in stats["counters"] if c.get("kind") == "COUNTER_DROP")
exported = sorted(l["reason"] for l, _ in dp.get("dpu_dataplane_dropped_packets_total", []))
need("drops by reason: all %d reasons of dpuctl stats exported" % len(reasons), reasons and reasons == exported)
byname = {c["name"]: int(c.get("value", 0)) for c in stats["counters"]}
setups = value("dpu_dataplane_flow_setups_total")
need("slow-path setups %s, at least dpuctl's FlowInstalled %d read before" % (setups, byname.get("FlowInstalled", 0)),
     setups is not None and setups >= byname.get("FlowInstalled", 0) > 0)
sw, hw = value("dpu_dataplane_flows", where="sw"), value("dpu_dataplane_flows", where="hw")
need("flows: %s in software, %s in hardware (offload none)" % (sw, hw), (sw or 0) >= 1 and hw == 0)
need("flow cache lookups by result", value("dpu_dataplane_flow_cache_lookups_total", result="hit") is not None)
# Services and conntrack: the table's size as dpuctl's stats say (the config's
# conntrack.max_entries), every state, the services gauges, and no Conntrack*
# or Service* event left in the generic family.
cap = value("dpu_dataplane_conntrack_capacity")
need("conntrack capacity %s, as dpuctl's conntrack_capacity %s" % (cap, byname.get("conntrack_capacity")),
     cap is not None and cap == byname.get("conntrack_capacity", -1) > 0)
states = sorted(l["state"] for l, _ in dp.get("dpu_dataplane_conntrack_connections", []))
need("conntrack connections by state: %s" % ", ".join(states), len(states) == 9 and "established" in states)
need("services %s, frontends by kind %s" % (value("dpu_dataplane_services"),
     sorted(l["kind"] for l, _ in dp.get("dpu_dataplane_service_frontends", []))),
     value("dpu_dataplane_services") is not None and len(dp.get("dpu_dataplane_service_frontends", [])) == 3)
generic = [l["event"] for l, _ in dp.get("dpu_dataplane_events_total", []) if l["event"].startswith(("Conntrack", "Service"))]
need("services' events in their own families (%s left generic)" % (", ".join(generic) or "none"), not generic)
exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
wanted = sorted(set(re.findall(r"\b(dpu_[a-z0-9_]+)", exprs)))
missing = [m for m in wanted if m not in dp and m not in agent]
need("the dashboard's %d metrics all exist (%s)" % (len(wanted), ", ".join(missing) or "none missing"), wanted and not missing)
for p in problems: print("FAIL: " + p)
PYEOF
)
echo "$out"
FAILURES=$(( FAILURES + $(grep -c '^FAIL' <<< "$out") ))

# The agent goes away: the dataplane forwards on, and its series stay served.
before=$(dl_metrics 1 dataplane | awk '$1 == "dpu_dataplane_flow_cache_lookups_total{result=\"hit\"}" {print $2}')
dl_daemon_stop 1 agent
dl_exec $a ping -c 10 -i 0.05 -W 1 "$(dl_pod_ip 2 pod1)" >/dev/null || fail "ping while the agent is stopped lost packets"
after=$(dl_metrics 1 dataplane | awk '$1 == "dpu_dataplane_flow_cache_lookups_total{result=\"hit\"}" {print $2}')
if [ -n "$after" ] && [ -n "$before" ] && [ "${after%.*}" -gt "${before%.*}" ]; then
  pass "agent stopped: the dataplane still serves its metrics, flow cache hits $before -> $after"
else
  fail "agent stopped: dataplane metrics not served or not moving ($before -> ${after:-none})"
fi
dl_metrics 1 agent >/dev/null 2>&1 && fail "the stopped agent still answers /metrics"
dl_daemon_start 1 agent || fail "the agent did not start again"
agent_text=$(dl_metrics 1 agent)
grep -q '^dpu_agent_dataplane_connected 1$' <<< "$agent_text" &&
  pass "the agent is back and connected to the dataplane (dpu_agent_dataplane_connected 1)" ||
  fail "the restarted agent's /metrics does not show it connected to the dataplane"
finish
