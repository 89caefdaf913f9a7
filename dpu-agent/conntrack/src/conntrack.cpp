// The connection table (conntrack.h): entries preallocated, an index of two
// chained nodes per entry (one per direction's tuple) in striped buckets.
//
// An entry keeps its two tuples compactly: the four addresses' first 4 bytes
// (all of an IPv4 address) in the entry, the other 12 bytes of IPv6 ones in
// a side array that only IPv6 connections write (zero pages until then), so
// an IPv4 connection costs bytesPerIpv4Entry() and reads one entry.
#include "conntrack/conntrack.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "open_resizing.h"

namespace dpu::conntrack {
namespace {

constexpr uint32_t kStripes = 256;

// A test-and-set lock for the short critical sections here (a few hundred
// instructions at most, never across a call out).
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
      while (flag_.test(std::memory_order_relaxed)) relax();
    }
  }
  void unlock() { flag_.clear(std::memory_order_release); }
  bool try_lock() { return !flag_.test_and_set(std::memory_order_acquire); }

 private:
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

uint32_t node(uint32_t id, Dir dir) { return ((id << 1) | static_cast<uint32_t>(dir)) + 1; }
uint32_t nodeId(uint32_t n) { return (n - 1) >> 1; }
Dir nodeDir(uint32_t n) { return static_cast<Dir>((n - 1) & 1); }

constexpr uint8_t kUsed = 1, kLoose = 2, kFlushed = 4;

// A full table looks for an entry to drop early in this many buckets from
// each of a new connection's two (adjacent heads: one or two cache lines).
constexpr uint32_t kEarlyDropBuckets = 16;

// An entry a full table may drop for a new connection: one the other side
// never answered (Linux's not "assured") and that no cached flow uses, so
// nothing else refers to it.
bool unanswered(State s) { return s == State::kNew || s == State::kSynSent || s == State::kSynReceived; }

}  // namespace

struct Table::Stripe {
  mutable SpinLock lock;
  char pad[64 - sizeof(SpinLock)];
};

// One connection, 80 bytes. The tuples do not change while the entry is
// linked (its generation changes when it is reused); the rest is guarded by
// `lock`, taken after the stripe's. Both tuples of a connection have the
// same protocol and family (insert refuses others).
struct Table::Slot {
  // Addresses (bytes 0..3) and ports of the original tuple's source and
  // destination, then the reply tuple's: index 2 * dir + 0 / 1.
  uint32_t addr[4];
  uint16_t port[4];
  uint8_t protocol;
  uint8_t family;
  State state;
  uint8_t nat;
  uint8_t flags;
  SpinLock lock;
  uint16_t reserved;
  uint32_t gen;
  uint32_t service;
  uint32_t backend;
  uint32_t created_s;
  uint32_t next[2];
  uint64_t last_ms;
  uint64_t user[2];
};

namespace {
// The walks over the whole table (expiry, flushes, dumps) look at an
// entry's flags before taking its lock: taking it writes the entry, and a
// write to a page the table never used costs a zeroed page, so every walk
// would make the whole table resident (expiry walks it every few seconds).
// The flags are written under the lock, atomically, so that this unlocked
// look is a hint the locked check confirms.
template <typename S>
bool inUse(const S& s) {
  return (__atomic_load_n(&s.flags, __ATOMIC_RELAXED) & kUsed) != 0;
}
template <typename S>
void setFlags(S& s, uint8_t flags) {
  __atomic_store_n(&s.flags, flags, __ATOMIC_RELAXED);
}
}  // namespace

// The rest (bytes 4..15) of an IPv6 connection's four addresses, in the
// order of Slot::addr.
struct Table::Ipv6Rest {
  std::array<std::array<uint8_t, 12>, 4> addr;
};

Tuple Tuple::reversed() const {
  Tuple r = *this;
  std::swap(r.src, r.dst);
  std::swap(r.src_port, r.dst_port);
  return r;
}

