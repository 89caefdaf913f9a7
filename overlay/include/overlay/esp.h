// ESP (RFC 4303) with AES-GCM (RFC 4106): outbound and inbound security
// associations that encrypt and decrypt IP packets in a PacketBuffer in place.
//
// What this protects: the DPUs' Geneve overlay (UDP/6081 between tunnel IPs)
// in transport mode; tunnel mode is there for gateways and peers that want it.
//
// Packets start at the IP header (the caller strips and re-adds Ethernet).
//  - Transport mode: the ESP header goes after the IPv4 header (options
//    included) or after the IPv6 extension headers that must precede it
//    (hop-by-hop, routing, destination options before a routing header, and an
//    atomic fragment header: RFC 4303 §3.1.1, placed as Linux and scapy do).
//    Encrypt moves only the IP header (into the headroom) and appends padding,
//    trailer and ICV into the tailroom; it fixes the IPv4 total length,
//    protocol and checksum (incrementally, RFC 1624) or the IPv6 payload length
//    and next header. Decrypt undoes exactly that.
//  - Tunnel mode: encrypt wraps the whole inner packet (next header 4 or 41)
//    under a new outer IPv4/IPv6 header built from the SA; decrypt returns the
//    inner packet. The outer DS field is copied from the inner one (RFC 4301
//    §5.1.2.1; ECN "normal mode", RFC 6040 §4.1) and a CE mark on the outer
//    header is copied back into an ECN-capable inner one on decrypt (§4.2).
//
// Wire format choices:
//  - IV: explicit 8 bytes by default (RFC 4106 §3.1), set to the 64-bit
//    sequence number, which is unique per key by construction (the counter
//    never wraps, see below) and the same value RFC 8750 uses. Explicit is
//    what every IKEv2 peer, the Linux kernel, tshark and scapy understand;
//    implicit IV (RFC 8750, EspIvMode::kImplicit) saves 8 bytes per packet but
//    needs both ends to have negotiated it (ENCR_AES_GCM_16_IIV).
//  - Nonce = salt (4 bytes of KEYMAT, RFC 4106 §8.1) || IV (RFC 4106 §4).
//  - AAD = SPI || sequence number (32 bits), or SPI || ESN high || ESN low with
//    extended sequence numbers (RFC 4106 §5). With ESN only the low 32 bits are
//    sent (RFC 4303 §2.2.1); the receiver infers the high half from its replay
//    window (RFC 4303 Appendix A).
//  - Padding: to a 4-byte boundary (RFC 4303 §2.4; GCM needs no block
//    alignment, RFC 4106 §3.2) with the bytes 1, 2, 3..., checked on receive.
//  - ICV: 16 bytes, the only size we offer (RFC 4106 §8 allows 8 and 12).
//
// Sequence numbers (RFC 4303 §3.3.3): the first packet is 1 and the counter
// never wraps. Past the soft limit rekeyNeeded() turns true (the control plane
// should start a rekey); at the hard limit (2^32-1 without ESN, 2^64-1 with)
// encrypt() returns kEspSeqExhausted and never reuses a nonce.
//
// Decrypt order (RFC 4303 §3.4): SPI match, length sanity, replay pre-check,
// ICV verification and decryption, padding check, window update. The window
// moves only for packets that authenticated.
//
// Failures: encrypt()/decrypt() never throw, allocate, lock or log (the
// shared variants take only the inbound SA's short window lock). Any status
// other than kOk leaves the PacketBuffer exactly as it was (offset, length and
// bytes; a failed decrypt re-encrypts what it decrypted), except
// kEspCryptoError from encrypt (a backend failure no built-in backend has):
// the packet must then be dropped. kEspDummy (a valid RFC 4303 §2.6 dummy
// packet) counts as received in the window but carries nothing to deliver.
//
// Threading: encrypt() and decrypt() are for an SA that belongs to one
// thread. encryptShared() and decryptShared() are for an SA several threads
// use at once (the dataplane's workers sending to one peer), as DPDK's
// librte_ipsec does it: the AEAD runs outside any lock (the context is safe
// to share, aead.h). Outbound, the sequence number is reserved with one
// atomic compare-and-swap (or a block of them with one, EspSequenceBlock),
// so no number is used twice or above the limit.
// Inbound, the replay window is checked and then, after the ICV verified,
// checked again and moved under a short spinlock of the SA that covers only
// those two steps. decryptPlacedOwned() is the inbound one for an SA that
// only one thread decrypts with while others may read highestSequence() (a
// dataplane with one worker): the same without the lock, which nothing else
// contends.
// The shared and owned variants leave counters() alone (the caller counts,
// per thread). The kinds must not be mixed on one SA at the same time.
// Create SAs off the datapath; create() validates the whole configuration
// before anything is built.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "overlay/aead.h"
#include "overlay/buffer.h"
#include "overlay/bytes.h"
#include "overlay/headers.h"
#include "overlay/replay_window.h"
#include "overlay/result.h"
#include "overlay/status.h"

