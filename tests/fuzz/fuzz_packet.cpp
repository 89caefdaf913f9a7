// Fuzz target for the packet library: parse untrusted frames, then run every
// consumer of a parsed packet on it — flow key and hash, checksum verifiers,
// neighbor discovery validation, the slow-path replies, and the NAT/TTL
// rewrites on a copy — and check the properties that must hold for any input:
//  - a rewrite never changes how the packet parses;
//  - a rewrite that does not apply leaves every byte as it was;
//  - checksums that verified before a rewrite still verify after it
//    (RFC 1624 incremental updates are exact);
//  - every reply we build parses and carries valid checksums.
// A violated property traps, so libFuzzer reports it like a crash.
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "overlay/buffer.h"
#include "overlay/flow_key.h"
#include "overlay/nat.h"
#include "overlay/parse.h"
#include "overlay/replies.h"

using namespace dpu::overlay;

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

bool sameLayout(const ParsedPacket& a, const ParsedPacket& b) {
  return a.frame_len == b.frame_len && a.l3_end == b.l3_end && a.ethertype == b.ethertype &&
         a.vlan_count == b.vlan_count && a.l3 == b.l3 && a.l3_offset == b.l3_offset && a.l4_offset == b.l4_offset &&
         a.payload_offset == b.payload_offset && a.pseudo_dst_offset == b.pseudo_dst_offset &&
         a.ip_proto == b.ip_proto && a.l4 == b.l4 && a.fragment == b.fragment;
}

void checkInvariants(const ParsedPacket& p, size_t size) {
  require(p.frame_len == size);
  require(p.l3_offset == 14 + 4 * p.vlan_count);
  require(p.l3_end <= size);
  if (p.isIp()) {
    require(p.l3_offset < p.l4_offset && p.l4_offset <= p.payload_offset && p.payload_offset <= p.l3_end);
    const uint32_t addr_len = p.l3 == L3Type::kIpv4 ? 4 : 16;
    require(p.pseudo_dst_offset == 0 || p.pseudo_dst_offset + addr_len <= p.l3_end);
  }
  if (p.fragment == Fragment::kLater) require(p.l4 == L4Type::kNone);
}

// A reply must be a well-formed packet with correct checksums.
void checkReply(Status s, const PacketBuffer& out) {
  if (s != Status::kOk) return;
  const std::span<const uint8_t> reply = out.bytes();
  ParsedPacket p;
  require(parsePacket(reply, p) == Status::kOk);
  if (p.l3 == L3Type::kIpv4) require(verifyIpv4Checksum(reply, p) == Status::kOk);
  if (p.l4 != L4Type::kNone) require(verifyL4Checksum(reply, p) == Status::kOk);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> frame(data, size);
  ParsedPacket pkt;
  if (parsePacket(frame, pkt) != Status::kOk) return 0;
  checkInvariants(pkt, size);

  const FlowKey key = extractFlowKey(frame, pkt, 1, 0x123456);
  const uint64_t hash = flowHash64(key, 0x5eed);
  require(key == extractFlowKey(frame, pkt, 1, 0x123456));
  const bool ip_ok = verifyIpv4Checksum(frame, pkt) == Status::kOk;
  const bool l4_ok = verifyL4Checksum(frame, pkt) == Status::kOk;
  NeighborMessage nd;
  if (parseNeighborMessage(frame, pkt, nd) == Status::kOk) require(nd.target_offset + 16u <= pkt.l3_end);

  // Replies, into a buffer that never overlaps the input.
  static std::array<uint8_t, 2048> out_bytes;
  const MacAddress gw_mac = {0x02, 0, 0, 0, 0, 0xfe};
  const Ipv6Address gw_v6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe};
  PacketBuffer out(out_bytes.data(), out_bytes.size(), 64, 0);
  checkReply(buildArpReply(frame, pkt, gw_mac, out), out);
  checkReply(buildNeighborAdvert(frame, pkt, gw_mac, out), out);
  checkReply(buildIcmpFragNeeded(frame, pkt, gw_mac, 0x0a0000fe, static_cast<uint16_t>(68 + hash % 9000), out), out);
  checkReply(buildIcmp6PacketTooBig(frame, pkt, gw_mac, gw_v6, static_cast<uint32_t>(1280 + hash % 9000), out),
             out);

  // Rewrites on an exact-size heap copy, with values derived from the input.
  std::vector<uint8_t> copy(frame.begin(), frame.end());
  const std::span<uint8_t> mutable_frame(copy);
  const uint32_t addr4 = static_cast<uint32_t>(hash);
  Ipv6Address addr6;
  for (size_t i = 0; i < addr6.size(); ++i) addr6[i] = static_cast<uint8_t>(hash >> (i % 8 * 8)) ^ static_cast<uint8_t>(i);
  const uint16_t port = static_cast<uint16_t>(hash >> 40);
  using Rewrite = Status (*)(std::span<uint8_t>, const ParsedPacket&, uint32_t, const Ipv6Address&, uint16_t);
  const Rewrite rewrites[] = {
      [](auto f, auto& p, uint32_t a, auto&, uint16_t) { return setIpv4Src(f, p, a); },
      [](auto f, auto& p, uint32_t a, auto&, uint16_t) { return setIpv4Dst(f, p, ~a); },
      [](auto f, auto& p, uint32_t, auto& a, uint16_t) { return setIpv6Src(f, p, a); },
      [](auto f, auto& p, uint32_t, auto& a, uint16_t) { return setIpv6Dst(f, p, a); },
      [](auto f, auto& p, uint32_t, auto&, uint16_t port) { return setL4SrcPort(f, p, port); },
      [](auto f, auto& p, uint32_t, auto&, uint16_t port) { return setL4DstPort(f, p, static_cast<uint16_t>(~port)); },
      [](auto f, auto& p, uint32_t, auto&, uint16_t) { return decrementTtl(f, p); },
  };
  for (const Rewrite& rewrite : rewrites) {
    const std::vector<uint8_t> before = copy;
    const Status s = rewrite(mutable_frame, pkt, addr4, addr6, port);
    if (s != Status::kOk) require(copy == before);
    ParsedPacket again;
    require(parsePacket(mutable_frame, again) == Status::kOk);
    require(sameLayout(pkt, again));
  }
  if (ip_ok) require(verifyIpv4Checksum(mutable_frame, pkt) == Status::kOk);
  if (l4_ok) require(verifyL4Checksum(mutable_frame, pkt) == Status::kOk);
  return 0;
}
