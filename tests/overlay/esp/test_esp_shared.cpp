// ESP SAs shared by several threads (esp.h, encryptShared/decryptShared):
// threads hammering one outbound SA get distinct sequence numbers, none lost,
// none above the limit, each packet opening on the peer; threads feeding the
// same packets to one inbound SA get each accepted exactly once, every other
// copy refused as a replay with its bytes untouched, and the window where the
// packets left it. Run under ASan and TSan too (docs/ipsec.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "esp_test_util.h"
#include "overlay/esp.h"

using namespace dpu::overlay;
using dpu::test::espConfig;
using dpu::test::TestPacket;

namespace {

constexpr unsigned kThreads = 4;

template <class F>
void onThreads(F body) {
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Start together, so the threads overlap as much as they can.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      body(t);
    });
  }
  for (auto& th : threads) th.join();
}

// What the threads' packets came to, each thread calling `encrypt(t, packet)`
// kPerThread times on a copy of `plain`: the ESP packets each sent, in order,
// and the packets refused as exhausted (left as they were) or for any other
// reason (`other`: none is expected).
struct Outcome {
  std::vector<std::vector<std::vector<uint8_t>>> sent = std::vector<std::vector<std::vector<uint8_t>>>(kThreads);
  std::vector<std::vector<uint8_t>> all;  // every thread's, in thread order
  unsigned refused = 0;
  std::vector<unsigned> other = std::vector<unsigned>(kThreads, 0);
};

template <class Encrypt>
Outcome sendFromThreads(const std::vector<uint8_t>& plain, unsigned per_thread, Encrypt encrypt) {
  Outcome o;
  std::vector<unsigned> exhausted(kThreads, 0);
  onThreads([&](unsigned t) {
    for (unsigned i = 0; i < per_thread; ++i) {
      TestPacket p(plain);
      const Status s = encrypt(t, p.buf);
      if (s == Status::kOk) {
        o.sent[t].push_back(p.bytes());
      } else if (s == Status::kEspSeqExhausted && p.bytes() == plain) {
        ++exhausted[t];
      } else {
        ++o.other[t];
      }
    }
  });
  for (unsigned t = 0; t < kThreads; ++t) {
    o.refused += exhausted[t];
    o.all.insert(o.all.end(), o.sent[t].begin(), o.sent[t].end());
  }
  return o;
}

// The sequence number of an IPv4 transport-mode ESP packet.
uint32_t seqOf(const std::vector<uint8_t>& p) { return load32(p.data() + 20 + 4); }

// Every packet is genuine ESP under its own nonce: the peer opens each,
// in the order given.
void eachOpens(const EspSaConfig& config, const std::vector<std::vector<uint8_t>>& packets,
               const std::vector<uint8_t>& plain) {
  auto in = EspInboundSa::create(config);
  REQUIRE(in.ok());
  for (const auto& bytes : packets) {
    TestPacket p(bytes);
    REQUIRE(in->decrypt(p.buf) == Status::kOk);
    CHECK(p.bytes() == plain);
  }
}

}  // namespace

TEST_CASE("ESP shared outbound SA: threads get distinct sequence numbers up to the limit exactly", "[esp][shared]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (bool esn : {false, true}) {
      INFO(dpu::test::backendName(backend) << (esn ? " esn" : " 32-bit"));
      auto config = espConfig(16, EspMode::kTransport, esn, EspIvMode::kExplicit, backend);
      config.initial_sequence = 5;  // 4 numbers already used under this key
      config.replay_window = 4096;
      auto created = EspOutboundSa::create(config);
      REQUIRE(created.ok());
      EspOutboundSa sa = std::move(created).value();
      constexpr uint64_t kLimit = 3004;  // 3,000 numbers left, 4,000 attempts
      constexpr unsigned kPerThread = 1000;
      const auto plain = dpu::test::ipv4Udp(100);

      Outcome o = sendFromThreads(plain, kPerThread, [&](unsigned, PacketBuffer& buf) {
        return sa.encryptShared(buf, kLimit);
      });
      for (unsigned t = 0; t < kThreads; ++t) CHECK(o.other[t] == 0);
      auto& all = o.all;
      const unsigned refused = o.refused;
      // Exactly the numbers 5..kLimit, each once: none reused, none lost, none above.
      REQUIRE(all.size() == kLimit - 4);
      CHECK(refused == kThreads * kPerThread - (kLimit - 4));
      std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) { return seqOf(a) < seqOf(b); });
      for (size_t i = 0; i < all.size(); ++i) REQUIRE(seqOf(all[i]) == 5 + i);
      CHECK(sa.lastSequence() == kLimit);
      CHECK(sa.counters().packets == 0);  // the shared path leaves counting to its caller
      eachOpens(config, all, plain);

      // The counter only moves up, also while another thread encrypts.
      std::thread mover([&] { sa.advanceTo(10); });
      mover.join();
      CHECK(sa.lastSequence() == kLimit);
      sa.advanceTo(kLimit + 100);
      TestPacket next(plain);
      REQUIRE(sa.encryptShared(next.buf, kLimit + 101) == Status::kOk);
      CHECK(seqOf(next.bytes()) == kLimit + 101);
      TestPacket over(plain);
      CHECK(sa.encryptShared(over.buf, kLimit + 101) == Status::kEspSeqExhausted);
    }
  }
}

