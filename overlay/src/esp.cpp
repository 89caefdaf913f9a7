// ESP transforms (RFC 4303 with RFC 4106 AES-GCM) over PacketBuffer: SA
// creation, encrypt, decrypt and the few IP header fields they need. The
// wire format and the failure contract are described in esp.h.
//
// The IP parsing here is deliberately minimal and local: it reads the wire
// formats of headers.h but not through the packet library's parser, which this
// library does not link. ESP needs only where its header goes, the length
// fields it rewrites and the next-header byte it takes over.
#include "overlay/esp.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/headers.h"

namespace dpu::overlay {
namespace {

// More extension headers than any sane packet carries ends the walk: the
// chain is attacker-controlled and must not cost unbounded time. (The same
// bound as the parser's kMaxIpv6ExtHeaders, which lives in the packet library.)
constexpr int kMaxExtHeaders = 8;
constexpr uint32_t kMaxIpLength = 65535;

enum class Direction { kEncrypt, kDecrypt };

[[gnu::always_inline]] inline Status parseIpv4(const uint8_t* p, uint32_t size, EspLayout& out) {
  if (size < ipv4::kMinHeaderLen) return Status::kTruncated;
  const auto header_len = static_cast<uint32_t>(ipv4::headerLen(p));
  if (header_len < ipv4::kMinHeaderLen || header_len > size) return Status::kBadIpv4HeaderLength;
  const uint32_t total = ipv4::totalLength(p);
  if (total < header_len || total > size) return Status::kBadIpv4TotalLength;
  // Transport mode protects whole datagrams (RFC 4303 §3.1.1), and received
  // fragments are reassembled before ESP processing (§3.4.1): MF or a
  // fragment offset means the caller must reassemble first.
  if (ipv4::fragField(p) & (ipv4::kFlagMf | ipv4::kFragOffsetMask)) return Status::kUnsupported;
  out = {header_len, total, ipv4::kProtocolOffset, false};
  return Status::kOk;
}

// Walks the IPv6 extension headers. Encrypt stops where ESP must be inserted:
// after hop-by-hop, routing, an atomic fragment header and destination options
// that precede a routing header (those are read by intermediate hops) — the
// placement of Linux's ip6_find_1stfragopt() and of scapy, RFC 4303 §3.1.1.
// Decrypt walks the same kinds of headers until it finds ESP.
Status parseIpv6(const uint8_t* p, uint32_t size, Direction dir, EspLayout& out) {
  if (size < ipv6::kHeaderLen) return Status::kTruncated;
  const uint32_t total = ipv6::kHeaderLen + ipv6::payloadLength(p);
  if (total > size) return Status::kBadIpv6PayloadLength;
  uint32_t off = ipv6::kHeaderLen;
  uint32_t next_header_at = ipv6::kNextHeaderOffset;
  bool seen_routing = false;
  for (int count = 0;; ++count) {
    const uint8_t nh = p[next_header_at];
    if (dir == Direction::kDecrypt && nh == ipproto::kEsp) break;
    bool skip = false;
    switch (nh) {
      case ipproto::kHopByHop:
        // RFC 8200 §4.1: only directly after the IPv6 header.
        if (next_header_at != ipv6::kNextHeaderOffset) return Status::kBadIpv6ExtHeader;
        skip = true;
        break;
      case ipproto::kRouting:
      case ipproto::kFragment:
        skip = true;
        break;
      case ipproto::kDestOptions:
        skip = dir == Direction::kDecrypt || !seen_routing;
        break;
      default:
        break;
    }
    if (!skip) {
      if (dir == Direction::kDecrypt) return Status::kNotEsp;
      break;
    }
    if (count == kMaxExtHeaders) return Status::kBadIpv6ExtHeader;
    if (off + ipv6::kExtMinLen > total) return Status::kBadIpv6ExtHeader;
    const uint8_t* const ext = p + off;
    // Offset or M flag set: a real fragment (see parseIpv4). An atomic
    // fragment header (RFC 6946) is just skipped.
    if (nh == ipproto::kFragment && (ipv6::fragOffset(ext) != 0 || ipv6::fragMore(ext))) {
      return Status::kUnsupported;
    }
    const auto len = static_cast<uint32_t>(ipv6::extLength(nh, ext));
    if (off + len > total) return Status::kBadIpv6ExtHeader;
    if (nh == ipproto::kRouting) seen_routing = true;
    next_header_at = off;
    off += len;
  }
  out = {off, total, next_header_at, true};
  return Status::kOk;
}

[[gnu::always_inline]] inline Status parseTransport(const uint8_t* p, uint32_t size, Direction dir, EspLayout& out) {
  if (size == 0) return Status::kTruncated;
  Status s;
  switch (p[0] >> 4) {
    case 4:
      s = parseIpv4(p, size, out);
      if (s == Status::kOk && dir == Direction::kDecrypt && ipv4::protocol(p) != ipproto::kEsp) return Status::kNotEsp;
      return s;
    case 6:
      return parseIpv6(p, size, dir, out);
    default:
      return Status::kBadIpVersion;
  }
}

// The outer header of a received tunnel-mode packet is parsed the same way.
Status parseEspPacket(const uint8_t* p, uint32_t size, EspLayout& out) {
  return parseTransport(p, size, Direction::kDecrypt, out);
}

// Length, next-header value and DS field (DSCP + ECN) of a whole inner packet.
struct InnerPacket {
  uint32_t length = 0;
  uint8_t next_header = 0;
  uint8_t ds = 0;
};

Status parseInner(const uint8_t* p, uint32_t size, InnerPacket& out) {
  if (size == 0) return Status::kTruncated;
  switch (p[0] >> 4) {
    case 4: {
      if (size < ipv4::kMinHeaderLen) return Status::kTruncated;
      const auto header_len = static_cast<uint32_t>(ipv4::headerLen(p));
      if (header_len < ipv4::kMinHeaderLen || header_len > size) return Status::kBadIpv4HeaderLength;
      const uint32_t total = ipv4::totalLength(p);
      if (total < header_len || total > size) return Status::kBadIpv4TotalLength;
      out = {total, ipproto::kIpv4, ipv4::tos(p)};
      return Status::kOk;
    }
    case 6: {
      if (size < ipv6::kHeaderLen) return Status::kTruncated;
      const uint32_t total = ipv6::kHeaderLen + ipv6::payloadLength(p);
      if (total > size) return Status::kBadIpv6PayloadLength;
      out = {total, ipproto::kIpv6, ipv6::trafficClass(p)};
      return Status::kOk;
    }
    default:
      return Status::kBadIpVersion;
  }
}

// A packet's AES-GCM nonce (RFC 4106 §4: salt || IV) and AAD (§5: SPI ||
// seq, 8 bytes, or SPI || ESN high || ESN low, 12), each written with one
// 16-byte store. The AES-GCM code loads each whole right after; a load that
// several smaller stores would have to feed waits until they reach the cache
// (store-to-load forwarding fails), which cost the ESP encap about 10 cycles
// a packet at 64 B and at 1400 B.
struct alignas(16) GcmInputs {
  AeadNonce nonce;
  uint8_t nonce_pad[16 - sizeof(AeadNonce)];
  uint8_t aad[16];
  uint32_t aad_len;
};
static_assert(sizeof(AeadNonce) == 12 && offsetof(GcmInputs, aad) == 16);
static_assert(std::endian::native == std::endian::little, "the words below are built in little-endian order");

inline void store128(void* to, uint64_t lo, uint64_t hi) {
#if defined(__SSE2__)
  _mm_store_si128(static_cast<__m128i*>(to), _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)));
#else
  const uint64_t w[2] = {lo, hi};
  std::memcpy(to, w, sizeof w);
#endif
}

