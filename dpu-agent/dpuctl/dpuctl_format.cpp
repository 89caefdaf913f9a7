// Text and JSON forms of operator replies (dpuctl_format.h).
#include "dpuctl_format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace dpu::dpuctl {
namespace {

// Columns padded to the widest cell; the last column is not padded.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string formatDuration(uint64_t ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%llums", static_cast<unsigned long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof(buf), "%llu.%llus", static_cast<unsigned long long>(ms / 1000),
                  static_cast<unsigned long long>(ms % 1000 / 100));
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof(buf), "%llum%02llus", static_cast<unsigned long long>(ms / 60'000),
                  static_cast<unsigned long long>(ms % 60'000 / 1000));
  } else {
    std::snprintf(buf, sizeof(buf), "%lluh%02llum", static_cast<unsigned long long>(ms / 3'600'000),
                  static_cast<unsigned long long>(ms % 3'600'000 / 60'000));
  }
  return buf;
}

std::string formatFlows(const dataplane::v1::OperatorReply& reply) {
  std::string out;
  for (const auto& f : reply.flows()) {
    std::string where = f.in_hw() ? "hw" : "sw";
    // "offloaded+punt:fin,syn,rst" → "hw+punt:fin,syn,rst": the NIC forwards
    // the flow and sends those TCP packets to software (conntrack).
    if (f.in_hw() && f.offload_status().rfind("offloaded+", 0) == 0) where += f.offload_status().substr(9);
    if (!f.offload_status().empty() && !f.in_hw()) {
      // "software: <reason>" → "sw(<reason>)"
      std::string reason = f.offload_status();
      if (reason.rfind("software: ", 0) == 0) reason = reason.substr(10);
      if (reason != "software") where += "(" + reason + ")";
    }
    out += f.match() + ", packets:" + std::to_string(f.packets()) + ", bytes:" + std::to_string(f.bytes()) +
           ", age:" + formatDuration(f.age_ms()) + ", used:" + formatDuration(f.idle_ms()) + " ago, dp:" + where +
           ", actions:" + f.actions() + (f.policy().empty() ? "" : ", policy:" + f.policy()) + "\n";
  }
  return out;
}

std::string formatPorts(const dataplane::v1::OperatorReply& reply) {
  std::vector<std::vector<std::string>> rows{{"PORT", "NAME", "ROLE", "STATE", "RX", "TX", "RX_DROP", "RX_MISSED",
                                              "TX_DROP", "MISS_DROP", "THROTTLED", "BACKEND", "MBUFS", "RXQ", "WORKER",
                                              "LOGICAL", "DEVARGS"}};
  std::vector<dataplane::v1::PortInfo> ports(reply.ports().begin(), reply.ports().end());
  // Open ports by DPDK port, then the ones that could not be opened (they have no port).
  std::stable_sort(ports.begin(), ports.end(), [](const auto& a, const auto& b) {
    const bool fa = a.state() == "failed", fb = b.state() == "failed";
    return fa != fb ? fb : (fa ? a.name() < b.name() : a.dpdk_port() < b.dpdk_port());
  });
  auto orDash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  // The worker of each receive queue ("0,1": queue 0 on worker 0, queue 1 on worker 1).
  auto workers = [](const dataplane::v1::PortInfo& p) {
    if (p.queue_workers().empty()) return p.worker() < 0 ? std::string("-") : std::to_string(p.worker());
    std::string out;
    for (int w : p.queue_workers()) out += (out.empty() ? "" : ",") + (w < 0 ? std::string("-") : std::to_string(w));
    return out;
  };
  std::vector<std::string> notes;
  for (const auto& p : ports) {
    const bool failed = p.state() == "failed";
    unsigned receiving = 0;
    std::string by_worker;
    for (int w = 0; w < p.worker_rx_packets_size(); ++w) {
      receiving += p.worker_rx_packets(w) > 0;
      by_worker += (by_worker.empty() ? "" : ", ") + ("worker " + std::to_string(w)) + " " +
                   std::to_string(p.worker_rx_packets(w));
    }
    rows.push_back({failed ? "-" : std::to_string(p.dpdk_port()), p.name(), p.role(), orDash(p.state()),
                    std::to_string(p.rx_packets()), std::to_string(p.tx_packets()), std::to_string(p.rx_dropped()),
                    std::to_string(p.rx_missed()), std::to_string(p.tx_dropped()),
                    std::to_string(p.miss_budget_dropped()), std::to_string(p.miss_throttled_polls()), orDash(p.backend()),
                    std::to_string(p.mbufs()), failed ? "-" : std::to_string(p.rx_queues()), workers(p),
                    orDash(p.logical_port()), orDash(p.devargs())});
    if (failed) {
      notes.push_back(p.name() + ": not open: " + orDash(p.error()) + " (next attempt in " +
                      formatDuration(p.retry_in_ms()) + ")");
    } else if (!p.backend_reason().empty()) {
      notes.push_back(p.name() + ": " + p.backend() + ", not the first choice: " + p.backend_reason());
    }
    // A port more than one worker received on: what each counted (RX is their sum).
    if (receiving > 1) notes.push_back(p.name() + ": rx by worker: " + by_worker + " (" + p.rx_spread() + ")");
  }
  std::string out = table(rows);
  if (!notes.empty()) {
    out += "\n";
    for (const auto& n : notes) out += n + "\n";
  }
  return out;
}

std::string formatStats(const dataplane::v1::OperatorReply& reply, bool nonzero_only) {
  std::vector<std::vector<std::string>> rows{{"COUNTER", "VALUE", "DESCRIPTION"}};
  for (const auto& c : reply.counters()) {
    if (nonzero_only && c.value() == 0) continue;
    rows.push_back({c.name(), std::to_string(c.value()), c.description()});
  }
  return table(rows);
}

std::string formatProblems(const dataplane::v1::OperatorReply& reply) {
  if (reply.problems().empty()) {
    return "no problems: every object of the model in force (generation " + std::to_string(reply.generation()) +
           ") is forwarding\n";
  }
  auto kind = [](dataplane::v1::ObjectProblem::Kind k) -> std::string {
    switch (k) {
      case dataplane::v1::ObjectProblem::PORT: return "port";
      case dataplane::v1::ObjectProblem::REMOTE_NODE: return "remote-node";
      case dataplane::v1::ObjectProblem::LOCAL_SUBNET: return "local-subnet";
      case dataplane::v1::ObjectProblem::IPSEC_SA: return "ipsec-sa";
      case dataplane::v1::ObjectProblem::SERVICE: return "service";
      case dataplane::v1::ObjectProblem::PORT_POLICY: return "port-policy";
      default: return "?";
    }
  };
  auto state = [](dataplane::v1::ObjectProblem::State s) -> std::string {
    switch (s) {
      case dataplane::v1::ObjectProblem::REFUSED: return "refused";
      case dataplane::v1::ObjectProblem::PORT_UNAVAILABLE: return "port-unavailable";
      default: return "?";
    }
  };
  std::vector<std::vector<std::string>> rows{{"KIND", "NAME", "STATE", "REASON"}};
  for (const auto& p : reply.problems()) rows.push_back({kind(p.kind()), p.name(), state(p.state()), p.reason()});
  return table(rows);
}

std::string formatStartup(const dataplane::v1::OperatorReply& reply) {
  if (reply.startup().empty()) return "no start-up phases in the answer (a dataplane that does not time them)\n";
  auto ms = [](uint64_t us) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", static_cast<double>(us) / 1000.0);
    return std::string(text);
  };
  std::vector<std::vector<std::string>> rows{{"PHASE", "START_MS", "DURATION_MS"}};
  for (const auto& p : reply.startup())
    rows.push_back({p.name(), ms(p.start_us()), p.moment() ? "-" : ms(p.duration_us())});
  std::string out = table(rows);
  if (reply.startup_us() == 0) out += "not forwarding yet: waiting for the agent's first full sync\n";
  return out;
}

std::string formatNeighbours(const dataplane::v1::OperatorReply& reply) {
  const auto& ns = reply.north_south();
  auto list = [](const auto& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
    return out.empty() ? std::string("none") : out;
  };
  std::string out;
  if (ns.host_pf().empty()) {
    out += "host PF: none (no host_pf port in the dataplane's config: the uplink carries only tunnel traffic)\n";
  } else {
    out += "host PF: " + ns.host_pf() + " (DPDK port " + std::to_string(ns.host_pf_dpdk_port()) + ")\n";
  }
  out += "node IPs: " + list(ns.node_ips()) + "; gateways: " + list(ns.node_gateways()) + "\n\n";
  out += "host MACs (" + std::to_string(ns.host_macs_size()) + " of at most " + std::to_string(ns.host_macs_max()) +
         ", forgotten after " + formatDuration(ns.host_mac_ageing_ms()) + " idle):\n";
  std::vector<std::vector<std::string>> macs{{"MAC", "NODE_IPS", "IDLE", "AGE"}};
  for (const auto& h : ns.host_macs()) {
    std::string ips;
    for (const auto& ip : h.node_ips()) ips += (ips.empty() ? "" : ",") + ip;
    macs.push_back({h.mac(), ips.empty() ? "-" : ips, formatDuration(h.idle_ms()), formatDuration(h.age_ms())});
  }
  out += table(macs);
  out += "\nneighbours on the node network (" + std::to_string(ns.neighbours_size()) + ", at most " +
         std::to_string(ns.neighbours_max()) + " with a MAC):\n";
  std::vector<std::vector<std::string>> rows{{"IP", "MAC", "STATE", "CONFIRMED", "REQUESTS", "LEARNED_FROM"}};
  for (const auto& n : ns.neighbours()) {
    rows.push_back({n.ip(), n.mac().empty() ? "-" : n.mac(), n.state(), formatDuration(n.confirmed_ms()) + " ago",
                    std::to_string(n.requests()), n.learned_from().empty() ? "-" : n.learned_from()});
  }
  out += table(rows);
  return out;
}

namespace {

// The agent's rotation as its last status poll reported it (IpsecInfo.rotation).
std::string formatRotation(const dataplane::v1::IpsecInfo& info) {
  if (!info.has_rotation()) {
    return "\nkey rotation: no report from dpu-agent since this dataplane started (IPsec is off in the agent, "
           "or it has not polled yet)\n";
  }
  const auto& r = info.rotation();
  // The agent polls every second: a report much older means it stopped.
  constexpr uint64_t kStaleMs = 5'000;
  std::string out = "\nkey rotation (dpu-agent, reported " + formatDuration(info.rotation_reported_ms_ago()) + " ago";
  if (info.rotation_reported_ms_ago() > kStaleMs) out += "; stale: the agent has stopped polling this dataplane";
  out += "): " + r.phase() + "\n";
  std::vector<std::string> epochs;
  epochs.push_back(r.current_epoch() != 0 ? "epoch " + std::to_string(r.current_epoch()) + " in use"
                                          : "no epoch published yet");
  if (r.next_epoch() != 0) {
    epochs.push_back("epoch " + std::to_string(r.next_epoch()) +
                     (r.phase() == "installing" ? " being installed" : " installed, being published"));
  }
  if (r.previous_epoch() != 0) {
    epochs.push_back("epoch " + std::to_string(r.previous_epoch()) + " still accepted for " +
                     formatDuration(r.previous_accepted_for_ms()));
  }
  out += "  ";
  for (size_t i = 0; i < epochs.size(); ++i) out += (i ? "; " : "") + epochs[i];
  out += "\n";
  if (!r.waiting_for().empty()) out += "  waiting for " + r.waiting_for() + "\n";
  if (!r.deferred().empty()) out += "  a requested rotation waits: " + r.deferred() + "\n";
  out += "  rotations started since the agent started: " + std::to_string(r.rotations_started()) + "\n";
  if (!r.last_error().empty()) out += "  last problem: " + r.last_error() + "\n";
  if (r.peers().empty()) return out;
  std::vector<std::vector<std::string>> rows{{"PEER", "ADVERTISED", "SENDING_WITH", "INBOUND_SAS", "PROBLEM"}};
  auto epoch = [](uint32_t e) { return e == 0 ? std::string("-") : std::to_string(e); };
  for (const auto& p : r.peers()) {
    rows.push_back({p.node(), epoch(p.advertised_epoch()), epoch(p.sending_epoch()), std::to_string(p.inbound_sas()),
                    p.problem().empty() ? "-" : p.problem()});
  }
  out += "\n" + table(rows);
  out += "ADVERTISED: the peer's newest key epoch; SENDING_WITH: our epoch we encrypt to it with\n";
  return out;
}

}  // namespace

std::string formatIpsec(const dataplane::v1::OperatorReply& reply) {
  const auto& info = reply.ipsec();
  std::string out = std::string("encryption: ") +
                    (info.encrypt() ? "on (every packet to a remote node leaves as ESP or is dropped)"
                                    : "off (SAs installed and arriving ESP accepted; the node sends plaintext)") +
                    "\ncrypto backend: " + (info.crypto_backend().empty() ? "-" : info.crypto_backend()) + "\n\n";
  if (info.sas().empty()) return out + "no IPsec SA in force\n" + formatRotation(info);
  auto hex = [](uint32_t v) {
    char b[11];
    std::snprintf(b, sizeof b, "0x%08x", v);
    return std::string(b);
  };
  std::vector<std::vector<std::string>> rows{{"SA", "PEER", "DIR", "SPI", "EPOCHS", "ALG", "SEQUENCE", "PACKETS",
                                              "BYTES", "REPLAY", "ICV_FAIL", "LIMIT_DROP", "OTHER", "AGE"}};
  for (const auto& sa : info.sas()) {
    const auto& st = sa.state();
    const bool out_dir = st.direction() == dataplane::v1::OUTBOUND;
    std::string seq = std::to_string(st.highest_sequence());
    if (out_dir) seq += "/" + std::to_string(sa.sequence_limit());
    else if (st.first_packet_received()) seq += " (in use)";
    rows.push_back({st.name(), st.remote_node() + " " + sa.peer_tunnel_ip(), out_dir ? "out" : "in", hex(st.spi()),
                    std::to_string(sa.local_epoch()) + "/" + std::to_string(sa.remote_epoch()),
                    sa.algorithm() == dataplane::v1::AES_256_GCM ? "aes-256-gcm" : "aes-128-gcm", seq,
                    std::to_string(st.packets()), std::to_string(st.bytes()), std::to_string(st.replay_drops()),
                    std::to_string(st.icv_failures()), std::to_string(st.limit_drops()),
                    std::to_string(sa.other_drops()), formatDuration(sa.age_ms())});
  }
  out += table(rows);
  out += "\nEPOCHS: ours/the peer's; SEQUENCE: outbound the highest sent/the limit, inbound the highest authenticated\n";
  // NAT traversal: where each peer's ESP in UDP goes (its NAT address, the port learned from it or 4500).
  std::map<std::string, std::string> nat;
  for (const auto& sa : info.sas()) {
    if (!sa.nat_peer().empty()) nat.emplace(sa.state().remote_node(), sa.nat_peer());
  }
  if (!nat.empty()) {
    out += "\nESP in UDP (NAT traversal) is sent to:\n";
    for (const auto& [node, where] : nat) out += "  " + node + " at " + where + "\n";
  }
  if (info.rotation_requests() > 0) {
    out += "\nrotation requests (dpuctl ipsec rotate) to this dataplane: " + std::to_string(info.rotation_requests()) +
           ", taken by the agent: " + std::to_string(info.rotations_taken()) + "\n";
  }
  return out + formatRotation(info);
}

std::string formatIpsecRotate(const dataplane::v1::OperatorReply& reply) {
  const auto& info = reply.ipsec();
  return "rotation requested (request " + std::to_string(info.rotation_requests()) +
         " to this dataplane; the agent has taken " + std::to_string(info.rotations_taken()) +
         "): dpu-agent takes it at its next status poll, within a second, and starts a new epoch.\n"
         "`dpuctl ipsec` shows the rotation's phase and the SAs move to it (EPOCHS) as the peers accept it.\n";
}

namespace {

// "10.96.0.10:80", "[fd00::10]:80": as conntrack prints a tuple's ends.
std::string hostPort(const std::string& ip, uint32_t port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", share * 100.0);
  return text;
}

}  // namespace

std::string formatServices(const dataplane::v1::OperatorReply& services, const dataplane::v1::OperatorReply& conntrack) {
  if (services.services().empty()) {
    return "no services: the model in force (generation " + std::to_string(services.generation()) +
           ") balances none\n";
  }
  // Connections per frontend: protocol and original destination ("tcp 10.96.0.10:80").
  std::map<std::string, uint64_t> connections;
  for (const auto& c : conntrack.conntrack()) {
    const size_t arrow = c.original().find(" -> ");
    if (arrow != std::string::npos) ++connections[c.protocol() + " " + c.original().substr(arrow + 4)];
  }
  std::vector<std::vector<std::string>> rows{{"SERVICE", "PORT", "KIND", "ADDRESS", "PROTO", "POLICY", "AFFINITY",
                                              "BACKENDS", "MAGLEV", "CONNECTIONS"}};
  std::vector<std::vector<std::string>> backends{{"SERVICE", "PORT", "BACKEND", "CONDITION", "NODE", "SHARE",
                                                  "LOCAL_SHARE"}};
  std::set<std::string> listed;  // backends are per service port: its frontends share them
  for (const auto& f : services.services()) {
    unsigned usable = 0;
    for (const auto& b : f.backends()) usable += b.condition() != "unused" && (!f.local_only() || b.local());
    const std::string address = hostPort(f.ip(), f.port());
    const auto it = connections.find(f.protocol() + " " + address);
    const std::string port_name = f.port_name().empty() ? "-" : f.port_name();
    rows.push_back({f.service(), port_name, f.kind(), address, f.protocol(), f.local_only() ? "local" : "cluster",
                    f.affinity_timeout_s() == 0 ? "-" : formatDuration(uint64_t{f.affinity_timeout_s()} * 1000),
                    std::to_string(usable) + "/" + std::to_string(f.backends_size()), std::to_string(f.maglev_size()),
                    std::to_string(it == connections.end() ? 0 : it->second)});
    for (const auto& b : f.backends()) {
      const std::string backend = hostPort(b.ip(), b.port());
      if (!listed.insert(f.service() + " " + port_name + " " + f.protocol() + " " + backend).second) continue;
      backends.push_back({f.service(), port_name, backend, b.condition(), b.local() ? "local" : "remote",
                          percent(b.share()), b.local() ? percent(b.local_share()) : "-"});
    }
  }
  std::string out = table(rows);
  if (conntrack.conntrack_entries() > static_cast<uint64_t>(conntrack.conntrack_size())) {
    out += "connections counted over " + std::to_string(conntrack.conntrack_size()) + " of the " +
           std::to_string(conntrack.conntrack_entries()) + " tracked (dpuctl conntrack --address IP narrows)\n";
  }
  out += "\n";
  if (backends.size() == 1) {
    out += "no backends: every service port is without endpoints (connections are refused)\n";
  } else {
    out += table(backends);
  }
  return out;
}

std::string formatConntrack(const dataplane::v1::OperatorReply& reply) {
  std::string out;
  if (reply.conntrack().empty()) {
    out += "no connections match\n";
  } else {
    std::vector<std::vector<std::string>> rows{
        {"PROTO", "ORIGINAL", "REPLY", "STATE", "NAT", "SERVICE", "IDLE", "EXPIRES"}};
    for (const auto& c : reply.conntrack()) {
      rows.push_back({c.protocol(), c.original(), c.reply(), c.state(), c.nat().empty() ? "-" : c.nat(),
                      c.service().empty() ? "-" : c.service(), formatDuration(c.idle_ms()),
                      formatDuration(c.expires_in_ms())});
    }
    out += table(rows);
  }
  std::string states;
  for (const auto& s : reply.conntrack_states()) {
    if (s.count() == 0) continue;
    states += (states.empty() ? "" : ", ") + s.state() + " " + std::to_string(s.count());
  }
  char fill[32];
  std::snprintf(fill, sizeof fill, "%.1f%%",
                reply.conntrack_capacity() == 0
                    ? 0.0
                    : 100.0 * static_cast<double>(reply.conntrack_entries()) /
                          static_cast<double>(reply.conntrack_capacity()));
  out += "\nlisted " + std::to_string(reply.conntrack_size()) + "; tracked " +
         std::to_string(reply.conntrack_entries()) + " of at most " + std::to_string(reply.conntrack_capacity()) +
         " (" + fill + ", conntrack.max_entries)\n";
  out += "by state: " + (states.empty() ? std::string("none") : states) + "\n";
  if (reply.conntrack_early_dropped() != 0 || reply.conntrack_refused_full() != 0) {
    out += "full since start: " + std::to_string(reply.conntrack_early_dropped()) +
           " unanswered connections gave their places to new ones, " +
           std::to_string(reply.conntrack_refused_full()) + " new connections refused (ConntrackFull)\n";
  }
  return out;
}

std::string formatPolicy(const dataplane::v1::OperatorReply& reply) {
  if (reply.port_policies().empty()) return "no port is isolated (no PortPolicy in force)\n";
  std::map<std::string, uint64_t> dropped;
  for (const auto& d : reply.policy_drops()) dropped[d.policy()] = d.dropped();
  auto protocol = [](uint32_t p) -> std::string {
    switch (p) {
      case 0: return "any";
      case 1: return "icmp";
      case 6: return "tcp";
      case 17: return "udp";
      case 58: return "icmpv6";
      case 132: return "sctp";
      default: return std::to_string(p);
    }
  };
  std::string out;
  for (const auto& pp : reply.port_policies()) {
    out += "port " + pp.port() + (pp.pod().empty() ? "" : " (" + pp.pod() + ")") + "\n";
    for (const auto& [name, d] : {std::pair{"ingress", &pp.ingress()}, std::pair{"egress", &pp.egress()}}) {
      const bool in = std::string(name) == "ingress";
      if (!d->isolated()) {
        out += std::string("  ") + name + ": not isolated\n";
        continue;
      }
      out += std::string("  ") + name + ": isolated by";
      for (const auto& p : d->policies()) out += " " + p + " (denied " + std::to_string(dropped[p]) + ")";
      out += "\n";
      if (d->rules().empty()) out += "    nothing allowed\n";
      for (const auto& r : d->rules()) {
        std::string peers;
        for (const auto& p : r.peers()) peers += (peers.empty() ? "" : ",") + p;
        std::string ports;
        if (r.protocol() != 0 && r.protocol() != 1 && r.protocol() != 58) {
          ports = r.port_first() == 0 && r.port_last() == 65535 ? " any port"
                  : r.port_first() == r.port_last()            ? " port " + std::to_string(r.port_first())
                                                                : " ports " + std::to_string(r.port_first()) + "-" +
                                                                      std::to_string(r.port_last());
        }
        out += "    allow " + protocol(r.protocol()) + ports + (in ? " from " : " to ") + peers + "  [" + r.policy() +
               "]\n";
      }
    }
  }
  return out;
}

std::string formatJson(const dataplane::v1::OperatorReply& reply) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(reply, &out, options).ok()) return "{}\n";
  return out;
}

}  // namespace dpu::dpuctl
