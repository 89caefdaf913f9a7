// Reads and validates the dpu-agent configuration (see agent_config.h).
#include "control/agent_config.h"

#include <set>

#include "common/config_doc.h"
#include "common/log.h"
#include "model/model.h"
#include "overlay/mtu.h"

namespace dpu::control {
namespace {

std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

std::vector<IpPrefix> prefixes(FieldReader& r, const std::string& key, const std::vector<std::string>& texts) {
  std::vector<IpPrefix> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto p = IpPrefix::parse(texts[i]);
    if (!p) {
      r.fail(key + "[" + std::to_string(i) + "]", p.error());
      return {};
    }
    out.push_back(*p);
  }
  return out;
}

// "podCIDR: x" or "podCIDRs: [x, y]"; at most one of each family.
std::vector<IpPrefix> readCidrs(FieldReader& r, const std::string& single, const std::string& plural) {
  std::vector<std::string> texts;
  if (r.has(single) && r.has(plural)) {
    r.fail(single, "give either " + single + " or " + plural + ", not both");
    return {};
  }
  if (r.has(single)) {
    texts.push_back(r.str(single));
  } else {
    texts = r.strings(plural);
    r.ignore({single});
  }
  auto out = prefixes(r, r.has(single) ? single : plural, texts);
  return out;
}

}  // namespace

const char* ipsecModeName(IpsecMode mode) {
  switch (mode) {
    case IpsecMode::kOff: return "off";
    case IpsecMode::kKeys: return "keys";
    case IpsecMode::kOn: return "on";
  }
  return "off";
}

std::string RepresentorMap::representorFor(uint32_t vf) const {
  if (vf < names.size()) return names[vf];
  return replaceAll(replaceAll(name_pattern, "{pf}", std::to_string(pf_index)), "{vf}", std::to_string(vf));
}

const RepresentorMap* AgentConfig::representorsOf(uint32_t pf) const {
  for (const auto& r : representors) {
    if (r.pf_index == pf) return &r;
  }
  return nullptr;
}

std::string AgentConfig::apiUri() const {
  std::string host = api_address.find(':') != std::string::npos ? "[" + api_address + "]" : api_address;
  return std::string(tls.enabled() ? "https" : "http") + "://" + host + ":" + std::to_string(api_port);
}

std::string AgentConfig::metricsUri() const {
  if (!metrics.enabled) return "";
  std::string host = metrics.address.find(':') != std::string::npos ? "[" + metrics.address + "]" : metrics.address;
  return std::string(tls.enabled() ? "https" : "http") + "://" + host + ":" + std::to_string(metrics.port);
}

namespace {

// "ADDR:PORT" with a numeric IPv4 or a bracketed IPv6 address; "" when fine.
std::string parseListen(const std::string& text, MetricsListen& out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find("]:");
    if (close == std::string::npos) return "must be \"[IPv6]:PORT\" for an IPv6 address, not \"" + text + "\"";
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon)
      return "must be \"ADDRESS:PORT\" (IPv6 in brackets), not \"" + text + "\"";
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto ip = IpAddress::parse(host);
  if (!ip) return "\"" + host + "\" is not a numeric IP address: " + ip.error();
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) < 1 || std::stoul(port) > 65535)
    return "the port \"" + port + "\" must be 1..65535";
  out.enabled = true;
  out.address = ip->str();
  out.port = static_cast<uint16_t>(std::stoul(port));
  return "";
}

}  // namespace

uint32_t podMtu(uint32_t underlay_mtu, bool ipv6_underlay, bool ipsec, bool nat_t) {
  overlay::OverlayEncap e;
  e.family = ipv6_underlay ? overlay::UnderlayFamily::kIpv6 : overlay::UnderlayFamily::kIpv4;
  e.geneve_options_len = 8;  // the OVN option carries the logical ports
  e.esp = ipsec;
  e.esp_nat_t = ipsec && nat_t;
  return overlay::podMtuFor(underlay_mtu, e);
}

