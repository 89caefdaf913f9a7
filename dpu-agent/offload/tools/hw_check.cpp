// dpu-offload-hw-check: the hardware check for the first BlueField it meets
// (docs/hardware-test-plan.md). It starts the EAL on the ports it is given
// (on a DPU: the mlx5 PF with two VF representors), builds the rte_flow
// backend the dataplane uses (rte_flow_backend.h) and, for one flow of every
// kind the offload README lists, reports:
//   - what our own analysis says (offloadable.h: kinds that stay in software
//     by design never reach the device),
//   - the device's answer to rte_flow_validate and to rte_flow_create,
//   - the rule's COUNT after the traffic the operator sends while the rules
//     are held (--traffic-seconds; the plan says what to send),
// then the insertion and removal rate of one kind (--rate-flows rules).
// Every refusal is a line of the report, never a crash: on ports without
// rte_flow (net_null, net_ring, af_xdp) every kind reads "refused by the
// device", which is what its ctest checks.
//
//   dpu-offload-hw-check [options] -- EAL ARGS
//     --uplink N, --vf N --vf N   ethdev ids (default 0, then 1 and 2)
//     --traffic-seconds S         hold the rules S seconds for traffic, then read counters (default 0)
//     --rate-flows N              rules for the insertion-rate run (default 1000; 0 skips it)
//     --expect-offload            exit 3 unless every kind that can be offloaded was
// Exit status: 0 the check ran (the report says what the device took), 1 the
// EAL or a port could not start, 2 bad arguments, 3 a kind our translation
// refused before the device (a bug), or --expect-offload and a kind refused.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "flow/flow.h"
#include "offload/offloadable.h"
#include "offload/rte_flow_backend.h"
#include "offload/rte_flow_rule.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"

namespace {

using namespace dpu;
using namespace dpu::offload;
using flow::ActionType;
using flow::FlowAction;
using flow::FlowSpec;
using flow::Mac;

struct Options {
  uint16_t uplink = 0;
  uint16_t vf[2] = {1, 2};
  unsigned vf_given = 0;
  unsigned traffic_seconds = 0;
  unsigned rate_flows = 1000;
  bool expect_offload = false;
};

// ---- the flows: one of every kind, with documentation-range addresses ----

const Mac kPod1Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05};
const Mac kPod2Mac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x07};
const Mac kGatewayMac{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01};
const Mac kUplinkMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
const Mac kNextHopMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
constexpr uint32_t kVni = 0x123456;

std::array<uint8_t, 16> v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return {a, b, c, d}; }
std::array<uint8_t, 16> v6(uint8_t last) { return {0xfd, 0x00, 0x10, 0x24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last}; }

FlowAction act(ActionType type) {
  FlowAction a;
  a.type = type;
  return a;
}
FlowAction output(uint16_t port) {
  FlowAction a = act(ActionType::kOutput);
  a.port = port;
  return a;
}
FlowAction setMac(ActionType type, const Mac& mac) {
  FlowAction a = act(type);
  a.mac = mac;
  return a;
}

overlay::FlowKey podKey(uint32_t in_port, bool ipv6, uint8_t proto) {
  overlay::FlowKey k;
  k.in_port = in_port;
  k.eth_src = kPod1Mac;
  k.eth_dst = kGatewayMac;
  k.ethertype = ipv6 ? overlay::eth::kTypeIpv6 : overlay::eth::kTypeIpv4;
  k.ip_proto = proto;
  k.l3_src = ipv6 ? v6(5) : v4(10, 244, 1, 5);
  k.l3_dst = ipv6 ? v6(7) : v4(10, 244, 1, 7);
  k.l4_src = 40000;
  k.l4_dst = proto == overlay::ipproto::kTcp ? 80 : 53;
  return k;
}

FlowSpec routed(const Options& o, bool ipv6, uint8_t proto) {
  FlowSpec f;
  f.match.key = podKey(o.vf[0], ipv6, proto);
  f.actions = {act(ActionType::kDecTtl), setMac(ActionType::kSetEthSrc, kGatewayMac),
               setMac(ActionType::kSetEthDst, kPod2Mac), output(o.vf[1])};
  return f;
}

