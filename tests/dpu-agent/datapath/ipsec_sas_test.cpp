// The dataplane's SA slots (ipsec_sas.h) under several workers at once: the
// AES-GCM runs outside any lock, so what must hold is shown here with threads
// standing in for lcores on one SA — outbound, distinct sequence numbers up
// to sequence_limit exactly and counters that add up; inbound, every packet
// accepted once, the rest counted as replays, the window and the reported
// highest sequence number where the packets left them. Also built with ASan
// (the asan preset) and TSan (docs/ipsec.md, "Several workers on one SA").
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "ipsec_sas.h"
#include "overlay/bytes.h"
#include "overlay/checksum.h"

namespace {

using dpu::datapath::EspSlot;
using dpu::datapath::EspVerdict;
using dpu::overlay::PacketBuffer;
using dpu::overlay::Status;
namespace dpv1 = dpu::dataplane::v1;

constexpr unsigned kWorkers = 4;

dpu::model::ModelIpsecSa modelSa(dpv1::IpsecDirection dir, uint64_t limit) {
  dpu::model::ModelIpsecSa sa;
  sa.name = dir == dpv1::OUTBOUND ? "node2/out/11000101" : "node2/in/11000101";
  sa.remote_node = "node2";
  sa.peer_tunnel_ip = dpu::IpAddress::parse("192.168.100.2").value();
  sa.direction = dir;
  sa.spi = 0x11000101;
  sa.key = std::string(16, '\x11');
  sa.salt = {1, 2, 3, 4};
  sa.esn = true;
  sa.sequence_limit = limit;
  return sa;
}

// An IPv4/UDP packet of 100 bytes in a buffer with room for ESP.
struct Packet {
  Packet() : mem(512, 0) {
    uint8_t* p = mem.data() + 128;
    p[0] = 0x45;
    dpu::overlay::store16(p + 2, 100);
    p[8] = 64;
    p[9] = 17;
    p[12] = 192, p[13] = 168, p[14] = 100, p[15] = 1;
    p[16] = 192, p[17] = 168, p[18] = 100, p[19] = 2;
    dpu::overlay::store16(p + 10, dpu::overlay::internetChecksum({p, 20}));
    dpu::overlay::store16(p + 24, 80);
    buf = PacketBuffer(mem.data(), static_cast<uint32_t>(mem.size()), 128, 100);
  }
  explicit Packet(const std::vector<uint8_t>& bytes) : mem(512, 0) {
    std::copy(bytes.begin(), bytes.end(), mem.begin() + 128);
    buf = PacketBuffer(mem.data(), static_cast<uint32_t>(mem.size()), 128, static_cast<uint32_t>(bytes.size()));
  }
  std::vector<uint8_t> bytes() const { return {buf.data(), buf.data() + buf.size()}; }
  std::vector<uint8_t> mem;
  PacketBuffer buf;
};

// An ESP packet received as the dataplane receives it: parsed once,
// decrypted by the slot with that layout where it lies, then stripped.
EspVerdict receive(EspSlot& slot, Packet& p, Status& st, unsigned worker) {
  dpu::overlay::EspLayout layout;
  uint32_t spi = 0;
  st = dpu::overlay::espParse({p.buf.data(), p.buf.size()}, layout, spi);
  if (st != Status::kOk) return EspVerdict::kFailed;
  dpu::overlay::EspOpened opened;
  const EspVerdict v = slot.decryptPlaced(p.buf, layout, opened, st, worker);
  if (v == EspVerdict::kOk) dpu::overlay::EspInboundSa::stripPlaced(p.buf, layout, opened);
  return v;
}

template <class F>
void onWorkers(F body) {
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ready.fetch_add(1);
      while (ready.load() < kWorkers) std::this_thread::yield();
      body(w);
    });
  }
  for (auto& t : threads) t.join();
}

dpv1::IpsecSaState report(const EspSlot& slot) {
  dpv1::IpsecSaState st;
  slot.report(st);
  return st;
}

}  // namespace