TEST_CASE("ESP shared outbound SA with blocks: distinct numbers, none above the limit, one CAS a block",
          "[esp][shared]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (bool esn : {false, true}) {
      INFO(dpu::test::backendName(backend) << (esn ? " esn" : " 32-bit"));
      auto config = espConfig(16, EspMode::kTransport, esn, EspIvMode::kExplicit, backend);
      config.initial_sequence = 5;
      config.replay_window = 4096;
      auto created = EspOutboundSa::create(config);
      REQUIRE(created.ok());
      EspOutboundSa sa = std::move(created).value();
      constexpr uint64_t kLimit = 3004;
      constexpr unsigned kPerThread = 1000;
      const auto plain = dpu::test::ipv4Udp(100);

      std::vector<EspSequenceBlock> blocks(kThreads);
      Outcome o = sendFromThreads(plain, kPerThread, [&](unsigned t, PacketBuffer& buf) {
        return sa.encryptShared(buf, kLimit, blocks[t]);
      });
      auto& all = o.all;
      for (unsigned t = 0; t < kThreads; ++t) {
        CHECK(o.other[t] == 0);
        const auto& sent = o.sent[t];
        // A thread's numbers rise, and its block names the last it took.
        for (size_t i = 1; i < sent.size(); ++i) REQUIRE(seqOf(sent[i]) > seqOf(sent[i - 1]));
        if (!sent.empty()) CHECK(blocks[t].lastTaken() == seqOf(sent.back()));
      }
      CHECK(o.refused + all.size() == kThreads * kPerThread);
      // Numbers a thread reserved but did not send (it had no packet left
      // when another reached the limit) are the only ones missing: at most
      // one block a thread.
      CHECK(all.size() + kThreads * kEspSequenceBlockSize >= kLimit - 4);
      std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) { return seqOf(a) < seqOf(b); });
      REQUIRE(seqOf(all.front()) >= 5);
      REQUIRE(seqOf(all.back()) <= kLimit);
      for (size_t i = 1; i < all.size(); ++i) REQUIRE(seqOf(all[i]) > seqOf(all[i - 1]));  // none twice
      CHECK(sa.lastSequence() == kLimit);
      eachOpens(config, all, plain);
    }
  }
}