// `iv_wire`: the 8 IV bytes as the packet carries them (memcpy'd, not
// byte-swapped); `seq` the full sequence number.
void makeGcmInputs(GcmInputs& g, const std::array<uint8_t, 4>& salt, uint64_t iv_wire, uint32_t spi, uint64_t seq,
                   bool esn) {
  uint32_t salt_word;
  std::memcpy(&salt_word, salt.data(), 4);
  store128(g.nonce.data(), uint64_t{salt_word} | iv_wire << 32, iv_wire >> 32);
  const uint64_t spi_be = __builtin_bswap32(spi);
  const uint64_t low_be = __builtin_bswap32(static_cast<uint32_t>(seq));
  if (esn) {
    const uint64_t high_be = __builtin_bswap32(static_cast<uint32_t>(seq >> 32));
    store128(g.aad, spi_be | high_be << 32, low_be);
    g.aad_len = 12;
  } else {
    store128(g.aad, spi_be | low_be << 32, 0);
    g.aad_len = 8;
  }
}

// An IPv4 header without options to a place that may overlap it: read
// whole, then written (inline, where a memmove is a libc call).
void moveMinIpv4Header(uint8_t* to, const uint8_t* from) {
  uint8_t header[ipv4::kMinHeaderLen];
  std::memcpy(header, from, sizeof header);
  std::memcpy(to, header, sizeof header);
}

// The checksum of an IPv4 header after its total length and protocol become
// `total` and `protocol`, patched incrementally (RFC 1624 eqn. 3, both changed
// words in one sum: one fold, and the same checksum as two updates in a row,
// since a one's complement sum folds to zero only when every term is zero),
// so a header that arrived with a bad checksum keeps it rather than being
// laundered. The checksum covers 16-bit words: the protocol shares one with
// the TTL.
uint16_t rewrittenIpv4Checksum(const uint8_t* ip, uint16_t total, uint8_t protocol) {
  const uint16_t old_word = load16(ip + 8);
  const uint16_t new_word = static_cast<uint16_t>((old_word & 0xff00) | protocol);
  uint32_t sum = static_cast<uint16_t>(~ipv4::checksum(ip));
  sum += static_cast<uint16_t>(~ipv4::totalLength(ip));
  sum += total;
  sum += static_cast<uint16_t>(~old_word);
  sum += new_word;
  return checksumFinish(sum);
}