TEST_CASE("esp slot: workers on one outbound SA send distinct numbers up to sequence_limit exactly",
          "[ipsec][shared]") {
  constexpr uint64_t kLimit = 3000;
  constexpr unsigned kPerWorker = 1000;
  auto created = EspSlot::create(modelSa(dpv1::OUTBOUND, kLimit), kWorkers);
  REQUIRE(created.ok());
  EspSlot& slot = **created;
  std::vector<std::vector<uint32_t>> seqs(kWorkers);
  std::vector<unsigned> limited(kWorkers, 0), failed(kWorkers, 0);
  onWorkers([&](unsigned w) {
    for (unsigned i = 0; i < kPerWorker; ++i) {
      Packet p;
      Status st = Status::kOk;
      switch (slot.encrypt(p.buf, st, w)) {
        case EspVerdict::kOk:
          seqs[w].push_back(dpu::overlay::load32(p.buf.data() + 20 + 4));
          break;
        case EspVerdict::kLimit:
          ++limited[w];
          break;
        default:
          ++failed[w];
          break;
      }
    }
  });
  std::vector<uint32_t> all;
  unsigned limit_drops = 0;
  for (unsigned w = 0; w < kWorkers; ++w) {
    CHECK(failed[w] == 0);
    limit_drops += limited[w];
    all.insert(all.end(), seqs[w].begin(), seqs[w].end());
  }
  std::sort(all.begin(), all.end());
  // Each number once, none above the limit; the only ones not sent are those
  // a worker reserved in its block and had no packet left for (at most a
  // block a worker: overlay::EspSequenceBlock).
  for (size_t i = 1; i < all.size(); ++i) REQUIRE(all[i] > all[i - 1]);
  REQUIRE(!all.empty());
  REQUIRE(all.back() <= kLimit);
  CHECK(all.size() + kWorkers * dpu::overlay::kEspSequenceBlockSize >= kLimit);
  const auto st = report(slot);
  CHECK(st.packets() == all.size());
  CHECK(st.bytes() == all.size() * 100);
  CHECK(st.limit_drops() == kWorkers * kPerWorker - all.size());
  CHECK(st.limit_drops() == limit_drops);
  CHECK(st.highest_sequence() == all.back());  // sent, not reserved

  // A raised limit (the same SA sent again) goes on with numbers not sent before.
  REQUIRE(slot.update(modelSa(dpv1::OUTBOUND, kLimit + 1)).ok());
  Packet p;
  Status s = Status::kOk;
  REQUIRE(slot.encrypt(p.buf, s, 2) == EspVerdict::kOk);
  const uint32_t next = dpu::overlay::load32(p.buf.data() + 24);
  CHECK(next <= kLimit + 1);
  CHECK(!std::binary_search(all.begin(), all.end(), next));
}

TEST_CASE("esp slot: a worker sends from its own block; a higher initial_sequence moves every worker above it",
          "[ipsec][shared]") {
  auto created = EspSlot::create(modelSa(dpv1::OUTBOUND, 1000), kWorkers);
  REQUIRE(created.ok());
  EspSlot& slot = **created;
  auto send = [&](unsigned w) {
    Packet p;
    Status st = Status::kOk;
    REQUIRE(slot.encrypt(p.buf, st, w) == EspVerdict::kOk);
    return dpu::overlay::load32(p.buf.data() + 24);
  };
  CHECK(report(slot).highest_sequence() == 0);
  CHECK(send(0) == 1);
  CHECK(send(1) == 1 + dpu::overlay::kEspSequenceBlockSize);
  CHECK(send(0) == 2);
  CHECK(report(slot).highest_sequence() == 1 + dpu::overlay::kEspSequenceBlockSize);
  // The sealPlaced path draws from the same block.
  std::vector<uint8_t> room(256, 0);
  uint32_t esp_len = 0;
  Status st = Status::kOk;
  REQUIRE(slot.sealPlaced(room.data() + 20, 40, 60, esp_len, st, 0) == EspVerdict::kOk);
  CHECK(dpu::overlay::load32(room.data() + 24) == 3);

  // The agent's mark above what was reserved: both workers go on above it.
  auto moved = modelSa(dpv1::OUTBOUND, 1000);
  moved.initial_sequence = 201;
  REQUIRE(slot.update(moved).ok());
  const uint32_t a = send(0), b = send(1);
  CHECK(a > 200);
  CHECK(b > 200);
  CHECK(a != b);
  CHECK(report(slot).highest_sequence() == std::max(a, b));
}

