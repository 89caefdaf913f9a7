// The connection table (dpu-agent/conntrack): its TCP/UDP state machine
// against a reference model written from the transitions as a table, the
// two-tuple index, the bound, expiry against the caller's last use, and
// concurrent use from several threads.
#include <catch2/catch.hpp>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "conntrack/affinity.h"
#include "conntrack/conntrack.h"
#include "temp_dir.h"

using namespace dpu::conntrack;

namespace {

Tuple v4(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto = kProtoTcp) {
  Tuple t;
  t.family = 4;
  t.protocol = proto;
  for (int i = 0; i < 4; ++i) {
    t.src[i] = static_cast<uint8_t>(src >> (24 - 8 * i));
    t.dst[i] = static_cast<uint8_t>(dst >> (24 - 8 * i));
  }
  t.src_port = sport;
  t.dst_port = dport;
  return t;
}

constexpr uint32_t kClient = 0x0af40105, kVip = 0x0a60000a, kBackend = 0x0af40207;

// The reference: the TCP transitions as a table of (state, direction, packet
// kind) written from the specification in conntrack.h, checked independently
// of the implementation's code.
enum Kind { kSyn, kSynAck, kAck, kFin, kRst, kData };
uint8_t flagsOf(Kind k) {
  switch (k) {
    case kSyn: return kTcpSyn;
    case kSynAck: return kTcpSyn | kTcpAck;
    case kAck: return kTcpAck;
    case kFin: return kTcpFin | kTcpAck;
    case kRst: return kTcpRst;
    case kData: return kTcpAck;
  }
  return 0;
}
State reference(State s, Dir d, Kind k) {
  using S = State;
  const bool o = d == Dir::kOriginal;
  static const std::map<std::tuple<S, bool, Kind>, S> table = {
      // SYN handshake
      {{S::kSynSent, false, kSynAck}, S::kSynReceived},
      {{S::kSynReceived, true, kAck}, S::kEstablished},
      {{S::kSynReceived, true, kData}, S::kEstablished},
      // closing
      {{S::kSynSent, true, kFin}, S::kFinWait},      {{S::kSynSent, false, kFin}, S::kCloseWait},
      {{S::kSynReceived, false, kFin}, S::kCloseWait},
      {{S::kEstablished, true, kFin}, S::kFinWait},  {{S::kEstablished, false, kFin}, S::kCloseWait},
      {{S::kFinWait, false, kFin}, S::kTimeWait},    {{S::kCloseWait, true, kFin}, S::kTimeWait},
      // a new SYN on a connection that is over
      {{S::kTimeWait, true, kSyn}, S::kSynSent},      {{S::kClose, true, kSyn}, S::kSynSent},
  };
  if (k == kRst) return S::kClose;
  // A FIN carries an ACK: from syn-received the client's FIN+ACK completes the
  // handshake and closes its side at once.
  if (s == S::kSynReceived && o && k == kFin) return S::kFinWait;
  auto it = table.find({s, o, k});
  return it == table.end() ? s : it->second;
}

}  // namespace

TEST_CASE("conntrack: TCP states follow the reference model for random packet sequences", "[conntrack]") {
  std::mt19937 rng(42);
  for (int run = 0; run < 2000; ++run) {
    State s = State::kSynSent, r = State::kSynSent;
    for (int step = 0; step < 12; ++step) {
      const Dir d = rng() % 2 ? Dir::kOriginal : Dir::kReply;
      const Kind k = static_cast<Kind>(rng() % 6);
      s = Table::next(s, kProtoTcp, d, flagsOf(k));
      r = reference(r, d, k);
      INFO("run " << run << " step " << step << " dir " << int(d) << " kind " << int(k));
      REQUIRE(stateName(s) == std::string(stateName(r)));
    }
  }
}

TEST_CASE("conntrack: the first packet decides whether and how a connection opens", "[conntrack]") {
  bool loose = false;
  CHECK(Table::initialState(kProtoTcp, kTcpSyn, loose) == State::kSynSent);
  CHECK_FALSE(loose);
  CHECK(Table::initialState(kProtoTcp, kTcpAck, loose) == State::kEstablished);
  CHECK(loose);
  CHECK_FALSE(Table::initialState(kProtoTcp, kTcpRst, loose).has_value());
  CHECK_FALSE(Table::initialState(kProtoTcp, kTcpSyn | kTcpAck, loose).has_value());
  CHECK(Table::initialState(kProtoUdp, 0, loose) == State::kNew);
  CHECK(Table::next(State::kNew, kProtoUdp, Dir::kOriginal, 0) == State::kNew);
  CHECK(Table::next(State::kNew, kProtoUdp, Dir::kReply, 0) == State::kReplied);
  CHECK(Table::next(State::kReplied, kProtoUdp, Dir::kOriginal, 0) == State::kReplied);
}

TEST_CASE("conntrack: a connection is found by either direction, with its NAT", "[conntrack]") {
  Table t(16);
  const Tuple orig = v4(kClient, 40000, kVip, 80);
  const Tuple reply = v4(kBackend, 8080, kClient, 40000);  // DNAT: the backend answers
  auto h = t.insert(orig, reply, kNatDst, State::kSynSent, 1000, 7, 3);
  REQUIRE(h.ok());
  CHECK(t.size() == 1);
  Entry e;
  auto f = t.find(orig, &e);
  REQUIRE(f);
  CHECK(f->dir == Dir::kOriginal);
  CHECK(e.reply == reply);
  CHECK(e.nat == kNatDst);
  CHECK(e.service == 7);
  CHECK(e.backend == 3);
  State before = State::kClose;
  auto g = t.track(reply, kTcpSyn | kTcpAck, 1500, &e, &before);
  REQUIRE(g);
  CHECK(g->dir == Dir::kReply);
  CHECK(before == State::kSynSent);
  CHECK(e.state == State::kSynReceived);
  CHECK(e.last_ms == 1500);
  // The untranslated reverse of the original is not the reply.
  CHECK_FALSE(t.find(orig.reversed()));
  // Either tuple taken: refused.
  auto again = t.insert(orig, v4(kBackend, 9090, kClient, 40000), 0, State::kSynSent, 1600);
  REQUIRE_FALSE(again.ok());
  CHECK(again.code() == dpu::ErrorCode::kConflict);
  CHECK(t.remove(*h));
  CHECK_FALSE(t.remove(*h));
  CHECK_FALSE(t.find(orig));
  CHECK_FALSE(t.find(reply));
  CHECK(t.size() == 0);
}

