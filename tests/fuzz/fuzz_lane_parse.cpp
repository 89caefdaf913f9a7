// Fuzz target for the dataplane's hit-path parsers (dpu-agent/datapath/src/
// worker_parse.h), which read packet bytes from pods with wide loads and no
// general parser in front. For any frame:
//  - fastParse takes it only when parsePacket accepts it, with the same key
//    as extractFlowKey, and its compact key is that key's (lossless, and
//    expanding back to it, exactly when it is not long);
//  - laneParse takes it exactly when fastParse takes it as IPv4, with the
//    same compact key and end of the IP packet (14 + its IPv4 total
//    length), in both its forms (byte shuffle and scalar);
//  - the uplink's lane (tunnelLaneParse) takes a frame only when the general
//    decap and fast parse take it (lane_reference.h), with the same key and
//    the tunnel folded into it (expanding back to the inner frame's key),
//    and the same lengths, for each way the NIC may have verified checksums.
// Out-of-bounds reads trap under the fuzz build's sanitizers; a violated
// property traps too, so libFuzzer reports both like a crash.
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include "lane_reference.h"
#include "overlay/flow_key.h"
#include "overlay/parse.h"
#include "worker_parse.h"

using namespace dpu::overlay;
using dpu::datapath::CompactKey;

namespace {
void require(bool condition) {
  if (!condition) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0xffff) return 0;
  const std::span<const uint8_t> frame(data, size);
  constexpr uint32_t kPort = 7;
  ParsedPacket pf;
  FlowKey kf;
  CompactKey cf;
  bool long_f = false;
  const bool took = dpu::datapath::fastParse(frame, pf, kf, cf, long_f, kPort, 0);
  if (took) {
    ParsedPacket pg;
    require(parsePacket(frame, pg) == Status::kOk);
    const FlowKey kg = extractFlowKey(frame, pg, kPort, 0);
    require(kg == kf);
    bool long_g = false;
    const CompactKey cg = CompactKey::from(kg, long_g);
    require(cg == cf && long_g == long_f);
    if (!long_g) require(cg.expand() == kg);
  }
  CompactKey cl;
  uint16_t ip_len = 0;
  const bool lane = dpu::datapath::laneParse(data, static_cast<uint32_t>(size), kPort, cl, ip_len);
  require(lane == (took && pf.l3 == L3Type::kIpv4));
  if (lane) require(cl == cf && 14u + ip_len == pf.l3_end);
  // The scalar form (CPUs without a byte shuffle) agrees with it.
  CompactKey cs;
  uint16_t ip_len_s = 0;
  require(dpu::datapath::laneParse<false>(data, static_cast<uint32_t>(size), kPort, cs, ip_len_s) == lane);
  if (lane) require(cs == cf && 14u + ip_len_s == pf.l3_end);

  static constexpr std::array<uint8_t, 16> kTunnelIp{192, 168, 100, 1};
  uint32_t tunnel_ip;
  std::memcpy(&tunnel_ip, kTunnelIp.data(), 4);
  for (const auto& [ip_ok, udp_ok] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    CompactKey ct;
    dpu::datapath::TunnelLanePacket t;
    if (!dpu::datapath::tunnelLaneParse(data, static_cast<uint32_t>(size), tunnel_ip, ip_ok, udp_ok, kPort, ct, t)) {
      continue;
    }
    const dpu::datapath::GeneralDecap g = dpu::datapath::generalDecap(frame, kTunnelIp, ip_ok, udp_ok, kPort);
    require(g.took && g.inner_offset == dpu::datapath::kTunnelLaneOuterLen && ct == g.key && ct.folded() &&
            ct.tunnelRemote4() == g.remote && ct.tunnelIngress() == g.ingress && ct.tunnelEgress() == g.egress &&
            ct.expand() == g.full && t.inner_len == g.lane.inner_len &&
            t.ip_len == g.lane.ip_len);
  }
  return 0;
}