TEST_CASE("esp slot: a worker beyond its lanes takes numbers one at a time, never one a block holds",
          "[ipsec][shared]") {
  auto created = EspSlot::create(modelSa(dpv1::OUTBOUND, 1000), 1);  // one lane: worker 0's
  REQUIRE(created.ok());
  EspSlot& slot = **created;
  std::vector<uint32_t> sent;
  for (unsigned i = 0; i < 40; ++i) {
    Packet p;
    Status st = Status::kOk;
    REQUIRE(slot.encrypt(p.buf, st, i % 3 == 2 ? 5 : 0) == EspVerdict::kOk);  // worker 5 has no lane
    sent.push_back(dpu::overlay::load32(p.buf.data() + 24));
  }
  // Worker 0's block (1..32, then 33 onwards after worker 5's numbers), worker
  // 5's from the counter above every block: none twice.
  CHECK(sent[0] == 1);
  CHECK(sent[2] == dpu::overlay::kEspSequenceBlockSize + 1);
  std::vector<uint32_t> sorted = sent;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  // The report covers what the laneless worker sent too.
  const auto r = report(slot);
  CHECK(r.highest_sequence() >= sorted.back());
  CHECK(r.packets() == 40);
}

TEST_CASE("esp slot: workers on one inbound SA accept each packet once and count the rest as replays",
          "[ipsec][shared]") {
  constexpr unsigned kPackets = 2000;
  auto sender = EspSlot::create(modelSa(dpv1::OUTBOUND, kPackets), 1);
  auto created = EspSlot::create(modelSa(dpv1::INBOUND, 0), kWorkers);
  REQUIRE(sender.ok());
  REQUIRE(created.ok());
  EspSlot& slot = **created;
  std::vector<std::vector<uint8_t>> esp;
  for (unsigned i = 0; i < kPackets; ++i) {
    Packet p;
    Status st = Status::kOk;
    REQUIRE((*sender)->encrypt(p.buf, st, 0) == EspVerdict::kOk);
    esp.push_back(p.bytes());
  }
  std::vector<std::atomic<unsigned>> accepted(kPackets);
  onWorkers([&](unsigned w) {
    // Each worker starts at its own place and wraps: the same packets meet
    // at different times, in and out of order.
    for (unsigned k = 0; k < kPackets; ++k) {
      const unsigned i = (k + w * 7) % kPackets;
      Packet p(esp[i]);
      Status st = Status::kOk;
      if (receive(slot, p, st, w) == EspVerdict::kOk) accepted[i].fetch_add(1);
    }
  });
  unsigned once = 0, never = 0;
  for (unsigned i = 0; i < kPackets; ++i) {
    REQUIRE(accepted[i].load() <= 1);  // a replay is never accepted
    (accepted[i].load() == 1 ? once : never) += 1;
  }
  // A worker that starts late may find a number already left of the window
  // (with ESN that is an ICV failure, RFC 4303 A2.2): none is accepted twice,
  // and whatever was refused is counted once.
  const auto st = report(slot);
  CHECK(st.packets() == once);
  CHECK(st.bytes() == uint64_t{once} * 100);
  CHECK(st.packets() + st.replay_drops() + st.icv_failures() == uint64_t{kWorkers} * kPackets);
  CHECK(once + never == kPackets);
  CHECK(once >= kPackets - 1024);
  CHECK(st.highest_sequence() == kPackets);
  // Replay is still caught afterwards.
  Packet again(esp.back());
  Status s = Status::kOk;
  CHECK(receive(slot, again, s, 0) == EspVerdict::kFailed);
  CHECK(s == Status::kEspReplay);
  CHECK(report(slot).replay_drops() == st.replay_drops() + 1);
}
