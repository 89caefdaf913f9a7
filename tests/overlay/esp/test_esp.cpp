// ESP SAs end to end: round trips over every backend, key size, mode, address
// family, ESN setting and IV mode at every payload length up to 1500 bytes;
// the exact layout of transport and tunnel packets; tampering; replay through
// the SA; sequence number exhaustion; configuration errors; full-packet known
// answers (DPDK's ESP vectors derived from draft-mcgrew-gcm-test-01).
#include <catch2/catch.hpp>

#include "esp_test_util.h"
#include "golden.h"
#include "overlay/esp.h"

using namespace dpu::overlay;
using dpu::test::espConfig;
using dpu::test::fromHex;
using dpu::test::TestPacket;

namespace {

EspOutboundSa makeOutbound(const EspSaConfig& c) {
  auto sa = EspOutboundSa::create(c);
  if (!sa.ok()) FAIL(sa.error());
  return std::move(sa).value();
}

EspInboundSa makeInbound(const EspSaConfig& c) {
  auto sa = EspInboundSa::create(c);
  if (!sa.ok()) FAIL(sa.error());
  return std::move(sa).value();
}

bool ipv4ChecksumOk(const std::vector<uint8_t>& p) {
  return internetChecksum({p.data(), static_cast<size_t>((p[0] & 15) * 4)}) == 0;
}

const char* modeName(EspMode m) { return m == EspMode::kTransport ? "transport" : "tunnel"; }

}  // namespace

