// Parsing and validation of the dpu-dataplane configuration (dataplane_config.h).
#include "datapath/dataplane_config.h"

#include <unistd.h>

#include "common/config_doc.h"
#include "common/net_address.h"

namespace dpu::datapath {
namespace {

constexpr uint64_t kMaxWorkers = 64;

bool validIfname(const std::string& name) {
  if (name.empty() || name.size() > 15) return false;
  for (char c : name) {
    if (c == '/' || c == ',' || c == '=' || c == ' ' || c == ':') return false;
  }
  return true;
}

std::optional<PortKind> parseKind(const std::string& text) {
  if (text == "devargs") return PortKind::kDevargs;
  if (text == "af_xdp") return PortKind::kAfXdp;
  if (text == "af_packet") return PortKind::kAfPacket;
  if (text == "preprobed") return PortKind::kPreprobed;
  return std::nullopt;
}

// A nested reader's unknown keys surface only from its own finish(): keep the first error.
void finishInto(FieldReader& reader, std::string& errors) {
  if (auto done = reader.finish(); !done && errors.empty()) errors = done.error();
}

// A port role: {kind, devargs | iface | ethdev, fallback}. `kind` defaults to
// devargs when `devargs` is given, af_xdp when `iface` is.
PortConfig readPort(FieldReader& parent, std::string_view key, std::string& errors) {
  PortConfig port;
  if (!parent.has(key)) return port;
  FieldReader r = parent.object(key);
  port.configured = true;
  std::string default_kind = r.has("iface") ? "af_xdp" : r.has("ethdev") ? "preprobed" : "devargs";
  std::string kind_text = r.str("kind", default_kind);
  auto kind = parseKind(kind_text);
  if (!kind) {
    r.fail("kind", "unknown port kind \"" + kind_text + "\"; use devargs, af_xdp, af_packet or preprobed");
    return port;
  }
  port.kind = *kind;
  switch (port.kind) {
    case PortKind::kDevargs:
      port.devargs = r.str("devargs");
      if (r.ok() && (port.devargs.empty() || port.devargs.find(' ') != std::string::npos))
        r.fail("devargs", "must be DPDK devargs without spaces, e.g. \"net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap\"");
      break;
    case PortKind::kAfXdp:
    case PortKind::kAfPacket:
      port.iface = r.str("iface");
      if (r.ok() && !validIfname(port.iface))
        r.fail("iface", "\"" + port.iface + "\" is not a network interface name (1-15 characters, no / , = : or space)");
      port.fallback = r.boolean("fallback", true);
      break;
    case PortKind::kPreprobed:
      port.ethdev_name = r.str("ethdev");
      break;
  }
  finishInto(r, errors);
  return port;
}

Result<DataplaneConfig> fromDocument(const nlohmann::json& doc, std::string_view origin) {
  if (!doc.is_object()) return Error{std::string(origin) + ": the configuration must be an object (a mapping)"};
  DataplaneConfig c;
  FieldReader r(doc, "config");
  // Nested readers report unknown keys only from their own finish(); keep the first.
  std::string errors;

  {
    FieldReader e = r.object("eal", true);
    c.eal.no_huge = e.boolean("no_huge", true);
    c.eal.no_pci = e.boolean("no_pci", true);
    c.eal.memory_mb = static_cast<uint32_t>(e.uint("memory_mb", 64, 1 << 20, 256));
    c.eal.file_prefix = e.str("file_prefix", "dpu-dataplane-" + std::to_string(getpid()));
    c.eal.allow = e.strings("allow");
    c.eal.vdevs = e.strings("vdevs");
    c.eal.extra_args = e.strings("extra_args");
    c.eal.lcores = e.str("lcores", "");
    c.eal.log_level = e.str("log_level", "");
    if (e.ok() && (c.eal.file_prefix.empty() || c.eal.file_prefix.find('/') != std::string::npos))
      e.fail("file_prefix", "must be a non-empty name without '/' (it names files under /var/run/dpdk)");
    if (e.ok() && c.eal.no_pci && !c.eal.allow.empty())
      e.fail("allow", "PCI devices are listed but no_pci is true; set no_pci: false to probe them");
    finishInto(e, errors);
  }

  c.workers = static_cast<unsigned>(r.uint("workers", 1, kMaxWorkers, 1));
  c.mbuf_pool_size = static_cast<uint32_t>(r.uint("mbuf_pool_size", 1023, 1u << 24, 8191));
  c.mbuf_cache_size = static_cast<uint32_t>(r.uint("mbuf_cache_size", 0, 512, 256));
  c.rx_ring_size = static_cast<uint16_t>(r.uint("rx_ring_size", 64, 16384, 1024));
  c.tx_ring_size = static_cast<uint16_t>(r.uint("tx_ring_size", 64, 16384, 1024));
  c.idle_sleep_us = static_cast<uint32_t>(r.uint("idle_sleep_us", 0, 1000000, 0));
  if (r.ok() && c.mbuf_cache_size > c.mbuf_pool_size / 8)
    r.fail("mbuf_cache_size", "must be at most mbuf_pool_size / 8 (" + std::to_string(c.mbuf_pool_size / 8) + ")");

  c.uplink = readPort(r, "uplink", errors);
  if (r.ok() && !c.uplink.configured) r.fail("uplink", "is required: the port that carries Geneve to other nodes");
  c.management = readPort(r, "management", errors);
  c.host_pf = readPort(r, "host_pf", errors);
  if (r.ok() && c.host_pf.configured) {
    // One netdev or ethdev per role: the host PF's frames are bridged to the uplink.
    for (const auto* other : {&c.uplink, &c.management}) {
      if (!other->configured) continue;
      const bool same = (!c.host_pf.iface.empty() && c.host_pf.iface == other->iface) ||
                        (!c.host_pf.devargs.empty() && c.host_pf.devargs == other->devargs) ||
                        (!c.host_pf.ethdev_name.empty() && c.host_pf.ethdev_name == other->ethdev_name);
      if (same) {
        r.fail("host_pf", std::string("is the same port as ") + (other == &c.uplink ? "uplink" : "management") +
                              ": give the host PF's representor (pf0hpf on a BlueField)");
        break;
      }
    }
  }
  {
    FieldReader n = r.object("north_south", true);
    c.north_south.max_host_macs = static_cast<uint32_t>(n.uint("max_host_macs", 1, 256, 16));
    c.north_south.host_mac_ageing_s = static_cast<uint32_t>(n.uint("host_mac_ageing_s", 1, 86400, 300));
    c.north_south.max_neighbours = static_cast<uint32_t>(n.uint("max_neighbours", 1, 65536, 1024));
    c.north_south.neighbour_stale_s = static_cast<uint32_t>(n.uint("neighbour_stale_s", 1, 86400, 60));
    finishInto(n, errors);
  }

  {
    // Seconds in the file, milliseconds in the engine; the defaults are
    // conntrack::Timeouts' own, so the file and the engine cannot disagree.
    FieldReader ct = r.object("conntrack", true);
    c.conntrack.max_entries =
        static_cast<uint32_t>(ct.uint("max_entries", 1, kMaxConntrackEntries, kDefaultConntrackEntries));
    c.conntrack.affinity_entries =
        static_cast<uint32_t>(ct.uint("affinity_entries", 1, kMaxAffinityEntries, kDefaultAffinityEntries));
    c.conntrack.persist = ct.boolean("persist", true);
    FieldReader t = ct.object("timeouts", true);
    conntrack::Timeouts& to = c.conntrack.timeouts;
    auto seconds = [&t](std::string_view key, uint32_t& ms, uint32_t max_s) {
      ms = static_cast<uint32_t>(t.uint(key, kMinConntrackTimeoutS, max_s, ms / 1000) * 1000);
    };
    seconds("tcp_syn_sent_s", to.tcp_syn_sent, kMaxConntrackTimeoutS);
    seconds("tcp_syn_received_s", to.tcp_syn_received, kMaxConntrackTimeoutS);
    seconds("tcp_established_s", to.tcp_established, kMaxConntrackEstablishedS);
    seconds("tcp_fin_wait_s", to.tcp_fin_wait, kMaxConntrackTimeoutS);
    seconds("tcp_close_wait_s", to.tcp_close_wait, kMaxConntrackTimeoutS);
    seconds("tcp_time_wait_s", to.tcp_time_wait, kMaxConntrackTimeoutS);
    seconds("tcp_close_s", to.tcp_close, kMaxConntrackTimeoutS);
    seconds("udp_s", to.udp_new, kMaxConntrackTimeoutS);
    seconds("udp_stream_s", to.udp_replied, kMaxConntrackTimeoutS);
    seconds("icmp_s", to.icmp, kMaxConntrackTimeoutS);
    finishInto(t, errors);
    finishInto(ct, errors);
  }

  {
    FieldReader p = r.object("representors", true);
    std::string mode = p.str("mode", "hotplug");
    if (mode == "hotplug") {
      c.representors.mode = RepresentorMode::kHotplug;
      if (p.has("backends")) {
        c.representors.backends.clear();
        for (const auto& b : p.strings("backends")) {
          auto kind = parseKind(b);
          if (!kind || (*kind != PortKind::kAfXdp && *kind != PortKind::kAfPacket)) {
            p.fail("backends", "unknown backend \"" + b + "\"; use af_xdp and/or af_packet");
            break;
          }
          c.representors.backends.push_back(*kind);
        }
        if (p.ok() && c.representors.backends.empty()) p.fail("backends", "must name at least one backend");
      }
    } else if (mode == "template") {
      c.representors.mode = RepresentorMode::kTemplate;
      c.representors.devargs_template = p.str("devargs", "");
      if (p.ok() && !c.representors.devargs_template.empty() &&
          c.representors.devargs_template.find("{name}") == std::string::npos)
        p.fail("devargs", "must contain {name} so each representor gets its own vdev");
      for (auto& port : p.objects("ports")) {
        std::string name = port.str("name");
        std::string devargs = port.str("devargs");
        finishInto(port, errors);
        c.representors.devargs_by_name.emplace_back(name, devargs);
      }
      if (p.ok() && c.representors.devargs_template.empty() && c.representors.devargs_by_name.empty())
        p.fail("devargs", "template mode needs devargs (with {name}) or a ports list of {name, devargs}");
    } else if (mode == "preprobed") {
      c.representors.mode = RepresentorMode::kPreprobed;
      c.representors.preprobed_suffix = p.str("ethdev_suffix", "_representor_vf");
    } else {
      p.fail("mode", "unknown mode \"" + mode + "\"; use hotplug, template or preprobed");
    }
    finishInto(p, errors);
  }

  c.tunnel_ip = r.str("tunnel_ip");
  if (r.ok()) {
    if (auto ip = IpAddress::parse(c.tunnel_ip); !ip) r.fail("tunnel_ip", ip.error());
  }
  c.uplink_mac = r.str("uplink_mac", "");
  if (r.ok() && !c.uplink_mac.empty()) {
    if (auto mac = MacAddress::parse(c.uplink_mac); !mac) r.fail("uplink_mac", mac.error());
  }
  c.xdp_program = r.str("xdp_program", "");
  if (r.ok() && !c.xdp_program.empty() && access(c.xdp_program.c_str(), R_OK) != 0)
    r.fail("xdp_program", "cannot read " + c.xdp_program + ": give the path of overlay_steer.bpf.o");
  c.xdp_steer_arp = r.boolean("xdp_steer_arp", false);
  for (auto& hop : r.objects("next_hops")) {
    DataplaneConfig::NextHop h{hop.str("peer"), hop.str("mac")};
    if (hop.ok()) {
      if (auto ip = IpAddress::parse(h.peer); !ip) hop.fail("peer", ip.error());
    }
    if (hop.ok()) {
      if (auto mac = MacAddress::parse(h.mac); !mac) hop.fail("mac", mac.error());
    }
    finishInto(hop, errors);
    c.next_hops.push_back(std::move(h));
  }
  c.resolve_next_hops = r.boolean("resolve_next_hops", true);
  {
    FieldReader f = r.object("flow_cache", true);
    c.flow_cache_entries = static_cast<uint32_t>(f.uint("entries", 64, 1u << 24, 65536));
    c.flow_idle_timeout_ms = static_cast<uint32_t>(f.uint("idle_timeout_ms", 100, 24ull * 3600 * 1000, 10000));
    c.miss_budget = static_cast<uint32_t>(
        f.uint("miss_budget", 1, kMaxMissBudget, kDefaultMissBudget));
    // A percent, not a fraction: say what it is when it is out of range.
    const uint64_t share = f.uint("miss_cycle_share", 0, UINT32_MAX, kDefaultMissCycleShare);
    if (f.ok() && (share < 1 || share > 100)) {
      f.fail("miss_cycle_share", "must be between 1 and 100, not " + std::to_string(share) +
                                     " (percent of a worker's cycles new flows may use while it forwards "
                                     "established traffic; 100: no bound but miss_budget)");
    }
    c.miss_cycle_share = static_cast<uint32_t>(share);
    finishInto(f, errors);
  }
  c.offload = r.str("offload", "none");
  if (r.ok() && c.offload != "none" && c.offload != "rte_flow")
    r.fail("offload", "unknown backend \"" + c.offload + "\"; use none or rte_flow");
  {
    FieldReader s = r.object("sockets", true);
    c.sockets.programming = s.str("programming", c.sockets.programming);
    c.sockets.operator_api = s.str("operator", c.sockets.operator_api);
    if (s.ok() && (c.sockets.programming.empty() || c.sockets.programming[0] != '/'))
      s.fail("programming", "must be an absolute path");
    if (s.ok() && (c.sockets.operator_api.empty() || c.sockets.operator_api[0] != '/'))
      s.fail("operator", "must be an absolute path");
    if (s.ok() && c.sockets.programming == c.sockets.operator_api)
      s.fail("operator", "must differ from sockets.programming");
    finishInto(s, errors);
  }
  {
    FieldReader m = r.object("metrics", true);
    const std::string listen = m.str("listen", "");
    if (m.ok() && !listen.empty()) {
      if (auto parsed = parseMetricsListen(listen); parsed) c.metrics = *parsed;
      else m.fail("listen", parsed.error());
    }
    finishInto(m, errors);
  }
  {
    FieldReader l = r.object("log", true);
    c.log_level = l.str("level", "info");
    c.log_file = l.str("file", "");
    if (l.ok() && c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" && c.log_level != "error")
      l.fail("level", "unknown level \"" + c.log_level + "\"; use debug, info, warn or error");
    finishInto(l, errors);
  }
  if (auto done = r.finish(); !done) return prefixed(std::string(origin), std::move(done).takeError());
  if (!errors.empty()) return Error{std::string(origin) + ": " + errors};
  return c;
}

}  // namespace

Result<DataplaneConfig> parseDataplaneConfig(std::string_view text, std::string_view origin) {
  auto doc = parseConfigText(text, origin);
  if (!doc) return std::move(doc).takeError();
  return fromDocument(*doc, origin);
}

Result<DataplaneConfig> loadDataplaneConfig(const std::string& path) {
  auto doc = loadConfigFile(path);
  if (!doc) return std::move(doc).takeError();
  return fromDocument(*doc, path);
}

Result<MetricsConfig> parseMetricsListen(std::string_view text) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Error{"\"" + std::string(text) + "\" is not [IPv6]:PORT", ErrorCode::kInvalid};
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon)
      return Error{"\"" + std::string(text) + "\" is not ADDRESS:PORT (IPv6 as [::]:9476)", ErrorCode::kInvalid};
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto ip = IpAddress::parse(host);
  if (!ip) return Error{"\"" + std::string(host) + "\" is not a numeric IPv4 or IPv6 address", ErrorCode::kInvalid};
  unsigned value = 0;
  bool digits = !port.empty() && port.size() <= 5;
  for (char ch : port) {
    if (ch < '0' || ch > '9') digits = false;
    else value = value * 10 + static_cast<unsigned>(ch - '0');
  }
  if (!digits || value == 0 || value > 65535)
    return Error{"port \"" + std::string(port) + "\" is not a number from 1 to 65535", ErrorCode::kInvalid};
  MetricsConfig m;
  m.enabled = true;
  m.address = std::string(host);
  m.port = static_cast<uint16_t>(value);
  return m;
}

