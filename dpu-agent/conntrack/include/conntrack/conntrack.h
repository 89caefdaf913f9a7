// Connection tracking for the dataplane's load balancer and NAT: one entry
// per connection, found by either direction's 5-tuple, with the NAT it
// applies (the reply tuple is the translated one), its TCP state or whether a
// UDP/ICMP flow was answered, and its expiry. No DPDK, no I/O.
//
// Where it sits: the slow path creates an entry when it balances or
// translates a new connection, and consults it on every flow-cache miss; the
// established connection then runs as one cached flow per direction with the
// NAT fused into it, so the hit path never reads this table. TCP packets with
// SYN, FIN or RST on such a flow come back here (the flow punts them), which
// is how the state advances and closes; expiry is decided by the state's
// timeout against the last use the caller reports (the flows' hits).
//
// The state machine (no window tracking; what a service proxy needs):
//   TCP  original SYN (no ACK) → syn-sent; reply SYN+ACK → syn-received;
//        original ACK → established; the client's FIN → fin-wait, the
//        server's → close-wait; the other side's FIN then → time-wait; RST
//        from either side → close. A packet of an
//        unknown connection without SYN may be picked up loose (established),
//        as Linux's nf_conntrack_tcp_loose does, so connections survive a
//        dataplane restart. A new SYN on a closing connection starts anew.
//   UDP  original → new; a reply → replied.
//   ICMP echo request → new; echo reply → replied (the identifier is the "port").
// Timeouts (Timeouts) follow Linux's defaults, established TCP as kube-proxy
// sets it (a day).
//
// Bounded: at most `capacity` entries, all allocated at construction. When
// full, a new connection takes the place of a connection the other side never
// answered (UDP/ICMP/SCTP new, TCP syn-sent or syn-received) and no cached
// flow uses, found in the chains near the new one's (early drop, as Linux's
// nf_conntrack does: a flood of spoofed SYNs would otherwise hold the table
// for the syn-sent timeout); with none there it is refused (kExhausted). An
// answered connection is never evicted for a new one.
//
// Restarts: a table opened on a file (openPersistent) keeps its entries and
// index there (common/persistent_pages.h). When its process dies, kill -9
// included, the next one of the same boot opens the same file and takes every
// connection over, NAT and state included: the index is rebuilt from the
// entries (a process may die mid-update), damaged entries are dropped, and
// the caller's per-direction values (`user`) are cleared, since they name
// the dead process's flows. Entries are taken lowest id first, so the walks
// (expiry, flushes, dumps) stop at the highest id ever used: a walk never
// reads a page the table has not written.
//
// Threads: every method may be called from any thread (the workers' slow
// paths, the control thread's expiry and dpuctl). The index is split in
// stripes, each with its own spinlock, held only for a lookup or an update of
// one entry (never across a callback); a packet on the hit path never comes here.
//
// Hash flooding: the index's hash is keyed with keys each table draws when it
// is made, so a client cannot choose 5-tuples that share one chain and make
// every lookup there walk them all (as Linux keys nf_conntrack's hash).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/keyed_hash.h"
#include "common/persistent_pages.h"
#include "common/result.h"
#include "common/zeroed_pages.h"