Result<AgentConfig> parseAgentConfig(const nlohmann::json& doc) {
  AgentConfig c;
  FieldReader r(doc, "config");
  // The host's node name, or where to read it: a label on the DPU's own Node
  // (a DaemonSet's one file serves every DPU; the DPU knows only its own name).
  if (const auto* n = doc.is_object() && doc.contains("nodeName") ? &doc["nodeName"] : nullptr; n && n->is_object()) {
    FieldReader from = r.object("nodeName");
    c.node_name_from.label = from.str("fromNodeLabel");
    c.node_name_from.node = from.str("node");
    c.node_name_from.in_cluster = from.boolean("inCluster", false);
    c.node_name_from.kubeconfig = from.str("kubeconfig", "");
    if (from.ok() && c.node_name_from.node.empty()) from.fail("node", "must name the DPU's own Node (e.g. \"${DPU_NODE_NAME}\")");
    if (from.ok() && (c.node_name_from.label.empty() || c.node_name_from.label.find(' ') != std::string::npos))
      from.fail("fromNodeLabel", "must be a label key, e.g. dpu-cni.io/host-node");
    if (from.ok() && c.node_name_from.in_cluster && !c.node_name_from.kubeconfig.empty())
      from.fail("inCluster", "give inCluster or kubeconfig, not both");
    if (auto done = from.finish(); !done) return std::move(done).takeError();
  } else {
    c.node_name = r.str("nodeName");
  }
  if (r.ok() && c.node_name_from.label.empty() &&
      (c.node_name.empty() || c.node_name.size() > 253 || c.node_name.find_first_of("/ \t\n") != std::string::npos)) {
    r.fail("nodeName", "must be the Kubernetes node name (1-253 characters, no '/' or spaces), or "
                       "{fromNodeLabel: LABEL, node: DPU_NODE}");
  }
  std::string tunnel = r.str("tunnelIP");
  if (r.ok()) {
    auto ip = IpAddress::parse(tunnel);
    if (!ip) r.fail("tunnelIP", ip.error());
    else c.tunnel_ip = *ip;
  }
  c.uplink = r.str("uplink", "p0");

  std::set<uint32_t> seen_pfs;
  for (auto& rep : r.objects("representors", true)) {
    RepresentorMap m;
    m.pf_index = static_cast<uint32_t>(rep.uint("pf", 0, 7));
    m.names = rep.strings("names");
    m.vf_count = static_cast<uint32_t>(rep.uint("vfCount", 1, 1024, m.names.empty() ? std::nullopt
                                                                                  : std::optional<uint64_t>(m.names.size())));
    m.name_pattern = rep.str("name", m.names.empty() ? std::nullopt : std::optional<std::string>(""));
    if (rep.ok() && m.names.empty() && m.name_pattern.find("{vf}") == std::string::npos) {
      rep.fail("name", "must contain {vf} (e.g. \"pf0vf{vf}\") so every VF has its own representor, or give names");
    }
    if (rep.ok() && !m.names.empty() && m.names.size() < m.vf_count) {
      rep.fail("names", "lists " + std::to_string(m.names.size()) + " representors for vfCount " +
                            std::to_string(m.vf_count));
    }
    if (rep.ok() && !seen_pfs.insert(m.pf_index).second) rep.fail("pf", "PF " + std::to_string(m.pf_index) + " is listed twice");
    if (auto done = rep.finish(); !done) return std::move(done).takeError();
    c.representors.push_back(std::move(m));
  }
  if (r.ok() && c.representors.empty()) r.fail("representors", "must list at least one PF");

  c.pod_cidrs = readCidrs(r, "podCIDR", "podCIDRs");
  c.cluster_cidrs = prefixes(r, "clusterCIDRs", r.strings("clusterCIDRs", true));
  if (r.ok() && c.cluster_cidrs.empty()) r.fail("clusterCIDRs", "must list the cluster's pod network (e.g. 10.244.0.0/16)");
  c.service_cidrs = prefixes(r, "serviceCIDRs", r.strings("serviceCIDRs"));
  if (r.ok()) {
    for (size_t i = 0; i < c.pod_cidrs.size(); ++i) {
      const auto& p = c.pod_cidrs[i];
      bool inside = false;
      for (const auto& cc : c.cluster_cidrs) inside |= cc.contains(p.address) && p.length >= cc.length;
      if (!inside) r.fail("podCIDR", p.str() + " is not inside any of clusterCIDRs");
      uint32_t bits = p.address.isV4() ? 32 : 128;
      if (bits - p.length < 2 || (p.address.isV4() && p.length > 29)) {
        r.fail("podCIDR", p.str() + " is too small: the gateway and the management port need two addresses");
      }
      for (size_t j = 0; j < i; ++j) {
        if (c.pod_cidrs[j].address.family == p.address.family) r.fail("podCIDRs", "at most one CIDR per IP family");
      }
    }
  }

  {
    FieldReader ns = r.object("northSouth", true);
    const auto ips = ns.strings("nodeIPs");
    const auto gateways = ns.strings("gateways");
    if (r.ok() && ns.ok()) {
      auto addresses = model::parseNodeAddresses(ips, gateways, c.tunnel_ip, c.cluster_cidrs, c.service_cidrs,
                                                 ns.pathOf("nodeIPs"), ns.pathOf("gateways"));
      if (!addresses) return Error{addresses.error()};
      c.node_ips = std::move(addresses->ips);
      c.node_gateways = std::move(addresses->gateways);
    }
    if (auto done = ns.finish(); !done) return std::move(done).takeError();
  }

  c.underlay_mtu = static_cast<uint32_t>(r.uint("underlayMTU", 576, 9216, 1500));
  if (const auto* v = doc.is_object() && doc.contains("ipsec") ? &doc["ipsec"] : nullptr; v && v->is_object()) {
    FieldReader ip = r.object("ipsec");
    const std::string mode = ip.str("mode", "off");
    if (mode == "off") c.ipsec.mode = IpsecMode::kOff;
    else if (mode == "keys") c.ipsec.mode = IpsecMode::kKeys;
    else if (mode == "on") c.ipsec.mode = IpsecMode::kOn;
    else if (ip.ok()) ip.fail("mode", "must be off, keys or on, not \"" + mode + "\"");
    c.ipsec.state_dir = ip.str("stateDir", "");
    c.ipsec.psk_file = ip.str("pskFile", "");
    c.ipsec.key_bits = static_cast<uint32_t>(ip.uint("keyBits", 128, 256, 128));
    if (ip.ok() && c.ipsec.key_bits != 128 && c.ipsec.key_bits != 256) {
      ip.fail("keyBits", "must be 128 (AES-128-GCM) or 256 (AES-256-GCM), not " + std::to_string(c.ipsec.key_bits));
    }
    c.ipsec.grace_period_s = ip.uint("gracePeriodSeconds", 1, 86400, 60);
    c.ipsec.rotation_period_s = ip.uint("rotationPeriodSeconds", 0, 10ull * 365 * 86400, 86400);
    if (ip.ok() && c.ipsec.rotation_period_s != 0 && c.ipsec.rotation_period_s < 2 * c.ipsec.grace_period_s) {
      ip.fail("rotationPeriodSeconds",
              std::to_string(c.ipsec.rotation_period_s) + " is shorter than twice gracePeriodSeconds (" +
                  std::to_string(c.ipsec.grace_period_s) + "): a rotation must end before the next begins; "
                  "make it at least " + std::to_string(2 * c.ipsec.grace_period_s) + ", or 0 for no periodic rotation");
    }
    // Below 2^16 a rotation would be due every few milliseconds at line rate;
    // above 2^64 - 2 there is no room left to rotate before the hard limit.
    c.ipsec.esn_soft_limit = ip.uint("esnSoftLimit", 1u << 16, ~uint64_t{0} - 1, uint64_t{1} << 63);
    c.ipsec.byte_soft_limit = ip.uint("byteSoftLimit", 0, ~uint64_t{0}, 0);
    if (ip.ok() && c.ipsec.byte_soft_limit != 0 && c.ipsec.byte_soft_limit < (uint64_t{1} << 20)) {
      ip.fail("byteSoftLimit", "must be 0 (none) or at least 1048576 bytes");
    }
    c.ipsec.replay_window = static_cast<uint32_t>(ip.uint("replayWindow", 64, 65536, 1024));
    if (ip.ok() && c.ipsec.replay_window % 64 != 0) ip.fail("replayWindow", "must be a multiple of 64");
    c.ipsec.rollout = ip.boolean("rollout", false);
    c.ipsec.nat_traversal = ip.boolean("natTraversal", false);
    if (ip.ok() && c.ipsec.nat_traversal && !c.ipsec.enabled()) {
      ip.fail("natTraversal", "is set with mode off, where nothing is encrypted: set mode to keys or on, or unset it");
    }
    if (ip.ok() && r.ok() && c.ipsec.nat_traversal && !c.tunnel_ip.isV4()) {
      ip.fail("natTraversal", "is for IPv4 underlays (ESP in UDP 4500, RFC 3948) and tunnelIP " + c.tunnel_ip.str() +
                                  " is IPv6: unset it");
    }
    // Behind a NAT: where peers reach this node (the NAT's public address).
    const std::string nat_address = ip.str("natAddress", "");
    if (ip.ok() && !nat_address.empty()) {
      auto a = IpAddress::parse(nat_address);
      if (!a) {
        ip.fail("natAddress", "\"" + nat_address + "\": " + a.error());
      } else if (!a->isV4()) {
        ip.fail("natAddress", a->str() + " is IPv6: NAT traversal (ESP in UDP 4500) is for IPv4 underlays");
      } else if (const uint32_t h = a->v4HostOrder(); h == 0 || a->isLoopback() || h >= 0xe0000000u) {
        ip.fail("natAddress", a->str() + " is not a unicast address: give the NAT's public address peers send to");
      } else if (!c.ipsec.nat_traversal) {
        ip.fail("natAddress", "is set without natTraversal: a NAT passes only ESP in UDP 4500, so set natTraversal: "
                              "true on every node (or unset natAddress)");
      } else if (r.ok() && *a == c.tunnel_ip) {
        ip.fail("natAddress", a->str() + " is the tunnelIP: give the NAT's public address, or unset it without a NAT");
      } else {
        c.ipsec.nat_address = *a;
      }
    }
    const bool keepalive_given = v->contains("natKeepaliveSeconds");
    c.ipsec.nat_keepalive_s = static_cast<uint32_t>(ip.uint("natKeepaliveSeconds", 0, 3600, 20));
    if (ip.ok() && !c.ipsec.nat_traversal) {
      if (keepalive_given && c.ipsec.nat_keepalive_s != 0) {
        ip.fail("natKeepaliveSeconds", "is set without natTraversal: keepalives are UDP 4500 for NATs on the path; set "
                                       "natTraversal: true, or unset it");
      }
      c.ipsec.nat_keepalive_s = 0;
    }
    if (auto done = ip.finish(); !done) return std::move(done).takeError();
  } else if (r.boolean("ipsec", false) && r.ok()) {
    // `ipsec: true`: encryption on with every setting at its default.
    c.ipsec.mode = IpsecMode::kOn;
  }
  if (r.ok()) {
    c.pod_mtu = podMtu(c.underlay_mtu, !c.tunnel_ip.isV4(), c.ipsec.enabled(), c.ipsec.nat_traversal);
    if (c.pod_mtu < 576) {
      r.fail("underlayMTU", std::to_string(c.underlay_mtu) + " leaves a pod MTU of only " + std::to_string(c.pod_mtu) +
                                " after Geneve" + (c.ipsec.enabled() ? (c.ipsec.nat_traversal ? "+ESP in UDP" : "+ESP") : "") +
                                "; use at least 1500");
    }
  }

  {
    FieldReader src = r.object("clusterSource");
    std::string type = src.str("type");
    if (type == "file") {
      c.cluster_source.kind = ClusterSourceKind::kFile;
      c.cluster_source.file_path = src.str("path");
      if (src.ok() && c.cluster_source.file_path.empty()) src.fail("path", "must name the cluster file");
      src.ignore({"kubernetes"});
    } else if (type == "kubernetes") {
      c.cluster_source.kind = ClusterSourceKind::kKubernetes;
      FieldReader k = src.object("kubernetes", true);
      c.cluster_source.kubeconfig = k.str("kubeconfig", "");
      c.cluster_source.kube_context = k.str("context", "");
      c.cluster_source.in_cluster = k.boolean("inCluster", false);
      c.cluster_source.in_cluster_dir = k.str("inClusterDir", "");
      c.cluster_source.api_server = k.str("apiServer", "");
      if (src.ok() && c.cluster_source.kubeconfig.empty() == !c.cluster_source.in_cluster) {
        src.fail("kubernetes", "give exactly one of kubeconfig (a path) or inCluster: true");
      }
      if (auto done = k.finish(); !done) return std::move(done).takeError();
      src.ignore({"path"});
    } else if (src.ok()) {
      src.fail("type", "must be \"file\" or \"kubernetes\", not \"" + type + "\"");
    }
    if (auto done = src.finish(); !done) return std::move(done).takeError();
  }

  if (r.ok() && !c.node_name_from.label.empty() && c.cluster_source.kind != ClusterSourceKind::kKubernetes &&
      !c.node_name_from.in_cluster && c.node_name_from.kubeconfig.empty())
    r.fail("nodeName", "reading the node name from a label needs the Kubernetes cluster source, inCluster or kubeconfig");

  {
    FieldReader api = r.object("api", true);
    c.api_address = api.str("address", "127.0.0.1");
    if (api.ok()) {
      if (auto ip = IpAddress::parse(c.api_address); !ip) api.fail("address", ip.error());
    }
    c.api_port = static_cast<uint16_t>(api.uint("port", 1, 65535, 9443));
    FieldReader tls = api.object("tls", true);
    c.tls.cert_file = tls.str("cert", "");
    c.tls.key_file = tls.str("key", "");
    c.tls.client_ca_file = tls.str("clientCA", "");
    if (tls.ok() && c.tls.cert_file.empty() != c.tls.key_file.empty()) tls.fail("cert", "cert and key go together");
    if (tls.ok() && !c.tls.client_ca_file.empty() && c.tls.cert_file.empty()) {
      tls.fail("clientCA", "needs cert and key: client certificates are verified only over TLS");
    }
    if (auto done = tls.finish(); !done) return std::move(done).takeError();
    c.api_insecure = api.boolean("insecure", false);
    // The attach API hands out pod addresses and ports to whoever calls it:
    // off this host it takes only the host node's client certificate, unless
    // the operator says in so many words that it may do without.
    if (api.ok() && !c.api_insecure && !IpAddress::parse(c.api_address)->isLoopback()) {
      if (c.tls.cert_file.empty()) {
        api.fail("tls", "the attach API on " + c.api_address +
                            " would be plain HTTP across the host-DPU link: give tls {cert, key, clientCA} "
                            "(scripts/make-tls.sh makes them), or set insecure: true to allow it");
      } else if (c.tls.client_ca_file.empty()) {
        api.fail("tls.clientCA", "without it any client that reaches " + c.api_address +
                                     " may attach pods: give the CA of the host's certificate, or set insecure: true");
      }
    }
    if (auto done = api.finish(); !done) return std::move(done).takeError();
  }

  {
    FieldReader m = r.object("metrics", true);
    std::string listen = m.str("listen", "");
    if (m.ok() && !listen.empty()) {
      if (auto why = parseListen(listen, c.metrics); !why.empty()) m.fail("listen", why);
    }
    if (m.ok() && c.metrics.enabled && c.metrics.address == c.api_address && c.metrics.port == c.api_port)
      m.fail("listen", "is the attach API's own address and port (api): give the metrics listener a port of its own");
    if (auto done = m.finish(); !done) return std::move(done).takeError();
  }

  c.dataplane_socket = r.str("dataplaneSocket", c.dataplane_socket);
  c.state_dir = r.str("stateDir", c.state_dir);
  if (r.ok() && c.state_dir.empty()) r.fail("stateDir", "must name a directory");
  if (c.ipsec.state_dir.empty()) c.ipsec.state_dir = c.state_dir + "/ipsec";
  {
    FieldReader lg = r.object("log", true);
    c.log_level = lg.str("level", "info");
    c.log_file = lg.str("file", "");
    if (lg.ok()) {
      if (auto lvl = log::parseLevel(c.log_level); !lvl) lg.fail("level", lvl.error());
    }
    if (auto done = lg.finish(); !done) return std::move(done).takeError();
  }
  if (auto done = r.finish(); !done) return std::move(done).takeError();
  return c;
}

Result<AgentConfig> loadAgentConfig(const std::string& path) {
  auto doc = loadConfigFile(path);
  if (!doc) return std::move(doc).takeError();
  auto c = parseAgentConfig(*doc);
  if (!c) return prefixed(path, std::move(c).takeError());
  return c;
}

}  // namespace dpu::control