std::string Tuple::str() const {
  char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
  const int af = family == 4 ? AF_INET : AF_INET6;
  inet_ntop(af, src.data(), a, sizeof a);
  inet_ntop(af, dst.data(), b, sizeof b);
  auto host = [&](const char* ip, uint16_t port) {
    return family == 4 ? std::string(ip) + ":" + std::to_string(port)
                       : "[" + std::string(ip) + "]:" + std::to_string(port);
  };
  return host(a, src_port) + " -> " + host(b, dst_port);
}

const char* stateName(State s) {
  switch (s) {
    case State::kNew: return "new";
    case State::kReplied: return "replied";
    case State::kSynSent: return "syn-sent";
    case State::kSynReceived: return "syn-received";
    case State::kEstablished: return "established";
    case State::kFinWait: return "fin-wait";
    case State::kCloseWait: return "close-wait";
    case State::kTimeWait: return "time-wait";
    case State::kClose: return "close";
  }
  return "?";
}

uint32_t Timeouts::forState(State s, uint8_t protocol) const {
  switch (s) {
    case State::kNew: return protocol == kProtoIcmp || protocol == kProtoIcmp6 ? icmp : udp_new;
    case State::kReplied: return protocol == kProtoIcmp || protocol == kProtoIcmp6 ? icmp : udp_replied;
    case State::kSynSent: return tcp_syn_sent;
    case State::kSynReceived: return tcp_syn_received;
    case State::kEstablished: return tcp_established;
    case State::kFinWait: return tcp_fin_wait;
    case State::kCloseWait: return tcp_close_wait;
    case State::kTimeWait: return tcp_time_wait;
    case State::kClose: return tcp_close;
  }
  return tcp_close;
}

std::optional<State> Table::initialState(uint8_t protocol, uint8_t tcp_flags, bool& loose) {
  loose = false;
  if (protocol != kProtoTcp) return State::kNew;
  if (tcp_flags & kTcpRst) return std::nullopt;
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) return State::kSynSent;
  if (tcp_flags & kTcpSyn) return std::nullopt;  // a SYN+ACK opens nothing: we saw the server side first
  loose = true;
  return (tcp_flags & kTcpFin) ? State::kFinWait : State::kEstablished;
}

State Table::next(State s, uint8_t protocol, Dir dir, uint8_t f) {
  if (protocol != kProtoTcp) return dir == Dir::kReply || s == State::kReplied ? State::kReplied : State::kNew;
  const bool orig = dir == Dir::kOriginal;
  if (f & kTcpRst) return State::kClose;
  // A new SYN from the client on a connection that is over starts it again.
  if (orig && (f & (kTcpSyn | kTcpAck)) == kTcpSyn && (s == State::kTimeWait || s == State::kClose)) {
    return State::kSynSent;
  }
  if (s == State::kSynSent && !orig && (f & kTcpSyn) && (f & kTcpAck)) s = State::kSynReceived;
  else if (s == State::kSynReceived && orig && (f & kTcpAck) && !(f & kTcpSyn)) s = State::kEstablished;
  if (f & kTcpFin) {
    switch (s) {
      case State::kSynSent:
      case State::kSynReceived:
      case State::kEstablished: return orig ? State::kFinWait : State::kCloseWait;
      case State::kFinWait: return orig ? State::kFinWait : State::kTimeWait;
      case State::kCloseWait: return orig ? State::kTimeWait : State::kCloseWait;
      default: return s;
    }
  }
  return s;
}

uint32_t Table::bucketCount(uint32_t capacity) {
  // Two index nodes per entry: about one bucket per node.
  return std::bit_ceil(std::max<uint32_t>(2 * capacity, 64));
}

Table::Table(uint32_t capacity, Timeouts timeouts) : Table(capacity, timeouts, nullptr) {}