namespace dpu::conntrack {

inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;
inline constexpr uint8_t kProtoSctp = 132;
inline constexpr uint8_t kProtoIcmp6 = 58;

// One direction of a connection as its packets carry it. Ports in host
// order; for ICMP echo both ports are the identifier.
struct Tuple {
  std::array<uint8_t, 16> src{};  // IPv4 in the first 4 bytes
  std::array<uint8_t, 16> dst{};
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t protocol = 0;
  uint8_t family = 4;  // 4 or 6
  bool operator==(const Tuple&) const = default;
  // The other direction of the same packets, untranslated.
  Tuple reversed() const;
  // "10.244.1.5:40000 -> 10.96.0.10:80"
  std::string str() const;
};

enum class Dir : uint8_t { kOriginal = 0, kReply = 1 };

enum class State : uint8_t {
  kNew,          // UDP/ICMP/SCTP: only the original direction seen
  kReplied,      // UDP/ICMP/SCTP: answered
  kSynSent,
  kSynReceived,
  kEstablished,
  kFinWait,      // the original side (the client) sent FIN
  kCloseWait,    // the reply side (the server) sent FIN first
  kTimeWait,     // both sides sent FIN
  kClose,        // RST seen
};
inline constexpr size_t kStateCount = 9;
const char* stateName(State s);

// TCP flags as the header has them (byte 13).
inline constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpAck = 0x10;

// Milliseconds an entry lives without a packet, by state.
struct Timeouts {
  uint32_t tcp_syn_sent = 120'000;
  uint32_t tcp_syn_received = 60'000;
  uint32_t tcp_established = 86'400'000;
  uint32_t tcp_fin_wait = 120'000;
  uint32_t tcp_close_wait = 60'000;
  uint32_t tcp_time_wait = 120'000;
  uint32_t tcp_close = 10'000;
  uint32_t udp_new = 30'000;
  uint32_t udp_replied = 120'000;
  uint32_t icmp = 30'000;
  uint32_t forState(State s, uint8_t protocol) const;
};

// What the entry translates (the reply tuple shows how).
inline constexpr uint8_t kNatDst = 1;  // DNAT: a service's address to a backend
inline constexpr uint8_t kNatSrc = 2;  // SNAT: masquerade (node port, hairpin, egress)

// A copy of one entry.
struct Entry {
  Tuple original;     // as the client sent it
  Tuple reply;        // as the replies arrive (translated)
  State state = State::kNew;
  uint8_t nat = 0;
  bool loose = false;       // picked up without its SYN
  bool flushed = false;     // its service moved it off its backend (markFlushedIf): a tombstone
  uint32_t service = 0;     // the caller's tags: which frontend and backend balanced it
  uint32_t backend = 0;
  uint64_t created_ms = 0;
  uint64_t last_ms = 0;     // the last packet this table saw (the caller may know a later one)
  uint64_t user[2] = {};    // the caller's, per direction (e.g. where its cached flow is)
};

// A connection found or created: its entry, the entry's generation (an id
// is reused once its connection is gone; a stale Hit no longer matches) and
// the direction of the packet that found it.
struct Hit {
  uint32_t id = 0;
  uint32_t gen = 0;
  Dir dir = Dir::kOriginal;
};

struct Stats {
  uint64_t inserted = 0;
  uint64_t refused_full = 0;   // new connections refused: the table was full
  uint64_t early_dropped = 0;  // unanswered connections dropped for new ones: the table was full
  uint64_t expired = 0;
  uint64_t removed = 0;        // removed by the caller (closed, flushed)
};

class Table {
 public:
  Table(uint32_t capacity, Timeouts timeouts = {});
  // A table whose memory is the file `path`: adopted() tells whether it took
  // over the connections a previous process of this boot left there. A file
  // this boot wrote for another capacity (conntrack.max_entries changed) is
  // read first: its connections are carried over into the new table (as
  // many as fit; resizedFrom() says from what capacity), then it goes. The
  // error names the file and what failed.
  static Result<std::unique_ptr<Table>> openPersistent(uint32_t capacity, Timeouts timeouts, const std::string& path);
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return size_.load(std::memory_order_relaxed); }
  const Timeouts& timeouts() const { return timeouts_; }

  // The connection `t` belongs to, and in which direction; `out` gets a copy of its entry.
  std::optional<Hit> find(const Tuple& t, Entry* out = nullptr) const;
  // Starts loading what a lookup of `t` reads first (its bucket and the
  // bucket's lock), for a caller that will look `t` up soon: in a large
  // table each is a cache miss.
  void prefetch(const Tuple& t) const;
  // The same, counting a packet with `tcp_flags` (TCP) seen at `now_ms`: the
  // state advances and the last use moves (`out`: the entry after it;
  // `before`: its state before the packet, one lookup for both).
  std::optional<Hit> track(const Tuple& t, uint8_t tcp_flags, uint64_t now_ms, Entry* out = nullptr,
                           State* before = nullptr);
  // A new connection in state `initial`. kExhausted when the table is full
  // and no unanswered connection near it can go (above), kConflict when
  // either tuple already belongs to a connection.
  Result<Hit> insert(const Tuple& original, const Tuple& reply, uint8_t nat, State initial, uint64_t now_ms,
                     uint32_t service = 0, uint32_t backend = 0, bool loose = false);
  // The state a connection opened by a first packet with `tcp_flags` starts
  // in (nullopt: a TCP packet that opens none, e.g. a lone RST); `loose` set
  // when it is picked up mid-stream.
  static std::optional<State> initialState(uint8_t protocol, uint8_t tcp_flags, bool& loose);
  // The state after a packet in `dir` with `tcp_flags` (pure: the state machine above).
  static State next(State s, uint8_t protocol, Dir dir, uint8_t tcp_flags);
  bool get(const Hit& h, Entry& out) const;
  // False when the connection is gone (removed, expired, or its place
  // given to a new one when the table was full).
  bool setUser(const Hit& h, Dir dir, uint64_t value);
  // Removes one connection (false: it was gone already).
  bool remove(const Hit& h);
  // Removes every connection `pred` selects; returns how many.
  size_t removeIf(const std::function<bool(const Entry&)>& pred);
  // Marks every connection `pred` selects (and not marked yet) as flushed;
  // returns how many. A flushed entry stays until it expires like any other,
  // so that a packet of the old connection still finds it: the caller
  // decides the client's next packet anew and sends a late answer of the old
  // backend through without caching a flow for it, which would outlive the
  // entry and hide a later connection's replies from the table.
  size_t markFlushedIf(const std::function<bool(const Entry&)>& pred);
  // Expires up to `scan` entries from where the last call stopped: an entry
  // is removed when its state's timeout has passed since the later of its
  // last_ms and `last_use(entry)` (the caller's; 0 if it knows none).
  size_t expire(uint64_t now_ms, uint32_t scan, const std::function<uint64_t(const Entry&)>& last_use = {});
  // Every entry (a consistent copy of each; the table may change meanwhile).
  void forEach(const std::function<void(uint32_t id, const Entry&)>& fn) const;
  std::array<uint64_t, kStateCount> countByState() const;
  Stats stats() const;
  // Persistent: whether the file held a previous process's table, how many
  // of its connections were taken over and how many dropped as damaged, and
  // (not adopted) why the table started empty.
  bool adopted() const { return persist_ != nullptr && persist_->adopted(); }
  uint32_t adoptedConnections() const { return adopted_; }
  uint32_t droppedDamaged() const { return dropped_damaged_; }
  // Carried over from a table of another capacity: that capacity (0: none),
  // and the connections that did not fit in this one.
  uint32_t resizedFrom() const { return resized_from_; }
  uint32_t droppedNoRoom() const { return dropped_no_room_; }
  std::string persistNote() const { return persist_ != nullptr ? persist_->freshReason() : std::string(); }
  // The file's filesystem when it is on a disk ("" in memory or not persistent).
  std::string persistDisk() const { return persist_ != nullptr ? persist_->diskFilesystem() : std::string(); }
  // One past the highest entry id ever used: where the walks stop.
  uint32_t highWater() const { return static_cast<uint32_t>(high_water_->load(std::memory_order_acquire)); }
  // Bytes the table holds per entry of capacity (entries and index).
  static size_t bytesPerEntry();
  // The same without the rest of IPv6 addresses: what an entry costs while
  // the table holds IPv4 connections only (the IPv6 side array's pages are
  // never touched then).
  static size_t bytesPerIpv4Entry();
  // The chain a lookup of `t` walks (of the table's bucket count): where
  // this table's keyed hash puts `t`; tests show two tables place alike
  // tuples apart.
  uint32_t bucketIndex(const Tuple& t) const;