Tuple v6(const std::array<uint8_t, 16>& src, uint16_t sport, const std::array<uint8_t, 16>& dst, uint16_t dport,
         uint8_t proto = kProtoTcp) {
  Tuple t;
  t.family = 6;
  t.protocol = proto;
  t.src = src;
  t.dst = dst;
  t.src_port = sport;
  t.dst_port = dport;
  return t;
}

// An entry keeps the first 4 bytes of each address inline and the rest of an
// IPv6 one aside: IPv6 addresses that differ only past their first 4 bytes,
// and an IPv4 tuple with the same first 4 bytes as an IPv6 one, are each a
// connection of their own, and every tuple reads back whole.
TEST_CASE("conntrack: IPv6 connections are told apart by every byte and read back whole", "[conntrack]") {
  Table t(16);
  const std::array<uint8_t, 16> client1{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
  const std::array<uint8_t, 16> client2{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6};
  const std::array<uint8_t, 16> vip{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  const std::array<uint8_t, 16> backend{0xfd, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0, 0, 0, 0x2, 0x7};
  const Tuple o1 = v6(client1, 40000, vip, 80), r1 = v6(backend, 8080, client1, 40000);
  const Tuple o2 = v6(client2, 40000, vip, 80), r2 = v6(backend, 8080, client2, 40000);
  auto h1 = t.insert(o1, r1, kNatDst, State::kSynSent, 1000, 7, 3);
  REQUIRE(h1.ok());
  auto h2 = t.insert(o2, r2, kNatDst, State::kSynSent, 1000, 7, 4);
  REQUIRE(h2.ok());
  // IPv4 with the same first 4 bytes as client1 and the VIP (fd00:0000).
  Tuple o4 = o1, r4 = r1;
  o4.family = r4.family = 4;
  for (Tuple* x : {&o4, &r4}) {
    std::fill(x->src.begin() + 4, x->src.end(), 0);
    std::fill(x->dst.begin() + 4, x->dst.end(), 0);
  }
  CHECK_FALSE(t.find(o4));
  auto h4 = t.insert(o4, r4, kNatDst, State::kSynSent, 1000, 7, 5);
  REQUIRE(h4.ok());
  Entry e;
  auto f1 = t.find(r1, &e);
  REQUIRE(f1);
  CHECK(f1->id == h1->id);
  CHECK(f1->dir == Dir::kReply);
  CHECK(e.original == o1);
  CHECK(e.reply == r1);
  CHECK(e.backend == 3);
  auto f2 = t.find(o2, &e);
  REQUIRE(f2);
  CHECK(f2->id == h2->id);
  CHECK(e.reply == r2);
  auto f4 = t.find(r4, &e);
  REQUIRE(f4);
  CHECK(f4->id == h4->id);
  CHECK(e.original == o4);
  CHECK(e.backend == 5);
  // A byte past the first 4 of the backend's address: no connection.
  Tuple other = r1;
  other.src[9] ^= 1;
  CHECK_FALSE(t.find(other));
  CHECK(t.remove(*h1));
  CHECK_FALSE(t.find(o1));
  CHECK(t.find(o2));
}

TEST_CASE("conntrack: a connection whose tuples differ in family or protocol is refused", "[conntrack]") {
  Table t(4);
  const Tuple orig = v4(kClient, 40000, kVip, 80);
  Tuple reply = v4(kBackend, 8080, kClient, 40000, kProtoUdp);
  auto h = t.insert(orig, reply, kNatDst, State::kSynSent, 0);
  REQUIRE_FALSE(h.ok());
  CHECK(h.code() == dpu::ErrorCode::kInvalid);
  CHECK_THAT(h.error(), Catch::Contains("one protocol and one family"));
  reply = v4(kBackend, 8080, kClient, 40000);
  reply.family = 6;
  CHECK_FALSE(t.insert(orig, reply, kNatDst, State::kSynSent, 0).ok());
  CHECK(t.size() == 0);
  CHECK_FALSE(t.find(orig));
}

TEST_CASE("conntrack: a full table refuses new connections and evicts none", "[conntrack]") {
  Table t(100);
  std::vector<Hit> hits;
  for (uint16_t i = 0; i < 100; ++i) {
    auto h = t.insert(v4(kClient, 1000 + i, kVip, 80), v4(kBackend, 8080, kClient, 1000 + i), kNatDst,
                      State::kEstablished, 0);
    REQUIRE(h.ok());
    hits.push_back(*h);
  }
  auto full = t.insert(v4(kClient, 999, kVip, 80), v4(kBackend, 8080, kClient, 999), kNatDst, State::kSynSent, 0);
  REQUIRE_FALSE(full.ok());
  CHECK(full.code() == dpu::ErrorCode::kExhausted);
  CHECK_THAT(full.error(), Catch::Contains("conntrack.max_entries"));
  CHECK(t.stats().refused_full == 1);
  for (uint16_t i = 0; i < 100; ++i) CHECK(t.find(v4(kClient, 1000 + i, kVip, 80)));
  // A freed entry is reused; the old Hit no longer names anything.
  REQUIRE(t.remove(hits[5]));
  auto reused = t.insert(v4(kClient, 999, kVip, 80), v4(kBackend, 8080, kClient, 999), 0, State::kSynSent, 0);
  REQUIRE(reused.ok());
  CHECK(reused->id == hits[5].id);
  Entry e;
  CHECK_FALSE(t.get(hits[5], e));
  CHECK(t.get(*reused, e));
}

TEST_CASE("conntrack: a full table gives an unanswered connection's place to a new one (early drop)",
          "[conntrack]") {
  // A flood of spoofed SYNs (and datagrams nobody answers) fills a table
  // that then takes new connections in their places, each found in the
  // chains near the new one's (32 of 256). While most of the table is
  // flood a place is all but always there; as the new connections replace
  // it one may find none near and be refused: of 100, more than 80 take a
  // place (the odds against it are far below 1e-9).
  Table t(100);
  std::vector<Tuple> flood;
  std::vector<Hit> flood_hits;
  for (uint16_t i = 0; i < 100; ++i) {
    const uint8_t proto = i % 4 == 0 ? kProtoUdp : kProtoTcp;
    const State s = proto == kProtoUdp ? State::kNew : i % 4 == 1 ? State::kSynReceived : State::kSynSent;
    flood.push_back(v4(kClient + i, 1000 + i, kVip, 80, proto));
    auto h = t.insert(flood.back(), v4(kBackend, 8080, kClient + i, 1000 + i, proto), kNatDst, s, 0);
    REQUIRE(h.ok());
    flood_hits.push_back(*h);
  }
  std::vector<Tuple> admitted;
  for (uint16_t i = 0; i < 100; ++i) {
    const Tuple o = v4(kClient, 3000 + i, kVip, 80);
    auto h = t.insert(o, v4(kBackend, 8080, kClient, 3000 + i), kNatDst, State::kEstablished, 1000);
    if (h.ok()) {
      admitted.push_back(o);
    } else {
      CHECK(h.code() == dpu::ErrorCode::kExhausted);
    }
  }
  CHECK(admitted.size() > 80);
  CHECK(t.size() == 100);
  CHECK(t.stats().early_dropped == admitted.size());
  CHECK(t.stats().refused_full == 100 - admitted.size());
  for (const Tuple& o : admitted) CHECK(t.find(o));
  const auto left = std::count_if(flood.begin(), flood.end(), [&t](const Tuple& f) { return t.find(f).has_value(); });
  CHECK(static_cast<size_t>(left) == 100 - admitted.size());
  // A caller still holding a dropped connection's Hit (a core about to note
  // its new flow there) learns that it is gone.
  for (size_t i = 0; i < flood.size(); ++i) {
    CHECK(t.setUser(flood_hits[i], Dir::kOriginal, 1) == t.find(flood[i]).has_value());
  }
  // Only answered connections left: the next is refused, none evicted.
  t.removeIf([](const Entry& e) { return e.state != State::kEstablished; });
  for (uint16_t i = 0; t.size() < 100; ++i) {
    REQUIRE(t.insert(v4(kClient, 5000 + i, kVip, 80), v4(kBackend, 8080, kClient, 5000 + i), kNatDst,
                     State::kEstablished, 1000)
                .ok());
  }
  const uint64_t refused = t.stats().refused_full;
  auto full = t.insert(v4(kClient, 999, kVip, 80), v4(kBackend, 8080, kClient, 999), kNatDst, State::kSynSent, 0);
  REQUIRE_FALSE(full.ok());
  CHECK(full.code() == dpu::ErrorCode::kExhausted);
  CHECK(t.stats().refused_full == refused + 1);
  for (const Tuple& o : admitted) CHECK(t.find(o));
}

TEST_CASE("conntrack: early drop never takes an answered connection or one a flow uses", "[conntrack]") {
  // Half answered (established, UDP replied), a quarter unanswered with a
  // flow (the caller's value set), a quarter free to go: new connections
  // take the last quarter's places and no other, then are refused.
  Table t(100);
  std::vector<Tuple> kept, droppable;
  for (uint16_t i = 0; i < 100; ++i) {
    const uint8_t proto = i % 2 ? kProtoUdp : kProtoTcp;
    const Tuple o = v4(kClient + i, 1000 + i, kVip, 80, proto);
    const State s = i < 50 ? (proto == kProtoUdp ? State::kReplied : State::kEstablished)
                           : (proto == kProtoUdp ? State::kNew : State::kSynSent);
    auto h = t.insert(o, v4(kBackend, 8080, kClient + i, 1000 + i, proto), kNatDst, s, 0);
    REQUIRE(h.ok());
    if (i >= 50 && i < 75) t.setUser(*h, i % 3 ? Dir::kOriginal : Dir::kReply, 0x1234);
    (i < 75 ? kept : droppable).push_back(o);
  }
  unsigned taken = 0, refused = 0;
  for (uint16_t i = 0; i < 200; ++i) {
    auto h = t.insert(v4(kClient, 3000 + i, kVip, 80), v4(kBackend, 8080, kClient, 3000 + i), kNatDst,
                      State::kEstablished, 1000);
    if (h.ok()) {
      ++taken;
    } else {
      CHECK(h.code() == dpu::ErrorCode::kExhausted);
      ++refused;
    }
  }
  CHECK(taken > 0);
  CHECK(taken <= 25);
  CHECK(refused == 200 - taken);
  CHECK(t.stats().early_dropped == taken);
  CHECK(t.size() == 100);
  for (const Tuple& o : kept) CHECK(t.find(o));
  const auto gone = std::count_if(droppable.begin(), droppable.end(), [&t](const Tuple& o) { return !t.find(o); });
  CHECK(static_cast<unsigned>(gone) == taken);
}

TEST_CASE("conntrack: threads filling a full table by early drop keep the index consistent", "[conntrack]") {
  // Four threads insert unanswered connections into a table a quarter their
  // number, dropping each other's, while they remove some: every entry left
  // is found by both tuples, the count is right, and none was lost.
  Table t(1024);
  constexpr int kThreads = 4, kPerThread = 4000;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> inserted{0}, removed{0};
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937 rng(th);
      for (int i = 0; i < kPerThread; ++i) {
        const uint16_t port = static_cast<uint16_t>(1024 + i);
        const Tuple o = v4(kClient + th, port, kVip, 80);
        auto n = t.insert(o, v4(kBackend, 80, kClient + th, port), kNatDst, State::kSynSent, i);
        if (!n.ok()) continue;
        ++inserted;
        if (rng() % 4 == 0 && t.remove(*n)) ++removed;
      }
    });
  }
  for (auto& th : threads) th.join();
  size_t listed = 0;
  t.forEach([&](uint32_t, const Entry& e) {
    ++listed;
    CHECK(t.find(e.original));
    CHECK(t.find(e.reply));
  });
  CHECK(listed == t.size());
  const Stats st = t.stats();
  CHECK(st.inserted == inserted.load());
  CHECK(inserted.load() - removed.load() - st.early_dropped == t.size());
  CHECK(st.early_dropped > 0);
}

