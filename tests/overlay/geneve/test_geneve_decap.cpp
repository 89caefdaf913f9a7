// Geneve decapsulation: round trips with 0, 1 and many options over both
// underlays, and every way a received packet can be malformed, each with the
// drop reason it must get. Corrupted packets have their outer checksums fixed
// afterwards so that only the corrupted field is wrong.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "geneve_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

std::vector<uint8_t> encapsulate(UnderlayFamily family, std::span<const GeneveOption> options,
                                 const std::vector<uint8_t>& inner, bool udp_checksum = false) {
  GeneveTunnel t = goldenTunnel(family);
  t.options = options;
  t.udp_checksum = udp_checksum;
  TestPacket pkt(inner);
  REQUIRE(encapGeneve(pkt.buffer(), t, 0x55aa) == Status::kOk);
  return pkt.bytes();
}

size_t geneveOffset(UnderlayFamily family) { return family == UnderlayFamily::kIpv4 ? 42 : 62; }

Status parse(const std::vector<uint8_t>& pkt, const GeneveDecapConfig& config = {}) {
  GeneveHeaders h;
  return parseGeneve(pkt, config, h);
}

struct OvnFixture {
  std::array<uint8_t, 4> storage{};
  GeneveOption option;
  OvnFixture() { REQUIRE(makeOvnOption({0x22, 0x33}, storage, option) == Status::kOk); }
};

const std::vector<UnderlayFamily> kFamilies = {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6};

}  // namespace

TEST_CASE("round trip with random option lists up to 252 bytes") {
  std::mt19937 rng(2024);
  std::vector<uint8_t> pool(124 * 16);
  for (auto& b : pool) b = static_cast<uint8_t>(rng());
  for (int round = 0; round < 400; ++round) {
    const auto family = kFamilies[round % 2];
    // 0, 1 or many options; each non-critical or the OVN option at most once.
    const uint32_t count = round % 3 == 0 ? 0 : round % 3 == 1 ? 1 : 2 + rng() % (kGeneveMaxOptions - 1);
    std::vector<GeneveOption> options;
    uint32_t total = 0;
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t data_len = (rng() % 32) * 4;
      if (data_len > kGeneveMaxOptionDataLen) data_len = kGeneveMaxOptionDataLen;
      if (total + 4 + data_len > kGeneveMaxOptionsLen) data_len = 0;
      if (total + 4 + data_len > kGeneveMaxOptionsLen) break;
      options.push_back({static_cast<uint16_t>(rng()), static_cast<uint8_t>(rng() & 0x7f),
                         {&pool[i * 124], data_len}});
      total += 4 + data_len;
    }
    const auto inner = innerFrame(14 + rng() % 1500, static_cast<uint8_t>(round));
    const bool csum = rng() % 2 == 0;
    const auto pkt = encapsulate(family, options, inner, csum);

    TestPacket buf(pkt);
    GeneveHeaders h;
    INFO("round " << round);
    REQUIRE(decapGeneve(buf.buffer(), {}, h) == Status::kOk);
    REQUIRE(buf.bytes() == inner);
    CHECK(h.family == family);
    CHECK(h.vni == kGoldenVni);
    CHECK(h.options_len == total);
    CHECK(h.inner_offset == geneveOffset(family) + 8 + total);
    CHECK(h.inner_length == inner.size());
    CHECK_FALSE(h.critical);
    CHECK_FALSE(h.oam);
    REQUIRE(h.option_count == options.size());
    for (size_t i = 0; i < options.size(); ++i) {
      CHECK(h.options[i].option_class == options[i].option_class);
      CHECK(h.options[i].type == options[i].type);
      REQUIRE(h.options[i].data.size() == options[i].data.size());
      CHECK(std::equal(options[i].data.begin(), options[i].data.end(), h.options[i].data.begin()));
    }
    CHECK(h.optionList().size() == options.size());
  }
}