namespace dpu::overlay {

inline constexpr uint32_t kEspHeaderSize = 8;      // SPI + sequence number
inline constexpr uint32_t kEspExplicitIvSize = 8;  // RFC 4106 §3.1
inline constexpr uint32_t kEspTrailerSize = 2;     // pad length + next header
inline constexpr uint32_t kEspIcvSize = 16;
inline constexpr uint32_t kEspMaxPadding = 3;  // to a 4-byte boundary

enum class EspMode : uint8_t { kTransport, kTunnel };
enum class EspIvMode : uint8_t { kExplicit, kImplicit };

// The outer header of tunnel mode.
struct EspTunnelConfig {
  bool ipv6 = false;
  // Network byte order; IPv4 uses the first 4 bytes of each.
  std::array<uint8_t, 16> src{};
  std::array<uint8_t, 16> dst{};
  uint8_t ttl = 64;           // TTL or hop limit
  bool dont_fragment = true;  // IPv4 DF: the overlay sizes packets to the path MTU itself

  static EspTunnelConfig v4(const std::array<uint8_t, 4>& src, const std::array<uint8_t, 4>& dst);
  static EspTunnelConfig v6(const std::array<uint8_t, 16>& src, const std::array<uint8_t, 16>& dst);
};

struct EspSaConfig {
  uint32_t spi = 0;               // RFC 4303 §2.1: 1..255 are reserved, 0 is never sent
  std::vector<uint8_t> key;       // 16 bytes (AES-128-GCM) or 32 (AES-256-GCM)
  std::array<uint8_t, 4> salt{};  // the last 4 bytes of KEYMAT (RFC 4106 §8.1)
  EspMode mode = EspMode::kTransport;
  EspTunnelConfig tunnel;  // tunnel mode only
  bool esn = false;        // 64-bit extended sequence numbers
  EspIvMode iv_mode = EspIvMode::kExplicit;
  // Inbound: anti-replay window in packets (multiple of 64, 64..65536).
  uint32_t replay_window = ReplayWindow::kDefaultSize;
  // Outbound: the first sequence number to send (1 for a new SA; larger to
  // resume an SA whose counter was checkpointed, never smaller than what was
  // already sent under this key). Inbound: the first sequence number the
  // receiver will accept; everything before it counts as already received
  // (the window, and the ESN high half it infers from, start there).
  uint64_t initial_sequence = 1;
  // Outbound: last sequence number after which rekeyNeeded() is true; 0 picks
  // half of the sequence space (2^31 without ESN, 2^63 with).
  uint64_t soft_sequence_limit = 0;
  // Crypto backend; unset picks defaultAeadBackend().
  std::optional<AeadBackend> backend;
};

// Per-SA counters (RFC 4301 §4.4.2.1 keeps lifetime counters per SA). Plain
// fields: the SA's lcore writes them, readers on other threads may see
// slightly stale values.
struct EspSaCounters {
  uint64_t packets = 0;                        // transformed successfully
  uint64_t bytes = 0;                          // plaintext IP bytes (before encrypt, after decrypt)
  std::array<uint64_t, kStatusCount> drops{};  // by Status