TEST_CASE("ESP shared outbound SA with blocks: advanceTo and a lowered limit stop a block's numbers",
          "[esp][shared]") {
  auto config = espConfig(16, EspMode::kTransport, true, EspIvMode::kExplicit, defaultAeadBackend());
  auto created = EspOutboundSa::create(config);
  REQUIRE(created.ok());
  EspOutboundSa sa = std::move(created).value();
  const auto plain = dpu::test::ipv4Udp(100);
  auto send = [&](EspSequenceBlock& b, uint64_t limit) -> int64_t {
    TestPacket p(plain);
    const Status s = sa.encryptShared(p.buf, limit, b);
    if (s != Status::kOk) return -static_cast<int64_t>(s);
    return load32(p.bytes().data() + 20 + 4);
  };
  EspSequenceBlock a, b;
  CHECK(a.lastTaken() == 0);
  CHECK(send(a, 1000) == 1);  // a reserves 1..32
  CHECK(sa.lastSequence() == kEspSequenceBlockSize);
  CHECK(send(b, 1000) == kEspSequenceBlockSize + 1);  // b the next block
  CHECK(send(a, 1000) == 2);  // a spends its own, no CAS
  CHECK(sa.lastSequence() == 2 * kEspSequenceBlockSize);
  CHECK(a.lastTaken() == 2);

  // A mark below a block's numbers leaves it alone; at or above them it is dropped.
  sa.advanceTo(kEspSequenceBlockSize);
  CHECK(send(b, 1000) == kEspSequenceBlockSize + 2);
  CHECK(send(a, 1000) == 2 * kEspSequenceBlockSize + 1);  // 3..32 were at or below the mark
  sa.advanceTo(500);
  CHECK(send(a, 1000) == 501);
  CHECK(send(b, 1000) == 501 + kEspSequenceBlockSize);

  // A limit lowered under a block's numbers refuses them, and nothing is sent.
  CHECK(send(a, 501) == -static_cast<int64_t>(Status::kEspSeqExhausted));
  CHECK(a.lastTaken() == 501);
  // Raised again: the counter goes on above every block reserved.
  const uint64_t top = sa.lastSequence();
  CHECK(send(a, 1000) == static_cast<int64_t>(top + 1));
  CHECK(send(b, 1000) == 502 + kEspSequenceBlockSize);  // b's block is still its own
  // Near the limit a block holds only what is left.
  const uint64_t near = top + kEspSequenceBlockSize + 2;
  EspSequenceBlock c;
  CHECK(send(c, near) == static_cast<int64_t>(near - 1));
  CHECK(send(c, near) == static_cast<int64_t>(near));
  CHECK(send(c, near) == -static_cast<int64_t>(Status::kEspSeqExhausted));
  CHECK(sa.lastSequence() == near);
}

TEST_CASE("ESP shared inbound SA: each packet accepted once however many threads race it", "[esp][shared]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (bool esn : {false, true}) {
      INFO(dpu::test::backendName(backend) << (esn ? " esn" : " 32-bit"));
      auto config = espConfig(16, EspMode::kTransport, esn, EspIvMode::kExplicit, backend);
      auto out = EspOutboundSa::create(config);
      auto created = EspInboundSa::create(config);
      REQUIRE(out.ok());
      REQUIRE(created.ok());
      EspInboundSa sa = std::move(created).value();
      constexpr unsigned kPackets = 3000;  // more than the window of 1,024
      std::vector<std::vector<uint8_t>> esp;
      for (unsigned i = 0; i < kPackets; ++i) {
        TestPacket p(dpu::test::ipv4Udp(i % 300));
        REQUIRE(out->encrypt(p.buf) == Status::kOk);
        esp.push_back(p.bytes());
      }

      // With ESN a number left of the window is taken for one 2^32 later
      // (RFC 4303 Appendix A2.1) and fails its ICV instead (A2.2).
      auto refusal = [esn](Status s) {
        return s == Status::kEspReplay || s == Status::kEspTooOld || (esn && s == Status::kEspAuthFailed);
      };
      // Every thread offers every packet, in order: they race on each number.
      std::vector<std::atomic<unsigned>> accepted(kPackets);
      std::vector<unsigned> refused(kThreads, 0), wrong(kThreads, 0);
      onThreads([&](unsigned t) {
        for (unsigned i = 0; i < kPackets; ++i) {
          TestPacket p(esp[i]);
          const Status s = sa.decryptShared(p.buf);
          if (s == Status::kOk) {
            accepted[i].fetch_add(1);
          } else if (refusal(s) && p.bytes() == esp[i]) {
            ++refused[t];  // refused with the packet as it came (re-encrypted if it was opened)
          } else {
            ++wrong[t];
          }
        }
      });

      unsigned refused_total = 0;
      for (unsigned t = 0; t < kThreads; ++t) {
        CHECK(wrong[t] == 0);
        refused_total += refused[t];
      }
      for (unsigned i = 0; i < kPackets; ++i) {
        INFO("sequence number " << i + 1);
        REQUIRE(accepted[i].load() == 1);
      }
      CHECK(refused_total == (kThreads - 1) * kPackets);
      CHECK(sa.highestSequence() == kPackets);
      CHECK(sa.replayWindow().top() == kPackets);

      // The window is where the packets left it: the last one is a replay,
      // one left of the window too old, and a new number is accepted.
      TestPacket last(esp.back());
      CHECK(sa.decryptShared(last.buf) == Status::kEspReplay);
      TestPacket old(esp[kPackets - 1 - 1024]);
      CHECK(sa.decryptShared(old.buf) == (esn ? Status::kEspAuthFailed : Status::kEspTooOld));
      TestPacket fresh(dpu::test::ipv4Udp(5));
      REQUIRE(out->encrypt(fresh.buf) == Status::kOk);
      CHECK(sa.decryptShared(fresh.buf) == Status::kOk);
      CHECK(sa.highestSequence() == kPackets + 1);
    }
  }
}