Table::Table(uint32_t capacity, Timeouts timeouts, std::unique_ptr<PersistentPages> persist)
    : capacity_(capacity), timeouts_(timeouts), keys_(HashKeys::fromSeed(HashKeys::randomSeed())),
      persist_(std::move(persist)) {
  static_assert(sizeof(Slot) == 80, "an IPv4 connection is 80 bytes");
  static_assert(sizeof(Ipv6Rest) == 48);
  const uint32_t buckets = bucketCount(capacity);
  bucket_mask_ = buckets - 1;
  // Zeroed memory is a free entry (flags 0, generation 0) and an empty chain.
  if (persist_ != nullptr) {
    uint8_t* base = persist_->data();
    slots_ = reinterpret_cast<Slot*>(base);
    v6_ = reinterpret_cast<Ipv6Rest*>(base + PersistentPages::pageAlign(sizeof(Slot) * capacity));
    buckets_ = reinterpret_cast<uint32_t*>(base + PersistentPages::pageAlign(sizeof(Slot) * capacity) +
                                           PersistentPages::pageAlign(sizeof(Ipv6Rest) * capacity));
    high_water_ = &persist_->word(0);
  } else {
    slots_mem_ = zeroedArray<Slot>(capacity);
    v6_mem_ = zeroedArray<Ipv6Rest>(capacity);
    buckets_mem_ = zeroedArray<uint32_t>(buckets);
    slots_ = slots_mem_.get();
    v6_ = v6_mem_.get();
    buckets_ = buckets_mem_.get();
  }
  stripes_ = std::make_unique<Stripe[]>(kStripes);
  free_.reserve(capacity);
  if (persist_ != nullptr && persist_->adopted()) {
    adopt();
  } else {
    for (uint32_t i = capacity; i > 0; --i) free_.push_back(i - 1);
  }
}

// What a table file holds: the format, the entry sizes and the capacity
// (below 2^40).
uint64_t Table::layoutOf(uint32_t capacity) {
  constexpr uint64_t kFormat = 1;
  return kFormat << 56 | uint64_t{sizeof(Slot)} << 48 | uint64_t{sizeof(Ipv6Rest)} << 40 | capacity;
}

Result<std::unique_ptr<Table>> Table::openPersistent(uint32_t capacity, Timeouts timeouts, const std::string& path) {
  auto open = [timeouts](uint64_t size, const std::string& file) -> Result<std::unique_ptr<Table>> {
    const auto cap = static_cast<uint32_t>(size);
    const size_t bytes = PersistentPages::pageAlign(sizeof(Slot) * cap) + PersistentPages::pageAlign(sizeof(Ipv6Rest) * cap) +
                         PersistentPages::pageAlign(sizeof(uint32_t) * bucketCount(cap));
    auto pages = PersistentPages::open(file, layoutOf(cap), bytes);
    if (!pages) return std::move(pages).takeError();
    return std::unique_ptr<Table>(new Table(cap, timeouts, std::make_unique<PersistentPages>(std::move(*pages))));
  };
  auto carry = [](Table& old, Table& fresh) {
    fresh.resized_from_ = old.capacity();
    fresh.dropped_damaged_ = old.droppedDamaged();
    std::vector<Entry> entries;
    entries.reserve(old.size());
    old.forEach([&entries](uint32_t, const Entry& e) { entries.push_back(e); });
    // Into a smaller table, the most recently used first.
    if (entries.size() > fresh.capacity()) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const Entry& a, const Entry& b) { return a.last_ms > b.last_ms; });
    }
    for (const Entry& e : entries) {
      if (fresh.restore(e)) {
        ++fresh.adopted_;
      } else {
        ++fresh.dropped_no_room_;
      }
    }
  };
  return detail::openResizing<Table>(path, layoutOf(capacity), 40, capacity, open, carry);
}

bool Table::restore(const Entry& e) {
  if (size() >= capacity_) return false;  // not counted as a new connection refused
  auto hit = insert(e.original, e.reply, e.nat, e.state, e.last_ms, e.service, e.backend, e.loose);
  if (!hit) return false;
  Slot& s = slots_[hit->id];
  std::lock_guard entry(s.lock);
  s.created_s = static_cast<uint32_t>(e.created_ms / 1000);
  if (e.flushed) setFlags(s, static_cast<uint8_t>(s.flags | kFlushed));
  return true;
}

