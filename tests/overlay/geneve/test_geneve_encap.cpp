// Geneve encapsulation: the fields of every outer header, the checksum rules
// (zero or computed over IPv4, always over IPv6), the source-port range, the C
// bit, the option limits of RFC 8926 §3.4-3.5, and failures that leave the
// packet untouched.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "geneve_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

// Verifies the UDP checksum of an encapsulated (untagged) packet independently
// of the template's precomputed sums: a full sum over pseudo-header and datagram.
bool udpChecksumValid(const std::vector<uint8_t>& pkt) {
  const uint8_t* ip = pkt.data() + 14;
  if (load16(pkt.data() + 12) == 0x0800) {
    const uint16_t len = static_cast<uint16_t>(load16(ip + 2) - 20);
    return checksumFinish(checksumAdd(ip + 20, len, pseudoHeaderSumV4(ip + 12, ip + 16, 17, len))) == 0;
  }
  const uint16_t len = load16(ip + 4);
  return checksumFinish(checksumAdd(ip + 40, len, pseudoHeaderSumV6(ip + 8, ip + 24, 17, len))) == 0;
}

}  // namespace

TEST_CASE("outer IPv4 headers") {
  const auto inner = innerFrame(100);
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
  t.ttl = 17;
  t.tos = 0xb8;
  TestPacket pkt(inner);
  REQUIRE(encapGeneve(pkt.buffer(), t, 0xabcdef01) == Status::kOk);
  const auto out = pkt.bytes();
  REQUIRE(out.size() == 14 + 20 + 8 + 8 + inner.size());
  CHECK(std::equal(t.dst_mac.begin(), t.dst_mac.end(), out.begin()));
  CHECK(std::equal(t.src_mac.begin(), t.src_mac.end(), out.begin() + 6));
  CHECK(load16(&out[12]) == 0x0800);
  const uint8_t* ip = &out[14];
  CHECK(ip[0] == 0x45);
  CHECK(ip[1] == 0xb8);
  CHECK(load16(ip + 2) == out.size() - 14);
  CHECK(load16(ip + 4) == 0);       // ID 0: atomic datagram (RFC 6864)
  CHECK(load16(ip + 6) == 0x4000);  // DF, no fragment offset
  CHECK(ip[8] == 17);
  CHECK(ip[9] == 17);
  CHECK(internetChecksum({ip, 20}) == 0);
  const uint8_t* udp = ip + 20;
  CHECK(load16(udp + 2) == 6081);
  CHECK(load16(udp + 4) == out.size() - 34);
  CHECK(load16(udp + 6) == 0);  // zero by default over IPv4 (docs/hardware.md: mlx5 cannot compute it)
  const uint8_t* g = udp + 8;
  CHECK(g[0] == 0);  // version 0, no options
  CHECK(g[1] == 0);
  CHECK(load16(g + 2) == 0x6558);
  CHECK(load32(g + 4) == (kGoldenVni << 8));
  CHECK(std::equal(inner.begin(), inner.end(), out.begin() + 50));
}

TEST_CASE("outer IPv6 headers and the always-computed UDP checksum") {
  const auto inner = innerFrame(333);
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv6);
  t.ttl = 3;
  t.tos = 0x2e;
  t.udp_checksum = false;  // ignored over IPv6
  TestPacket pkt(inner);
  REQUIRE(encapGeneve(pkt.buffer(), t, 7) == Status::kOk);
  const auto out = pkt.bytes();
  REQUIRE(out.size() == 14 + 40 + 8 + 8 + inner.size());
  CHECK(load16(&out[12]) == 0x86dd);
  const uint8_t* ip = &out[14];
  CHECK(load32(ip) == ((6u << 28) | (0x2eu << 20)));
  CHECK(load16(ip + 4) == out.size() - 54);
  CHECK(ip[6] == 17);
  CHECK(ip[7] == 3);
  CHECK(std::equal(t.src_ip.begin(), t.src_ip.end(), ip + 8));
  CHECK(std::equal(t.dst_ip.begin(), t.dst_ip.end(), ip + 24));
  CHECK(load16(ip + 40 + 4) == out.size() - 54);
  CHECK(load16(ip + 40 + 6) != 0);
  CHECK(udpChecksumValid(out));
}