TEST_CASE("252 bytes of options in 16 options over both underlays") {
  // 15 options of 16 bytes and one of 12: 15 * 16 + 12 = 252.
  std::vector<uint8_t> data(12, 0xab);
  std::vector<GeneveOption> options(15, GeneveOption{0xffff, 0x42, data});
  options.push_back(GeneveOption{0xffff, 0x43, {data.data(), 8}});
  for (auto family : kFamilies) {
    const auto inner = innerFrame(200);
    const auto pkt = encapsulate(family, options, inner);
    CHECK(pkt[geneveOffset(family)] == 63);
    GeneveHeaders h;
    REQUIRE(parseGeneve(pkt, {}, h) == Status::kOk);
    CHECK(h.options_len == 252);
    CHECK(h.option_count == 16);
    CHECK(h.options[15].type == 0x43);
  }
}

TEST_CASE("more options than recorded: kGeneveTooManyOptions") {
  std::vector<GeneveOption> options(kGeneveMaxOptions + 1, GeneveOption{0x0100, 0x01, {}});
  const auto pkt = encapsulate(UnderlayFamily::kIpv4, options, innerFrame(60));
  CHECK(parse(pkt) == Status::kGeneveTooManyOptions);
  options.pop_back();
  CHECK(parse(encapsulate(UnderlayFamily::kIpv4, options, innerFrame(60))) == Status::kOk);
}

TEST_CASE("RFC 8926 3.5: unknown critical options drop, unknown non-critical pass") {
  const std::array<uint8_t, 8> data{1, 2, 3, 4, 5, 6, 7, 8};
  OvnFixture ovn;
  for (auto family : kFamilies) {
    GeneveOption critical[2] = {ovn.option, {0x0105, 0x81, data}};
    GeneveOption plain[2] = {ovn.option, {0x0105, 0x01, data}};
    const auto drop = encapsulate(family, critical, innerFrame(64));
    const auto pass = encapsulate(family, plain, innerFrame(64));
    CHECK(parse(drop) == Status::kGeneveCriticalOption);
    CHECK(parse(pass) == Status::kOk);

    // A receiver that understands the option accepts it.
    const GeneveOptionKey both[2] = {kOvnOptionKey, {0x0105, 0x81}};
    CHECK(parse(drop, {.understood = both}) == Status::kOk);
    // A receiver that understands nothing drops even the OVN option (it is critical).
    CHECK(parse(pass, {.understood = {}}) == Status::kGeneveCriticalOption);
    // Same class, other type: not understood.
    const GeneveOptionKey other[2] = {kOvnOptionKey, {0x0105, 0x82}};
    CHECK(parse(drop, {.understood = other}) == Status::kGeneveCriticalOption);

    // The C bit is advisory for us: a critical option with C clear still drops.
    auto no_c = drop;
    no_c[geneveOffset(family) + 1] &= static_cast<uint8_t>(~0x40);
    fixOuterChecksums(no_c);
    CHECK(parse(no_c) == Status::kGeneveCriticalOption);
  }
}

TEST_CASE("bad Geneve version") {
  for (auto family : kFamilies) {
    for (uint8_t version : {1, 2, 3}) {
      auto pkt = encapsulate(family, {}, innerFrame(64));
      pkt[geneveOffset(family)] |= static_cast<uint8_t>(version << 6);
      fixOuterChecksums(pkt);
      CHECK(parse(pkt) == Status::kBadGeneveVersion);
    }
  }
}

TEST_CASE("options length beyond the packet") {
  for (auto family : kFamilies) {
    auto pkt = encapsulate(family, {}, innerFrame(64));
    // 64 bytes of inner frame: 16 words of options would consume it all and leave no inner header;
    // 17 words run past the datagram.
    pkt[geneveOffset(family)] = 17;
    fixOuterChecksums(pkt);
    CHECK(parse(pkt) == Status::kBadGeneveLength);
    pkt[geneveOffset(family)] = 63;
    fixOuterChecksums(pkt);
    CHECK(parse(pkt) == Status::kBadGeneveLength);
  }
}