void Table::adopt() {
  // The index is rebuilt from the entries: the old one may be mid-update.
  const size_t slots_bytes = PersistentPages::pageAlign(sizeof(Slot) * capacity_);
  const size_t v6_bytes = PersistentPages::pageAlign(sizeof(Ipv6Rest) * capacity_);
  persist_->zero(slots_bytes + v6_bytes, PersistentPages::pageAlign(sizeof(uint32_t) * bucketCount(capacity_)));
  const uint32_t hw = static_cast<uint32_t>(std::min<uint64_t>(high_water_->load(), capacity_));
  high_water_->store(hw);
  for (uint32_t i = capacity_; i > hw; --i) free_.push_back(i - 1);
  std::vector<uint32_t> low_free;
  for (uint32_t id = 0; id < hw; ++id) {
    Slot& s = slots_[id];
    s.lock.unlock();  // its process may have died holding it
    if (!(s.flags & kUsed)) {
      low_free.push_back(id);
      continue;
    }
    const Tuple original = tupleOf(id, Dir::kOriginal), reply = tupleOf(id, Dir::kReply);
    const uint32_t bo = bucketOf(original), br = bucketOf(reply);
    Dir dir;
    const bool sane = (s.family == 4 || s.family == 6) && s.protocol != 0 &&
                      static_cast<size_t>(s.state) < kStateCount && s.nat <= (kNatDst | kNatSrc) &&
                      !(original == reply) && findLocked(original, bo, dir) == 0 && findLocked(reply, br, dir) == 0;
    if (!sane) {
      // Written half-way by a process that died, or a second claim on a
      // tuple: dropped, as a connection it never finished.
      const uint32_t gen = s.gen;
      std::memset(static_cast<void*>(&s), 0, sizeof s);
      s.gen = gen + 1;
      low_free.push_back(id);
      ++dropped_damaged_;
      continue;
    }
    s.user[0] = s.user[1] = 0;  // the dead process's flows
    link(id, Dir::kOriginal, bo);
    link(id, Dir::kReply, br);
    ++adopted_;
  }
  for (auto it = low_free.rbegin(); it != low_free.rend(); ++it) free_.push_back(*it);
  size_.store(adopted_, std::memory_order_relaxed);
}

Table::~Table() = default;

size_t Table::bytesPerEntry() { return bytesPerIpv4Entry() + sizeof(Ipv6Rest); }

size_t Table::bytesPerIpv4Entry() { return sizeof(Slot) + 2 * sizeof(uint32_t) + sizeof(uint32_t); }

void Table::store(uint32_t id, const Tuple& original, const Tuple& reply) {
  Slot& s = slots_[id];
  const Tuple* t[2] = {&original, &reply};
  for (int d = 0; d < 2; ++d) {
    std::memcpy(&s.addr[2 * d], t[d]->src.data(), 4);
    std::memcpy(&s.addr[2 * d + 1], t[d]->dst.data(), 4);
    s.port[2 * d] = t[d]->src_port;
    s.port[2 * d + 1] = t[d]->dst_port;
  }
  s.protocol = original.protocol;
  s.family = original.family;
  if (original.family == 6) {
    Ipv6Rest& v6 = v6_[id];
    for (int d = 0; d < 2; ++d) {
      std::memcpy(v6.addr[2 * d].data(), t[d]->src.data() + 4, 12);
      std::memcpy(v6.addr[2 * d + 1].data(), t[d]->dst.data() + 4, 12);
    }
  }
}

Tuple Table::tupleOf(uint32_t id, Dir dir) const {
  const Slot& s = slots_[id];
  const int d = static_cast<int>(dir);
  Tuple t;
  std::memcpy(t.src.data(), &s.addr[2 * d], 4);
  std::memcpy(t.dst.data(), &s.addr[2 * d + 1], 4);
  if (s.family == 6) {
    const Ipv6Rest& v6 = v6_[id];
    std::memcpy(t.src.data() + 4, v6.addr[2 * d].data(), 12);
    std::memcpy(t.dst.data() + 4, v6.addr[2 * d + 1].data(), 12);
  }
  t.src_port = s.port[2 * d];
  t.dst_port = s.port[2 * d + 1];
  t.protocol = s.protocol;
  t.family = s.family;
  return t;
}