TEST_CASE("the UDP checksum over IPv4 is computed on request, for any inner length") {
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
  t.udp_checksum = true;
  std::array<uint8_t, 4> ovn{};
  GeneveOption o;
  REQUIRE(makeOvnOption({1, 2}, ovn, o) == Status::kOk);
  t.options = {&o, 1};
  GeneveEncapTemplate tpl;
  REQUIRE(tpl.build(t) == Status::kOk);
  for (size_t len = 14; len < 200; ++len) {  // odd and even lengths
    TestPacket pkt(innerFrame(len, static_cast<uint8_t>(len)));
    REQUIRE(tpl.encap(pkt.buffer(), static_cast<uint32_t>(len * 2654435761u)) == Status::kOk);
    const auto out = pkt.bytes();
    INFO("inner length " << len);
    REQUIRE(load16(&out[34 + 6]) != 0);
    REQUIRE(udpChecksumValid(out));
    REQUIRE(internetChecksum({&out[14], 20}) == 0);
  }
}

TEST_CASE("a computed checksum of zero is sent as 0xffff") {
  // Place the checksum of a first encapsulation into the last inner word: the
  // sum then becomes 0xffff and the computed checksum zero (RFC 768).
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    GeneveTunnel t = goldenTunnel(family);
    t.udp_checksum = true;
    GeneveEncapTemplate tpl;
    REQUIRE(tpl.build(t) == Status::kOk);
    const size_t udp = family == UnderlayFamily::kIpv4 ? 34 : 54;
    auto inner = innerFrame(64);
    inner[62] = inner[63] = 0;
    TestPacket first(inner);
    REQUIRE(tpl.encap(first.buffer(), 5) == Status::kOk);
    const uint16_t c = load16(first.buffer().data() + udp + 6);
    store16(&inner[62], c);
    TestPacket second(inner);
    REQUIRE(tpl.encap(second.buffer(), 5) == Status::kOk);
    CHECK(load16(second.buffer().data() + udp + 6) == 0xffff);
    CHECK(udpChecksumValid(second.bytes()));
  }
}

TEST_CASE("source ports stay in 49152-65535 and spread") {
  std::mt19937 rng(1);
  std::vector<int> buckets(16);
  for (int i = 0; i < 100000; ++i) {
    const uint16_t port = geneveSourcePort(static_cast<uint32_t>(rng()));
    REQUIRE(port >= kGeneveSourcePortMin);
    ++buckets[(port - kGeneveSourcePortMin) >> 10];
  }
  for (int b : buckets) CHECK(b > 100000 / 16 * 9 / 10);
  // Hashes that differ only in the high half still land on different ports.
  CHECK(geneveSourcePort(0x00010000) != geneveSourcePort(0x00020000));
  CHECK(geneveSourcePort(0) == kGeneveSourcePortMin);
  CHECK(geneveSourcePort(0x3fff) == kGeneveSourcePortMax);

  GeneveEncapTemplate tpl;
  REQUIRE(tpl.build(goldenTunnel(UnderlayFamily::kIpv4)) == Status::kOk);
  TestPacket pkt(innerFrame(60));
  REQUIRE(tpl.encap(pkt.buffer(), 0xdeadbeef) == Status::kOk);
  CHECK(load16(pkt.buffer().data() + 34) == geneveSourcePort(0xdeadbeef));
}

TEST_CASE("the C bit follows the critical bit of the options") {
  const std::array<uint8_t, 4> data{1, 2, 3, 4};
  for (uint8_t type : {0x00, 0x01, 0x7f, 0x80, 0x81, 0xff}) {
    GeneveOption opts[2] = {{0xffff, 0x01, data}, {0x0200, type, data}};
    GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
    t.options = opts;
    GeneveEncapTemplate tpl;
    REQUIRE(tpl.build(t) == Status::kOk);
    const uint8_t flags = tpl.bytes()[34 + 8 + 1];
    CHECK(((flags & 0x40) != 0) == ((type & 0x80) != 0));
    CHECK(tpl.bytes()[42] == 4);  // 16 bytes of options
  }
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
  t.oam = true;
  GeneveEncapTemplate tpl;
  REQUIRE(tpl.build(t) == Status::kOk);
  CHECK(tpl.bytes()[43] == 0x80);
}