// Resident memory of this process, from /proc/self/statm (pages).
size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A dataplane (re)start builds its table before it forwards: a large table
// costs its pages only as connections use them, and its untouched entries are
// free ones (every insert up to the bound succeeds, as above).
TEST_CASE("conntrack: a new table's entries are not written until used", "[conntrack]") {
  const size_t before = residentBytes();
  Table t(1u << 20);  // 80 MB of entries, 48 MB of IPv6 addresses, 8 MB of chain heads
  // The walks over the whole table (expiry every few seconds, a service's
  // UDP flush, dumps) do not write the free entries either.
  CHECK(t.expire(1'000'000, t.capacity()) == 0);
  CHECK(t.markFlushedIf([](const Entry&) { return true; }) == 0);
  CHECK(t.removeIf([](const Entry&) { return true; }) == 0);
  CHECK(t.countByState()[static_cast<size_t>(State::kEstablished)] == 0);
  const size_t grown = residentBytes() - std::min(before, residentBytes());
  INFO("resident memory grew by " << (grown >> 20) << " MB");
  CHECK(grown < (size_t{32} << 20));  // the free list's 4 MB and a little
  for (uint16_t i = 0; i < 1000; ++i) {
    REQUIRE(t.insert(v4(kClient, 1000 + i, kVip, 80), v4(kBackend, 8080, kClient, 1000 + i), kNatDst,
                     State::kEstablished, 0)
                .ok());
  }
  CHECK(t.stats().inserted == 1000);
  for (uint16_t i = 0; i < 1000; ++i) CHECK(t.find(v4(kBackend, 8080, kClient, 1000 + i)));
}