bool Table::matches(uint32_t id, Dir dir, const Tuple& t) const {
  const Slot& s = slots_[id];
  const int d = static_cast<int>(dir);
  uint32_t src, dst;
  std::memcpy(&src, t.src.data(), 4);
  std::memcpy(&dst, t.dst.data(), 4);
  if (s.addr[2 * d] != src || s.addr[2 * d + 1] != dst || s.port[2 * d] != t.src_port ||
      s.port[2 * d + 1] != t.dst_port || s.protocol != t.protocol || s.family != t.family) {
    return false;
  }
  if (s.family != 6) return true;
  const Ipv6Rest& v6 = v6_[id];
  return std::memcmp(v6.addr[2 * d].data(), t.src.data() + 4, 12) == 0 &&
         std::memcmp(v6.addr[2 * d + 1].data(), t.dst.data() + 4, 12) == 0;
}

// Keyed (keys_, drawn per table: common/keyed_hash.h), so that no client
// can choose tuples that share a chain. Four multiplies: the addresses'
// first and last 8 bytes pairwise, the ports and protocol through one of
// their own (fed only to the last one, neighbouring ports would move the
// bucket bits almost linearly), then the three folded. The index is rebuilt
// from the entries whenever a table is opened (adopt), so a new process's
// keys place the connections it takes over.
uint32_t Table::bucketOf(const Tuple& t) const {
  uint64_t a, b, c, d;
  std::memcpy(&a, t.src.data(), 8);
  std::memcpy(&b, t.src.data() + 8, 8);
  std::memcpy(&c, t.dst.data(), 8);
  std::memcpy(&d, t.dst.data() + 8, 8);
  const uint64_t ports = uint64_t{t.src_port} << 32 | uint64_t{t.dst_port} << 16 | t.protocol;
  const uint64_t x = mum(a ^ keys_.word[0], c ^ keys_.word[1]);
  const uint64_t y = mum(b ^ keys_.word[2], d ^ keys_.word[3]);
  const uint64_t p = mum(ports ^ keys_.word[4], keys_.word[5]);
  return static_cast<uint32_t>(mum(x ^ p ^ keys_.word[6], y ^ keys_.seed)) & bucket_mask_;
}

uint32_t Table::bucketIndex(const Tuple& t) const { return bucketOf(t); }

Table::Stripe& Table::stripeOf(uint32_t bucket) const { return stripes_[bucket & (kStripes - 1)]; }

uint32_t Table::findLocked(const Tuple& t, uint32_t bucket, Dir& dir) const {
  for (uint32_t n = buckets_[bucket]; n != 0;) {
    const uint32_t id = nodeId(n);
    const Dir d = nodeDir(n);
    const Slot& s = slots_[id];
    if (matches(id, d, t)) {
      dir = d;
      return id + 1;
    }
    n = s.next[static_cast<int>(d)];
  }
  return 0;
}

void Table::link(uint32_t id, Dir dir, uint32_t bucket) {
  slots_[id].next[static_cast<int>(dir)] = buckets_[bucket];
  buckets_[bucket] = node(id, dir);
}

void Table::unlink(uint32_t id, Dir dir, uint32_t bucket) {
  const uint32_t target = node(id, dir);
  uint32_t* p = &buckets_[bucket];
  while (*p != 0 && *p != target) p = &slots_[nodeId(*p)].next[static_cast<int>(nodeDir(*p))];
  if (*p == target) *p = slots_[id].next[static_cast<int>(dir)];
}

void Table::copyOut(uint32_t id, Entry& out) const {
  const Slot& s = slots_[id];
  out.original = tupleOf(id, Dir::kOriginal);
  out.reply = tupleOf(id, Dir::kReply);
  out.state = s.state;
  out.nat = s.nat;
  out.loose = (s.flags & kLoose) != 0;
  out.flushed = (s.flags & kFlushed) != 0;
  out.service = s.service;
  out.backend = s.backend;
  out.created_ms = uint64_t{s.created_s} * 1000;
  out.last_ms = s.last_ms;
  out.user[0] = s.user[0];
  out.user[1] = s.user[1];
}

void Table::prefetch(const Tuple& t) const {
  const uint32_t b = bucketOf(t);
  __builtin_prefetch(&buckets_[b], 1);
  __builtin_prefetch(&stripeOf(b), 1);
}