TEST_CASE("option limits: 124 bytes of data each, 252 bytes in all, 4-byte multiples") {
  std::vector<uint8_t> data(128, 0x5a);
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
  GeneveEncapTemplate tpl;

  GeneveOption ok124{0xffff, 1, {data.data(), 124}};
  t.options = {&ok124, 1};
  CHECK(tpl.build(t) == Status::kOk);
  CHECK(tpl.length() == 14 + 20 + 8 + 8 + 128);

  GeneveOption too_long{0xffff, 1, {data.data(), 128}};
  t.options = {&too_long, 1};
  CHECK(tpl.build(t) == Status::kBadGeneveOption);
  CHECK(tpl.length() == 14 + 20 + 8 + 8 + 128);  // the previous build stays

  GeneveOption unaligned{0xffff, 1, {data.data(), 6}};
  t.options = {&unaligned, 1};
  CHECK(tpl.build(t) == Status::kBadGeneveOption);

  // 63 empty options are exactly 252 bytes; a 64th is one too many.
  std::vector<GeneveOption> many(63, GeneveOption{0xffff, 2, {}});
  t.options = many;
  CHECK(tpl.build(t) == Status::kOk);
  CHECK(tpl.bytes()[42] == 63);
  many.push_back(GeneveOption{0xffff, 2, {}});
  t.options = many;
  CHECK(tpl.build(t) == Status::kGeneveOptionsTooLong);

  GeneveOption two[2] = {{0xffff, 1, {data.data(), 124}}, {0xffff, 1, {data.data(), 124}}};
  t.options = two;  // 256 bytes
  CHECK(tpl.build(t) == Status::kGeneveOptionsTooLong);
  two[1].data = {data.data(), 120};  // 252 bytes
  CHECK(tpl.build(t) == Status::kOk);
  CHECK(tpl.length() == GeneveEncapTemplate::kMaxLength - 20);
}

TEST_CASE("VNI limited to 24 bits") {
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv6);
  GeneveEncapTemplate tpl;
  t.vni = kGeneveMaxVni;
  REQUIRE(tpl.build(t) == Status::kOk);
  CHECK(load32(tpl.bytes().data() + 54 + 8 + 4) == 0xffffff00u);
  t.vni = kGeneveMaxVni + 1;
  CHECK(tpl.build(t) == Status::kUnsupported);
}

TEST_CASE("the template bytes are the RAW_ENCAP data: per-packet fields zero") {
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    GeneveTunnel t = goldenTunnel(family);
    t.udp_checksum = true;
    GeneveEncapTemplate tpl;
    REQUIRE(tpl.bytes().empty());
    REQUIRE(tpl.build(t) == Status::kOk);
    CHECK(tpl.family() == family);
    const auto b = tpl.bytes();
    const size_t udp = family == UnderlayFamily::kIpv4 ? 34 : 54;
    REQUIRE(b.size() == udp + 16);
    CHECK(load16(&b[udp]) == 0);
    CHECK(load16(&b[udp + 4]) == 0);
    CHECK(load16(&b[udp + 6]) == 0);
    if (family == UnderlayFamily::kIpv4) {
      CHECK(load16(&b[16]) == 0);
      CHECK(load16(&b[24]) == 0);
    } else {
      CHECK(load16(&b[18]) == 0);
    }
  }
}

TEST_CASE("no headroom: kNoRoom and the packet unchanged") {
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    GeneveEncapTemplate tpl;
    REQUIRE(tpl.build(goldenTunnel(family)) == Status::kOk);
    const auto inner = innerFrame(80);
    TestPacket short_room(inner, tpl.length() - 1);
    CHECK(tpl.encap(short_room.buffer(), 1) == Status::kNoRoom);
    CHECK(short_room.bytes() == inner);
    CHECK(short_room.buffer().headroom() == tpl.length() - 1);

    TestPacket exact_room(inner, tpl.length());
    CHECK(tpl.encap(exact_room.buffer(), 1) == Status::kOk);
    CHECK(exact_room.buffer().headroom() == 0);
  }
}

TEST_CASE("outer lengths beyond 65535: kGeneveTooBig and the packet unchanged") {
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    GeneveEncapTemplate tpl;
    REQUIRE(tpl.build(goldenTunnel(family)) == Status::kOk);
    const uint32_t udp = family == UnderlayFamily::kIpv4 ? 34 : 54;
    const uint32_t ip_overhead = family == UnderlayFamily::kIpv4 ? 20 : 0;
    const uint32_t fits = 65535 - ip_overhead - (tpl.length() - udp);
    TestPacket ok(innerFrame(fits));
    CHECK(tpl.encap(ok.buffer(), 1) == Status::kOk);
    const auto big = innerFrame(fits + 1);
    TestPacket too_big(big);
    CHECK(tpl.encap(too_big.buffer(), 1) == Status::kGeneveTooBig);
    CHECK(too_big.bytes() == big);
  }
}

TEST_CASE("an unbuilt template refuses to encapsulate") {
  GeneveEncapTemplate tpl;
  const auto inner = innerFrame(40);
  TestPacket pkt(inner);
  CHECK(tpl.encap(pkt.buffer(), 1) == Status::kUnsupported);
  CHECK(pkt.bytes() == inner);
}