TEST_CASE("ESP round trip: backends x keys x modes x families x ESN x IV at every length", "[esp]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (size_t key_size : {16u, 32u}) {
      for (EspMode mode : {EspMode::kTransport, EspMode::kTunnel}) {
        for (bool inner_v6 : {false, true}) {
          for (bool esn : {false, true}) {
            for (EspIvMode iv : {EspIvMode::kExplicit, EspIvMode::kImplicit}) {
              const bool outer_v6 = mode == EspMode::kTunnel && inner_v6 == !esn;  // mix families too
              INFO(dpu::test::backendName(backend)
                   << " key " << key_size << " " << modeName(mode) << (inner_v6 ? " v6" : " v4")
                   << (outer_v6 ? " outer-v6" : "") << (esn ? " esn" : "")
                   << (iv == EspIvMode::kImplicit ? " implicit-iv" : ""));
              const auto config = espConfig(key_size, mode, esn, iv, backend, outer_v6);
              auto out = makeOutbound(config);
              auto in = makeInbound(config);
              const uint32_t header = inner_v6 ? 48 : 28;
              for (uint32_t payload = 0; payload + header <= 1500; ++payload) {
                const auto plain = inner_v6 ? dpu::test::ipv6Udp(payload, payload % 3 == 0)
                                            : dpu::test::ipv4Udp(payload, payload % 5 == 0 ? 8 : 0);
                TestPacket pkt(plain);
                REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
                const auto wire = pkt.bytes();
                // Ciphertext (payload + padding + trailer) is a multiple of 4 bytes.
                const uint32_t ip_hdr = mode == EspMode::kTunnel ? (outer_v6 ? 40 : 20) : 0;
                const uint32_t keep =
                    mode == EspMode::kTransport ? static_cast<uint32_t>(plain.size()) - payload - 8 : 0;
                const uint32_t iv_size = iv == EspIvMode::kExplicit ? 8 : 0;
                REQUIRE((wire.size() - ip_hdr - keep - 8 - iv_size - 16) % 4 == 0);
                REQUIRE(wire.size() == plain.size() + out.overhead(static_cast<uint32_t>(plain.size()) - keep));
                if (!outer_v6 && (mode == EspMode::kTunnel || !inner_v6)) REQUIRE(ipv4ChecksumOk(wire));
                REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
                REQUIRE(pkt.bytes() == plain);
              }
              CHECK(in.counters().packets == out.counters().packets);
              CHECK(out.lastSequence() == out.counters().packets);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("ESP transport layout: only the IP header moves, fields fixed up", "[esp]") {
  const auto config = espConfig(16, EspMode::kTransport, false, EspIvMode::kExplicit, defaultAeadBackend());
  auto out = makeOutbound(config);

  SECTION("IPv4 with options") {
    const auto plain = dpu::test::ipv4Udp(101, 12, 0xb9);
    TestPacket pkt(plain);
    const uint8_t* payload_before = pkt.buf.data() + 32;
    REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
    const auto w = pkt.bytes();
    CHECK(pkt.buf.headroom() == 128 - 16);  // ESP header + IV in front, nothing else
    CHECK(pkt.buf.data() + 32 + 16 == payload_before);
    CHECK(w[9] == 50);
    CHECK(load16(&w[2]) == w.size());
    CHECK(ipv4ChecksumOk(w));
    CHECK(std::equal(w.begin() + 12, w.begin() + 32, plain.begin() + 12));  // addresses and options
    CHECK(load32(&w[32]) == config.spi);
    CHECK(load32(&w[36]) == 1);
    CHECK(load64(&w[40]) == 1);  // explicit IV = 64-bit sequence number
    // 109 bytes of payload + 2: 1 byte of padding.
    CHECK(w.size() == plain.size() + 16 + 1 + 2 + 16);
  }
  SECTION("IPv6 with hop-by-hop and destination options: ESP after them") {
    const auto plain = dpu::test::ipv6Udp(10, true);
    TestPacket pkt(plain);
    REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
    const auto w = pkt.bytes();
    CHECK(w[6] == 0);    // hop-by-hop still first
    CHECK(w[40] == 60);  // then destination options
    CHECK(w[48] == 50);  // whose next header is now ESP
    CHECK(load16(&w[4]) == w.size() - 40);
    CHECK(load32(&w[56]) == config.spi);
  }
  SECTION("bytes after the IP packet (Ethernet padding) are dropped") {
    auto plain = dpu::test::ipv4Udp(2);
    auto padded = plain;
    padded.resize(plain.size() + 16, 0);
    TestPacket pkt(padded);
    REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
    auto in = makeInbound(config);
    REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
    CHECK(pkt.bytes() == plain);
  }
}

TEST_CASE("ESP tunnel layout: outer header from the SA, DS copied, CE propagated", "[esp]") {
  auto config = espConfig(32, EspMode::kTunnel, true, EspIvMode::kExplicit, defaultAeadBackend());
  config.tunnel.ttl = 33;
  auto out = makeOutbound(config);
  auto in = makeInbound(config);
  const auto plain = dpu::test::ipv4Udp(64, 0, 0xb9);  // DSCP 46, ECT(1)
  TestPacket pkt(plain);
  REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
  auto w = pkt.bytes();
  CHECK(w[0] == 0x45);
  CHECK(w[1] == 0xb9);
  CHECK(load16(&w[6]) == 0x4000);
  CHECK(w[8] == 33);
  CHECK(w[9] == 50);
  CHECK(ipv4ChecksumOk(w));
  CHECK(std::vector<uint8_t>(w.begin() + 12, w.begin() + 20) == std::vector<uint8_t>{192, 0, 2, 1, 192, 0, 2, 2});
  // A router on the way marks congestion on the outer header.
  uint8_t* p = pkt.buf.data();
  store16(p + 10, checksumUpdate16(load16(p + 10), load16(p), static_cast<uint16_t>(load16(p) | 3)));
  p[1] |= 3;
  REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
  auto inner = pkt.bytes();
  CHECK(inner[1] == 0xbb);
  CHECK(ipv4ChecksumOk(inner));
  inner[1] = plain[1];
  inner[10] = plain[10];
  inner[11] = plain[11];
  CHECK(inner == plain);
}

TEST_CASE("ESP decrypt rejects tampering anywhere in ESP and leaves packet and window unchanged", "[esp]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (EspMode mode : {EspMode::kTransport, EspMode::kTunnel}) {
      for (bool esn : {false, true}) {
        INFO(dpu::test::backendName(backend) << " " << modeName(mode) << (esn ? " esn" : ""));
        const auto config = espConfig(16, mode, esn, EspIvMode::kExplicit, backend);
        auto out = makeOutbound(config);
        auto in = makeInbound(config);
        // Advance the window so the tampered packets are not simply too old.
        for (int i = 0; i < 5; ++i) {
          TestPacket warm(dpu::test::ipv4Udp(20));
          REQUIRE(out.encrypt(warm.buf) == Status::kOk);
          REQUIRE(in.decrypt(warm.buf) == Status::kOk);
        }
        const auto plain = dpu::test::ipv4Udp(45);
        TestPacket pkt(plain);
        REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
        const auto wire = pkt.bytes();
        const uint32_t esp_off = 20;
        const uint64_t top = in.replayWindow().top();
        for (size_t i = esp_off; i < wire.size(); ++i) {
          for (uint8_t flip : {0x01, 0x80}) {
            TestPacket bad(wire);
            bad.buf.data()[i] ^= flip;
            const auto before = bad.bytes();
            const Status s = in.decrypt(bad.buf);
            INFO("byte " << i << " flip " << int(flip) << ": " << statusName(s));
            if (i < esp_off + 4) {
              REQUIRE(s == Status::kEspUnknownSpi);
            } else if (i < esp_off + 8) {
              // The sequence number: either the window rejects it or the ICV does.
              REQUIRE((s == Status::kEspAuthFailed || s == Status::kEspReplay || s == Status::kEspTooOld));
            } else {
              REQUIRE(s == Status::kEspAuthFailed);
            }
            REQUIRE(bad.bytes() == before);
            REQUIRE(in.replayWindow().top() == top);
          }
        }
        // Truncated by one byte (length still consistent): ICV fails too.
        TestPacket shorter(std::vector<uint8_t>(wire.begin(), wire.end() - 1));
        store16(shorter.buf.data() + 2, static_cast<uint16_t>(wire.size() - 1));
        CHECK(in.decrypt(shorter.buf) == Status::kEspAuthFailed);
        // The genuine packet still goes through, exactly once.
        TestPacket good(wire);
        REQUIRE(in.decrypt(good.buf) == Status::kOk);
        CHECK(good.bytes() == plain);
        TestPacket again(wire);
        CHECK(in.decrypt(again.buf) == Status::kEspReplay);
        CHECK(again.bytes() == wire);
        CHECK(in.counters().dropped(Status::kEspAuthFailed) > 0);
        CHECK(in.counters().dropped(Status::kEspReplay) >= 1);
      }
    }
  }
}

TEST_CASE("ESP replay protection through the SA: reorder, duplicates, too old, 1024 and 4096", "[esp][replay]") {
  for (uint32_t window : {1024u, 4096u}) {
    for (bool esn : {false, true}) {
      INFO("window " << window << (esn ? " esn" : ""));
      auto config = espConfig(16, EspMode::kTransport, esn, EspIvMode::kExplicit, defaultAeadBackend());
      config.replay_window = window;
      auto out = makeOutbound(config);
      auto in = makeInbound(config);
      std::vector<std::vector<uint8_t>> sent;
      for (uint32_t i = 0; i < window + 10; ++i) {
        TestPacket pkt(dpu::test::ipv4Udp(i % 50));
        REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
        sent.push_back(pkt.bytes());
      }
      auto deliver = [&](size_t index) {
        TestPacket pkt(sent[index]);
        return in.decrypt(pkt.buf);
      };
      // Newest first, then the rest backwards: all inside the window.
      REQUIRE(deliver(window + 9) == Status::kOk);
      for (size_t i = window + 8; i >= 10; --i) REQUIRE(deliver(i) == Status::kOk);
      // seq 10 (index 9) is exactly one window behind the top (seq window + 10).
      // With ESN a low half left of the window is read as the next subspace
      // (RFC 4303 Appendix A2.1 case A) and fails the ICV instead.
      CHECK(deliver(9) == (esn ? Status::kEspAuthFailed : Status::kEspTooOld));
      CHECK(deliver(10) == Status::kEspReplay);
      CHECK(deliver(window + 9) == Status::kEspReplay);
      CHECK(in.counters().packets == window);
      CHECK(in.replayWindow().top() == window + 10);
    }
  }
}

TEST_CASE("ESP with ESN crosses 2^32 without losing sync, in order and reordered", "[esp][esn]") {
  for (AeadBackend backend : availableAeadBackends()) {
    INFO(dpu::test::backendName(backend));
    auto config = espConfig(32, EspMode::kTransport, true, EspIvMode::kExplicit, backend);
    auto in = makeInbound(config);
    // Walk the receiver's window up to just below 2^32 the way a live SA does
    // (each step stays within half the subspace).
    for (uint64_t seq :
         {uint64_t{1}, uint64_t{0x40000000}, uint64_t{0x80000000}, uint64_t{0xc0000000}, uint64_t{0xfffffe00}}) {
      config.initial_sequence = seq;
      auto out = makeOutbound(config);
      TestPacket pkt(dpu::test::ipv4Udp(8));
      REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
      REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
    }
    config.initial_sequence = 0xfffffe01;
    auto out = makeOutbound(config);
    std::vector<std::vector<uint8_t>> sent;
    for (int i = 0; i < 1024; ++i) {
      TestPacket pkt(dpu::test::ipv4Udp(i % 7));
      REQUIRE(out.encrypt(pkt.buf) == Status::kOk);
      sent.push_back(pkt.bytes());
    }
    CHECK(out.lastSequence() == uint64_t{0xfffffe00} + 1024);
    // Deliver in pairs swapped (1,0,3,2,...): reordering across the boundary.
    for (size_t i = 0; i + 1 < sent.size(); i += 2) {
      for (size_t j : {i + 1, i}) {
        TestPacket pkt(sent[j]);
        REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
      }
    }
    CHECK(in.replayWindow().top() == uint64_t{0xfffffe00} + 1024);
    // A packet from before the wrap is still recognised as a duplicate.
    TestPacket old(sent[10]);
    CHECK(in.decrypt(old.buf) == Status::kEspReplay);
  }
}

TEST_CASE("ESP sequence exhaustion: soft limit flags, hard limit refuses and never reuses a nonce", "[esp]") {
  for (bool esn : {false, true}) {
    INFO((esn ? "esn" : "32-bit"));
    auto config = espConfig(16, EspMode::kTransport, esn, EspIvMode::kExplicit, defaultAeadBackend());
    const uint64_t hard = esn ? UINT64_MAX : UINT32_MAX;
    {
      auto sa = makeOutbound(config);
      CHECK(sa.hardSequenceLimit() == hard);
      CHECK(sa.softSequenceLimit() == (esn ? uint64_t{1} << 63 : uint64_t{1} << 31));
      CHECK(!sa.rekeyNeeded());
    }
    config.initial_sequence = hard - 1;
    config.soft_sequence_limit = hard - 1;
    auto out = makeOutbound(config);
    auto in = makeInbound(config);
    CHECK(!out.rekeyNeeded());
    CHECK(out.sequencesLeft() == 2);
    TestPacket a(dpu::test::ipv4Udp(10));
    REQUIRE(out.encrypt(a.buf) == Status::kOk);
    CHECK(out.rekeyNeeded());
    CHECK(!out.exhausted());
    TestPacket b(dpu::test::ipv4Udp(10));
    REQUIRE(out.encrypt(b.buf) == Status::kOk);
    CHECK(load32(b.buf.data() + 24) == 0xffffffff);
    CHECK(out.exhausted());
    const auto plain = dpu::test::ipv4Udp(10);
    TestPacket c(plain);
    CHECK(out.encrypt(c.buf) == Status::kEspSeqExhausted);
    CHECK(c.bytes() == plain);
    CHECK(out.lastSequence() == hard);
    CHECK(out.counters().dropped(Status::kEspSeqExhausted) == 1);
    if (!esn) {
      // The receiver accepts the last legal sequence numbers.
      REQUIRE(in.decrypt(a.buf) == Status::kOk);
      REQUIRE(in.decrypt(b.buf) == Status::kOk);
    }
  }
}

TEST_CASE("ESP encrypt failures change nothing", "[esp]") {
  const auto config = espConfig(16, EspMode::kTransport, false, EspIvMode::kExplicit, defaultAeadBackend());
  auto out = makeOutbound(config);
  SECTION("no headroom") {
    const auto plain = dpu::test::ipv4Udp(10);
    TestPacket pkt(plain, 15, 64);
    CHECK(out.encrypt(pkt.buf) == Status::kNoRoom);
    CHECK(pkt.bytes() == plain);
  }
  SECTION("no tailroom") {
    const auto plain = dpu::test::ipv4Udp(10);
    TestPacket pkt(plain, 64, 17);
    CHECK(out.encrypt(pkt.buf) == Status::kNoRoom);
    CHECK(pkt.bytes() == plain);
  }
  SECTION("malformed IP") {
    auto plain = dpu::test::ipv4Udp(10);
    plain[0] = 0x44;
    TestPacket pkt(plain);
    CHECK(out.encrypt(pkt.buf) == Status::kBadIpv4HeaderLength);
    plain[0] = 0x45;
    store16(&plain[2], 200);
    TestPacket pkt2(plain);
    CHECK(out.encrypt(pkt2.buf) == Status::kBadIpv4TotalLength);
    plain[0] = 0x75;
    TestPacket pkt3(plain);
    CHECK(out.encrypt(pkt3.buf) == Status::kBadIpVersion);
  }
  SECTION("fragments are not transport-mode material") {
    auto plain = dpu::test::ipv4Udp(10);
    store16(&plain[6], 0x2000);  // MF
    TestPacket pkt(plain);
    CHECK(out.encrypt(pkt.buf) == Status::kUnsupported);
  }
  CHECK(out.lastSequence() == 0);  // no sequence number was spent
}

TEST_CASE("ESP decrypt: SPI, length, next header, padding and dummy packets", "[esp]") {
  for (AeadBackend backend : availableAeadBackends()) {
    INFO(dpu::test::backendName(backend));
    auto config = espConfig(16, EspMode::kTunnel, false, EspIvMode::kExplicit, backend);
    auto in = makeInbound(config);
    auto aead = std::move(createAeadContext(backend, AeadAlgorithm::kAes128Gcm, config.key)).value();
    // Builds an authentic tunnel-mode packet around an arbitrary plaintext
    // (payload and trailer), as a buggy or hostile peer with the key could.
    auto forge = [&](uint32_t seq, const std::vector<uint8_t>& payload_and_trailer) {
      std::vector<uint8_t> p(20 + 16 + payload_and_trailer.size() + 16);
      p[0] = 0x45;
      store16(&p[2], static_cast<uint16_t>(p.size()));
      p[8] = 64;
      p[9] = 50;
      store32(&p[20], config.spi);
      store32(&p[24], seq);
      store64(&p[28], seq);
      std::copy(payload_and_trailer.begin(), payload_and_trailer.end(), p.begin() + 36);
      AeadNonce nonce;
      std::copy(config.salt.begin(), config.salt.end(), nonce.begin());
      store64(nonce.data() + 4, seq);
      uint8_t aad[8];
      store32(aad, config.spi);
      store32(aad + 4, seq);
      REQUIRE(aead->seal(nonce, {aad, 8}, {p.data() + 36, payload_and_trailer.size()},
                         p.data() + 36 + payload_and_trailer.size()) == Status::kOk);
      return p;
    };
    auto inner = dpu::test::ipv4Udp(2);  // 30 bytes
    auto with_trailer = [&](std::vector<uint8_t> body, std::vector<uint8_t> pad, uint8_t pad_len, uint8_t nh) {
      body.insert(body.end(), pad.begin(), pad.end());
      body.push_back(pad_len);
      body.push_back(nh);
      return body;
    };
    auto expect = [&](const std::vector<uint8_t>& wire, Status status) {
      TestPacket pkt(wire);
      const uint64_t top = in.replayWindow().top();
      CHECK(in.decrypt(pkt.buf) == status);
      if (status != Status::kOk) CHECK(pkt.bytes() == wire);
      if (status != Status::kOk && status != Status::kEspDummy) CHECK(in.replayWindow().top() == top);
    };
    expect(forge(1, with_trailer(inner, {}, 0, 4)), Status::kOk);
    expect(forge(2, with_trailer(inner, {1, 2, 4}, 3, 4)), Status::kEspBadPadding);
    expect(forge(3, with_trailer(inner, {1, 2, 3}, 40, 4)), Status::kEspBadPadding);
    expect(forge(4, with_trailer(inner, {}, 0, 41)), Status::kEspBadNextHeader);
    expect(forge(5, with_trailer(inner, {}, 0, 17)), Status::kEspBadNextHeader);
    expect(forge(6, with_trailer({}, {1, 2}, 2, 4)), Status::kEspBadNextHeader);
    expect(forge(7, with_trailer({}, {1, 2}, 2, 59)), Status::kEspDummy);
    CHECK(in.replayWindow().top() == 7);
    expect(forge(8, with_trailer(inner, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 10, 4)),
           Status::kOk);  // longer padding is legal
    // Every padding length up to past the one-load check, each byte wrong in
    // turn, and a ciphertext of the trailer and padding alone (the bytes the
    // check loads before it are the IV's).
    uint32_t seq = 100;
    for (uint8_t pad_len = 0; pad_len <= 6; ++pad_len) {
      std::vector<uint8_t> pad;
      for (uint8_t i = 1; i <= pad_len; ++i) pad.push_back(i);
      INFO("padding " << int(pad_len));
      expect(forge(seq++, with_trailer(inner, pad, pad_len, 4)), Status::kOk);
      expect(forge(seq++, with_trailer({}, pad, pad_len, 59)), Status::kEspDummy);
      for (size_t j = 0; j < pad.size(); ++j) {
        for (uint8_t flip : {0x01, 0x80}) {
          auto wrong = pad;
          wrong[j] ^= flip;
          expect(forge(seq++, with_trailer(inner, wrong, pad_len, 4)), Status::kEspBadPadding);
          expect(forge(seq++, with_trailer({}, wrong, pad_len, 59)), Status::kEspBadPadding);
        }
      }
    }

    auto other = forge(9, with_trailer(inner, {}, 0, 4));
    store32(&other[20], config.spi + 1);
    expect(other, Status::kEspUnknownSpi);
    auto not_esp = forge(9, with_trailer(inner, {}, 0, 4));
    not_esp[9] = 17;
    expect(not_esp, Status::kNotEsp);
    // Too short to hold header, IV, trailer and ICV.
    std::vector<uint8_t> tiny(20 + 8 + 8 + 1 + 16);
    tiny[0] = 0x45;
    store16(&tiny[2], static_cast<uint16_t>(tiny.size()));
    tiny[9] = 50;
    store32(&tiny[20], config.spi);
    expect(tiny, Status::kEspBadLength);

    uint32_t spi = 0;
    EspLayout layout;
    CHECK(espParse(other, layout, spi) == Status::kOk);
    CHECK(spi == config.spi + 1);
    CHECK(layout.header_len == 20);
    CHECK(layout.packet_len == other.size());
    CHECK(!layout.ipv6);
    CHECK(espParse(not_esp, layout, spi) == Status::kNotEsp);
  }
}

// espParse takes the usual packet (IPv4 without options, not a fragment)
// inline and the rest out of line: both say the same of every header field
// and length the inline one looks at, at and around each bound.
TEST_CASE("ESP parse: the inline path agrees with the full parse", "[esp]") {
  auto same = [](const std::vector<uint8_t>& p, size_t size) {
    uint32_t spi = 0, any_spi = 0;
    EspLayout layout, any;
    const Status s = espParse({p.data(), size}, layout, spi);
    REQUIRE(s == detail::espParseAny({p.data(), size}, any, any_spi));
    if (s != Status::kOk) return;
    CHECK(spi == any_spi);
    CHECK(layout.header_len == any.header_len);
    CHECK(layout.packet_len == any.packet_len);
    CHECK(layout.next_header_at == any.next_header_at);
    CHECK(layout.ipv6 == any.ipv6);
  };
  size_t ok = 0;
  for (uint8_t version_ihl : {0x45, 0x44, 0x46, 0x55, 0x65}) {
    for (uint8_t protocol : {50, 51, 17}) {
      for (uint16_t frag : {0x0000, 0x4000, 0x2000, 0x0001, 0x8000}) {
        for (uint16_t total : {0, 19, 20, 24, 27, 28, 29, 40, 41, 64}) {
          std::vector<uint8_t> p(64, 0);
          p[0] = version_ihl;
          store16(&p[2], total);
          store16(&p[6], frag);
          p[9] = protocol;
          store32(&p[20], 0x01020304);
          store32(&p[24], 0xdeadbeef);
          for (size_t size : {0, 19, 20, 27, 28, 40, 64}) {
            INFO(int(version_ihl) << " " << int(protocol) << " " << frag << " " << total << " " << size);
            same(p, size);
            uint32_t spi = 0;
            EspLayout layout;
            ok += espParse({p.data(), size}, layout, spi) == Status::kOk;
          }
        }
      }
    }
  }
  CHECK(ok > 0);
}

TEST_CASE("ESP configuration errors are reported with a message", "[esp]") {
  auto config = espConfig(16, EspMode::kTransport, false, EspIvMode::kExplicit, AeadBackend::kOpenSsl);
  config.key.resize(20);
  auto r = EspOutboundSa::create(config);
  REQUIRE(!r.ok());
  CHECK(r.error().find("16 or 32 bytes") != std::string::npos);
  config.key.resize(16);
  config.spi = 7;
  CHECK(EspOutboundSa::create(config).error().find("reserved") != std::string::npos);
  CHECK(EspInboundSa::create(config).ok());  // a peer's reserved SPI is accepted
  config.spi = 0;
  CHECK(EspInboundSa::create(config).error().find("reserved") != std::string::npos);
  config.spi = 0x1000;
  config.replay_window = 1000;
  CHECK(EspInboundSa::create(config).error().find("multiple of 64") != std::string::npos);
  config.replay_window = 1024;
  config.initial_sequence = uint64_t{1} << 32;
  CHECK(EspOutboundSa::create(config).error().find("ESN") != std::string::npos);
  config.initial_sequence = 1;
  config.mode = EspMode::kTunnel;
  config.tunnel = EspTunnelConfig{};
  CHECK(!EspOutboundSa::create(config).ok());
#ifndef DPU_HAVE_IPSEC_MB
  config.mode = EspMode::kTransport;
  config.backend = AeadBackend::kIpsecMb;
  CHECK(EspOutboundSa::create(config).error().find("not available") != std::string::npos);
#endif
}

// DPDK's ESP vectors (app/test/test_cryptodev_security_ipsec_test_vectors.h),
// derived from draft-mcgrew-gcm-test-01 with sequence number 1 and corrected
// checksums: full tunnel-mode ESP packets with an arbitrary explicit IV. We
// decrypt them with our inbound SA and compare the inner packet.
TEST_CASE("ESP known answers: draft-mcgrew-gcm-test-01 packets (as in DPDK's tests)", "[esp][kat]") {
  struct Vector {
    const char* name;
    const char* key;
    const char* salt;
    uint32_t spi;
    const char* plain;
    const char* wire;
  };
  const Vector vectors[] = {
      {"aes128-v4", "feffe9928665731c6d6a8f9467308308", "cafebabe", 0xa5f8,
       "4500003e698f000080114dccc0a80102c0a801010a980035002a2343b2d001000001000000000000037369700963796265726369"
       "747902646b0000010001",
       "45000074698f000080324d75c0a80102c0a801010000a5f800000001facedbaddecaf888deb22cd9b07c72c16e3a65beeb8df304"
       "a5a5897d33ae530f1ba76d5d114d2a5c3de81827c10e9a4f51330d0eec416642cfbb85a5b47e48a4ec3b9ba95d918bd429c73757"
       "9ff19e58cffc607a3bce8994"},
      {"aes256-v4", "abbccddef00112233445566778899aababbccddef00112233445566778899aab", "11223344", 0x4a2cbfe3,
       "4500003069a6400080062690c0a801029389155e0a9e008b2dc57ee0000000007002400020bf0000020405b401010402",
       "45000068698f000080324d81c0a80102c0a801014a2cbfe3000000010102030405060708ff425c9b724599df7a3bcd510194e00d"
       "6a78107f1b0b1cbf06efae9d65a5d763748a637985771d347f0545659f14e99def842d8b00144a1fec6adf0c9a927feea6c51160"},
      {"aes256-v6", "de12be56deadbeefdeadbeefdeadbeef1278be3401020307aabbccf108070605", "11223344", 52,
       "60000000002006382607f8b0400c0c03000000000000001a20010470e5bfdead49572174e82c48870019f9c79563979c03a08831"
       "8012a7d6258300000204056a0101040201030307",
       "60000000006c3240123412211745113411fc8971df225678123412211745113411fc8971df223456000000340000000145adfe23"
       "78561200e7dfc47e21bdec1b745ae47e2e94210a9b0e59be062adab86b487f0b883aa9fd3cfe9fb18c67d2f8afb5ad16dbff8d50"
       "d348f56c3c0c27342b65c8ffeb5fb8ff12001c9fb785dd7d4019cb18eb15c488e1c291c7b165c32716068ff2"},
  };
  for (AeadBackend backend : availableAeadBackends()) {
    for (const Vector& v : vectors) {
      INFO(dpu::test::backendName(backend) << " " << v.name);
      EspSaConfig c;
      c.spi = v.spi;
      c.key = fromHex(v.key);
      const auto salt = fromHex(v.salt);
      std::copy(salt.begin(), salt.end(), c.salt.begin());
      c.mode = EspMode::kTunnel;
      c.backend = backend;
      auto in = makeInbound(c);
      TestPacket pkt(fromHex(v.wire));
      REQUIRE(in.decrypt(pkt.buf) == Status::kOk);
      CHECK(dpu::test::toHex(pkt.bytes()) == v.plain);
    }
  }
}