std::optional<Hit> Table::find(const Tuple& t, Entry* out) const {
  const uint32_t b = bucketOf(t);
  std::lock_guard guard(stripeOf(b).lock);
  Dir dir;
  const uint32_t found = findLocked(t, b, dir);
  if (found == 0) return std::nullopt;
  Slot& s = slots_[found - 1];
  if (out != nullptr) {
    std::lock_guard entry(s.lock);
    copyOut(found - 1, *out);
  }
  return Hit{found - 1, s.gen, dir};
}

std::optional<Hit> Table::track(const Tuple& t, uint8_t tcp_flags, uint64_t now_ms, Entry* out, State* before) {
  const uint32_t b = bucketOf(t);
  std::lock_guard guard(stripeOf(b).lock);
  Dir dir;
  const uint32_t found = findLocked(t, b, dir);
  if (found == 0) return std::nullopt;
  Slot& s = slots_[found - 1];
  std::lock_guard entry(s.lock);
  if (before != nullptr) *before = s.state;
  s.state = next(s.state, s.protocol, dir, tcp_flags);
  s.last_ms = now_ms;
  if (out != nullptr) copyOut(found - 1, *out);
  return Hit{found - 1, s.gen, dir};
}

Result<Hit> Table::insert(const Tuple& original, const Tuple& reply, uint8_t nat, State initial, uint64_t now_ms,
                          uint32_t service, uint32_t backend, bool loose) {
  if (original.protocol != reply.protocol || original.family != reply.family ||
      (original.family != 4 && original.family != 6)) {
    return Error{"connection " + original.str() + " (reply " + reply.str() +
                     "): both tuples must have one protocol and one family, 4 or 6",
                 ErrorCode::kInvalid};
  }
  const uint32_t bo = bucketOf(original), br = bucketOf(reply);
  Stripe* first = &stripeOf(bo);
  Stripe* second = &stripeOf(br);
  if (second < first) std::swap(first, second);
  std::lock_guard g1(first->lock);
  std::unique_lock<SpinLock> g2;
  if (second != first) g2 = std::unique_lock<SpinLock>(second->lock);
  Dir dir;
  if (findLocked(original, bo, dir) != 0 || findLocked(reply, br, dir) != 0) {
    return Error{"connection " + original.str() + " (reply " + reply.str() + ") is tracked already",
                 ErrorCode::kConflict};
  }
  uint32_t id;
  {
    while (free_lock_.test_and_set(std::memory_order_acquire)) {
    }
    if (free_.empty()) {
      free_lock_.clear(std::memory_order_release);
      const uint32_t dropped = dropEarlyLocked(bo, br, *first, *second);
      if (dropped == 0) {
        refused_full_.fetch_add(1, std::memory_order_relaxed);
        return Error{"the connection table is full (" + std::to_string(capacity_) +
                         " entries, none of them unanswered near this connection's): raise conntrack.max_entries",
                     ErrorCode::kExhausted};
      }
      id = dropped - 1;  // its place is this connection's: the size stays
      size_.fetch_sub(1, std::memory_order_relaxed);
      early_dropped_.fetch_add(1, std::memory_order_relaxed);
    } else {
      id = free_.back();
      free_.pop_back();
      // Before the entry is written: a walk (or the next process) must reach it.
      if (id >= high_water_->load(std::memory_order_relaxed)) high_water_->store(id + 1, std::memory_order_release);
      free_lock_.clear(std::memory_order_release);
    }
  }
  Slot& s = slots_[id];
  {
    std::lock_guard entry(s.lock);
    store(id, original, reply);
    s.state = initial;
    s.nat = nat;
    setFlags(s, kUsed | (loose ? kLoose : 0));
    ++s.gen;
    s.service = service;
    s.backend = backend;
    s.created_s = static_cast<uint32_t>(now_ms / 1000);
    s.last_ms = now_ms;
    s.user[0] = s.user[1] = 0;
  }
  link(id, Dir::kOriginal, bo);
  link(id, Dir::kReply, br);
  size_.fetch_add(1, std::memory_order_relaxed);
  inserted_.fetch_add(1, std::memory_order_relaxed);
  return Hit{id, s.gen, Dir::kOriginal};
}