// The caller that places the packet around the ESP itself (the dataplane's
// fixed Geneve template) gets what encryptShared() makes of the same IPv4
// packet, byte for byte once it writes the IP header's length and protocol,
// under the same sequence numbers, for every padding length; at the limit it
// gets kEspSeqExhausted with nothing written, and tunnel mode is refused.
TEST_CASE("ESP sealPlacedShared: the bytes encryptShared makes, the caller writing the IP header", "[esp][shared]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (bool esn : {false, true}) {
      for (EspIvMode iv : {EspIvMode::kExplicit, EspIvMode::kImplicit}) {
        INFO(dpu::test::backendName(backend) << (esn ? " esn" : " 32-bit")
                                              << (iv == EspIvMode::kExplicit ? " explicit IV" : " implicit IV"));
        auto config = espConfig(16, EspMode::kTransport, esn, iv, backend);
        config.initial_sequence = 7;
        auto a = EspOutboundSa::create(config), b = EspOutboundSa::create(config);
        REQUIRE(a.ok());
        REQUIRE(b.ok());
        constexpr uint64_t kLimit = 11;  // five numbers: 7..11
        for (size_t payload = 0; payload < 5; ++payload) {  // the padding cycles through 0..3
          INFO("payload " << payload);
          const auto plain = dpu::test::ipv4Udp(payload);
          TestPacket want(plain);
          REQUIRE(a->encryptShared(want.buf, kLimit) == Status::kOk);

          // The IP header, room for the ESP header, the UDP datagram, room behind.
          const uint32_t front = b->headroom(), udp_len = static_cast<uint32_t>(plain.size()) - 20;
          std::vector<uint8_t> got(20 + front + udp_len + EspOutboundSa::tailroom(), 0xee);
          std::copy(plain.begin(), plain.begin() + 20, got.begin());
          std::copy(plain.begin() + 20, plain.end(), got.begin() + 20 + front);
          uint32_t esp_len = 0;
          REQUIRE(b->sealPlacedShared(got.data() + 20, udp_len, ipproto::kUdp, kLimit, esp_len) == Status::kOk);
          CHECK(esp_len == want.buf.size() - 20);
          got.resize(20 + esp_len);
          // The caller's part: length, protocol and checksum (summed whole here; encryptShared
          // updates it incrementally, RFC 1624: the same value).
          store16(got.data() + 2, static_cast<uint16_t>(got.size()));
          got[9] = ipproto::kEsp;
          store16(got.data() + 10, 0);
          store16(got.data() + 10, ipv4HeaderChecksum(got.data(), 20));
          CHECK(got == want.bytes());
        }
        CHECK(b->lastSequence() == 11);
        // Numbers 7..11 are used: the next is refused, nothing written.
        std::vector<uint8_t> room(200, 0xee);
        const auto before = room;
        uint32_t esp_len = 0;
        CHECK(b->sealPlacedShared(room.data() + 20, 40, ipproto::kUdp, kLimit, esp_len) ==
              Status::kEspSeqExhausted);
        CHECK(room == before);
      }
    }
  }
  auto tunnel =
      EspOutboundSa::create(espConfig(16, EspMode::kTunnel, false, EspIvMode::kExplicit, defaultAeadBackend()));
  REQUIRE(tunnel.ok());
  std::vector<uint8_t> room(200, 0);
  uint32_t esp_len = 0;
  CHECK(tunnel->sealPlacedShared(room.data() + 40, 40, ipproto::kUdp, 100, esp_len) == Status::kUnsupported);
  CHECK(tunnel->lastSequence() == 0);
}

