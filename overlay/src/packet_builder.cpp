// PacketBuilder (packet_builder.h): layers are written as they are added, with
// their "next" and length fields left for build(), which fills lengths from
// the outside in and checksums from the inside out (an L4 checksum needs its
// IP addresses and its own length; the IPv4 header checksum needs the total length).
#include "overlay/packet_builder.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "overlay/checksum.h"

namespace dpu::overlay {
namespace {

constexpr uint16_t kNoCode = 0xffff;  // a layer that implies no EtherType or protocol

void padOptions(std::vector<uint8_t>& options) {
  while (options.size() % 4 != 0) options.push_back(0);  // End of Option List (RFC 791, RFC 9293)
}

}  // namespace

uint8_t* PacketBuilder::push(Kind kind, size_t len, uint16_t code, bool fill) {
  layers_.push_back({kind, bytes_.size(), code, fill});
  bytes_.resize(bytes_.size() + len, 0);
  return bytes_.data() + layers_.back().offset;
}

void PacketBuilder::requireAfter(std::initializer_list<Kind> allowed, const char* what, bool may_start) const {
  if (layers_.empty()) {
    // A bare IP packet is fine (e.g. to quote inside an ICMP error); anything else needs a parent.
    if (may_start) return;
    throw std::invalid_argument(std::string("PacketBuilder: ") + what + " cannot be the first layer");
  }
  for (Kind k : allowed) {
    if (layers_.back().kind == k) return;
  }
  throw std::invalid_argument(std::string("PacketBuilder: ") + what + " cannot follow the previous layer");
}

PacketBuilder& PacketBuilder::ethernet(const MacAddress& dst, const MacAddress& src, uint16_t type) {
  if (!layers_.empty()) throw std::invalid_argument("PacketBuilder: Ethernet must be the first layer");
  uint8_t* h = push(Kind::kEthernet, eth::kHeaderLen, kNoCode);
  eth::setDst(h, dst);
  eth::setSrc(h, src);
  eth::setType(h, type);
  return *this;
}

PacketBuilder& PacketBuilder::vlan(uint16_t tci, uint16_t tpid) {
  requireAfter({Kind::kEthernet, Kind::kVlan}, "a VLAN tag");
  // The tag's TPID goes into the previous layer's type field; this layer is
  // the TCI and the type field of whatever follows.
  uint8_t* h = push(Kind::kVlan, vlan::kTagLen, tpid);
  store16(h, tci);
  return *this;
}

PacketBuilder& PacketBuilder::arp(uint16_t op, const MacAddress& sender_mac, uint32_t sender_ip,
                                  const MacAddress& target_mac, uint32_t target_ip) {
  requireAfter({Kind::kEthernet, Kind::kVlan}, "ARP");
  uint8_t* h = push(Kind::kArp, arp::kLen, eth::kTypeArp);
  arp::setEthernetIpv4(h);
  arp::setOp(h, op);
  arp::setSenderMac(h, sender_mac);
  arp::setSenderIp(h, sender_ip);
  arp::setTargetMac(h, target_mac);
  arp::setTargetIp(h, target_ip);
  return *this;
}

PacketBuilder& PacketBuilder::ipv4(const Ipv4Fields& f) {
  requireAfter({Kind::kEthernet, Kind::kVlan}, "IPv4", true);
  std::vector<uint8_t> options = f.options;
  padOptions(options);
  const size_t hl = ipv4::kMinHeaderLen + options.size();
  if (hl > ipv4::kMaxHeaderLen) throw std::invalid_argument("PacketBuilder: IPv4 options longer than 40 bytes");
  uint8_t* h = push(Kind::kIpv4, hl, eth::kTypeIpv4, !f.protocol.has_value());
  ipv4::setVersionIhl(h, hl);
  ipv4::setTos(h, f.tos);
  ipv4::setId(h, f.id);
  ipv4::setFragField(h, f.frag_field);
  ipv4::setTtl(h, f.ttl);
  ipv4::setProtocol(h, f.protocol.value_or(0));
  ipv4::setSrc(h, f.src);
  ipv4::setDst(h, f.dst);
  if (!options.empty()) std::memcpy(h + ipv4::kMinHeaderLen, options.data(), options.size());
  return *this;
}

PacketBuilder& PacketBuilder::ipv6(const Ipv6Fields& f) {
  requireAfter({Kind::kEthernet, Kind::kVlan}, "IPv6", true);
  uint8_t* h = push(Kind::kIpv6, ipv6::kHeaderLen, eth::kTypeIpv6, !f.next_header.has_value());
  ipv6::setVersionClassFlow(h, f.traffic_class, f.flow_label);
  ipv6::setNextHeader(h, f.next_header.value_or(ipproto::kNoNext));
  ipv6::setHopLimit(h, f.hop_limit);
  ipv6::setSrc(h, f.src);
  ipv6::setDst(h, f.dst);
  return *this;
}

PacketBuilder& PacketBuilder::ipv6Extension(uint8_t type, std::span<const uint8_t> body) {
  requireAfter({Kind::kIpv6, Kind::kIpv6Ext}, "an IPv6 extension header");
  const size_t len = 2 + body.size();
  const bool ah = type == ipproto::kAh;
  if (!ipv6::isExtensionHeader(type) || type == ipproto::kFragment || len % 8 != 0 || len < 8 ||
      (!ah && len > 2048) || (ah && len > 1028)) {
    throw std::invalid_argument("PacketBuilder: bad IPv6 extension header type or length");
  }
  uint8_t* h = push(Kind::kIpv6Ext, len, type);
  h[1] = static_cast<uint8_t>(ah ? len / 4 - 2 : len / 8 - 1);
  std::memcpy(h + 2, body.data(), body.size());
  return *this;
}

PacketBuilder& PacketBuilder::ipv6Fragment(uint16_t offset_units, bool more, uint32_t id) {
  requireAfter({Kind::kIpv6, Kind::kIpv6Ext}, "an IPv6 fragment header");
  uint8_t* h = push(Kind::kIpv6Ext, ipv6::kFragmentHeaderLen, ipproto::kFragment);
  store16(h + 2, static_cast<uint16_t>(offset_units << 3 | (more ? ipv6::kFragMore : 0)));
  store32(h + 4, id);
  return *this;
}

PacketBuilder& PacketBuilder::icmp(uint8_t type, uint8_t code, uint32_t rest) {
  requireAfter({Kind::kIpv4}, "ICMP");
  uint8_t* h = push(Kind::kIcmp, icmp::kHeaderLen, ipproto::kIcmp);
  icmp::setType(h, type);
  icmp::setCode(h, code);
  store32(h + 4, rest);
  return *this;
}

PacketBuilder& PacketBuilder::icmpEcho(uint8_t type, uint16_t id, uint16_t seq) {
  return icmp(type, 0, uint32_t{id} << 16 | seq);
}

PacketBuilder& PacketBuilder::icmpv6(uint8_t type, uint8_t code, uint32_t rest) {
  requireAfter({Kind::kIpv6, Kind::kIpv6Ext}, "ICMPv6");
  uint8_t* h = push(Kind::kIcmpv6, icmp6::kHeaderLen, ipproto::kIcmpv6);
  icmp6::setType(h, type);
  icmp6::setCode(h, code);
  store32(h + 4, rest);
  return *this;
}

PacketBuilder& PacketBuilder::icmpv6Echo(uint8_t type, uint16_t id, uint16_t seq) {
  return icmpv6(type, 0, uint32_t{id} << 16 | seq);
}

PacketBuilder& PacketBuilder::neighborSolicit(const Ipv6Address& target, std::optional<MacAddress> source_link_addr) {
  icmpv6(icmp6::kTypeNeighborSolicit, 0, 0);
  std::vector<uint8_t> body(target.begin(), target.end());
  if (source_link_addr) {
    body.push_back(icmp6::kNdOptSourceLinkAddr);
    body.push_back(1);
    body.insert(body.end(), source_link_addr->begin(), source_link_addr->end());
  }
  return payload(body);
}

PacketBuilder& PacketBuilder::neighborAdvert(uint32_t flags, const Ipv6Address& target,
                                             std::optional<MacAddress> target_link_addr) {
  icmpv6(icmp6::kTypeNeighborAdvert, 0, flags);
  std::vector<uint8_t> body(target.begin(), target.end());
  if (target_link_addr) {
    body.push_back(icmp6::kNdOptTargetLinkAddr);
    body.push_back(1);
    body.insert(body.end(), target_link_addr->begin(), target_link_addr->end());
  }
  return payload(body);
}

PacketBuilder& PacketBuilder::udp(uint16_t src_port, uint16_t dst_port, bool checksum) {
  requireAfter({Kind::kIpv4, Kind::kIpv6, Kind::kIpv6Ext}, "UDP");
  uint8_t* h = push(Kind::kUdp, udp::kHeaderLen, ipproto::kUdp, checksum);
  udp::setSrcPort(h, src_port);
  udp::setDstPort(h, dst_port);
  return *this;
}

PacketBuilder& PacketBuilder::tcp(const TcpFields& f) {
  requireAfter({Kind::kIpv4, Kind::kIpv6, Kind::kIpv6Ext}, "TCP");
  std::vector<uint8_t> options = f.options;
  padOptions(options);
  const size_t hl = tcp::kMinHeaderLen + options.size();
  if (hl > tcp::kMaxHeaderLen) throw std::invalid_argument("PacketBuilder: TCP options longer than 40 bytes");
  uint8_t* h = push(Kind::kTcp, hl, ipproto::kTcp);
  tcp::setSrcPort(h, f.src_port);
  tcp::setDstPort(h, f.dst_port);
  tcp::setSeq(h, f.seq);
  tcp::setAck(h, f.ack);
  tcp::setHeaderLen(h, hl);
  tcp::setFlags(h, f.flags);
  tcp::setWindow(h, f.window);
  tcp::setUrgentPointer(h, f.urgent);
  if (!options.empty()) std::memcpy(h + tcp::kMinHeaderLen, options.data(), options.size());
  return *this;
}

PacketBuilder& PacketBuilder::payload(std::span<const uint8_t> bytes) {
  if (layers_.empty()) throw std::invalid_argument("PacketBuilder: payload needs a header before it");
  uint8_t* h = push(Kind::kPayload, bytes.size(), kNoCode);
  if (!bytes.empty()) std::memcpy(h, bytes.data(), bytes.size());
  return *this;
}

PacketBuilder& PacketBuilder::dhcpReply(const MacAddress& client, uint32_t your_ip, uint8_t message_type) {
  requireAfter({Kind::kUdp}, "dhcpReply");
  constexpr size_t kFixed = 236;  // op .. file
  std::vector<uint8_t> b(kFixed + 4 + 3 + 1, 0);
  b[0] = dhcp::kOpReply;
  b[1] = dhcp::kHtypeEthernet;
  b[2] = 6;
  store32(b.data() + 4, 0x3903f326);  // xid
  store16(b.data() + 10, 0x8000);     // flags: BROADCAST
  store32(b.data() + 16, your_ip);    // yiaddr
  std::memcpy(b.data() + dhcp::kChaddrOffset, client.data(), client.size());
  store32(b.data() + kFixed, 0x63825363);  // the magic cookie
  b[kFixed + 4] = 53;                      // DHCP message type
  b[kFixed + 5] = 1;
  b[kFixed + 6] = message_type;
  b[kFixed + 7] = 255;  // end
  return payload(b);
}

std::vector<uint8_t> PacketBuilder::build() const {
  std::vector<uint8_t> out = bytes_;
  uint8_t* base = out.data();
  const size_t size = out.size();
  auto nextCode = [&](size_t i) { return i + 1 < layers_.size() ? layers_[i + 1].code : kNoCode; };

  // Lengths and "next" fields, outside in.
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    uint8_t* h = base + l.offset;
    const uint16_t next = nextCode(i);
    switch (l.kind) {
      case Kind::kEthernet:
        if (next != kNoCode) eth::setType(h, next);
        break;
      case Kind::kVlan:
        if (next != kNoCode) store16(h + 2, next);
        break;
      case Kind::kIpv4:
        if (l.fill && next != kNoCode) ipv4::setProtocol(h, static_cast<uint8_t>(next));
        ipv4::setTotalLength(h, static_cast<uint16_t>(size - l.offset));
        break;
      case Kind::kIpv6:
        if (l.fill && next != kNoCode) ipv6::setNextHeader(h, static_cast<uint8_t>(next));
        ipv6::setPayloadLength(h, static_cast<uint16_t>(size - l.offset - ipv6::kHeaderLen));
        break;
      case Kind::kIpv6Ext:
        h[0] = next != kNoCode ? static_cast<uint8_t>(next) : ipproto::kNoNext;
        break;
      case Kind::kUdp:
        udp::setLength(h, static_cast<uint16_t>(size - l.offset));
        break;
      default:
        break;
    }
  }