TEST_CASE("malformed option lengths") {
  OvnFixture ovn;
  const std::array<uint8_t, 8> data{};
  for (auto family : kFamilies) {
    const size_t g = geneveOffset(family);
    GeneveOption two[2] = {{0x0100, 0x01, data}, ovn.option};  // 12 + 8 = 20 bytes: Opt Len 5
    const auto base = encapsulate(family, two, innerFrame(64));
    REQUIRE(parse(base) == Status::kOk);

    auto overrun = base;  // first option claims 4 more bytes than the area holds
    overrun.at(g + 8 + 3) = 5;  // at(): GCC 12 false -Wstringop-overflow on []
    fixOuterChecksums(overrun);
    CHECK(parse(overrun) == Status::kBadGeneveOption);

    auto last_overrun = base;  // the OVN option claims 8 bytes of data
    last_overrun[g + 8 + 12 + 3] = 2;
    fixOuterChecksums(last_overrun);
    CHECK(parse(last_overrun) == Status::kBadGeneveOption);

    auto short_area = base;  // Opt Len cuts the OVN option's data off
    short_area[g] = 4;
    fixOuterChecksums(short_area);
    CHECK(parse(short_area) == Status::kBadGeneveOption);

    auto header_only = base;  // Opt Len cuts the OVN option to its header alone
    header_only[g] = 4;
    header_only[g + 8 + 12 + 3] = 0;  // ... which says it has no data: a 0-byte OVN option
    fixOuterChecksums(header_only);
    CHECK(parse(header_only) == Status::kBadGeneveOption);

    auto reserved = base;  // the R bits of an option are ignored on receipt
    reserved[g + 8 + 3] |= 0xe0;
    reserved[g + 1] |= 0x3f;  // and so are the reserved bits of the header
    reserved[g + 7] = 0xff;
    fixOuterChecksums(reserved);
    CHECK(parse(reserved) == Status::kOk);
  }
}

TEST_CASE("a malformed or repeated OVN option is refused") {
  OvnFixture ovn;
  const std::array<uint8_t, 8> data{};
  GeneveOption long_ovn{kOvnOptionClass, kOvnOptionType, data};
  CHECK(parse(encapsulate(UnderlayFamily::kIpv4, {&long_ovn, 1}, innerFrame(64))) == Status::kBadGeneveOption);
  GeneveOption twice[2] = {ovn.option, ovn.option};
  CHECK(parse(encapsulate(UnderlayFamily::kIpv4, twice, innerFrame(64))) == Status::kBadGeneveOption);
}

TEST_CASE("not Geneve: port, IP protocol, EtherType") {
  for (auto family : kFamilies) {
    const size_t udp = geneveOffset(family) - 8;
    auto port = encapsulate(family, {}, innerFrame(64));
    store16(&port[udp + 2], 4789);
    fixOuterChecksums(port);
    CHECK(parse(port) == Status::kNotGeneve);

    auto proto = encapsulate(family, {}, innerFrame(64));
    proto[family == UnderlayFamily::kIpv4 ? 14 + 9 : 14 + 6] = 6;
    fixOuterChecksums(proto);
    CHECK(parse(proto) == Status::kNotGeneve);

    auto ether = encapsulate(family, {}, innerFrame(64));
    store16(&ether[12], 0x0806);
    CHECK(parse(ether) == Status::kNotGeneve);
  }
}

TEST_CASE("wrong Geneve protocol type") {
  for (auto family : kFamilies) {
    for (uint16_t proto : {0x0800, 0x86dd, 0x0000, 0x6559}) {
      auto pkt = encapsulate(family, {}, innerFrame(64));
      store16(&pkt[geneveOffset(family) + 2], proto);
      fixOuterChecksums(pkt);
      CHECK(parse(pkt) == Status::kBadGeneveProtocol);
    }
  }
}

TEST_CASE("outer IPv4 checks") {
  const auto base = encapsulate(UnderlayFamily::kIpv4, {}, innerFrame(64), true);
  REQUIRE(parse(base) == Status::kOk);

  auto csum = base;
  csum[14 + 10] ^= 0x01;
  CHECK(parse(csum) == Status::kBadIpv4Checksum);
  CHECK(parse(csum, {.ipv4_checksum_verified = true}) == Status::kOk);

  auto version = base;
  version[14] = 0x65;
  fixOuterChecksums(version);
  CHECK(parse(version) == Status::kBadIpVersion);

  for (uint8_t ihl : {0, 1, 4}) {
    auto bad = base;
    bad[14] = static_cast<uint8_t>(0x40 | ihl);
    CHECK(parse(bad) == Status::kBadIpv4HeaderLength);
  }
  auto huge_ihl = encapsulate(UnderlayFamily::kIpv4, {}, innerFrame(14));
  huge_ihl.resize(14 + 40);  // the IHL of 15 words (60 bytes) runs past these 40 bytes
  huge_ihl[14] = 0x4f;
  CHECK(parse(huge_ihl) == Status::kBadIpv4HeaderLength);

  auto long_total = base;
  store16(&long_total[16], static_cast<uint16_t>(base.size() - 14 + 1));
  fixOuterChecksums(long_total);
  CHECK(parse(long_total) == Status::kBadIpv4TotalLength);
  auto short_total = base;
  store16(&short_total[16], 19);
  fixOuterChecksums(short_total);
  CHECK(parse(short_total) == Status::kBadIpv4TotalLength);

  for (uint16_t frag : {0x2000, 0x0001, 0x4001, 0x1fff, 0x6000}) {
    auto f = base;
    store16(&f[14 + 6], frag);
    fixOuterChecksums(f);
    CHECK(parse(f) == Status::kGeneveFragment);
  }
  auto no_df = base;  // DF clear is fine: our peers set it, others need not
  store16(&no_df[14 + 6], 0);
  fixOuterChecksums(no_df);
  CHECK(parse(no_df) == Status::kOk);
}