// Hash flooding: tuples that share a chain in one table (a client could find
// such a set for a fixed hash and fill one chain with its connections) are
// spread in another, whose keys are its own; and a client's neighbouring
// ports spread evenly over the chains of one table.
TEST_CASE("conntrack: the index's hash is keyed per table: no set of tuples shares a chain everywhere",
          "[conntrack]") {
  const Table a(4096), b(4096);  // 8,192 chains each
  // Sixteen connections to the VIP that share one chain of `a`.
  std::map<uint32_t, std::vector<Tuple>> by_chain;
  std::vector<Tuple> crowd;
  for (uint32_t i = 0; crowd.empty() && i < (1u << 22); ++i) {
    const Tuple t = v4(kClient + (i >> 16), static_cast<uint16_t>(i), kVip, 80);
    auto& chain = by_chain[a.bucketIndex(t)];
    chain.push_back(t);
    if (chain.size() == 16) crowd = chain;
  }
  REQUIRE(crowd.size() == 16);
  // In `b` they spread: three of sixteen in one chain of 8,192 has odds of
  // about 1e-5.
  std::map<uint32_t, unsigned> in_b;
  unsigned most = 0;
  for (const Tuple& t : crowd) most = std::max(most, ++in_b[b.bucketIndex(t)]);
  CHECK(most <= 2);

  // 60,000 connections of one client from consecutive ports: about 7.3 per
  // chain on average; a random placement puts more than 28 in one chain with
  // odds of about 1e-5.
  std::vector<unsigned> load(8192);
  for (uint32_t port = 1024; port < 61024; ++port) {
    const uint32_t chain = a.bucketIndex(v4(kClient, static_cast<uint16_t>(port), kVip, 80));
    REQUIRE(chain < load.size());
    ++load[chain];
  }
  const unsigned fullest = *std::max_element(load.begin(), load.end());
  INFO("fullest chain " << fullest);
  CHECK(fullest <= 28);
}

// IPv4 connections never touch the side array of IPv6 addresses: a table of
// them costs bytesPerIpv4Entry() each, not bytesPerEntry().
TEST_CASE("conntrack: IPv4 connections cost an IPv4 entry", "[conntrack]") {
  REQUIRE(Table::bytesPerIpv4Entry() < Table::bytesPerEntry());
  Table t(1u << 18);
  const size_t before = residentBytes();
  constexpr uint32_t kConnections = 200'000;
  for (uint32_t i = 0; i < kConnections; ++i) {
    const uint32_t client = kClient + (i >> 16);
    const uint16_t port = static_cast<uint16_t>(i);
    REQUIRE(t.insert(v4(client, port, kVip, 80), v4(kBackend, 8080, client, port), kNatDst, State::kEstablished, 0)
                .ok());
  }
  const size_t grown = residentBytes() - std::min(before, residentBytes());
  // The entries and the chain heads they use, with slack for huge pages
  // (2 MB) rounding each array up; with the IPv6 side array it would be
  // another 48 bytes an entry (9.6 MB).
  const size_t bound = size_t{kConnections} * Table::bytesPerIpv4Entry() + (size_t{4} << 20);
  INFO("resident memory grew by " << grown << " bytes, bound " << bound);
  CHECK(grown < bound);
}

TEST_CASE("conntrack: entries expire by their state's timeout after the last use anyone saw", "[conntrack]") {
  Timeouts to;
  to.udp_new = 1000;
  to.udp_replied = 5000;
  to.tcp_established = 60000;
  Table t(8, to);
  auto udp = t.insert(v4(kClient, 5000, kVip, 53, kProtoUdp), v4(kBackend, 53, kClient, 5000, kProtoUdp), kNatDst,
                      State::kNew, 0);
  auto tcp = t.insert(v4(kClient, 6000, kVip, 80), v4(kBackend, 80, kClient, 6000), kNatDst, State::kEstablished, 0);
  REQUIRE(udp.ok());
  REQUIRE(tcp.ok());
  CHECK(t.expire(900, 8) == 0);
  CHECK(t.expire(1001, 8) == 1);  // the unanswered UDP
  CHECK_FALSE(t.find(v4(kClient, 5000, kVip, 53, kProtoUdp)));
  // The caller knows of a later use (a cached flow's hit): it keeps the entry.
  auto last_use = [](const Entry&) { return uint64_t{100000}; };
  CHECK(t.expire(70000, 8, last_use) == 0);
  CHECK(t.expire(160001, 8, last_use) == 1);
  CHECK(t.size() == 0);
  CHECK(t.stats().expired == 2);
}