// Rewrites the IPv4 total length and protocol and patches the checksum.
void rewriteIpv4(uint8_t* ip, uint16_t total, uint8_t protocol) {
  // Computed before the stores, not read back after them (a 16-bit load over
  // a fresh 8-bit store stalls store forwarding on every packet).
  const uint16_t checksum = rewrittenIpv4Checksum(ip, total, protocol);
  ipv4::setProtocol(ip, protocol);
  ipv4::setTotalLength(ip, total);
  ipv4::setChecksum(ip, checksum);
}

// The same for an IPv4 header without options moved to `to` (which may
// overlap `from`): read once, rewritten in registers and written once, in
// the words it is read by next (the uplink lane's 8-byte loads). Patched
// in memory, around the move or after it, the wide loads of the move or of
// the next reader would wait for the narrow field stores to reach the cache.
void moveRewriteMinIpv4(uint8_t* to, const uint8_t* from, uint16_t total, uint8_t protocol) {
  if constexpr (std::endian::native != std::endian::little) {
    moveMinIpv4Header(to, from);
    rewriteIpv4(to, total, protocol);
  } else {
    uint64_t w0, w1;
    uint32_t w2;
    std::memcpy(&w0, from, 8);
    std::memcpy(&w1, from + 8, 8);
    std::memcpy(&w2, from + 16, 4);
    const uint16_t checksum = rewrittenIpv4Checksum(from, total, protocol);
    // Little-endian words: header byte i is bits 8i..8i+7 of its word. Total
    // length: bytes 2-3; protocol: byte 9; checksum: bytes 10-11.
    w0 = (w0 & ~0xffff0000ull) | uint64_t{__builtin_bswap16(total)} << 16;
    w1 = (w1 & ~0xffffff00ull) | uint64_t{protocol} << 8 | uint64_t{__builtin_bswap16(checksum)} << 16;
    std::memcpy(to, &w0, 8);
    std::memcpy(to + 8, &w1, 8);
    std::memcpy(to + 16, &w2, 4);
  }
}

void writeOuterHeader(uint8_t* p, const EspTunnelConfig& t, uint8_t ds, uint32_t total_len) {
  if (!t.ipv6) {
    ipv4::setVersionIhl(p, ipv4::kMinHeaderLen);
    ipv4::setTos(p, ds);
    ipv4::setTotalLength(p, static_cast<uint16_t>(total_len));
    // ID 0: with DF set the datagram is atomic and the ID has no meaning
    // (RFC 6864 §4.1); without DF the overlay never exceeds the path MTU.
    ipv4::setId(p, 0);
    ipv4::setFragField(p, t.dont_fragment ? ipv4::kFlagDf : 0);
    ipv4::setTtl(p, t.ttl);
    ipv4::setProtocol(p, ipproto::kEsp);
    ipv4::setChecksum(p, 0);
    std::memcpy(p + ipv4::kSrcOffset, t.src.data(), 4);
    std::memcpy(p + ipv4::kDstOffset, t.dst.data(), 4);
    ipv4::setChecksum(p, internetChecksum({p, ipv4::kMinHeaderLen}));
  } else {
    // Flow label 0: ECMP on the ESP path hashes the SPI; a per-flow label would
    // need the inner flow hash, which the caller does not pass here.
    ipv6::setVersionClassFlow(p, ds, 0);
    ipv6::setPayloadLength(p, static_cast<uint16_t>(total_len - ipv6::kHeaderLen));
    ipv6::setNextHeader(p, ipproto::kEsp);
    ipv6::setHopLimit(p, t.ttl);
    ipv6::setSrc(p, t.src);
    ipv6::setDst(p, t.dst);
  }
}

// RFC 6040 §4.2, decapsulation: a congestion mark the outer header collected
// on the way is copied to an ECN-capable inner header. (A CE outer over a
// Not-ECT inner cannot come from our encapsulation, which copies the inner ECN
// field; such a packet is passed on unchanged.)
void propagateCongestion(const uint8_t* outer, uint8_t* inner, uint32_t inner_len) {
  const uint8_t outer_ecn = (ipv4::version(outer) == 4) ? (ipv4::tos(outer) & 3) : (ipv6::trafficClass(outer) & 3);
  if (outer_ecn != 3) return;
  if (ipv4::version(inner) == 4 && inner_len >= ipv4::kMinHeaderLen) {
    const uint8_t ecn = ipv4::tos(inner) & 3;
    if (ecn == 1 || ecn == 2) {
      const uint16_t old_word = load16(inner);
      inner[1] |= 3;
      ipv4::setChecksum(inner, checksumUpdate16(ipv4::checksum(inner), old_word, load16(inner)));
    }
  } else if (ipv6::version(inner) == 6 && inner_len >= ipv6::kHeaderLen) {
    const uint8_t ecn = ipv6::trafficClass(inner) & 3;
    if (ecn == 1 || ecn == 2) inner[1] |= 0x30;
  }
}