std::string portKindName(PortKind kind) {
  switch (kind) {
    case PortKind::kDevargs: return "devargs";
    case PortKind::kAfXdp: return "af_xdp";
    case PortKind::kAfPacket: return "af_packet";
    case PortKind::kPreprobed: return "preprobed";
  }
  return "?";
}

std::string afXdpDevargs(const std::string& vdev_suffix, const std::string& iface, const std::string& xdp_program) {
  std::string devargs = "net_af_xdp_" + vdev_suffix + ",iface=" + iface + ",start_queue=0,queue_count=1";
  if (!xdp_program.empty()) devargs += ",xdp_prog=" + xdp_program;
  return devargs;
}

std::string afPacketDevargs(const std::string& vdev_suffix, const std::string& iface, unsigned queue_pairs) {
  // qdisc_bypass: our frames skip the netdev's qdisc, as the PMD intends.
  return "net_af_packet_" + vdev_suffix + ",iface=" + iface + ",qpairs=" + std::to_string(queue_pairs) +
         ",qdisc_bypass=1";
}

std::string standbyProblem(const DataplaneConfig& config) {
  std::string probed;
  if (!config.eal.allow.empty()) probed = "eal.allow";
  else if (!config.eal.vdevs.empty()) probed = "eal.vdevs";
  else if (config.uplink.kind == PortKind::kPreprobed) probed = "uplink.kind preprobed";
  else if (config.management.configured && config.management.kind == PortKind::kPreprobed)
    probed = "management.kind preprobed";
  else if (config.host_pf.configured && config.host_pf.kind == PortKind::kPreprobed) probed = "host_pf.kind preprobed";
  else if (config.representors.mode == RepresentorMode::kPreprobed) probed = "representors.mode preprobed";
  if (probed.empty()) return "";
  return "a standby cannot wait beside the active dataplane with this config: " + probed +
         " makes EAL probe the devices the active one owns at start; use ports opened after EAL (uplink and "
         "host_pf af_xdp or af_packet, representors hotplug) or run one dataplane without --standby";
}

std::string expandTemplate(const std::string& templ, const std::string& name) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t hit = templ.find("{name}", pos);
    if (hit == std::string::npos) break;
    out.append(templ, pos, hit - pos);
    out += name;
    pos = hit + 6;
  }
  out.append(templ, pos);
  return out;
}

}  // namespace dpu::datapath