// Early drop (as Linux's nf_conntrack does when full): the first entry that
// may go (unanswered, above) in the chains of kEarlyDropBuckets buckets from
// each of the new connection's two, with `a` and `b` (their stripes) held.
// The other buckets' stripes, and the stripe of a candidate's other tuple,
// are only tried: a stripe another thread holds is passed over, so this
// never waits and the lock order stays as it is. The entry is unlinked and
// freed; returns its id + 1 (0: none found).
uint32_t Table::dropEarlyLocked(uint32_t bo, uint32_t br, const Stripe& a, const Stripe& b) {
  const uint32_t scan = std::min(kEarlyDropBuckets, bucket_mask_ + 1);
  for (const uint32_t start : {bo, br}) {
    for (uint32_t k = 0; k < scan; ++k) {
      const uint32_t bucket = (start + k) & bucket_mask_;
      Stripe& here = stripeOf(bucket);
      const bool held = &here == &a || &here == &b;
      if (!held && !here.lock.try_lock()) continue;
      uint32_t victim = 0;
      for (uint32_t n = buckets_[bucket]; n != 0 && victim == 0;) {
        const uint32_t id = nodeId(n);
        const Dir d = nodeDir(n);
        Slot& s = slots_[id];
        n = s.next[static_cast<int>(d)];
        const Dir other = d == Dir::kOriginal ? Dir::kReply : Dir::kOriginal;
        // Its other tuple's chain (the tuples do not change while it is
        // linked here): in a stripe held here, or tried.
        const uint32_t other_bucket = bucketOf(tupleOf(id, other));
        Stripe& there = stripeOf(other_bucket);
        const bool there_held = &there == &a || &there == &b || &there == &here;
        if (!there_held && !there.lock.try_lock()) continue;
        {
          std::lock_guard entry(s.lock);
          // Linked, so in use: may it go?
          if (unanswered(s.state) && s.user[0] == 0 && s.user[1] == 0) {
            setFlags(s, 0);
            victim = id + 1;
          }
        }
        if (victim != 0) {
          unlink(id, d, bucket);
          unlink(id, other, other_bucket);
        }
        if (!there_held) there.lock.unlock();
      }
      if (!held) here.lock.unlock();
      if (victim != 0) return victim;
    }
  }
  return 0;
}

bool Table::get(const Hit& h, Entry& out) const {
  if (h.id >= capacity_) return false;
  const Slot& s = slots_[h.id];
  std::lock_guard entry(const_cast<SpinLock&>(s.lock));
  if (!(s.flags & kUsed) || s.gen != h.gen) return false;
  copyOut(h.id, out);
  return true;
}

bool Table::setUser(const Hit& h, Dir dir, uint64_t value) {
  if (h.id >= capacity_) return false;
  Slot& s = slots_[h.id];
  std::lock_guard entry(s.lock);
  if (!(s.flags & kUsed) || s.gen != h.gen) return false;
  s.user[static_cast<int>(dir)] = value;
  return true;
}

