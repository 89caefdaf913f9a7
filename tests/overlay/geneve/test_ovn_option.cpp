// The OVN Geneve option: the 15-bit ingress and 16-bit egress logical port
// keys, the ignored reserved bit, and the strict class/type/length checks.
#include <catch2/catch.hpp>

#include "geneve_fixtures.h"

using namespace dpu::overlay;
using namespace dpu::test;

TEST_CASE("OVN option encodes the port keys big-endian behind a zero reserved bit") {
  std::array<uint8_t, 4> data{};
  REQUIRE(encodeOvnOption({0x1234, 0xbeef}, data) == Status::kOk);
  CHECK(data == std::array<uint8_t, 4>{0x12, 0x34, 0xbe, 0xef});
  REQUIRE(encodeOvnOption({kOvnMaxIngressPortKey, 0xffff}, data) == Status::kOk);
  CHECK(data == std::array<uint8_t, 4>{0x7f, 0xff, 0xff, 0xff});
}

TEST_CASE("OVN ingress key above 15 bits is refused, nothing written") {
  std::array<uint8_t, 4> data{9, 9, 9, 9};
  CHECK(encodeOvnOption({0x8000, 1}, data) == Status::kBadGeneveOption);
  CHECK(data == std::array<uint8_t, 4>{9, 9, 9, 9});
  GeneveOption o;
  CHECK(makeOvnOption({0xffff, 1}, data, o) == Status::kBadGeneveOption);
}

TEST_CASE("OVN option round trip at the key limits") {
  for (OvnPortKeys keys : {OvnPortKeys{0, 0}, OvnPortKeys{1, 1}, OvnPortKeys{0x7fff, 0xffff},
                           OvnPortKeys{0x4000, 0x8000}, OvnPortKeys{0x7ffe, 0}}) {
    std::array<uint8_t, 4> storage{};
    GeneveOption o;
    REQUIRE(makeOvnOption(keys, storage, o) == Status::kOk);
    CHECK(o.option_class == 0x0102);
    CHECK(o.type == 0x80);
    CHECK(o.critical());
    CHECK(o.wireLength() == kOvnOptionWireLen);
    OvnPortKeys back;
    REQUIRE(decodeOvnOption(o, back) == Status::kOk);
    CHECK(back == keys);
  }
}

TEST_CASE("OVN decode ignores the reserved bit and checks class, type and length") {
  const std::array<uint8_t, 8> data{0xff, 0xff, 0x00, 0x02, 0, 0, 0, 0};
  OvnPortKeys keys;
  REQUIRE(decodeOvnOption({kOvnOptionClass, kOvnOptionType, {data.data(), 4}}, keys) == Status::kOk);
  CHECK(keys == OvnPortKeys{0x7fff, 2});
  CHECK(decodeOvnOption({kOvnOptionClass, kOvnOptionType, {data.data(), 8}}, keys) == Status::kBadGeneveOption);
  CHECK(decodeOvnOption({kOvnOptionClass, kOvnOptionType, {}}, keys) == Status::kBadGeneveOption);
  CHECK(decodeOvnOption({0x0101, kOvnOptionType, {data.data(), 4}}, keys) == Status::kBadGeneveOption);
  CHECK(decodeOvnOption({kOvnOptionClass, 0x00, {data.data(), 4}}, keys) == Status::kBadGeneveOption);
}

TEST_CASE("OVN keys survive encap and decap over both underlays") {
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    for (OvnPortKeys keys : {OvnPortKeys{0x7fff, 0xffff}, OvnPortKeys{3, 0x8001}}) {
      std::array<uint8_t, 4> storage{};
      GeneveOption o;
      REQUIRE(makeOvnOption(keys, storage, o) == Status::kOk);
      GeneveTunnel t = goldenTunnel(family);
      t.options = {&o, 1};
      const auto inner = innerFrame(70);
      TestPacket pkt(inner);
      REQUIRE(encapGeneve(pkt.buffer(), t, 99) == Status::kOk);
      GeneveHeaders h;
      REQUIRE(decapGeneve(pkt.buffer(), {}, h) == Status::kOk);
      REQUIRE(h.ovn.has_value());
      CHECK(*h.ovn == keys);
      CHECK(h.critical);
      CHECK(pkt.bytes() == inner);
    }
  }
}