  // Checksums, inside out.
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& l = layers_[i];
    uint8_t* h = base + l.offset;
    const size_t len = size - l.offset;
    if (l.kind == Kind::kIpv4) {
      ipv4::setChecksum(h, 0);
      ipv4::setChecksum(h, internetChecksum({h, ipv4::headerLen(h)}));
      continue;
    }
    if (l.kind == Kind::kIcmp) {
      icmp::setChecksum(h, 0);
      icmp::setChecksum(h, internetChecksum({h, len}));
      continue;
    }
    size_t field;
    if (l.kind == Kind::kUdp && l.fill) {
      field = udp::kChecksumOffset;
    } else if (l.kind == Kind::kTcp) {
      field = tcp::kChecksumOffset;
    } else if (l.kind == Kind::kIcmpv6) {
      field = icmp6::kChecksumOffset;
    } else {
      continue;
    }
    // The pseudo-header comes from the nearest IP header before this layer.
    size_t ip_index = layers_.size();
    for (size_t j = i; j-- > 0;) {
      if (layers_[j].kind == Kind::kIpv4 || layers_[j].kind == Kind::kIpv6) {
        ip_index = j;
        break;
      }
    }
    if (ip_index >= layers_.size()) throw std::invalid_argument("PacketBuilder: L4 checksum needs an IP layer");
    const uint8_t* ip = base + layers_[ip_index].offset;
    const uint8_t proto = static_cast<uint8_t>(l.code);
    const uint32_t sum = layers_[ip_index].kind == Kind::kIpv4
                             ? pseudoHeaderSumV4(ip + ipv4::kSrcOffset, ip + ipv4::kDstOffset, proto,
                                                 static_cast<uint16_t>(len))
                             : pseudoHeaderSumV6(ip + ipv6::kSrcOffset, ip + ipv6::kDstOffset, proto,
                                                 static_cast<uint32_t>(len));
    store16(h + field, 0);
    uint16_t c = checksumFinish(checksumAdd(h, len, sum));
    if (l.kind == Kind::kUdp && c == 0) c = 0xffff;  // RFC 768: 0 means "no checksum"
    store16(h + field, c);
  }
  return out;
}

}  // namespace dpu::overlay
