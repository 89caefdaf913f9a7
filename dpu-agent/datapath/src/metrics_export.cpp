// The operator API's counters as Prometheus metric families (metrics.h).
// One table names the families the dataplane's events feed; a counter the
// table does not know still appears, under a generic family with its name as
// a label, so a new drop reason or event is never missing from monitoring.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/prometheus.h"
#include "datapath/metrics.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {
namespace {

namespace v1 = dataplane::v1;

// Families in the order they are first used, so the text reads as the tables below.
class Families {
 public:
  void add(const std::string& name, const char* type, const char* help, prom::Labels labels, double value) {
    auto it = std::find_if(list_.begin(), list_.end(), [&](const Family& f) { return f.name == name; });
    if (it == list_.end()) {
      list_.push_back(Family{name, type, help, {}});
      it = list_.end() - 1;
    }
    it->samples.emplace_back(std::move(labels), value);
  }
  std::string text() const {
    prom::Writer w;
    for (const auto& f : list_) w.family(f.name, f.type, f.help, f.samples);
    return w.text();
  }

 private:
  struct Family {
    std::string name;
    const char* type;
    const char* help;
    std::vector<std::pair<prom::Labels, double>> samples;
  };
  std::vector<Family> list_;
};

// Where each event and gauge of the stats answer goes: family, type, help, and one label.
struct Mapping {
  std::string_view counter;  // the operator API's name
  const char* family;
  const char* type;
  const char* help;
  const char* label;  // nullptr: no label
  const char* value;
};

constexpr const char* kLookupsHelp = "Packets looked up in the flow cache, by result (a miss runs the slow path).";
constexpr const char* kRemovedHelp = "Cached flows removed, by cause.";
constexpr const char* kRepliesHelp = "Replies the dataplane generated itself, by kind.";
constexpr const char* kXdpHelp = "Packets the uplink's XDP program saw, by verdict (steered to the dataplane or passed to the kernel).";
constexpr const char* kMbufsHelp =
    "Mbufs of the pool, by share: budgeted to the open ports, reserved for lcore caches and bursts, free now.";
constexpr const char* kFlowsHelp = "Cached flows, by where they run: hw (offloaded to the NIC) or sw (the DPU's cores).";
constexpr const char* kHostMacsHelp = "Host MACs the host PF port learned or forgot, by change.";
constexpr const char* kNeighboursHelp =
    "Node-network neighbours (north–south next hops), by state: reachable (MAC known) or incomplete (being resolved).";
constexpr const char* kNeighbourChangesHelp = "Node-network neighbours learned (or whose MAC changed) and evicted, by change.";
constexpr const char* kConntrackChangesHelp =
    "Connections the conntrack table took or removed, by change: new, loose (picked up mid-stream after a restart), "
    "adopted (taken over at start from the table a previous dataplane process left), closed (RST or reopened), expired (idle past their state's timeout), flushed (UDP whose backend left).";
constexpr const char* kServiceConnectionsHelp =
    "New connections to services handled specially, by outcome: rejected (no endpoint or no such port: TCP reset or "
    "ICMP port unreachable), hairpin (a pod to itself, masqueraded), affinity (sent to their client's backend).";
constexpr const char* kPeersHelp =
    "Remote nodes by whether their underlay next-hop MAC is known (static, or the uplink's kernel tables).";

constexpr Mapping kMappings[] = {
    {"FlowHit", "dpu_dataplane_flow_cache_lookups_total", "counter", kLookupsHelp, "result", "hit"},
    {"FlowMiss", "dpu_dataplane_flow_cache_lookups_total", "counter", kLookupsHelp, "result", "miss"},
    {"FlowInstalled", "dpu_dataplane_flow_setups_total", "counter",
     "Flows the slow path set up and installed in the flow cache.", nullptr, nullptr},
    {"FlowNotCached", "dpu_dataplane_slow_path_uncached_packets_total", "counter",
     "Packets the slow path forwarded without caching a flow (every action record in use).", nullptr, nullptr},
    {"FlowEvicted", "dpu_dataplane_flows_removed_total", "counter", kRemovedHelp, "cause", "evicted"},
    {"FlowAged", "dpu_dataplane_flows_removed_total", "counter", kRemovedHelp, "cause", "aged"},
    {"FlowInvalidated", "dpu_dataplane_flows_removed_total", "counter", kRemovedHelp, "cause", "invalidated"},
    {"OffloadQueueFull", "dpu_dataplane_offload_queue_dropped_total", "counter",
     "New flows not queued for offload because the queue was full (they stay in software).", nullptr, nullptr},
    {"ArpReply", "dpu_dataplane_replies_sent_total", "counter", kRepliesHelp, "kind", "arp"},
    {"NdReply", "dpu_dataplane_replies_sent_total", "counter", kRepliesHelp, "kind", "nd"},
    {"IcmpFragNeeded", "dpu_dataplane_replies_sent_total", "counter", kRepliesHelp, "kind", "icmp_frag_needed"},
    {"Icmp6PacketTooBig", "dpu_dataplane_replies_sent_total", "counter", kRepliesHelp, "kind",
     "icmpv6_packet_too_big"},
    {"TunnelNextHopUnresolved", "dpu_dataplane_tunnel_next_hop_unresolved_packets_total", "counter",
     "Tunnel packets sent to the broadcast MAC because the underlay next hop was unknown.", nullptr, nullptr},
    {"xdp_steered", "dpu_dataplane_uplink_xdp_packets_total", "counter", kXdpHelp, "verdict", "steered"},
    {"xdp_to_kernel", "dpu_dataplane_uplink_xdp_packets_total", "counter", kXdpHelp, "verdict", "to_kernel"},
    {"xdp_no_socket", "dpu_dataplane_uplink_xdp_packets_total", "counter", kXdpHelp, "verdict", "no_socket"},
    {"xdp_host", "dpu_dataplane_uplink_xdp_host_packets_total", "counter",
     "Of the packets the uplink's XDP program steered (or found no socket for), the host's: to a host MAC, ARP/ND "
     "for a node IP.",
     nullptr, nullptr},
    {"north_south_host_macs", "dpu_dataplane_host_macs", "gauge", "Host MACs learned on the host PF port.", nullptr,
     nullptr},
    {"HostMacLearned", "dpu_dataplane_host_mac_changes_total", "counter", kHostMacsHelp, "change", "learned"},
    {"HostMacAged", "dpu_dataplane_host_mac_changes_total", "counter", kHostMacsHelp, "change", "aged"},
    {"north_south_neighbours", "dpu_dataplane_north_south_neighbours", "gauge", kNeighboursHelp, "state", "reachable"},
    {"north_south_neighbours_incomplete", "dpu_dataplane_north_south_neighbours", "gauge", kNeighboursHelp, "state",
     "incomplete"},
    {"NeighbourLearned", "dpu_dataplane_north_south_neighbour_changes_total", "counter", kNeighbourChangesHelp,
     "change", "learned"},
    {"NeighbourEvicted", "dpu_dataplane_north_south_neighbour_changes_total", "counter", kNeighbourChangesHelp,
     "change", "evicted"},
    {"NeighbourArpRequest", "dpu_dataplane_north_south_arp_requests_total", "counter",
     "ARP requests the dataplane sent from a node IP to resolve (or probe) a node-network next hop.", nullptr, nullptr},
    {"tunnel_peers_resolved", "dpu_dataplane_tunnel_peers", "gauge", kPeersHelp, "next_hop", "resolved"},
    {"tunnel_peers_unresolved", "dpu_dataplane_tunnel_peers", "gauge", kPeersHelp, "next_hop", "unresolved"},
    {"neighbour_events", "dpu_dataplane_underlay_netlink_events_total", "counter",
     "Route and neighbour notifications of the uplink's kernel tables the dataplane read.", nullptr, nullptr},
    {"neighbour_resyncs", "dpu_dataplane_underlay_netlink_resyncs_total", "counter",
     "Full re-reads of the uplink's routes and neighbours after rtnetlink events were lost.", nullptr, nullptr},
    {"neighbour_probes", "dpu_dataplane_underlay_next_hop_probes_total", "counter",
     "Datagrams sent to make the kernel resolve an underlay next hop.", nullptr, nullptr},
    {"port_capacity", "dpu_dataplane_port_capacity", "gauge",
     "Representor ports the dataplane can open (RTE_MAX_ETHPORTS of its DPDK less the ports used otherwise).",
     nullptr, nullptr},
    {"ports_unavailable", "dpu_dataplane_ports_unavailable", "gauge",
     "Representors the model wants that could not be opened (retried with backoff; dpuctl ports says why).", nullptr,
     nullptr},
    {"port_open_failures", "dpu_dataplane_port_open_failures_total", "counter",
     "Failed attempts to open a representor port.", nullptr, nullptr},
    {"mbuf_pool_size", "dpu_dataplane_mbuf_pool_size", "gauge", "Mbufs in the pool.", nullptr, nullptr},
    {"mbufs_budgeted", "dpu_dataplane_mbufs", "gauge", kMbufsHelp, "share", "budgeted"},
    {"mbufs_reserved", "dpu_dataplane_mbufs", "gauge", kMbufsHelp, "share", "reserved"},
    {"mbufs_free", "dpu_dataplane_mbufs", "gauge", kMbufsHelp, "share", "free"},
    {"flows_in_hw", "dpu_dataplane_flows", "gauge", kFlowsHelp, "where", "hw"},
    {"flows_in_sw", "dpu_dataplane_flows", "gauge", kFlowsHelp, "where", "sw"},
    {"flow_action_records", "dpu_dataplane_flow_action_records", "gauge",
     "Action records in use (cached flows that act alike share one).", nullptr, nullptr},
    {"flow_bytes", "dpu_dataplane_flow_cache_entry_bytes", "gauge",
     "Memory per cached flow in bytes (entry, bucket share, offload bookkeeping).", nullptr, nullptr},
    // Services and connection tracking. The entries per state come from the
    // conntrack answer (renderMetrics); ConntrackFull and the Service* drops
    // are drop reasons like the others.
    {"conntrack_entries", "dpu_dataplane_conntrack_entries", "gauge",
     "Connections tracked now (services and NAT).", nullptr, nullptr},
    {"conntrack_capacity", "dpu_dataplane_conntrack_capacity", "gauge",
     "Connections the table holds at most (conntrack.max_entries; beyond, a new one takes an unanswered one's place "
     "or is dropped as ConntrackFull).",
     nullptr, nullptr},
    {"conntrack_inserted", "dpu_dataplane_conntrack_inserts_total", "counter", "Connections the table took.", nullptr,
     nullptr},
    {"conntrack_refused_full", "dpu_dataplane_conntrack_refused_full_total", "counter",
     "New connections refused because the table was full (conntrack.max_entries) and held no unanswered "
     "connection near them to drop.",
     nullptr, nullptr},
    {"conntrack_early_dropped", "dpu_dataplane_conntrack_early_drops_total", "counter",
     "Unanswered connections (UDP new, TCP syn-sent or syn-received, no flow) dropped to make room for new ones "
     "because the table was full.",
     nullptr, nullptr},
    {"ConntrackNew", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change", "new"},
    {"ConntrackLoose", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change", "loose"},
    {"ConntrackAdopted", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change",
     "adopted"},
    {"ConntrackClosed", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change", "closed"},
    {"ConntrackExpired", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change",
     "expired"},
    {"ConntrackFlushed", "dpu_dataplane_conntrack_changes_total", "counter", kConntrackChangesHelp, "change",
     "flushed"},
    {"ConntrackPunt", "dpu_dataplane_conntrack_punted_packets_total", "counter",
     "TCP SYN, FIN and RST of translated connections that ran through conntrack (the slow path).", nullptr, nullptr},
    {"ServiceRejected", "dpu_dataplane_service_connections_total", "counter", kServiceConnectionsHelp, "outcome",
     "rejected"},
    {"ServiceHairpin", "dpu_dataplane_service_connections_total", "counter", kServiceConnectionsHelp, "outcome",
     "hairpin"},
    {"ServiceAffinity", "dpu_dataplane_service_connections_total", "counter", kServiceConnectionsHelp, "outcome",
     "affinity"},
};

const Mapping* mappingOf(std::string_view name) {
  for (const auto& m : kMappings)
    if (m.counter == name) return &m;
  return nullptr;
}

}  // namespace

namespace {
// Per SA (docs/ipsec.md "Operating it"): labelled by name, peer, direction,
// SPI and epochs. Never a key: the answer has none.
void addIpsec(const v1::IpsecInfo& info, Families& out) {
  out.add("dpu_dataplane_ipsec_encrypt", "gauge",
          "1 when the node encrypts (ipsec mode on: every packet to a remote node leaves as ESP or is dropped).", {},
          info.encrypt() ? 1 : 0);
  for (const auto& sa : info.sas()) {
    const auto& st = sa.state();
    char spi[11];
    std::snprintf(spi, sizeof spi, "0x%08x", st.spi());
    const prom::Labels l{{"sa", st.name()},
                         {"peer", st.remote_node()},
                         {"direction", st.direction() == v1::OUTBOUND ? "out" : "in"},
                         {"spi", spi},
                         {"local_epoch", std::to_string(sa.local_epoch())},
                         {"remote_epoch", std::to_string(sa.remote_epoch())}};
    out.add("dpu_dataplane_ipsec_sa_packets_total", "counter", "Packets an IPsec SA encrypted or decrypted.", l,
            static_cast<double>(st.packets()));
    out.add("dpu_dataplane_ipsec_sa_bytes_total", "counter", "Plaintext IP bytes an IPsec SA encrypted or decrypted.",
            l, static_cast<double>(st.bytes()));
    auto drops = [&](const char* reason, uint64_t n) {
      prom::Labels dl = l;
      dl.emplace_back("reason", reason);
      out.add("dpu_dataplane_ipsec_sa_drops_total", "counter",
              "Packets an IPsec SA refused, by reason: replay (replayed or left of the window), icv (did not "
              "authenticate), limit (outbound: sequence_limit reached), other (malformed).",
              dl, static_cast<double>(n));
    };
    drops("replay", st.replay_drops());
    drops("icv", st.icv_failures());
    drops("limit", st.limit_drops());
    drops("other", sa.other_drops());
    out.add("dpu_dataplane_ipsec_sa_sequence", "gauge",
            "Highest sequence number an IPsec SA sent (outbound) or authenticated (inbound).", l,
            static_cast<double>(st.highest_sequence()));
    out.add("dpu_dataplane_ipsec_sa_age_seconds", "gauge", "Seconds since the dataplane installed the IPsec SA.", l,
            static_cast<double>(sa.age_ms()) / 1000.0);
  }
}
}  // namespace

std::string renderMetrics(const v1::OperatorReply& ports, const v1::OperatorReply& stats,
                          const v1::OperatorReply& services, const v1::OperatorReply& conntrack,
                          const v1::OperatorReply* ipsec) {
  Families out;
  out.add("dpu_dataplane_info", "gauge", "The running dataplane instance (1), by instance id.",
          {{"instance_id", stats.instance_id()}}, 1);
  out.add("dpu_dataplane_model_generation", "gauge", "Generation of the logical model the dataplane forwards with.",
          {}, static_cast<double>(stats.generation()));

  for (const auto& p : ports.ports()) {
    const prom::Labels id{{"port", p.name()}, {"role", p.role()}};
    auto with = [&id](const char* key, const char* value) {
      prom::Labels l = id;
      l.emplace_back(key, value);
      return l;
    };
    out.add("dpu_dataplane_port_up", "gauge", "1 while the port's link is up (0: down, or it could not be opened).",
            id, p.state().rfind("up", 0) == 0 ? 1 : 0);
    prom::Labels info = id;
    info.emplace_back("backend", p.backend());
    info.emplace_back("logical_port", p.logical_port());
    out.add("dpu_dataplane_port_info", "gauge", "The port's backend and bound logical port (1).", info, 1);
    out.add("dpu_dataplane_port_mbufs", "gauge", "Mbufs of the pool budgeted to the port (0: not open).", id,
            static_cast<double>(p.mbufs()));
    out.add("dpu_dataplane_port_receive_packets_total", "counter", "Packets received on the port.", id,
            static_cast<double>(p.rx_packets()));
    out.add("dpu_dataplane_port_transmit_packets_total", "counter", "Packets transmitted on the port.", id,
            static_cast<double>(p.tx_packets()));
    out.add("dpu_dataplane_port_receive_bytes_total", "counter", "Bytes received on the port.", id,
            static_cast<double>(p.rx_bytes()));
    out.add("dpu_dataplane_port_transmit_bytes_total", "counter", "Bytes transmitted on the port.", id,
            static_cast<double>(p.tx_bytes()));
    out.add("dpu_dataplane_port_dropped_packets_total", "counter",
            "Packets the port dropped, by direction (rx: missed, errors, no mbuf; tx: queue full, errors).",
            with("direction", "rx"), static_cast<double>(p.rx_dropped()));
    out.add("dpu_dataplane_port_dropped_packets_total", "counter",
            "Packets the port dropped, by direction (rx: missed, errors, no mbuf; tx: queue full, errors).",
            with("direction", "tx"), static_cast<double>(p.tx_dropped()));
    out.add("dpu_dataplane_port_miss_budget_dropped_packets_total", "counter",
            "Packets received on the port whose flow-cache miss was over the worker's slow-path budget "
            "(drop reason MissBudget).",
            id, static_cast<double>(p.miss_budget_dropped()));
    out.add("dpu_dataplane_port_miss_throttled_polls_total", "counter",
            "Polls of the port that took less than a full burst because its packets were mostly flow-cache misses "
            "over the slow-path budget (the rest waited in the NIC's ring).",
            id, static_cast<double>(p.miss_throttled_polls()));
    out.add("dpu_dataplane_port_receive_missed_packets_total", "counter",
            "Packets the port's NIC dropped because its receive ring was full (imissed; also counted in "
            "port_dropped_packets_total{direction=\"rx\"}).",
            id, static_cast<double>(p.rx_missed()));
  }

  // How this process started (a restart's outage, less the time before it
  // began): once it forwards, the whole and each phase but the ports' steps.
  if (stats.startup_us() != 0) {
    out.add("dpu_dataplane_startup_seconds", "gauge",
            "From the dataplane process's start until it forwarded with its first model.", {},
            static_cast<double>(stats.startup_us()) / 1e6);
    for (const auto& phase : stats.startup()) {
      if (phase.moment() || phase.name().find(": ") != std::string::npos) continue;
      out.add("dpu_dataplane_startup_phase_seconds", "gauge",
              "How long each phase of the dataplane's start took (dpuctl startup; phases beside eal overlap it).",
              {{"phase", phase.name()}}, static_cast<double>(phase.duration_us()) / 1e6);
    }
  }

  for (const auto& c : stats.counters()) {
    const double v = static_cast<double>(c.value());
    if (c.kind() == v1::COUNTER_DROP) {
      out.add("dpu_dataplane_dropped_packets_total", "counter",
              "Packets the dataplane dropped, by reason (the names dpuctl stats prints).", {{"reason", c.name()}}, v);
    } else if (const Mapping* m = mappingOf(c.name())) {
      prom::Labels l;
      if (m->label) l.emplace_back(m->label, m->value);
      out.add(m->family, m->type, m->help, std::move(l), v);
    } else if (c.kind() == v1::COUNTER_GAUGE) {
      out.add("dpu_dataplane_gauge", "gauge", "Other quantities the dataplane reports, by name.",
              {{"name", c.name()}}, v);
    } else {
      out.add("dpu_dataplane_events_total", "counter", "Other events the dataplane counts, by name.",
              {{"event", c.name()}}, v);
    }
  }

  // NetworkPolicy denials by policy: a bounded label set (a cluster may have
  // thousands of policies), the ones that denied most, the rest summed.
  {
    std::vector<const v1::PolicyDropCount*> drops;
    for (const auto& d : stats.policy_drops()) drops.push_back(&d);
    std::stable_sort(drops.begin(), drops.end(), [](const auto* a, const auto* b) { return a->dropped() > b->dropped(); });
    constexpr size_t kMaxPolicyLabels = 50;
    constexpr const char* kPolicyHelp =
        "New connections NetworkPolicy denied, by a policy isolating the pod port that denied them (dpuctl policy; "
        "the 50 policies that denied most, the others summed as policy=\"(other)\").";
    uint64_t other = 0;
    for (size_t i = 0; i < drops.size(); ++i) {
      if (i < kMaxPolicyLabels) {
        out.add("dpu_dataplane_policy_denied_total", "counter", kPolicyHelp, {{"policy", drops[i]->policy()}},
                static_cast<double>(drops[i]->dropped()));
      } else {
        other += drops[i]->dropped();
      }
    }
    if (drops.size() > kMaxPolicyLabels) {
      out.add("dpu_dataplane_policy_denied_total", "counter", kPolicyHelp, {{"policy", "(other)"}},
              static_cast<double>(other));
    }
  }

  for (const auto& st : conntrack.conntrack_states()) {
    out.add("dpu_dataplane_conntrack_connections", "gauge",
            "Connections tracked now, by state (dpuctl conntrack; tcp: syn-sent ... close, udp/sctp/icmp: new, replied).",
            {{"state", st.state()}}, static_cast<double>(st.count()));
  }

  // Services as the dataplane balances them (dpuctl services): each service
  // once, its frontends by kind, each service port's backends once by
  // condition, and the frontends without a usable backend (their connections
  // are refused, or dropped under a Local policy).
  std::set<std::string> names, backends;
  std::map<std::string, uint64_t> by_kind{{"cluster-ip", 0}, {"node-port", 0}, {"external-ip", 0}};
  std::map<std::string, uint64_t> by_condition{{"ready", 0}, {"serving-terminating", 0}, {"unused", 0}};
  uint64_t without = 0;
  for (const auto& f : services.services()) {
    names.insert(f.service());
    ++by_kind[f.kind()];
    unsigned usable = 0;
    for (const auto& b : f.backends()) {
      usable += b.condition() != "unused" && (!f.local_only() || b.local());
      const std::string key = f.service() + " " + f.port_name() + " " + f.protocol() + " " + b.ip() + " " +
                              std::to_string(b.port());
      if (backends.insert(key).second) ++by_condition[b.condition()];
    }
    without += usable == 0;
  }
  out.add("dpu_dataplane_services", "gauge", "Services the dataplane balances.", {},
          static_cast<double>(names.size()));
  for (const auto& [kind, n] : by_kind) {
    out.add("dpu_dataplane_service_frontends", "gauge",
            "Service frontends (an address, protocol and port balanced), by kind: cluster-ip, node-port, external-ip.",
            {{"kind", kind}}, static_cast<double>(n));
  }
  for (const auto& [condition, n] : by_condition) {
    out.add("dpu_dataplane_service_backends", "gauge",
            "Backends of the service ports, by condition: ready, serving-terminating (used while none is ready), "
            "unused (neither: left out, as kube-proxy does).",
            {{"condition", condition}}, static_cast<double>(n));
  }
  out.add("dpu_dataplane_service_frontends_without_backends", "gauge",
          "Service frontends with no usable backend for their traffic policy: new connections are refused (or "
          "dropped as ServiceNoLocalEndpoint under a Local policy).",
          {}, static_cast<double>(without));
  if (ipsec != nullptr) addIpsec(ipsec->ipsec(), out);
  return out.text();
}

}  // namespace dpu::datapath