 private:
  struct Slot;
  struct Ipv6Rest;
  struct Stripe;
  uint32_t bucketOf(const Tuple& t) const;
  uint32_t findLocked(const Tuple& t, uint32_t bucket, Dir& dir) const;  // id + 1, or 0
  void link(uint32_t id, Dir dir, uint32_t bucket);
  void unlink(uint32_t id, Dir dir, uint32_t bucket);
  Stripe& stripeOf(uint32_t bucket) const;
  // Removes entry `id` of generation `gen` if it is still that one (and, for
  // expiry, still idle since `idle_since`).
  bool removeEntry(uint32_t id, uint32_t gen, bool expiry, uint64_t idle_since);
  // Full: unlinks an unanswered entry near a new connection's buckets
  // `bo` and `br` (their stripes `a` and `b` held) for it; its id + 1, or 0.
  uint32_t dropEarlyLocked(uint32_t bo, uint32_t br, const Stripe& a, const Stripe& b);
  void copyOut(uint32_t id, Entry& out) const;
  // A connection of another table as it was there (its state, NAT, times,
  // flags); false when it does not fit.
  bool restore(const Entry& e);
  static uint64_t layoutOf(uint32_t capacity);
  // Entry `id`'s tuples: written, read back, compared with a packet's.
  void store(uint32_t id, const Tuple& original, const Tuple& reply);
  Tuple tupleOf(uint32_t id, Dir dir) const;
  bool matches(uint32_t id, Dir dir, const Tuple& t) const;

  Table(uint32_t capacity, Timeouts timeouts, std::unique_ptr<PersistentPages> persist);
  // Takes over the entries a previous process left in the file.
  void adopt();
  static uint32_t bucketCount(uint32_t capacity);

  uint32_t capacity_;
  Timeouts timeouts_;
  uint32_t bucket_mask_;
  HashKeys keys_;  // the bucket hash's, this table's own
  std::unique_ptr<PersistentPages> persist_;  // the file, when persistent
  std::atomic<uint64_t> high_water_local_{0};
  std::atomic<uint64_t>* high_water_ = &high_water_local_;  // the file's header word when persistent
  uint32_t adopted_ = 0;
  uint32_t dropped_damaged_ = 0;
  uint32_t resized_from_ = 0;
  uint32_t dropped_no_room_ = 0;
  // The entries and the chain heads are zero pages from the kernel, each
  // faulted in on its first use (common/zeroed_pages.h): a large table costs
  // nothing at start (a dataplane restart waits for it) and only the pages in
  // use are resident.
  ZeroedArray<Slot> slots_mem_;
  ZeroedArray<Ipv6Rest> v6_mem_;
  ZeroedArray<uint32_t> buckets_mem_;
  Slot* slots_ = nullptr;
  Ipv6Rest* v6_ = nullptr;  // written by IPv6 connections only
  uint32_t* buckets_ = nullptr;  // chain heads: node = (id << 1 | dir) + 1, 0 = empty
  std::unique_ptr<Stripe[]> stripes_;
  mutable std::atomic_flag free_lock_ = ATOMIC_FLAG_INIT;
  std::vector<uint32_t> free_;  // free entry ids (a stack, reserved once)
  std::atomic<uint32_t> size_{0};
  std::atomic<uint32_t> cursor_{0};
  std::atomic<uint64_t> inserted_{0}, refused_full_{0}, early_dropped_{0}, expired_{0}, removed_{0};
};

}  // namespace dpu::conntrack