TEST_CASE("conntrack: removeIf flushes what the caller selects (a backend gone)", "[conntrack]") {
  Table t(64);
  for (uint16_t i = 0; i < 20; ++i) {
    REQUIRE(t.insert(v4(kClient, 7000 + i, kVip, 53, kProtoUdp), v4(kBackend + i % 2, 53, kClient, 7000 + i, kProtoUdp),
                     kNatDst, State::kReplied, 0, 1, i % 2)
                .ok());
  }
  CHECK(t.removeIf([](const Entry& e) { return e.backend == 1; }) == 10);
  CHECK(t.size() == 10);
  auto counts = t.countByState();
  CHECK(counts[static_cast<size_t>(State::kReplied)] == 10);
}

TEST_CASE("conntrack: markFlushedIf leaves tombstones that packets still find, and marks each once", "[conntrack]") {
  Table t(64, Timeouts{});
  for (uint16_t i = 0; i < 4; ++i) {
    REQUIRE(t.insert(v4(kClient, 7000 + i, kVip, 53, kProtoUdp), v4(kBackend + i % 2, 53, kClient, 7000 + i, kProtoUdp),
                     kNatDst, State::kReplied, 0, 1, i % 2)
                .ok());
  }
  CHECK(t.markFlushedIf([](const Entry& e) { return e.backend == 1; }) == 2);
  CHECK(t.markFlushedIf([](const Entry& e) { return e.backend == 1; }) == 0);  // marked already
  CHECK(t.size() == 4);
  Entry e;
  // The old backend's late answer finds its tombstone, and so does the client.
  auto late = t.track(v4(kBackend + 1, 53, kClient, 7001, kProtoUdp), 0, 5, &e);
  REQUIRE(late);
  CHECK(late->dir == Dir::kReply);
  CHECK(e.flushed);
  REQUIRE(t.find(v4(kClient, 7000, kVip, 53, kProtoUdp), &e));
  CHECK_FALSE(e.flushed);
  // A tombstone expires as its state would.
  CHECK(t.expire(5 + uint64_t{Timeouts{}.udp_replied} + 1, 64) == 4);
  CHECK(t.size() == 0);
}

TEST_CASE("conntrack: threads inserting, tracking and removing keep the index consistent", "[conntrack]") {
  Table t(4096);
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&t, th] {
      std::mt19937 rng(th);
      std::vector<Hit> mine;
      for (int i = 0; i < kPerThread; ++i) {
        const uint16_t port = static_cast<uint16_t>(th * 10000 + i % 1000);
        const Tuple o = v4(kClient + th, port, kVip, 80);
        if (auto h = t.find(o)) {
          (void)t.track(o, kTcpAck, i, nullptr);
          if (rng() % 3 == 0) (void)t.remove(*h);
        } else if (auto n = t.insert(o, v4(kBackend, 80, kClient + th, port), kNatDst, State::kSynSent, i); n.ok()) {
          mine.push_back(*n);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  size_t listed = 0;
  std::set<std::pair<uint32_t, uint16_t>> seen;
  t.forEach([&](uint32_t, const Entry& e) {
    ++listed;
    uint32_t src = 0;
    for (int i = 0; i < 4; ++i) src = src << 8 | e.original.src[i];
    CHECK(seen.insert({src, e.original.src_port}).second);
    CHECK(t.find(e.original));
    CHECK(t.find(e.reply));
  });
  CHECK(listed == t.size());
}

// --- persistence across processes (openPersistent) ---

namespace {

struct TempDir : dpu::test::TempDir {
  explicit TempDir(const char* under = "/tmp") : dpu::test::TempDir("dpu-conntrack", under) { REQUIRE(!path.empty()); }
};

Tuple v6(uint8_t last, uint16_t sport, uint8_t dlast, uint16_t dport) {
  Tuple t;
  t.family = 6;
  t.protocol = kProtoTcp;
  t.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, last};
  t.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, dlast};
  t.src_port = sport;
  t.dst_port = dport;
  return t;
}

std::unique_ptr<Table> openTable(const std::string& path, uint32_t capacity = 1024) {
  auto t = Table::openPersistent(capacity, Timeouts{}, path);
  INFO((t ? std::string() : t.error()));
  REQUIRE(t.ok());
  return std::move(*t);
}

// Pokes bytes of entry `id` in a table file (a header page, then 80-byte entries).
void pokeEntry(const std::string& path, uint32_t id, size_t offset, uint8_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(4096 + size_t{id} * 80 + offset));
  f.put(static_cast<char>(value));
}

}  // namespace