bool Table::removeEntry(uint32_t id, uint32_t gen, bool expiry, uint64_t idle_since) {
  Slot& s = slots_[id];
  Tuple original, reply;
  {
    std::lock_guard entry(s.lock);
    if (!(s.flags & kUsed) || s.gen != gen) return false;
    original = tupleOf(id, Dir::kOriginal);
    reply = tupleOf(id, Dir::kReply);
  }
  const uint32_t bo = bucketOf(original), br = bucketOf(reply);
  Stripe* first = &stripeOf(bo);
  Stripe* second = &stripeOf(br);
  if (second < first) std::swap(first, second);
  std::lock_guard g1(first->lock);
  std::unique_lock<SpinLock> g2;
  if (second != first) g2 = std::unique_lock<SpinLock>(second->lock);
  {
    std::lock_guard entry(s.lock);
    // Reused meanwhile, or (expiry) used again since it was judged idle.
    if (!(s.flags & kUsed) || s.gen != gen || (expiry && s.last_ms != idle_since)) return false;
    setFlags(s, 0);
  }
  unlink(id, Dir::kOriginal, bo);
  unlink(id, Dir::kReply, br);
  while (free_lock_.test_and_set(std::memory_order_acquire)) {
  }
  free_.push_back(id);  // reserved for every entry: never allocates
  free_lock_.clear(std::memory_order_release);
  size_.fetch_sub(1, std::memory_order_relaxed);
  (expiry ? expired_ : removed_).fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool Table::remove(const Hit& h) { return h.id < capacity_ && removeEntry(h.id, h.gen, false, 0); }

size_t Table::removeIf(const std::function<bool(const Entry&)>& pred) {
  size_t n = 0;
  Entry e;
  const uint32_t end = highWater();
  for (uint32_t id = 0; id < end; ++id) {
    uint32_t gen;
    {
      Slot& s = slots_[id];
      if (!inUse(s)) continue;  // before the lock: a free entry's page stays untouched
      std::lock_guard entry(s.lock);
      if (!(s.flags & kUsed)) continue;
      copyOut(id, e);
      gen = s.gen;
    }
    if (pred(e) && removeEntry(id, gen, false, 0)) ++n;
  }
  return n;
}

size_t Table::markFlushedIf(const std::function<bool(const Entry&)>& pred) {
  size_t n = 0;
  Entry e;
  const uint32_t end = highWater();
  for (uint32_t id = 0; id < end; ++id) {
    Slot& s = slots_[id];
    uint32_t gen;
    {
      if (!inUse(s)) continue;
      std::lock_guard entry(s.lock);
      if (!(s.flags & kUsed) || (s.flags & kFlushed)) continue;
      copyOut(id, e);
      gen = s.gen;
    }
    // The predicate runs unlocked (it may be slow); the mark only if the
    // entry is still the same connection.
    if (!pred(e)) continue;
    std::lock_guard entry(s.lock);
    if ((s.flags & kUsed) && s.gen == gen && !(s.flags & kFlushed)) {
      setFlags(s, s.flags | kFlushed);
      ++n;
    }
  }
  return n;
}

size_t Table::expire(uint64_t now_ms, uint32_t scan, const std::function<uint64_t(const Entry&)>& last_use) {
  size_t n = 0;
  Entry e;
  // Entries past the high-water mark were never used: the scan wraps there.
  const uint32_t end = highWater();
  uint32_t cursor = cursor_.load(std::memory_order_relaxed);
  if (cursor >= end) cursor = 0;
  for (uint32_t i = 0; i < scan && i < end; ++i) {
    const uint32_t id = cursor;
    cursor = cursor + 1 >= end ? 0 : cursor + 1;
    uint32_t gen;
    {
      Slot& s = slots_[id];
      if (!inUse(s)) continue;  // before the lock: a free entry's page stays untouched
      std::lock_guard entry(s.lock);
      if (!(s.flags & kUsed)) continue;
      copyOut(id, e);
      gen = s.gen;
    }
    uint64_t used = e.last_ms;
    if (last_use) used = std::max(used, last_use(e));
    if (now_ms > used + timeouts_.forState(e.state, e.original.protocol) && removeEntry(id, gen, true, e.last_ms)) {
      ++n;
    }
  }
  cursor_.store(cursor, std::memory_order_relaxed);
  return n;
}

void Table::forEach(const std::function<void(uint32_t id, const Entry&)>& fn) const {
  Entry e;
  const uint32_t end = highWater();
  for (uint32_t id = 0; id < end; ++id) {
    {
      const Slot& s = slots_[id];
      if (!inUse(s)) continue;
      std::lock_guard entry(const_cast<SpinLock&>(s.lock));
      if (!(s.flags & kUsed)) continue;
      copyOut(id, e);
    }
    fn(id, e);
  }
}

std::array<uint64_t, kStateCount> Table::countByState() const {
  std::array<uint64_t, kStateCount> out{};
  forEach([&out](uint32_t, const Entry& e) { ++out[static_cast<size_t>(e.state)]; });
  return out;
}

Stats Table::stats() const {
  Stats s;
  s.inserted = inserted_.load(std::memory_order_relaxed);
  s.refused_full = refused_full_.load(std::memory_order_relaxed);
  s.early_dropped = early_dropped_.load(std::memory_order_relaxed);
  s.expired = expired_.load(std::memory_order_relaxed);
  s.removed = removed_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace dpu::conntrack