// Checks and normalizes the configuration shared by both directions.
Result<std::unique_ptr<AeadContext>> makeAead(const EspSaConfig& c, bool outbound) {
  // RFC 4303 §2.1: 0 is never sent, 1-255 are reserved by IANA. We never send
  // a reserved SPI, but accept one from a peer (known-answer vectors use 52).
  if (c.spi == 0 || (outbound && c.spi < 256)) {
    return Error{"ESP SPI " + std::to_string(c.spi) + " is reserved (RFC 4303 §2.1: 0-255); use a value >= 256"};
  }
  const auto algorithm = aeadAlgorithmForKeySize(c.key.size());
  if (!algorithm) {
    return Error{"ESP AES-GCM key must be 16 or 32 bytes (without the 4-byte salt), got " +
                 std::to_string(c.key.size())};
  }
  if (outbound && c.mode == EspMode::kTunnel && !c.tunnel.ipv6) {
    static constexpr std::array<uint8_t, 16> kZero{};
    if (std::memcmp(c.tunnel.src.data(), kZero.data(), 4) == 0 ||
        std::memcmp(c.tunnel.dst.data(), kZero.data(), 4) == 0) {
      return Error{"ESP tunnel mode needs outer source and destination addresses"};
    }
  }
  const AeadBackend backend = c.backend.value_or(defaultAeadBackend());
  return createAeadContext(backend, *algorithm, c.key);
}

void countResult(EspSaCounters& counters, Status s, uint32_t bytes) {
  if (s == Status::kOk) {
    ++counters.packets;
    counters.bytes += bytes;
  } else {
    ++counters.drops[static_cast<size_t>(s)];
  }
}

}  // namespace

EspTunnelConfig EspTunnelConfig::v4(const std::array<uint8_t, 4>& src, const std::array<uint8_t, 4>& dst) {
  EspTunnelConfig t;
  std::memcpy(t.src.data(), src.data(), 4);
  std::memcpy(t.dst.data(), dst.data(), 4);
  return t;
}

EspTunnelConfig EspTunnelConfig::v6(const std::array<uint8_t, 16>& src, const std::array<uint8_t, 16>& dst) {
  EspTunnelConfig t;
  t.ipv6 = true;
  t.src = src;
  t.dst = dst;
  return t;
}