std::vector<uint8_t> encapTemplate(bool ipv6_outer) {
  overlay::GeneveTunnel t;
  t.src_mac = kUplinkMac;
  t.dst_mac = kNextHopMac;
  t.family = ipv6_outer ? overlay::UnderlayFamily::kIpv6 : overlay::UnderlayFamily::kIpv4;
  t.src_ip = ipv6_outer ? v6(0x11) : v4(192, 0, 2, 1);
  t.dst_ip = ipv6_outer ? v6(0x12) : v4(192, 0, 2, 2);
  t.vni = kVni;
  std::array<uint8_t, overlay::kOvnOptionDataLen> storage{};
  overlay::GeneveOption option;
  (void)overlay::makeOvnOption({3, 7}, storage, option);
  t.options = {&option, 1};
  overlay::GeneveEncapTemplate tmpl;
  (void)tmpl.build(t);
  return {tmpl.bytes().begin(), tmpl.bytes().end()};
}

FlowSpec encap(const Options& o, bool ipv6_outer) {
  FlowSpec f;
  f.match.key = podKey(o.vf[0], false, overlay::ipproto::kUdp);
  f.match.key.l3_dst = v4(10, 244, 2, 7);
  FlowAction e = act(ActionType::kGeneveEncap);
  e.encap_header = encapTemplate(ipv6_outer);
  e.encap_family = ipv6_outer ? 6 : 4;
  f.actions = {act(ActionType::kDecTtl), setMac(ActionType::kSetEthSrc, kGatewayMac),
               setMac(ActionType::kSetEthDst, kPod2Mac), e, output(o.uplink)};
  return f;
}

FlowSpec decap(const Options& o) {
  FlowSpec f;
  f.match.key = podKey(o.uplink, false, overlay::ipproto::kUdp);
  f.match.key.eth_src = kGatewayMac;
  f.match.key.eth_dst = kPod2Mac;
  f.match.key.l3_src = v4(10, 244, 2, 5);
  f.match.key.tunnel_id = kVni;
  flow::TunnelMatch& t = f.match.tunnel;
  t.family = 4;
  t.remote_ip = v4(192, 0, 2, 2);
  t.local_ip = v4(192, 0, 2, 1);
  t.vni = kVni;
  t.ingress_port_key = 7;
  t.egress_port_key = 3;
  FlowAction d = act(ActionType::kGeneveDecap);
  d.decap_bytes = static_cast<uint16_t>(geneveOuterLength(t));
  f.actions = {d, output(o.vf[1])};
  return f;
}

// A service connection: DNAT to the backend and SNAT to the node (the two
// rewrites an established connection's flow carries), then local delivery.
FlowSpec nat(const Options& o) {
  FlowSpec f = routed(o, false, overlay::ipproto::kTcp);
  f.match.key.l3_dst = v4(10, 96, 0, 10);
  FlowAction dst_ip = act(ActionType::kSetIpv4Dst);
  const uint8_t backend[4] = {10, 244, 1, 7};
  std::memcpy(&dst_ip.ipv4, backend, 4);
  FlowAction dst_port = act(ActionType::kSetL4Dst);
  dst_port.l4_port = 8080;
  FlowAction src_ip = act(ActionType::kSetIpv4Src);
  const uint8_t node[4] = {192, 0, 2, 1};
  std::memcpy(&src_ip.ipv4, node, 4);
  FlowAction src_port = act(ActionType::kSetL4Src);
  src_port.l4_port = 61000;
  f.actions.insert(f.actions.begin(), {dst_ip, dst_port, src_ip, src_port});
  return f;
}

// The same over IPv6 (a dual-stack service, or an IPv6 pod's egress SNAT).
FlowSpec nat6(const Options& o) {
  FlowSpec f = routed(o, true, overlay::ipproto::kTcp);
  f.match.key.l3_dst = {0xfd, 0x00, 0, 0x96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};  // fd00:96::10
  FlowAction dst_ip = act(ActionType::kSetIpv6Dst);
  dst_ip.ipv6 = v6(7);
  FlowAction dst_port = act(ActionType::kSetL4Dst);
  dst_port.l4_port = 8080;
  FlowAction src_ip = act(ActionType::kSetIpv6Src);
  src_ip.ipv6 = v6(1);
  FlowAction src_port = act(ActionType::kSetL4Src);
  src_port.l4_port = 61000;
  f.actions.insert(f.actions.begin(), {dst_ip, dst_port, src_ip, src_port});
  return f;
}

