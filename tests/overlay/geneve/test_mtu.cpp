// MTU arithmetic (overlay/mtu.h) checked against real packets: for each
// underlay MTU and encapsulation the largest pod packet is built, encapsulated
// with our Geneve code, wrapped in ESP transport mode as RFC 4303 lays it out
// (and NAT-T UDP when asked), and must fill the underlay MTU without exceeding
// it; a pod packet one byte longer must not fit.
#include <catch2/catch.hpp>

#include <vector>

#include "geneve_fixtures.h"
#include "overlay/mtu.h"

using namespace dpu::overlay;
using namespace dpu::test;

namespace {

// Options of exactly `len` bytes (a multiple of 4, at most 252).
struct OptionsOfLength {
  std::vector<uint8_t> data = std::vector<uint8_t>(124, 0x11);
  std::vector<GeneveOption> list;
  explicit OptionsOfLength(uint32_t len) {
    while (len > 0) {
      const uint32_t wire = len > 128 ? 128 : len;
      list.push_back({0xffff, 0x01, {data.data(), wire - 4}});
      len -= wire;
    }
  }
};

// The inner IP packet size as the pod sends it, inside its Ethernet frame.
std::vector<uint8_t> podFrame(uint32_t ip_len) { return innerFrame(14 + ip_len); }

// ESP transport mode (RFC 4303 §3.1.1) around the outer UDP datagram of an
// untagged Geneve frame: IP | [UDP/4500] | SPI seq | IV | UDP... | pad | pad len |
// next header | ICV. Returns the outer IP packet (no Ethernet header).
std::vector<uint8_t> espWrap(const std::vector<uint8_t>& frame, const OverlayEncap& e) {
  const bool v4 = e.family == UnderlayFamily::kIpv4;
  const size_t ip_len = v4 ? 20 : 40;
  std::vector<uint8_t> ip(frame.begin() + 14, frame.begin() + 14 + static_cast<std::ptrdiff_t>(ip_len));
  std::vector<uint8_t> payload(frame.begin() + 14 + static_cast<std::ptrdiff_t>(ip_len), frame.end());
  std::vector<uint8_t> out = ip;
  if (e.esp_nat_t) out.insert(out.end(), {0x11, 0x94, 0x11, 0x94, 0, 0, 0, 0});  // 4500 -> 4500
  out.insert(out.end(), {0, 0, 0x10, 0x01, 0, 0, 0, 1});                     // SPI, sequence number
  out.insert(out.end(), e.esp_iv_len, 0xa5);                                  // explicit IV
  out.insert(out.end(), payload.begin(), payload.end());
  uint8_t pad = 0;
  while ((payload.size() + pad + 2) % 4 != 0) out.push_back(++pad);  // RFC 4303 §2.4: 1, 2, 3...
  out.push_back(pad);
  out.push_back(17);  // next header: UDP
  out.insert(out.end(), e.esp_icv_len, 0x5a);
  if (v4) {
    store16(&out[2], static_cast<uint16_t>(out.size()));
    out[9] = e.esp_nat_t ? 17 : 50;
  } else {
    store16(&out[4], static_cast<uint16_t>(out.size() - 40));
    out[6] = e.esp_nat_t ? 17 : 50;
  }
  if (e.esp_nat_t) store16(&out[ip_len + 4], static_cast<uint16_t>(out.size() - ip_len));
  return out;
}

// The outer IP packet that carries a pod IP packet of `pod_ip_len` bytes.
std::vector<uint8_t> outerPacket(uint32_t pod_ip_len, const OverlayEncap& e) {
  OptionsOfLength options(e.geneve_options_len);
  GeneveTunnel t = goldenTunnel(e.family);
  t.options = options.list;
  TestPacket pkt(podFrame(pod_ip_len));
  REQUIRE(encapGeneve(pkt.buffer(), t, 42) == Status::kOk);
  const auto frame = pkt.bytes();
  if (e.esp) return espWrap(frame, e);
  return {frame.begin() + 14, frame.end()};
}

std::vector<OverlayEncap> encaps() {
  std::vector<OverlayEncap> out;
  for (auto family : {UnderlayFamily::kIpv4, UnderlayFamily::kIpv6}) {
    for (uint32_t options : {0u, 8u, 12u, 252u}) {
      out.push_back({.family = family, .geneve_options_len = options});
      out.push_back({.family = family, .geneve_options_len = options, .esp = true});
      out.push_back({.family = family, .geneve_options_len = options, .esp = true, .esp_nat_t = true});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the largest pod packet fits the underlay exactly; one byte more does not") {
  for (const OverlayEncap& e : encaps()) {
    for (uint32_t underlay : {1280u, 1400u, 1500u, 1501u, 1502u, 1503u, 1504u, 9000u, 9001u}) {
      INFO("v" << (e.family == UnderlayFamily::kIpv4 ? 4 : 6) << " options " << e.geneve_options_len << " esp "
               << e.esp << " nat-t " << e.esp_nat_t << " underlay " << underlay);
      const uint32_t pod = podMtuFor(underlay, e);
      REQUIRE(pod > 0);
      const auto largest = outerPacket(pod, e);
      CHECK(largest.size() <= underlay);
      CHECK(largest.size() == outerPacketSize(pod, e));
      // Without ESP the packet fills the underlay to the byte; with ESP up to
      // 3 bytes may stay unused when the underlay MTU is not a multiple of 4.
      CHECK(underlay - largest.size() <= (e.esp ? 3u : 0u));
      const auto one_more = outerPacket(pod + 1, e);
      CHECK(one_more.size() > underlay);
      CHECK(one_more.size() == outerPacketSize(pod + 1, e));
    }
  }
}

TEST_CASE("outerPacketSize matches built packets for every inner length") {
  for (const OverlayEncap& e : encaps()) {
    for (uint32_t len = 20; len < 80; ++len) {
      REQUIRE(outerPacket(len, e).size() == outerPacketSize(len, e));
    }
  }
}

TEST_CASE("well-known pod MTUs") {
  const OverlayEncap ovn4{.geneve_options_len = kOvnOptionWireLen};
  const OverlayEncap ovn6{.family = UnderlayFamily::kIpv6, .geneve_options_len = kOvnOptionWireLen};
  CHECK(podMtuFor(1500, {}) == 1450);  // the classic Geneve-over-IPv4 figure without options
  CHECK(podMtuFor(1500, ovn4) == 1442);
  CHECK(podMtuFor(1500, ovn6) == 1422);
  CHECK(podMtuFor(9000, ovn4) == 8942);
  OverlayEncap esp4 = ovn4;
  esp4.esp = true;
  CHECK(podMtuFor(1500, esp4) == 1408);
  esp4.esp_nat_t = true;
  CHECK(podMtuFor(1500, esp4) == 1400);
  OverlayEncap esp6 = ovn6;
  esp6.esp = true;
  CHECK(podMtuFor(1500, esp6) == 1388);
  // ESP padding: 1501..1503 gain nothing over 1500, 1504 gains 4 bytes.
  esp4.esp_nat_t = false;
  CHECK(podMtuFor(1503, esp4) == 1408);
  CHECK(podMtuFor(1504, esp4) == 1412);
}

TEST_CASE("underlay too small for anything gives a pod MTU of 0") {
  CHECK(podMtuFor(0, {}) == 0);
  // Without options 30 bytes of UDP, Geneve and inner Ethernet follow the outer IP header.
  CHECK(podMtuFor(20 + 30 - 1, {}) == 0);
  CHECK(podMtuFor(20 + 30, {}) == 0);
  CHECK(podMtuFor(20 + 30 + 1, {}) == 1);
  const OverlayEncap esp{.esp = true};
  CHECK(podMtuFor(20 + 32 + 1, esp) == 0);
  CHECK(podMtuFor(20 + 32 + 32, esp) == 0);  // 32 - 2 trailer bytes = 30 bytes of layers, nothing left
  CHECK(podMtuFor(20 + 32 + 35, esp) == 0);  // the ciphertext ends on a 4-byte boundary
  CHECK(podMtuFor(20 + 32 + 36, esp) == 4);
}

TEST_CASE("underlayMtuFor is the inverse of podMtuFor") {
  for (const OverlayEncap& e : encaps()) {
    for (uint32_t pod = 68; pod < 9100; pod += 7) {
      const uint32_t underlay = underlayMtuFor(pod, e);
      REQUIRE(podMtuFor(underlay, e) >= pod);
      REQUIRE(podMtuFor(underlay - 1, e) < pod);
      if (!e.esp) REQUIRE(podMtuFor(underlay, e) == pod);
    }
    for (uint32_t underlay = 1280; underlay < 1600; ++underlay) {
      REQUIRE(underlayMtuFor(podMtuFor(underlay, e), e) <= underlay);
    }
  }
}

TEST_CASE("path MTU announced to pods in ICMP") {
  const OverlayEncap ovn_esp{.geneve_options_len = 8, .esp = true};
  CHECK(innerPathMtu(1500, ovn_esp, false) == 1408);
  CHECK(innerPathMtu(1500, ovn_esp, true) == 1408);
  // The underlay reported a smaller path MTU (e.g. a 1400-byte link in between).
  CHECK(innerPathMtu(1400, ovn_esp, false) == podMtuFor(1400, ovn_esp));
  // Never below the protocol minimum.
  CHECK(innerPathMtu(1280, ovn_esp, true) == 1280);
  CHECK(innerPathMtu(1280, ovn_esp, false) == podMtuFor(1280, ovn_esp));
  CHECK(innerPathMtu(100, ovn_esp, false) == 68);
  CHECK(innerPathMtu(0, {}, false) == 68);
}