void detail::SpinFlag::lock() {
  while (flag_.test_and_set(std::memory_order_acquire)) {
    // Wait with plain loads (the line stays shared until it is released).
    while (flag_.test(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    }
  }
}

// ---------------------------------------------------------------- outbound

namespace {

// The sequence space of an SA, and whether initial_sequence lies in it.
Result<uint64_t> sequenceSpace(const EspSaConfig& config) {
  const uint64_t hard = config.esn ? UINT64_MAX : UINT32_MAX;
  if (config.initial_sequence == 0 || config.initial_sequence > hard) {
    return Error{"ESP initial sequence number must be in 1.." + std::to_string(hard) +
                 (config.esn ? "" : " (enable ESN for a 64-bit space)")};
  }
  return hard;
}

}  // namespace

Result<EspOutboundSa> EspOutboundSa::create(const EspSaConfig& config) {
  auto space = sequenceSpace(config);
  if (!space) return Error{space.error()};
  const uint64_t hard = space.value();
  const uint64_t soft = config.soft_sequence_limit != 0 ? config.soft_sequence_limit : (hard >> 1) + 1;
  if (soft > hard) {
    return Error{"ESP soft sequence limit " + std::to_string(soft) + " is beyond the hard limit " +
                 std::to_string(hard)};
  }
  auto aead = makeAead(config, true);
  if (!aead) return Error{aead.error()};
  EspOutboundSa sa;
  sa.aead_ = std::move(aead).value();
  sa.last_seq_.value.store(config.initial_sequence - 1, std::memory_order_relaxed);
  sa.soft_limit_ = soft;
  sa.hard_limit_ = hard;
  sa.spi_ = config.spi;
  sa.salt_ = config.salt;
  sa.mode_ = config.mode;
  sa.esn_ = config.esn;
  sa.iv_size_ = config.iv_mode == EspIvMode::kExplicit ? kEspExplicitIvSize : 0;
  sa.tunnel_ = config.tunnel;
  sa.outer_size_ = config.mode == EspMode::kTunnel ? (config.tunnel.ipv6 ? ipv6::kHeaderLen : ipv4::kMinHeaderLen) : 0;
  return sa;
}

Status EspOutboundSa::encrypt(PacketBuffer& packet) {
  const uint32_t size = packet.size();
  // One owner: a plain load and store.
  const Status s = encryptPacket(packet, [this]() -> uint64_t {
    const uint64_t last = last_seq_.load();
    if (last >= hard_limit_) return 0;
    last_seq_.value.store(last + 1, std::memory_order_relaxed);
    return last + 1;
  });
  countResult(counters_, s, size);
  return s;
}

// The compare-and-swap makes the number this thread's alone; 0 (never a
// valid number) when none is left below `limit`.
uint64_t EspOutboundSa::reserveShared(uint64_t limit) {
  uint64_t last = last_seq_.load();
  do {
    if (last >= limit) return 0;
  } while (!last_seq_.value.compare_exchange_weak(last, last + 1, std::memory_order_relaxed));
  return last + 1;
}

// A new block of up to kEspSequenceBlockSize numbers, the first of them
// taken; 0 (the block left as it was, empty) when none is left below `limit`.
// The mark is read before the counter (acquire, against advanceTo's release):
// a block reserved after a thread saw a mark lies above it.
uint64_t EspOutboundSa::refillShared(uint64_t limit, EspSequenceBlock& block) {
  (void)floor_.value.load(std::memory_order_acquire);
  uint64_t last = last_seq_.load();
  uint64_t top = 0;
  do {
    if (last >= limit) {
      block.end = block.next;  // what it held is above the limit or below the mark
      return 0;
    }
    top = limit - last > kEspSequenceBlockSize ? last + kEspSequenceBlockSize : limit;
  } while (!last_seq_.value.compare_exchange_weak(last, top, std::memory_order_relaxed));
  block.next = last + 2;
  block.end = top + 1;
  return last + 1;
}

Status EspOutboundSa::encryptShared(PacketBuffer& packet, uint64_t limit) {
  limit = std::min(limit, hard_limit_);
  return encryptPacket(packet, [this, limit] { return reserveShared(limit); });
}

Status EspOutboundSa::encryptShared(PacketBuffer& packet, uint64_t limit, EspSequenceBlock& block) {
  limit = std::min(limit, hard_limit_);
  return encryptPacket(packet, [this, limit, &block] { return takeShared(limit, block); });
}

void EspOutboundSa::advanceTo(uint64_t last) {
  uint64_t cur = last_seq_.load();
  while (cur < last && !last_seq_.value.compare_exchange_weak(cur, last, std::memory_order_relaxed)) {
  }
  // Then the mark (after the counter: a thread that sees the mark reserves
  // above it), never moved down.
  uint64_t mark = floor_.load();
  while (mark < last && !floor_.value.compare_exchange_weak(mark, last, std::memory_order_release)) {
  }
}

// Inlined, as sealPlacedAt below, into the dataplane's entry points
// (sealPlacedShared): one call per packet sealed, not three, which the
// 1400 B encap measured at about 3 % of its cycles.
[[gnu::always_inline]] inline Status EspOutboundSa::sealAt(uint8_t* esp, uint32_t payload_len, uint32_t pad,
                                                           uint8_t next_header, uint64_t seq) {
  store32(esp, spi_);
  store32(esp + 4, static_cast<uint32_t>(seq));  // RFC 4303 §2.2.1: only the low half on the wire
  // The IV is the 64-bit sequence number: unique per key since the counter
  // never wraps (RFC 4106 §3.1 asks only for uniqueness), and equal to the
  // RFC 8750 implicit IV, so both modes use the same nonce for a packet.
  if (iv_size_ != 0) store64(esp + kEspHeaderSize, seq);
  uint8_t* const ct = esp + kEspHeaderSize + iv_size_;
  uint8_t* const trailer = ct + payload_len;
  // RFC 4303 §2.4: the padding is 1, 2, 3 (at most 3: a 4-byte boundary),
  // stored as one word; the trailer and then the ICV overwrite its rest.
  static_assert(kEspTrailerSize + kEspIcvSize >= 4);
  store32(trailer, 0x01020304);
  trailer[pad] = static_cast<uint8_t>(pad);
  trailer[pad + 1] = next_header;
  const uint32_t ct_len = payload_len + pad + kEspTrailerSize;
  GcmInputs g;
  makeGcmInputs(g, salt_, __builtin_bswap64(seq), spi_, seq, esn_);
  return aead_->seal(g.nonce, {g.aad, g.aad_len}, {ct, ct_len}, ct + ct_len);
}

// sealPlacedShared's work once the mode is known to be transport: `seq` the
// number reserve() gives (0: none left, nothing written).
[[gnu::always_inline]] inline Status EspOutboundSa::sealPlacedAt(uint8_t* esp, uint32_t payload_len,
                                                                 uint8_t next_header, uint64_t seq, uint32_t& esp_len) {
  if (seq == 0) [[unlikely]] return Status::kEspSeqExhausted;
  const uint32_t pad = padLength(payload_len);
  const Status sealed = sealAt(esp, payload_len, pad, next_header, seq);
  esp_len = kEspHeaderSize + iv_size_ + payload_len + pad + kEspTrailerSize + kEspIcvSize;
  return sealed;
}

Status EspOutboundSa::sealPlacedShared(uint8_t* esp, uint32_t payload_len, uint8_t next_header, uint64_t limit,
                                       uint32_t& esp_len) {
  if (mode_ != EspMode::kTransport) return Status::kUnsupported;
  return sealPlacedAt(esp, payload_len, next_header, reserveShared(std::min(limit, hard_limit_)), esp_len);
}

Status EspOutboundSa::sealPlacedShared(uint8_t* esp, uint32_t payload_len, uint8_t next_header, uint64_t limit,
                                       EspSequenceBlock& block, uint32_t& esp_len) {
  if (mode_ != EspMode::kTransport) return Status::kUnsupported;
  return sealPlacedAt(esp, payload_len, next_header, takeShared(std::min(limit, hard_limit_), block), esp_len);
}

// `reserve` gives the packet's sequence number, or 0 when none is left
// (kEspSeqExhausted, nothing done).
template <class Reserve>
Status EspOutboundSa::encryptPacket(PacketBuffer& packet, Reserve&& reserve) {
  uint8_t* const p = packet.data();
  const uint32_t size = packet.size();

  // What stays in front (transport: the IP headers), what is protected, and
  // the next-header value the trailer carries.
  uint32_t keep = 0;
  uint32_t ip_len = 0;
  uint8_t next_header = 0;
  uint8_t ds = 0;
  EspLayout layout;
  if (mode_ == EspMode::kTransport) {
    const Status s = parseTransport(p, size, Direction::kEncrypt, layout);
    if (s != Status::kOk) return s;
    keep = layout.header_len;
    ip_len = layout.packet_len;
    next_header = p[layout.next_header_at];
  } else {
    InnerPacket inner;
    const Status s = parseInner(p, size, inner);
    if (s != Status::kOk) return s;
    ip_len = inner.length;
    next_header = inner.next_header;
    ds = inner.ds;
  }

  const uint32_t payload_len = ip_len - keep;
  const uint32_t pad = padLength(payload_len);
  const uint32_t front = outer_size_ + kEspHeaderSize + iv_size_;
  const uint32_t back = pad + kEspTrailerSize + kEspIcvSize;
  const uint32_t new_len = ip_len + front + back;
  // The result must still fit the 16-bit IP length field (IPv6 counts the
  // payload only).
  const bool ipv6_length = mode_ == EspMode::kTransport ? layout.ipv6 : tunnel_.ipv6;
  if (new_len - (ipv6_length ? ipv6::kHeaderLen : 0) > kMaxIpLength) return Status::kNoRoom;
  // Bytes after the IP packet (Ethernet minimum-frame padding) are dropped.
  const uint32_t excess = size - ip_len;
  if (packet.headroom() < front || packet.tailroom() + excess < back) return Status::kNoRoom;

  // From here on nothing fails after the sequence number is consumed but
  // the backend, and a nonce is never used twice even then.
  const uint64_t seq = reserve();
  if (seq == 0) [[unlikely]] return Status::kEspSeqExhausted;  // another thread took the last one
  packet.trim(excess);
  uint8_t* const start = packet.prepend(front);
  // Only the IP header moves (into the headroom); the payload stays put.
  // The usual one, an IPv4 header without options, in a few fixed moves.
  if (keep == ipv4::kMinHeaderLen) moveMinIpv4Header(start, start + front);
  else std::memmove(start, start + front, keep);
  (void)packet.append(back);
  const Status sealed = sealAt(start + outer_size_ + keep, payload_len, pad, next_header, seq);
  if (sealed != Status::kOk) return sealed;

  if (mode_ == EspMode::kTransport) {
    if (!layout.ipv6) {
      rewriteIpv4(start, static_cast<uint16_t>(new_len), ipproto::kEsp);
    } else {
      start[layout.next_header_at] = ipproto::kEsp;
      ipv6::setPayloadLength(start, static_cast<uint16_t>(new_len - ipv6::kHeaderLen));
    }
  } else {
    writeOuterHeader(start, tunnel_, ds, new_len);
  }
  return Status::kOk;
}

// ---------------------------------------------------------------- inbound

Result<EspInboundSa> EspInboundSa::create(const EspSaConfig& config) {
  if (auto space = sequenceSpace(config); !space) return Error{space.error()};
  if (!ReplayWindow::validSize(config.replay_window)) {
    return Error{"ESP replay window " + std::to_string(config.replay_window) +
                 " must be a multiple of 64 between 64 and 65536 packets"};
  }
  auto aead = makeAead(config, false);
  if (!aead) return Error{aead.error()};
  EspInboundSa sa;
  sa.aead_ = std::move(aead).value();
  sa.window_ = ReplayWindow(config.replay_window);
  if (config.initial_sequence > 1) sa.window_.resumeAt(config.initial_sequence - 1);
  sa.top_.value.store(sa.window_.top(), std::memory_order_relaxed);
  sa.spi_ = config.spi;
  sa.salt_ = config.salt;
  sa.mode_ = config.mode;
  sa.esn_ = config.esn;
  sa.iv_size_ = config.iv_mode == EspIvMode::kExplicit ? kEspExplicitIvSize : 0;
  return sa;
}

namespace {
struct NoGuard {
  void lock() {}
  void unlock() {}
};
}  // namespace

Status EspInboundSa::decrypt(PacketBuffer& packet) {
  NoGuard one_owner;
  const Status s = decryptPacket(packet, one_owner, nullptr);
  countResult(counters_, s, packet.size());
  return s;
}

Status EspInboundSa::decryptShared(PacketBuffer& packet) { return decryptPacket(packet, window_lock_, nullptr); }

Status EspInboundSa::decryptPlacedShared(PacketBuffer& packet, const EspLayout& layout, EspOpened& opened) {
  return decryptPacket(packet, window_lock_, &layout, &opened);
}

Status EspInboundSa::decryptPlacedOwned(PacketBuffer& packet, const EspLayout& layout, EspOpened& opened) {
  NoGuard one_owner;
  return decryptPacket(packet, one_owner, &layout, &opened);
}

void EspInboundSa::stripPlaced(PacketBuffer& packet, const EspLayout& layout, const EspOpened& opened) {
  const uint32_t front = opened.front;
  if (front == 0) return;
  uint8_t* const p = packet.data();
  const uint32_t esp_off = layout.header_len;
  const uint32_t new_len = packet.size() - front;
  if (!layout.ipv6 && esp_off == ipv4::kMinHeaderLen) {
    moveRewriteMinIpv4(p + front, p, static_cast<uint16_t>(new_len), opened.next_header);
  } else {
    if (!layout.ipv6) {
      rewriteIpv4(p, static_cast<uint16_t>(new_len), opened.next_header);
    } else {
      p[layout.next_header_at] = opened.next_header;
      ipv6::setPayloadLength(p, static_cast<uint16_t>(new_len - ipv6::kHeaderLen));
    }
    std::memmove(p + front, p, esp_off);
  }
  packet.adj(front);
}

template <class Guard>
Status EspInboundSa::decryptPacket(PacketBuffer& packet, Guard& guard, const EspLayout* known, EspOpened* placed) {
  uint8_t* const p = packet.data();
  const uint32_t size = packet.size();
  // espParse's layout of these bytes, read where it is: copied whole, its
  // fields just stored one by one would not forward to the wide load.
  EspLayout parsed;
  if (known == nullptr) {
    if (Status s = parseEspPacket(p, size, parsed); s != Status::kOk) return s;
  } else if (known->packet_len > size || known->header_len > known->packet_len) {
    return Status::kTruncated;  // a caller's slip must not read past the bytes
  }
  const EspLayout& layout = known != nullptr ? *known : parsed;

  // 1. SPI. The caller looked the SA up by SPI; a mismatch is its bug or a
  //    stale table, and must not reach the crypto.
  const uint32_t esp_off = layout.header_len;
  const uint32_t esp_len = layout.packet_len - esp_off;
  if (esp_len < kEspHeaderSize) return Status::kEspBadLength;
  uint8_t* const esp = p + esp_off;
  if (load32(esp) != spi_) return Status::kEspUnknownSpi;

  // 2. Length: header, IV, at least the 2-byte trailer, ICV.
  if (esp_len < kEspHeaderSize + iv_size_ + kEspTrailerSize + kEspIcvSize) return Status::kEspBadLength;
  const uint32_t ct_len = esp_len - kEspHeaderSize - iv_size_ - kEspIcvSize;

  // 3. Replay pre-check, before spending any crypto on the packet.
  //    Shared, a number above the top (every packet in order) needs no
  //    lock: the top is read from its copy, and the check under the lock in
  //    step 6 is the one that counts. A stale top only makes this pre-check
  //    weaker (or, with ESN, the guess wrong: the ICV then fails, A2.2).
  const uint32_t seq_low = load32(esp + 4);
  uint64_t seq = 0;
  Status fresh = Status::kOk;
  if constexpr (std::is_same_v<Guard, detail::SpinFlag>) {
    const uint64_t top = top_.load();
    seq = esn_ ? ReplayWindow::inferEsn(top, window_.size(), seq_low) : seq_low;
    if (seq <= top) {
      guard.lock();
      fresh = window_.check(seq);
      guard.unlock();
    }
  } else {
    seq = esn_ ? window_.inferEsn(seq_low) : seq_low;
    fresh = window_.check(seq);
  }
  if (fresh != Status::kOk) return fresh;

  // 4. ICV and decryption. A wrong ESN guess shows up here as a failed ICV
  //    (RFC 4303 Appendix A2.2) and leaves the window alone.
  uint64_t iv_wire = __builtin_bswap64(seq);
  if (iv_size_ != 0) std::memcpy(&iv_wire, esp + kEspHeaderSize, 8);
  GcmInputs g;
  makeGcmInputs(g, salt_, iv_wire, spi_, seq, esn_);
  const std::span<const uint8_t> aad(g.aad, g.aad_len);
  uint8_t* const ct = esp + kEspHeaderSize + iv_size_;
  const std::span<uint8_t> data(ct, ct_len);
  if (Status s = aead_->open(g.nonce, aad, data, ct + ct_len); s != Status::kOk) return s;

  // 5. Trailer. Failures from here on re-encrypt the payload so the buffer is
  //    returned as it came (see esp.h).
  const auto restore = [&](Status s) {
    uint8_t tag[kAeadTagSize];
    return aead_->seal(g.nonce, aad, data, tag) == Status::kOk ? s : Status::kEspCryptoError;
  };
  const uint8_t next_header = ct[ct_len - 1];
  const uint32_t pad = ct[ct_len - 2];
  if (pad + kEspTrailerSize > ct_len) return restore(Status::kEspBadPadding);
  // RFC 4303 §2.4: the default padding is 1, 2, 3...; we only send that and
  // only accept that, which catches a peer with a different key layout early.
  const uint8_t* const pad_end = ct + ct_len - kEspTrailerSize;
  if (pad <= 4) {
    // Up to 4 (a 4-byte boundary needs at most 3): the 4 bytes before the
    // trailer in one load, the padding its last `pad`. Those before the
    // ciphertext, when it is that short, are the ESP header's.
    const uint64_t want = uint64_t{0x01020304} >> (32 - 8 * pad);
    const uint64_t mask = (uint64_t{1} << (8 * pad)) - 1;
    if ((load32(pad_end - 4) & mask) != want) return restore(Status::kEspBadPadding);
  } else {
    const uint8_t* const pad_bytes = pad_end - pad;
    for (uint32_t i = 0; i < pad; ++i) {
      if (pad_bytes[i] != i + 1) return restore(Status::kEspBadPadding);
    }
  }
  const uint32_t inner_len = ct_len - kEspTrailerSize - pad;
  const bool dummy = next_header == ipproto::kNoNext;
  if (!dummy && mode_ == EspMode::kTunnel) {
    const uint8_t version = inner_len > 0 ? ct[0] >> 4 : 0;
    if (!((next_header == ipproto::kIpv4 && version == 4) || (next_header == ipproto::kIpv6 && version == 6))) {
      return restore(Status::kEspBadNextHeader);
    }
  }

  // 6. The packet is genuine: move the window if it is still new (another
  //    thread may have accepted the same number meanwhile; then this one is
  //    the replay), then strip ESP. RFC 4303 §2.6: a dummy packet
  //    authenticated and used its sequence number too.
  Status still = Status::kOk;
  if constexpr (std::is_same_v<Guard, detail::SpinFlag>) {
    guard.lock();
    still = window_.check(seq);
    if (still == Status::kOk) {
      window_.update(seq);
      top_.value.store(window_.top(), std::memory_order_relaxed);
    }
    guard.unlock();
  } else {
    // One owner: nothing moved the window since step 3 checked it.
    window_.update(seq);
    top_.value.store(window_.top(), std::memory_order_relaxed);
  }
  if (still != Status::kOk) [[unlikely]] return restore(still);
  if (dummy) return restore(Status::kEspDummy);
  const uint32_t front = kEspHeaderSize + iv_size_;
  const uint32_t back = (size - layout.packet_len) + pad + kEspTrailerSize + kEspIcvSize;
  if (mode_ == EspMode::kTunnel) {
    propagateCongestion(p, ct, inner_len);
    packet.adj(esp_off + front);
    packet.trim(back);
    if (placed != nullptr) *placed = EspOpened{0, next_header};
    return Status::kOk;
  }
  packet.trim(back);
  const EspOpened opened{front, next_header};
  if (placed != nullptr) {
    *placed = opened;
  } else {
    stripPlaced(packet, layout, opened);
  }
  return Status::kOk;
}

Status detail::espParseAny(std::span<const uint8_t> ip_packet, EspLayout& layout, uint32_t& spi) {
  const auto size = static_cast<uint32_t>(std::min<size_t>(ip_packet.size(), UINT32_MAX));
  if (Status s = parseEspPacket(ip_packet.data(), size, layout); s != Status::kOk) return s;
  if (layout.packet_len - layout.header_len < kEspHeaderSize) return Status::kEspBadLength;
  spi = load32(ip_packet.data() + layout.header_len);
  return Status::kOk;
}

}  // namespace dpu::overlay