FlowSpec dropFlow(const Options& o) {
  FlowSpec f;
  f.match.key = podKey(o.vf[0], false, overlay::ipproto::kUdp);
  f.match.key.eth_src = {0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x66};  // not the port's own MAC
  FlowAction d = act(ActionType::kDrop);
  d.drop_reason = 1;
  f.actions = {d};
  return f;
}

FlowSpec esp(const Options& o) {
  FlowSpec f = encap(o, false);
  FlowAction e = act(ActionType::kEspEncrypt);
  e.sa_index = 1;
  f.actions.insert(f.actions.end() - 1, e);
  return f;
}

struct Kind {
  const char* name;
  const char* what;
  FlowSpec flow;
};

std::vector<Kind> catalogue(const Options& o) {
  return {
      {"vf_to_vf", "VF -> VF routed (IPv4 UDP): DEC_TTL, SET_MAC_SRC/DST, REPRESENTED_PORT", routed(o, false, 17)},
      {"vf_to_vf_ipv6", "VF -> VF routed (IPv6 TCP): DEC_TTL (hop limit), SET_MAC_SRC/DST", routed(o, true, 6)},
      {"vf_to_geneve", "VF -> Geneve (IPv4 underlay): RAW_ENCAP with the OVN option", encap(o, false)},
      {"geneve_to_vf", "Geneve -> VF: GENEVE + GENEVE_OPT match, RAW_DECAP", decap(o)},
      {"nat", "service connection: SET_IPV4_DST/SRC, SET_TP_DST/SRC, after its port's FIN/SYN/RST punt rules", nat(o)},
      {"nat_ipv6", "IPv6 service connection: SET_IPV6_DST/SRC, SET_TP_DST/SRC, after its punt rules", nat6(o)},
      {"drop", "port-security drop: DROP", dropFlow(o)},
      {"esp", "Geneve under ESP (IPsec)", esp(o)},
      {"geneve_ipv6_underlay", "VF -> Geneve over an IPv6 underlay", encap(o, true)},
  };
}

// ---- the device ----

// The rte_flow calls with their last answers kept, so each step is reported.
struct Recorder {
  std::string validate;  // "" = not called
  std::string create;
  static std::string answer(int ret, const rte_flow_error* e) {
    if (ret == 0) return "accepted";
    const std::string code = std::strerror(ret < 0 ? -ret : ret);
    std::string s = "refused (" + code + ")";
    if (e != nullptr && e->message != nullptr && code != e->message) s += ": " + std::string(e->message);
    return s;
  }
};

Recorder g_rec;

RteFlowCalls recordingCalls() {
  RteFlowCalls c;
  c.validate = [](uint16_t p, const rte_flow_attr* a, const rte_flow_item* i, const rte_flow_action* x,
                  rte_flow_error* e) {
    const int ret = rte_flow_validate(p, a, i, x, e);
    g_rec.validate = Recorder::answer(ret, e);
    return ret;
  };
  c.create = [](uint16_t p, const rte_flow_attr* a, const rte_flow_item* i, const rte_flow_action* x,
                rte_flow_error* e) {
    rte_flow* f = rte_flow_create(p, a, i, x, e);
    g_rec.create = f != nullptr ? "accepted" : Recorder::answer(-rte_errno, e);
    return f;
  };
  return c;
}

bool startPort(uint16_t port, rte_mempool* pool, std::string& why) {
  if (!rte_eth_dev_is_valid_port(port)) {
    why = "no ethdev " + std::to_string(port) + " (" + std::to_string(rte_eth_dev_count_avail()) +
          " probed: check the EAL arguments)";
    return false;
  }
  rte_eth_conf conf{};
  int ret = rte_eth_dev_configure(port, 1, 1, &conf);
  if (ret == 0) ret = rte_eth_rx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), nullptr, pool);
  if (ret == 0) ret = rte_eth_tx_queue_setup(port, 0, 512, rte_eth_dev_socket_id(port), nullptr);
  if (ret == 0) ret = rte_eth_dev_start(port);
  if (ret != 0) why = "ethdev " + std::to_string(port) + ": " + rte_strerror(-ret);
  return ret == 0;
}

std::string portName(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port, name);
  return name;
}

int usage(FILE* out, int code) {
  std::fprintf(out,
               "usage: dpu-offload-hw-check [--uplink N] [--vf N --vf N] [--traffic-seconds S] [--rate-flows N]\n"
               "                            [--expect-offload] -- EAL ARGS\n"
               "  On a BlueField: -- -a 0000:03:00.0,representor=pf0vf[0-1],dv_flow_en=1 (the PF, two VF\n"
               "  representors: ethdevs 0, 1, 2). Without a NIC: -- --no-huge --no-pci -m 512 --vdev=net_null0\n"
               "  --vdev=net_ring0 --vdev=net_ring1 (every kind is then refused by the device).\n");
  return code;
}