TEST_CASE("conntrack: a persistent table's connections outlive it; the next one on the file takes them over",
          "[conntrack][persist]") {
  TempDir dir;
  const std::string path = dir.path + "/conntrack";
  struct Want {
    Tuple reply;
    State state;
    uint8_t nat;
    uint64_t last_ms;
  };
  std::map<std::string, std::pair<Tuple, Want>> want;
  std::vector<Tuple> gone;
  {
    auto t = openTable(path);
    CHECK_FALSE(t->adopted());
    CHECK(t->persistNote() == "a new file");
    std::vector<std::pair<Hit, Tuple>> made;
    for (uint16_t i = 0; i < 300; ++i) {
      const Tuple o = v4(kClient, 2000 + i, kVip, 80), r = v4(kBackend, 8080, kClient, 2000 + i);
      auto h = t->insert(o, r, kNatDst, State::kSynSent, 1000 + i);
      REQUIRE(h.ok());
      made.emplace_back(*h, o);
    }
    for (uint8_t i = 0; i < 20; ++i) {
      const Tuple o = v6(i, 3000, 9, 443), r = v6(9, 443, i, 3000);
      REQUIRE(t->insert(o, r, 0, State::kEstablished, 5000).ok());
      want[o.str()] = {o, {r, State::kEstablished, 0, 5000}};
    }
    for (size_t i = 0; i < made.size(); ++i) {
      const auto& [h, o] = made[i];
      if (i % 3 == 0) {
        REQUIRE(t->remove(h));
        gone.push_back(o);
        continue;
      }
      t->setUser(h, Dir::kOriginal, 0xabcdef);
      // A SYN+ACK from the backend: syn-received, seen later.
      REQUIRE(t->track(v4(kBackend, 8080, kClient, o.src_port), kTcpSyn | kTcpAck, 9000 + i));
      want[o.str()] = {o, {v4(kBackend, 8080, kClient, o.src_port), State::kSynReceived, kNatDst, 9000 + i}};
    }
    CHECK(t->size() == want.size());
  }  // the process is gone (its memory unmapped; the file stays)

  auto t = openTable(path);
  CHECK(t->adopted());
  CHECK(t->persistNote().empty());
  CHECK(t->adoptedConnections() == want.size());
  CHECK(t->droppedDamaged() == 0);
  CHECK(t->size() == want.size());
  CHECK(t->highWater() == 320);
  for (const auto& [name, w] : want) {
    INFO(name);
    const auto& [o, x] = w;
    Entry e;
    auto h = t->find(o, &e);
    REQUIRE(h.has_value());
    CHECK(h->dir == Dir::kOriginal);
    CHECK(e.reply == x.reply);
    CHECK(e.state == x.state);
    CHECK(e.nat == x.nat);
    CHECK(e.last_ms == x.last_ms);
    CHECK(e.user[0] == 0);  // named the dead process's flows
    auto back = t->find(x.reply);
    REQUIRE(back.has_value());
    CHECK(back->dir == Dir::kReply);
    CHECK(back->id == h->id);
  }
  for (const Tuple& o : gone) CHECK_FALSE(t->find(o).has_value());
  // The state machine goes on from where it was.
  const Tuple o1 = v4(kClient, 2001, kVip, 80);
  REQUIRE(t->track(o1, kTcpAck, 20000));
  Entry e;
  REQUIRE(t->find(o1, &e));
  CHECK(e.state == State::kEstablished);
  // A new connection takes the lowest free entry (one that was removed), and
  // the new table's conflicts are the old one's.
  auto fresh = t->insert(v4(kClient, 7000, kVip, 80), v4(kBackend, 8080, kClient, 7000), kNatDst, State::kSynSent, 1);
  REQUIRE(fresh.ok());
  CHECK(fresh->id == 0);
  CHECK(t->insert(o1, v4(kBackend, 8080, kClient, 9999), kNatDst, State::kSynSent, 1).code() == dpu::ErrorCode::kConflict);
  // Expiry walks what was taken over.
  CHECK(t->expire(100'000'000'000ull, t->capacity()) == want.size() + 1);
  CHECK(t->size() == 0);
}

TEST_CASE("conntrack: a table of another size carries the connections over, the most recent first when smaller",
          "[conntrack][persist]") {
  TempDir dir;
  const std::string path = dir.path + "/conntrack";
  std::vector<Tuple> originals;
  {
    auto t = openTable(path, 1024);
    for (uint16_t i = 0; i < 40; ++i) {
      const Tuple o = v4(kClient, 2000 + i, kVip, 80), r = v4(kBackend, 8080, kClient, 2000 + i);
      REQUIRE(t->insert(o, r, kNatDst, i % 2 ? State::kEstablished : State::kSynSent, 10'000 + 100 * i, 7, i).ok());
      originals.push_back(o);
    }
    for (uint8_t i = 0; i < 10; ++i) {
      const Tuple o = v6(i, 3000, 9, 443), r = v6(9, 443, i, 3000);
      REQUIRE(t->insert(o, r, 0, State::kEstablished, 20'000 + i, 0, 0, /*loose=*/true).ok());
      originals.push_back(o);
    }
    // A tombstone (its backend left) stays one.
    CHECK(t->markFlushedIf([](const Entry& e) { return e.original.src_port == 2003; }) == 1);
    t->setUser(*t->find(originals[5]), Dir::kOriginal, 0xabcdef);
  }
  // The old table as it was, to compare with.
  std::map<std::string, Entry> before;
  {
    auto t = openTable(path, 1024);
    REQUIRE(t->adopted());
    t->forEach([&before](uint32_t, const Entry& e) { before[e.original.str()] = e; });
  }
  REQUIRE(before.size() == 50);

  auto bigger = openTable(path, 4096);
  CHECK(bigger->resizedFrom() == 1024);
  CHECK(bigger->adoptedConnections() == 50);
  CHECK(bigger->droppedNoRoom() == 0);
  CHECK(bigger->capacity() == 4096);
  CHECK(bigger->size() == 50);
  CHECK_FALSE(std::filesystem::exists(path + ".resize"));
  for (const Tuple& o : originals) {
    INFO(o.str());
    Entry e;
    auto h = bigger->find(o, &e);
    REQUIRE(h.has_value());
    CHECK(h->dir == Dir::kOriginal);
    const Entry& b = before.at(o.str());
    CHECK(e.reply == b.reply);
    CHECK(e.state == b.state);
    CHECK(e.nat == b.nat);
    CHECK(e.loose == b.loose);
    CHECK(e.flushed == b.flushed);
    CHECK(e.service == b.service);
    CHECK(e.backend == b.backend);
    CHECK(e.created_ms == b.created_ms);
    CHECK(e.last_ms == b.last_ms);
    CHECK(e.user[0] == 0);  // named the old process's flows
    REQUIRE(bigger->find(b.reply).has_value());
  }
  CHECK(before.at(originals[3].str()).flushed);
  CHECK(before.at(originals[45].str()).loose);
  // It goes on from there: tracked, conflicting, counted.
  REQUIRE(bigger->track(originals[0], kTcpSyn | kTcpAck, 50'000));
  CHECK(bigger->insert(originals[1], v4(kBackend, 9999, kClient, 2001), kNatDst, State::kSynSent, 1).code() ==
        dpu::ErrorCode::kConflict);
  bigger.reset();

  // Into a smaller table: the 16 used last, the rest dropped and counted.
  auto smaller = openTable(path, 16);
  CHECK(smaller->resizedFrom() == 4096);
  CHECK(smaller->adoptedConnections() == 16);
  CHECK(smaller->droppedNoRoom() == 34);
  CHECK(smaller->size() == 16);
  std::vector<uint64_t> last;
  for (const auto& [name, e] : before) last.push_back(e.original.str() == originals[0].str() ? 50'000 : e.last_ms);
  std::sort(last.rbegin(), last.rend());
  for (const auto& [name, e] : before) {
    const uint64_t used = e.original.str() == originals[0].str() ? 50'000 : e.last_ms;
    INFO(name << " last used " << used);
    CHECK(smaller->find(e.original).has_value() == (used >= last[15]));
  }
  CHECK(smaller->stats().refused_full == 0);  // what did not fit is no new connection refused
  smaller.reset();

  // The same size again: taken over as any restart's.
  auto same = openTable(path, 16);
  CHECK(same->adopted());
  CHECK(same->resizedFrom() == 0);
  CHECK(same->adoptedConnections() == 16);
  same.reset();

  // A carry that did not finish (the process died with the old table moved
  // aside and the new one half-filled): the next start carries from the
  // table aside again, not from the half-filled one.
  std::filesystem::copy_file(path, path + ".resize");
  {
    auto half = openTable(path + ".half", 64);
    REQUIRE(half->insert(v4(kClient, 9000, kVip, 80), v4(kBackend, 8080, kClient, 9000), kNatDst, State::kSynSent, 1).ok());
  }
  std::filesystem::rename(path + ".half", path);
  auto again = openTable(path, 32);
  CHECK(again->resizedFrom() == 16);
  CHECK(again->adoptedConnections() == 16);
  CHECK_FALSE(again->find(v4(kClient, 9000, kVip, 80)).has_value());
  CHECK_FALSE(std::filesystem::exists(path + ".resize"));
}

TEST_CASE("conntrack: a process killed mid-work leaves a table the next takes over; damage is dropped",
          "[conntrack][persist]") {
  TempDir dir;
  const std::string path = dir.path + "/conntrack";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto t = Table::openPersistent(1024, Timeouts{}, path);
    if (!t) _exit(2);
    for (uint16_t i = 0; i < 500; ++i) {
      if (!(*t)->insert(v4(kClient, 4000 + i, kVip, 80), v4(kBackend, 8080, kClient, 4000 + i), kNatDst | kNatSrc,
                        State::kEstablished, 100)
               .ok()) {
        _exit(3);
      }
    }
    raise(SIGKILL);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  // Entry 5 half-written (an impossible family), entry 7 locked by the dead
  // process (the byte after the flags).
  pokeEntry(path, 5, 25, 9);
  pokeEntry(path, 7, 29, 1);

  auto t = openTable(path);
  REQUIRE(t->adopted());
  CHECK(t->adoptedConnections() == 499);
  CHECK(t->droppedDamaged() == 1);
  CHECK_FALSE(t->find(v4(kClient, 4005, kVip, 80)).has_value());
  // Its lock was released: this would spin forever otherwise.
  REQUIRE(t->track(v4(kClient, 4007, kVip, 80), kTcpAck, 200));
  Entry e;
  REQUIRE(t->find(v4(kBackend, 8080, kClient, 4499), &e));
  CHECK(e.nat == (kNatDst | kNatSrc));
  // The damaged entry is free again.
  auto h = t->insert(v4(kClient, 9000, kVip, 80), v4(kBackend, 8080, kClient, 9000), kNatDst, State::kSynSent, 1);
  REQUIRE(h.ok());
  CHECK(h->id == 5);
}

TEST_CASE("conntrack: a table file from before the last boot, or not a table, starts empty", "[conntrack][persist]") {
  TempDir dir;
  const std::string path = dir.path + "/conntrack";
  {
    auto t = openTable(path);
    REQUIRE(t->insert(v4(kClient, 1, kVip, 80), v4(kBackend, 8080, kClient, 1), kNatDst, State::kNew, 1).ok());
  }
  {
    // The boot id in the header (after magic, layout and size) of another boot.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24);
    f.put('x');
  }
  auto t = openTable(path);
  CHECK_FALSE(t->adopted());
  CHECK(t->persistNote() == "written before the last boot");
  CHECK(t->size() == 0);
  CHECK_FALSE(t->find(v4(kClient, 1, kVip, 80)).has_value());
  t.reset();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('X');
  }
  CHECK(openTable(path)->persistNote() == "not a table file");
  // A file that cannot be made says which and why.
  auto bad = Table::openPersistent(1024, Timeouts{}, dir.path + "/no/such/dir/conntrack");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::StartsWith("persistent table " + dir.path + "/no/such/dir/conntrack: open: "));
}

TEST_CASE("affinity: a persistent table keeps each client's backend for the next process", "[conntrack][persist]") {
  TempDir dir;
  const std::string path = dir.path + "/affinity";
  std::array<uint8_t, 16> client{10, 244, 1, 5};
  Affinity::Target backend;
  backend.ip = {10, 244, 2, 7};
  backend.port = 8080;
  {
    auto a = Affinity::openPersistent(4096, path);
    REQUIRE(a.ok());
    CHECK_FALSE((*a)->adopted());
    (*a)->record(42, client, backend, 1'000);
  }
  auto a = Affinity::openPersistent(4096, path);
  REQUIRE(a.ok());
  CHECK((*a)->adopted());
  Affinity::Target got;
  REQUIRE((*a)->find(42, client, 5'000, 10'000, got));
  CHECK(got.ip == backend.ip);
  CHECK(got.port == 8080);
  CHECK_FALSE((*a)->find(42, client, 12'000, 10'000, got));  // past its timeout, as before
  CHECK_FALSE((*a)->find(43, client, 5'000, 10'000, got));
  a->reset();
  // Another size: the clients' backends are carried over.
  auto other = Affinity::openPersistent(8192, path);
  REQUIRE(other.ok());
  CHECK((*other)->resizedFrom() == 4096);
  CHECK((*other)->carriedOver() == 1);
  CHECK((*other)->capacity() == 8192);
  REQUIRE((*other)->find(42, client, 5'000, 10'000, got));
  CHECK(got.ip == backend.ip);
  CHECK_FALSE((*other)->find(42, client, 12'000, 10'000, got));  // its time kept
  CHECK_FALSE(std::filesystem::exists(path + ".resize"));
  other->reset();

  // Into a table of one bucket (4 ways): the four clients used last stay.
  {
    auto many = Affinity::openPersistent(8192, path);
    REQUIRE(many.ok());
    for (uint8_t i = 0; i < 10; ++i) {
      std::array<uint8_t, 16> c{10, 244, 3, i};
      (*many)->record(7, c, backend, 2'000 + i);
    }
  }
  auto tiny = Affinity::openPersistent(4, path);
  REQUIRE(tiny.ok());
  CHECK((*tiny)->resizedFrom() == 8192);
  CHECK((*tiny)->carriedOver() == 4);
  for (uint8_t i = 0; i < 10; ++i) {
    std::array<uint8_t, 16> c{10, 244, 3, i};
    INFO(int{i});
    CHECK((*tiny)->find(7, c, 3'000, 10'000, got) == (i >= 6));
  }
}

// Eight IPv6 clients of one prefix that share a bucket of one table push
// each other out there (four ways); another table's keys spread them, so
// each keeps its backend. A persistent table reopened keeps its keys with
// its entries.
TEST_CASE("affinity: the bucket hash is keyed per table, and a persistent table keeps its keys",
          "[conntrack][persist]") {
  Affinity a(4096), b(4096);  // 1,024 buckets of four
  constexpr uint64_t kFrontend = 42;
  std::map<uint32_t, std::vector<std::array<uint8_t, 16>>> by_bucket;
  std::vector<std::array<uint8_t, 16>> crowd;
  for (uint32_t i = 0; crowd.empty() && i < (1u << 20); ++i) {
    std::array<uint8_t, 16> c{0xfd, 0, 0, 0, 0, 0, 0, 1};
    std::memcpy(c.data() + 12, &i, 4);
    auto& bucket = by_bucket[a.bucketIndex(kFrontend, c)];
    bucket.push_back(c);
    if (bucket.size() == 8) crowd = bucket;
  }
  REQUIRE(crowd.size() == 8);
  Affinity::Target backend{{10, 244, 2, 7}, 8080}, got;
  for (size_t i = 0; i < crowd.size(); ++i) {
    a.record(kFrontend, crowd[i], backend, 1'000 + i);
    b.record(kFrontend, crowd[i], backend, 1'000 + i);
  }
  unsigned kept_a = 0, kept_b = 0;
  for (const auto& c : crowd) {
    kept_a += a.find(kFrontend, c, 2'000, 10'000, got) ? 1 : 0;
    kept_b += b.find(kFrontend, c, 2'000, 10'000, got) ? 1 : 0;
  }
  CHECK(kept_a == 4);
  CHECK(kept_b == 8);  // five of eight in one bucket of 1,024: odds of about 5e-11

  TempDir dir("/dev/shm");
  const std::string path = dir.path + "/affinity";
  uint32_t placed = 0;
  {
    auto first = Affinity::openPersistent(4096, path);
    REQUIRE(first.ok());
    placed = (*first)->bucketIndex(kFrontend, crowd[0]);
    for (const auto& c : crowd) (*first)->record(kFrontend, c, backend, 1'000);
  }
  auto next = Affinity::openPersistent(4096, path);
  REQUIRE(next.ok());
  REQUIRE((*next)->adopted());
  CHECK((*next)->bucketIndex(kFrontend, crowd[0]) == placed);
  for (const auto& c : crowd) CHECK((*next)->find(kFrontend, c, 2'000, 10'000, got));
}

// A table file on a disk filesystem is written back under traffic (the
// engine warns): the table says which filesystem, and nothing for tmpfs.
TEST_CASE("conntrack: a persistent table names the disk filesystem its file is on", "[conntrack][persist]") {
  for (const char* under : {"/dev/shm", "/tmp", "."}) {
    TempDir dir(under);
    struct statfs fs {};
    REQUIRE(::statfs(dir.path.c_str(), &fs) == 0);
    const auto type = static_cast<unsigned long>(fs.f_type);
    INFO(under << ": filesystem type 0x" << std::hex << type);
    const auto t = openTable(dir.path + "/conntrack");
    if (type == TMPFS_MAGIC || type == RAMFS_MAGIC) {
      CHECK(t->persistDisk().empty());
    } else if (type == EXT4_SUPER_MAGIC) {
      CHECK(t->persistDisk() == "ext4");
    } else {
      CHECK_FALSE(t->persistDisk().empty());
    }
  }
  // In memory: nothing to say.
  CHECK(Table(64, Timeouts{}).persistDisk().empty());
}

// On tmpfs (/run on a DPU) a shared file mapping allocates a page even when
// it is only read: the walks must stop at what the table has used, or the
// first expiry walk would make the whole file real (here 136 MB).
// (Under qemu-user, /dev/shm is the sysroot's directory, not a tmpfs: the
// check needs the host's and runs in the native builds.)
TEST_CASE("conntrack: walks over a persistent table touch only the entries it has used", "[conntrack][persist]") {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
    WARN("/dev/shm is not a tmpfs here: nothing to check the walks on");
    return;
  }
  TempDir dir("/dev/shm");
  const std::string path = dir.path + "/conntrack";
  auto t = Table::openPersistent(1u << 20, Timeouts{}, path);
  REQUIRE(t.ok());
  auto allocated = [&] {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return size_t(st.st_blocks) * 512;
  };
  for (uint16_t i = 0; i < 1000; ++i) {
    REQUIRE((*t)->insert(v4(kClient, 1000 + i, kVip, 80), v4(kBackend, 8080, kClient, 1000 + i), kNatDst,
                         State::kEstablished, 0)
                .ok());
  }
  // What the inserts wrote: their entries and the index pages their tuples hash to.
  const size_t used = allocated();
  CHECK((*t)->expire(1'000, (*t)->capacity()) == 0);
  CHECK((*t)->markFlushedIf([](const Entry&) { return false; }) == 0);
  CHECK((*t)->removeIf([](const Entry&) { return false; }) == 0);
  CHECK((*t)->countByState()[static_cast<size_t>(State::kEstablished)] == 1000);
  INFO("file blocks: " << (used >> 10) << " KB after the inserts, " << (allocated() >> 10) << " KB after the walks");
  CHECK(used < (size_t{16} << 20));
  CHECK(allocated() == used);
  CHECK((*t)->expire(100'000'000'000ull, (*t)->capacity()) == 1000);
}