TEST_CASE("outer IPv4 with options is accepted") {
  const auto inner = innerFrame(64);
  const auto base = encapsulate(UnderlayFamily::kIpv4, {}, inner, true);
  std::vector<uint8_t> pkt(base.begin(), base.begin() + 34);
  pkt.insert(pkt.end(), {0x01, 0x01, 0x01, 0x00});  // NOP NOP NOP EOL
  pkt.insert(pkt.end(), base.begin() + 34, base.end());
  pkt[14] = 0x46;
  store16(&pkt[16], static_cast<uint16_t>(load16(&pkt[16]) + 4));
  fixOuterChecksums(pkt);
  TestPacket buf(pkt);
  GeneveHeaders h;
  REQUIRE(decapGeneve(buf.buffer(), {}, h) == Status::kOk);
  CHECK(h.inner_offset == 14 + 24 + 16);
  CHECK(buf.bytes() == inner);
}

TEST_CASE("outer IPv6 checks") {
  const auto base = encapsulate(UnderlayFamily::kIpv6, {}, innerFrame(64));
  REQUIRE(parse(base) == Status::kOk);

  auto version = base;
  version[14] = 0x40;
  CHECK(parse(version) == Status::kBadIpVersion);

  auto long_payload = base;
  store16(&long_payload[18], static_cast<uint16_t>(base.size() - 54 + 1));
  CHECK(parse(long_payload) == Status::kBadIpv6PayloadLength);
  auto jumbo = base;
  store16(&jumbo[18], 0);
  CHECK(parse(jumbo) == Status::kBadIpv6PayloadLength);

  auto fragment = base;
  fragment[20] = 44;
  CHECK(parse(fragment) == Status::kGeneveFragment);
  for (uint8_t ext : {0, 43, 60}) {
    auto e = base;
    e[20] = ext;
    CHECK(parse(e) == Status::kUnsupported);
  }
}

TEST_CASE("outer UDP length and checksums") {
  for (auto family : kFamilies) {
    const size_t udp = geneveOffset(family) - 8;
    const auto base = encapsulate(family, {}, innerFrame(101), true);
    REQUIRE(parse(base) == Status::kOk);

    auto csum = base;
    csum[udp + 6] ^= 0x10;
    CHECK(parse(csum) == Status::kBadL4Checksum);
    CHECK(parse(csum, {.udp_checksum_verified = true}) == Status::kOk);

    auto payload = base;  // a flipped inner byte breaks the checksum too
    payload.back() ^= 0x80;
    CHECK(parse(payload) == Status::kBadL4Checksum);

    auto zero = base;
    store16(&zero[udp + 6], 0);
    // Zero means "no checksum": fine over IPv4, an error over IPv6 (RFC 8200 §8.1).
    CHECK(parse(zero) == (family == UnderlayFamily::kIpv4 ? Status::kOk : Status::kBadL4Checksum));
    CHECK(parse(zero, {.udp_checksum_verified = true}) ==
          (family == UnderlayFamily::kIpv4 ? Status::kOk : Status::kBadL4Checksum));

    for (int delta : {-1, 1, -8}) {
      auto len = base;
      store16(&len[udp + 4], static_cast<uint16_t>(load16(&len[udp + 4]) + delta));
      fixOuterChecksums(len);
      CHECK(parse(len) == Status::kBadL4Header);
    }
  }
}