bool parseUnsigned(const char* text, unsigned max, unsigned& out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || v > max) return false;
  out = static_cast<unsigned>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int eal_at = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    unsigned v = 0;
    auto number = [&](unsigned max) { return i + 1 < argc && parseUnsigned(argv[++i], max, v); };
    if (a == "--") {
      eal_at = i;
      break;
    } else if (a == "--uplink" && number(RTE_MAX_ETHPORTS - 1)) {
      o.uplink = static_cast<uint16_t>(v);
    } else if (a == "--vf" && o.vf_given < 2 && number(RTE_MAX_ETHPORTS - 1)) {
      o.vf[o.vf_given++] = static_cast<uint16_t>(v);
    } else if (a == "--traffic-seconds" && number(3600)) {
      o.traffic_seconds = v;
    } else if (a == "--rate-flows" && number(1000000)) {
      o.rate_flows = v;
    } else if (a == "--expect-offload") {
      o.expect_offload = true;
    } else if (a == "--help" || a == "-h") {
      return usage(stdout, 0);
    } else {
      std::fprintf(stderr, "dpu-offload-hw-check: bad argument %s\n", a.c_str());
      return usage(stderr, 2);
    }
  }
  if (eal_at < 0) return usage(stderr, 2);
  if (o.vf_given == 1) {
    std::fprintf(stderr, "dpu-offload-hw-check: give --vf twice (the flows go from one VF to the other)\n");
    return 2;
  }
  std::vector<char*> eal_args{argv[0]};
  for (int i = eal_at + 1; i < argc; ++i) eal_args.push_back(argv[i]);
  if (rte_eal_init(static_cast<int>(eal_args.size()), eal_args.data()) < 0) {
    std::fprintf(stderr, "dpu-offload-hw-check: EAL init failed: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  rte_mempool* pool = rte_pktmbuf_pool_create("hwcheck", 4095, 128, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (pool == nullptr) {
    std::fprintf(stderr, "dpu-offload-hw-check: no mbuf pool: %s (raise -m)\n", rte_strerror(rte_errno));
    rte_eal_cleanup();
    return 1;
  }
  int status = 0;
  {
    const uint16_t ports[3] = {o.uplink, o.vf[0], o.vf[1]};
    for (uint16_t p : ports) {
      std::string why;
      if (!startPort(p, pool, why)) {
        std::fprintf(stderr, "dpu-offload-hw-check: cannot start %s\n", why.c_str());
        rte_eal_cleanup();
        return 1;
      }
    }
    std::printf("dpu-offload-hw-check: uplink %u (%s), VFs %u (%s) and %u (%s)\n", o.uplink,
                portName(o.uplink).c_str(), o.vf[0], portName(o.vf[0]).c_str(), o.vf[1], portName(o.vf[1]).c_str());
    RteFlowBackendConfig config;
    config.eswitch_port = o.uplink;
    for (uint16_t p : ports) config.ports.add(p, p);
    config.tunnel_ports = {o.uplink};
    config.rule.age_timeout_s = 30;
    config.calls = recordingCalls();
    auto created = RteFlowBackend::create(config);
    if (!created) {
      std::fprintf(stderr, "dpu-offload-hw-check: %s\n", created.error().c_str());
      rte_eal_cleanup();
      return 1;
    }
    RteFlowBackend& backend = **created;
    std::printf("transfer proxy: ethdev %u\n\nport rules (root jump group 0 -> 1, TTL guards):\n", backend.proxyPort());
    for (uint16_t p : ports) {
      const std::string err = backend.portRulesError(p);
      std::printf("  port %u: %s\n", p, err.empty() ? "installed" : err.c_str());
    }

    std::printf("\nflow kinds:\n");
    struct Installed {
      const Kind* kind;
      OffloadHandle handle;
    };
    std::vector<Kind> kinds = catalogue(o);
    std::vector<Installed> installed;
    unsigned offloadable = 0, offloaded = 0, by_device = 0, by_design = 0, untranslated = 0;
    for (const Kind& k : kinds) {
      std::printf("  %-21s %s\n", k.name, k.what);
      std::printf("    match:    %s\n    actions:  %s\n", flow::describeMatch(k.flow.match).c_str(),
                  flow::describeActions(k.flow.actions).c_str());
      auto features = offloadFeatures(k.flow);
      if (!features) {
        ++by_design;
        std::printf("    analysis: %s\n    verdict:  %s: software by design\n", features.error().c_str(), k.name);
        continue;
      }
      ++offloadable;
      g_rec = Recorder{};
      auto valid = backend.validate(k.flow);
      const std::string validate_answer = g_rec.validate.empty() ? "not called" : g_rec.validate;
      g_rec = Recorder{};
      auto handle = backend.install(k.flow);
      std::printf("    rte_flow_validate: %s\n    rte_flow_create:   %s\n", validate_answer.c_str(),
                  g_rec.create.empty() ? "not called (validate refused)" : g_rec.create.c_str());
      if (handle) {
        ++offloaded;
        installed.push_back({&k, *handle});
        std::printf("    verdict:  %s: offloaded\n", k.name);
      } else if (validate_answer == "not called") {
        // Our translation refused it before the device saw it: a bug to report.
        ++untranslated;
        std::printf("    verdict:  %s: not translated into a rule: %s\n", k.name, valid.error().c_str());
      } else {
        ++by_device;
        std::printf("    verdict:  %s: refused by the device: %s\n", k.name,
                    (valid ? handle.error() : valid.error()).c_str());
      }
    }

    if (!installed.empty()) {
      if (o.traffic_seconds > 0) {
        std::printf("\nholding %zu rules for %u s: send the traffic of docs/hardware-test-plan.md now\n",
                    installed.size(), o.traffic_seconds);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(o.traffic_seconds));
      }
      std::printf("\ncounters (COUNT) after traffic:\n");
      for (const Installed& i : installed) {
        auto c = backend.query(i.handle);
        if (c) {
          std::printf("  %-21s %llu packets, %llu bytes, idle %u s\n", i.kind->name,
                      static_cast<unsigned long long>(c->packets), static_cast<unsigned long long>(c->bytes),
                      c->idle_seconds);
        } else {
          std::printf("  %-21s query failed: %s\n", i.kind->name, c.error().c_str());
        }
        (void)backend.remove(i.handle);
      }
    } else {
      std::printf("\ncounters (COUNT) after traffic: no rule installed\n");
    }

    if (o.rate_flows > 0) {
      // Distinct exact-match rules of the first kind, as new connections make them.
      std::vector<OffloadHandle> handles;
      handles.reserve(o.rate_flows);
      FlowSpec f = kinds.front().flow;
      std::string first_error;
      const auto t0 = std::chrono::steady_clock::now();
      for (unsigned n = 0; n < o.rate_flows; ++n) {
        f.match.key.l4_src = static_cast<uint16_t>(1024 + n % 64000);
        f.match.key.l3_src[3] = static_cast<uint8_t>(5 + n / 64000);
        auto h = backend.install(f);
        if (!h) {
          first_error = h.error();
          break;
        }
        handles.push_back(*h);
      }
      const double insert_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto t1 = std::chrono::steady_clock::now();
      for (OffloadHandle h : handles) (void)backend.remove(h);
      const double remove_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      std::printf("\ninsertion rate (%s, %u rules):\n", kinds.front().name, o.rate_flows);
      if (handles.empty()) {
        std::printf("  not measured: the device refused the first rule: %s\n", first_error.c_str());
      } else {
        std::printf("  inserted %zu rules in %.3f s: %.0f rules/s\n", handles.size(), insert_s,
                    static_cast<double>(handles.size()) / insert_s);
        std::printf("  removed  %zu rules in %.3f s: %.0f rules/s\n", handles.size(), remove_s,
                    static_cast<double>(handles.size()) / remove_s);
        if (!first_error.empty()) std::printf("  stopped at rule %zu: %s\n", handles.size() + 1, first_error.c_str());
      }
    }

    std::printf("\nsummary: %zu kinds: %u offloaded, %u refused by the device, %u software by design, "
                "%u not translated\n",
                kinds.size(), offloaded, by_device, by_design, untranslated);
    if (untranslated > 0 || (o.expect_offload && offloaded != offloadable)) status = 3;
    created->reset();
    for (uint16_t p : ports) {
      (void)rte_eth_dev_stop(p);
    }
  }
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return status;
}