  uint64_t dropped(Status s) const { return drops[static_cast<size_t>(s)]; }
};

namespace detail {

// A 64-bit value other threads may read (and, where said, write) atomically;
// movable so SAs can be returned by value before they are shared.
struct RelaxedCounter {
  std::atomic<uint64_t> value{0};
  RelaxedCounter() = default;
  RelaxedCounter(RelaxedCounter&& o) noexcept : value(o.load()) {}
  RelaxedCounter& operator=(RelaxedCounter&& o) noexcept {
    value.store(o.load(), std::memory_order_relaxed);
    return *this;
  }
  uint64_t load() const { return value.load(std::memory_order_relaxed); }
};

// A test-and-set spinlock for a few instructions' worth of shared state.
// Moving one makes a new, unlocked flag (SAs are moved only before use).
class SpinFlag {
 public:
  SpinFlag() = default;
  SpinFlag(SpinFlag&&) noexcept {}
  SpinFlag& operator=(SpinFlag&&) noexcept { return *this; }
  void lock();
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

}  // namespace detail

// Outbound sequence numbers one thread reserved at once and spends alone (the
// *Shared calls that take one): the shared counter's compare-and-swap is paid
// once a block, not once a packet. A compare-and-swap is a full barrier (a
// locked instruction waits for the thread's stores to drain), which in the
// dataplane's ESP encap cost about 17 cycles a packet of its 330.
// Numbers a thread reserved and never sent leave a gap, which ESP allows
// (RFC 4303 §3.3.3 asks only that none is sent twice). Threads spending
// blocks at once reorder the numbers on the wire by at most one block per
// other thread, no more than their bursts already do (a worker sends a burst
// at once), and far inside a receiver's window (64 to 65536 packets).
// Start empty; one block serves one SA (moved to another SA, it is refilled
// from that SA's counter only once its numbers run out: give each SA its own).
struct EspSequenceBlock {
  uint64_t next = 0;  // the next number to send
  uint64_t end = 0;   // one past the last reserved: empty when next == end
  // The last number taken from it (0: none yet).
  uint64_t lastTaken() const { return next == 0 ? 0 : next - 1; }
};
inline constexpr uint64_t kEspSequenceBlockSize = 32;

class EspOutboundSa {
 public:
  static Result<EspOutboundSa> create(const EspSaConfig& config);

  // Encrypts the IP packet in `packet` in place (see the file comment).
  // Needs headroom() bytes of headroom and tailroom() bytes of tailroom.
  Status encrypt(PacketBuffer& packet);
  // The same for an SA shared by several threads (see the file comment):
  // the sequence number is taken atomically, never above min(`limit`,
  // hardSequenceLimit()) (kEspSeqExhausted when none is left, nothing
  // done), and counters() are not touched.
  Status encryptShared(PacketBuffer& packet, uint64_t limit);
  // The same with the sequence number taken from the calling thread's
  // `block`, refilled (kEspSequenceBlockSize numbers, never above the limit)
  // when it runs out: numbers stay unique per SA across the threads and
  // never go above min(`limit`, hardSequenceLimit()).
  Status encryptShared(PacketBuffer& packet, uint64_t limit, EspSequenceBlock& block);
  // Transport mode for a caller that builds the packet around the ESP
  // itself (the dataplane's fixed Geneve template: no header to parse or
  // move): `esp` is where the ESP header goes, headroom() bytes before the
  // `payload_len` bytes it protects, which overhead(payload_len) -
  // headroom() writable bytes follow (the padding, trailer and ICV).
  // Writes the ESP header, the padding and trailer (`next_header`: the
  // payload's protocol), encrypts and appends the ICV, as encryptShared()
  // would for that packet and with its sequence numbers; `esp_len` is then
  // the ESP packet's length. The IP header (its length and protocol) is the
  // caller's. Not kOk: nothing written (kEspSeqExhausted), or, from the
  // backend, the packet must be dropped. kUnsupported in tunnel mode.
  Status sealPlacedShared(uint8_t* esp, uint32_t payload_len, uint8_t next_header, uint64_t limit,
                          uint32_t& esp_len);
  // The same with the number taken from the calling thread's `block`, as the
  // encryptShared() that takes one.
  Status sealPlacedShared(uint8_t* esp, uint32_t payload_len, uint8_t next_header, uint64_t limit,
                          EspSequenceBlock& block, uint32_t& esp_len);
  // Moves the counter up so the next number sent is above `last` (never
  // down: a nonce is never reused). Safe beside encryptShared(): the
  // threads' blocks at or below `last` are dropped at their next packet.
  void advanceTo(uint64_t last);

  uint32_t spi() const { return spi_; }
  EspMode mode() const { return mode_; }
  AeadBackend backend() const { return aead_->backend(); }
  AeadAlgorithm algorithm() const { return aead_->algorithm(); }