namespace {
// As the dataplane receives a packet: espParse once, then decrypted where it
// lies by an SA one thread owns or one several share.
Status openPlaced(EspInboundSa& sa, bool one_owner, TestPacket& p, EspLayout& layout, EspOpened& opened) {
  uint32_t spi = 0;
  if (const Status s = espParse({p.buf.data(), p.buf.size()}, layout, spi); s != Status::kOk) return s;
  return one_owner ? sa.decryptPlacedOwned(p.buf, layout, opened) : sa.decryptPlacedShared(p.buf, layout, opened);
}
}  // namespace

// The inbound counterpart: decryptPlaced* leaves the headers where they
// arrived and the payload decrypted behind them; stripPlaced then makes what
// decrypt() makes, byte for byte, for IPv4 with and without options and IPv6
// with and without extension headers. A failure leaves the packet as it came.
TEST_CASE("ESP decryptPlaced: the payload in place, stripPlaced makes what decrypt makes", "[esp][shared]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (bool esn : {false, true}) {
      for (EspIvMode iv : {EspIvMode::kExplicit, EspIvMode::kImplicit}) {
        INFO(dpu::test::backendName(backend) << (esn ? " esn" : " 32-bit")
                                              << (iv == EspIvMode::kExplicit ? " explicit IV" : " implicit IV"));
        const auto config = espConfig(16, EspMode::kTransport, esn, iv, backend);
        auto out = EspOutboundSa::create(config);
        auto reference = EspInboundSa::create(config), owned = EspInboundSa::create(config),
             shared = EspInboundSa::create(config);
        REQUIRE(out.ok());
        REQUIRE(reference.ok());
        REQUIRE(owned.ok());
        REQUIRE(shared.ok());
        const std::vector<std::vector<uint8_t>> plains = {
            dpu::test::ipv4Udp(0), dpu::test::ipv4Udp(3), dpu::test::ipv4Udp(61, 8), dpu::test::ipv6Udp(5),
            dpu::test::ipv6Udp(40, true)};
        for (size_t i = 0; i < plains.size(); ++i) {
          INFO("packet " << i);
          TestPacket sealed(plains[i]);
          REQUIRE(out->encrypt(sealed.buf) == Status::kOk);
          const auto wire = sealed.bytes();
          TestPacket want(wire), a(wire), b(wire);
          REQUIRE(reference->decrypt(want.buf) == Status::kOk);
          REQUIRE(want.bytes() == plains[i]);
          for (bool one_owner : {true, false}) {
            TestPacket& got = one_owner ? a : b;
            EspLayout layout;
            EspOpened opened;
            REQUIRE(openPlaced(one_owner ? *owned : *shared, one_owner, got, layout, opened) == Status::kOk);
            // The headers as they came, the ESP header and IV, then the payload.
            CHECK(opened.front == kEspHeaderSize + (iv == EspIvMode::kExplicit ? kEspExplicitIvSize : 0));
            CHECK(opened.next_header == ipproto::kUdp);
            REQUIRE(got.buf.size() == layout.header_len + opened.front + (plains[i].size() - layout.header_len));
            CHECK(std::equal(wire.begin(), wire.begin() + layout.header_len + opened.front, got.buf.data()));
            CHECK(std::equal(plains[i].begin() + layout.header_len, plains[i].end(),
                             got.buf.data() + layout.header_len + opened.front));
            EspInboundSa::stripPlaced(got.buf, layout, opened);
            CHECK(got.bytes() == want.bytes());
          }
          // Again: a replay, refused, the bytes untouched.
          TestPacket again(wire);
          EspLayout layout;
          EspOpened opened;
          CHECK(openPlaced(*owned, true, again, layout, opened) == Status::kEspReplay);
          CHECK(again.bytes() == wire);
        }
        // One that does not authenticate: refused, the bytes as they came.
        TestPacket sealed(dpu::test::ipv4Udp(30));
        REQUIRE(out->encrypt(sealed.buf) == Status::kOk);
        auto wire = sealed.bytes();
        wire[wire.size() - 20] ^= 1;
        TestPacket bad(wire);
        EspLayout layout;
        EspOpened opened;
        CHECK(openPlaced(*shared, false, bad, layout, opened) == Status::kEspAuthFailed);
        CHECK(bad.bytes() == wire);
      }
    }
  }
}
