// Interop with scapy (tests/overlay/golden/gen_esp.py): for every plaintext,
// key size, mode and ESN setting, our inbound SA decrypts scapy's ESP packet
// to the plaintext byte for byte, and our outbound SA, given the same SPI,
// key, salt and sequence number, produces scapy's bytes exactly (our IV is
// the sequence number, which the script passes to scapy).
#include <catch2/catch.hpp>

#include "esp_test_util.h"
#include "golden.h"
#include "overlay/esp.h"

using namespace dpu::overlay;
using dpu::test::golden;
using dpu::test::TestPacket;

namespace {

constexpr const char* kFile = "tests/overlay/golden/esp.golden";
constexpr uint32_t kSpi = 0x0a0b0c0d;
constexpr uint64_t kSeqNoEsn = 0x1234;
constexpr uint64_t kSeqEsn = uint64_t{1} << 32 | 5;

EspSaConfig goldenConfig(size_t key_size, EspMode mode, bool esn, bool inner_v6, AeadBackend backend) {
  EspSaConfig c;
  c.spi = kSpi;
  c.key.resize(key_size);
  for (size_t i = 0; i < key_size; ++i) c.key[i] = static_cast<uint8_t>((key_size == 16 ? 0x01 : 0x21) + i);
  c.salt = {0xde, 0xad, 0xbe, 0xef};
  c.mode = mode;
  c.esn = esn;
  c.backend = backend;
  if (inner_v6) {
    std::array<uint8_t, 16> src{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff}, dst = src;
    src[15] = 1;
    dst[15] = 2;
    c.tunnel = EspTunnelConfig::v6(src, dst);
  } else {
    c.tunnel = EspTunnelConfig::v4({198, 51, 100, 1}, {198, 51, 100, 2});
  }
  return c;
}

// A fresh inbound SA only knows the first 2^32 subspace; walk its window up to
// where scapy's ESN packet (high half 1) is expected, as a live SA would get
// there, with packets of our own.
void primeEsnWindow(EspInboundSa& in, EspSaConfig config) {
  for (uint64_t seq : {uint64_t{1}, uint64_t{0x80000000}, uint64_t{0xffffff00}}) {
    config.initial_sequence = seq;
    auto out = std::move(EspOutboundSa::create(config)).value();
    TestPacket pkt(dpu::test::ipv4Udp(4));
    REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
    REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
  }
}

}  // namespace

TEST_CASE("ESP interop with scapy: decrypt its packets, encrypt to its bytes", "[esp][golden]") {
  const char* plaintexts[] = {"geneve_v4", "udp_v4_options", "udp_v6", "udp_v6_ext"};
  int checked = 0;
  for (AeadBackend backend : availableAeadBackends()) {
    for (const char* name : plaintexts) {
      const auto plain = golden(kFile, std::string("plain_") + name);
      const bool inner_v6 = plain[0] >> 4 == 6;
      for (size_t key_size : {16u, 32u}) {
        for (EspMode mode : {EspMode::kTransport, EspMode::kTunnel}) {
          for (bool esn : {false, true}) {
            const std::string id = std::string("esp_") + name + (key_size == 16 ? "_aes128" : "_aes256") +
                                   (mode == EspMode::kTransport ? "_transport" : "_tunnel") + (esn ? "_esn" : "_noesn");
            INFO(dpu::test::backendName(backend) << " " << id);
            const auto wire = golden(kFile, id);
            auto config = goldenConfig(key_size, mode, esn, inner_v6, backend);

            auto in = std::move(EspInboundSa::create(config)).value();
            if (esn) primeEsnWindow(in, config);
            TestPacket received(wire);
            REQUIRE(in.decrypt(received.buf) == Status::kOk);
            CHECK(received.bytes() == plain);

            config.initial_sequence = esn ? kSeqEsn : kSeqNoEsn;
            auto out = std::move(EspOutboundSa::create(config)).value();
            TestPacket sent(plain);
            REQUIRE(out.encrypt(sent.buf) == Status::kOk);
            CHECK(dpu::test::toHex(sent.bytes()) == dpu::test::toHex(wire));
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked == 32 * static_cast<int>(availableAeadBackends().size()));
}