  // The last sequence number sent (initial_sequence - 1 before the first);
  // with blocks, the last one reserved (the blocks' lastTaken() say what
  // was sent).
  uint64_t lastSequence() const { return last_seq_.load(); }
  uint64_t softSequenceLimit() const { return soft_limit_; }
  uint64_t hardSequenceLimit() const { return hard_limit_; }
  uint64_t sequencesLeft() const { return hard_limit_ - lastSequence(); }
  bool rekeyNeeded() const { return lastSequence() >= soft_limit_; }
  bool exhausted() const { return lastSequence() >= hard_limit_; }

  // Bytes encrypt() adds in front (outer header, ESP header, IV) and at most at
  // the end (padding, trailer, ICV), for buffer and MTU planning.
  uint32_t headroom() const { return outer_size_ + kEspHeaderSize + iv_size_; }
  static constexpr uint32_t tailroom() { return kEspMaxPadding + kEspTrailerSize + kEspIcvSize; }
  // Exact growth of a packet whose protected payload (transport: after the IP
  // headers; tunnel: the whole inner packet) is `payload_len` bytes.
  // Inline: the dataplane asks it for every packet it seals.
  uint32_t overhead(uint32_t payload_len) const {
    return headroom() + padLength(payload_len) + kEspTrailerSize + kEspIcvSize;
  }
  // Padding to make payload + padding + trailer a multiple of 4 (RFC 4303 §2.4).
  static constexpr uint32_t padLength(uint32_t payload_len) { return (0u - (payload_len + kEspTrailerSize)) & 3u; }

  const EspSaCounters& counters() const { return counters_; }

 private:
  EspOutboundSa() = default;
  template <class Reserve>
  Status encryptPacket(PacketBuffer& packet, Reserve&& reserve);
  uint64_t reserveShared(uint64_t limit);
  // The next number of `block`, refilled when it is empty, at or below
  // advanceTo()'s mark or above `limit` (min'ed with the hard limit by the
  // caller); 0 when none is left.
  uint64_t takeShared(uint64_t limit, EspSequenceBlock& block) {
    if (block.next < block.end && block.next <= limit &&
        block.next > floor_.load()) [[likely]] {
      return block.next++;
    }
    return refillShared(limit, block);
  }
  uint64_t refillShared(uint64_t limit, EspSequenceBlock& block);
  // The ESP header at `esp`, the padding and trailer after the payload that
  // follows it, the payload sealed under `seq` and the ICV after it.
  Status sealAt(uint8_t* esp, uint32_t payload_len, uint32_t pad, uint8_t next_header, uint64_t seq);
  Status sealPlacedAt(uint8_t* esp, uint32_t payload_len, uint8_t next_header, uint64_t seq, uint32_t& esp_len);

  std::unique_ptr<AeadContext> aead_;
  detail::RelaxedCounter last_seq_;
  // The last number advanceTo() moved the counter to: blocks reserved at or
  // below it are not spent.
  detail::RelaxedCounter floor_;
  uint64_t soft_limit_ = 0;
  uint64_t hard_limit_ = 0;
  uint32_t spi_ = 0;
  std::array<uint8_t, 4> salt_{};
  EspMode mode_ = EspMode::kTransport;
  bool esn_ = false;
  uint32_t iv_size_ = kEspExplicitIvSize;
  uint32_t outer_size_ = 0;  // tunnel: 20 or 40
  EspTunnelConfig tunnel_;
  EspSaCounters counters_;
};

// Where ESP goes in (encrypt) or is in (decrypt) a transport-mode IP packet.
struct EspLayout {
  uint32_t header_len = 0;      // bytes before the ESP header / the protected payload
  uint32_t packet_len = 0;      // from the IP length field; <= the buffer's size
  uint32_t next_header_at = 0;  // offset of the byte that names what follows header_len
  bool ipv6 = false;
};

// A transport-mode packet decrypted where it lies (decryptPlacedOwned,
// decryptPlacedShared): its IP header(s) as they arrived, then `front` bytes
// of ESP header and IV, then the decrypted payload, which ends the buffer
// (padding, trailer and ICV trimmed). `front` 0: nothing is left to strip
// (tunnel mode, stripped as decrypt() strips).
struct EspOpened {
  uint32_t front = 0;
  uint8_t next_header = 0;  // the payload's protocol
};

class EspInboundSa {
 public:
  static Result<EspInboundSa> create(const EspSaConfig& config);