TEST_CASE("Ethernet padding after the outer IP packet is not part of the inner frame") {
  for (auto family : kFamilies) {
    const auto inner = innerFrame(14);  // the shortest inner frame; the outer frame is padded on the wire
    auto pkt = encapsulate(family, {}, inner, true);
    pkt.insert(pkt.end(), 12, 0);
    TestPacket buf(pkt);
    GeneveHeaders h;
    REQUIRE(decapGeneve(buf.buffer(), {}, h) == Status::kOk);
    CHECK(h.inner_length == 14);
    CHECK(buf.bytes() == inner);
  }
}

TEST_CASE("VLAN tags: one accepted, two refused") {
  const auto inner = innerFrame(64);
  const auto base = encapsulate(UnderlayFamily::kIpv6, {}, inner);
  for (uint16_t tpid : {0x8100, 0x88a8}) {
    std::vector<uint8_t> one(base.begin(), base.begin() + 12);
    one.insert(one.end(), {static_cast<uint8_t>(tpid >> 8), static_cast<uint8_t>(tpid), 0x20, 0x07});
    one.insert(one.end(), base.begin() + 12, base.end());
    GeneveHeaders h;
    REQUIRE(parseGeneve(one, {}, h) == Status::kOk);
    CHECK(h.vlan);
    CHECK(h.vlan_tci == 0x2007);
    CHECK(h.inner_offset == 4 + 62 + 8);

    std::vector<uint8_t> two(one.begin(), one.begin() + 16);
    two.insert(two.end(), {0x81, 0x00, 0x00, 0x05});
    two.insert(two.end(), one.begin() + 16, one.end());
    CHECK(parse(two) == Status::kTooManyVlans);
  }
}

TEST_CASE("an inner frame shorter than an Ethernet header is refused") {
  for (auto family : kFamilies) {
    CHECK(parse(encapsulate(family, {}, innerFrame(13))) == Status::kTruncated);
    CHECK(parse(encapsulate(family, {}, innerFrame(14))) == Status::kOk);
  }
}

TEST_CASE("the O bit is reported") {
  GeneveTunnel t = goldenTunnel(UnderlayFamily::kIpv4);
  t.oam = true;
  TestPacket pkt(innerFrame(64));
  REQUIRE(encapGeneve(pkt.buffer(), t, 1) == Status::kOk);
  GeneveHeaders h;
  REQUIRE(parseGeneve(pkt.bytes(), {}, h) == Status::kOk);
  CHECK(h.oam);
}

TEST_CASE("every truncation of encapsulated packets is rejected, and decap leaves them unchanged") {
  OvnFixture ovn;
  const std::array<uint8_t, 20> data{};
  GeneveOption options[2] = {ovn.option, {0x0100, 0x01, data}};
  for (auto family : kFamilies) {
    for (bool csum : {false, true}) {
      const auto pkt = encapsulate(family, options, innerFrame(40), csum);
      for (size_t n = 0; n < pkt.size(); ++n) {
        std::vector<uint8_t> cut(pkt.begin(), pkt.begin() + static_cast<std::ptrdiff_t>(n));
        TestPacket buf(cut);
        GeneveHeaders h;
        INFO("cut at " << n);
        REQUIRE(decapGeneve(buf.buffer(), {}, h) != Status::kOk);
        REQUIRE(buf.bytes() == cut);
      }
    }
  }
}

TEST_CASE("decap after decap: the headers of a stripped packet stay readable") {
  OvnFixture ovn;
  const auto inner = innerFrame(64);
  TestPacket buf(encapsulate(UnderlayFamily::kIpv4, {&ovn.option, 1}, inner));
  GeneveHeaders h;
  REQUIRE(decapGeneve(buf.buffer(), {}, h) == Status::kOk);
  // The option views point into the headroom, which nothing has overwritten.
  REQUIRE(h.option_count == 1);
  CHECK(h.options[0].data[1] == 0x22);
  CHECK(buf.buffer().headroom() == 512 + h.inner_offset);
  GeneveHeaders again;
  CHECK(decapGeneve(buf.buffer(), {}, again) != Status::kOk);  // the inner frame is not Geneve
}