  // Verifies and decrypts the ESP packet in `packet` in place (see the file
  // comment for the order of checks and the state on failure).
  Status decrypt(PacketBuffer& packet);
  // The same for an SA shared by several threads (see the file comment):
  // replayWindow() must then not be read; highestSequence() may be, from
  // any thread. counters() are not touched.
  Status decryptShared(PacketBuffer& packet);
  // The same for a packet espParse took, `layout` what it found in these
  // very bytes (the packet starting at the buffer's data, unchanged since),
  // for a caller that may drop the outer header whole (the dataplane's
  // Geneve decap): in transport mode the headers are not moved (EspOpened
  // says where the payload is); stripPlaced() then leaves the packet as
  // decryptShared() would. Same checks, failures and window as decryptShared().
  Status decryptPlacedShared(PacketBuffer& packet, const EspLayout& layout, EspOpened& opened);
  // The same for an SA only the calling thread decrypts with (see the file
  // comment): highestSequence() may still be read from any thread.
  Status decryptPlacedOwned(PacketBuffer& packet, const EspLayout& layout, EspOpened& opened);
  // Removes the ESP header of a packet decrypted in place, moving the IP
  // header(s) up to the payload and rewriting the IPv4 total length,
  // protocol and checksum (incrementally) or the IPv6 payload length and
  // next header, as decrypt() does.
  static void stripPlaced(PacketBuffer& packet, const EspLayout& layout, const EspOpened& opened);
  // The highest sequence number authenticated so far (0: none yet).
  uint64_t highestSequence() const { return top_.load(); }

  uint32_t spi() const { return spi_; }
  EspMode mode() const { return mode_; }
  AeadBackend backend() const { return aead_->backend(); }
  AeadAlgorithm algorithm() const { return aead_->algorithm(); }
  const ReplayWindow& replayWindow() const { return window_; }
  const EspSaCounters& counters() const { return counters_; }

 private:
  EspInboundSa() = default;
  template <class Guard>
  Status decryptPacket(PacketBuffer& packet, Guard& guard, const EspLayout* known, EspOpened* placed = nullptr);

  std::unique_ptr<AeadContext> aead_;
  ReplayWindow window_;
  // decryptShared(), decryptPlacedShared(): around the window's check and update only
  detail::SpinFlag window_lock_;
  detail::RelaxedCounter top_;  // window_.top(), readable from any thread
  uint32_t spi_ = 0;
  std::array<uint8_t, 4> salt_{};
  EspMode mode_ = EspMode::kTransport;
  bool esn_ = false;
  uint32_t iv_size_ = kEspExplicitIvSize;
  EspSaCounters counters_;
};

// Where ESP is in a received packet starting at `ip_packet` (IPv4, or IPv6
// with extension headers before ESP), and its SPI, for the inbound SA lookup:
// kOk and both set, or the reason it is not a well-formed ESP packet. The
// layout then serves the SA's decryptPlaced* of the same bytes, which need
// not be parsed twice. Inline for the usual packet, IPv4 without options and
// not a fragment (a call per packet cost more than reading it); the rest,
// and every malformed one, out of line, with the same results.
namespace detail {
Status espParseAny(std::span<const uint8_t> ip_packet, EspLayout& layout, uint32_t& spi);
}  // namespace detail

inline Status espParse(std::span<const uint8_t> ip_packet, EspLayout& layout, uint32_t& spi) {
  constexpr uint32_t kMin = ipv4::kMinHeaderLen + kEspHeaderSize;
  const uint8_t* const p = ip_packet.data();
  if (ip_packet.size() >= kMin && p[0] == 0x45 && ipv4::protocol(p) == ipproto::kEsp &&
      (ipv4::fragField(p) & (ipv4::kFlagMf | ipv4::kFragOffsetMask)) == 0) {
    const uint32_t total = ipv4::totalLength(p);
    if (total >= kMin && total <= ip_packet.size()) {
      layout = {ipv4::kMinHeaderLen, total, ipv4::kProtocolOffset, false};
      spi = load32(p + ipv4::kMinHeaderLen);
      return Status::kOk;
    }
  }
  return detail::espParseAny(ip_packet, layout, spi);
}

}  // namespace dpu::overlay
