// Fuzz target for ESP decryption (and encryption of untrusted plaintext).
//
// Byte 0 selects the SA and what to do with the rest:
//   bit 0: tunnel mode; bit 1: ESN; bit 2: implicit IV; bit 3: OpenSSL backend
//   bits 4-5: 0 = the rest is a received packet: decrypt it as is;
//             1 = the rest is a plaintext IP packet: encrypt it, apply up to 7
//                 byte mutations given by byte 1 and the bytes after it
//                 (3 bytes each: 16-bit offset, XOR mask), decrypt; without
//                 mutations the round trip must give the packet back;
//             2 = the rest is an ESP payload with trailer: seal it with the
//                 SA's key under a well-formed outer header (IPv4 or IPv6 by
//                 bit 6), so decryption gets past the ICV and the padding,
//                 next-header and inner-packet checks see hostile input;
//             3 = espParse on the rest.
// A received packet (0) is also parsed once and decrypted with that layout,
// as the dataplane does (shared and owned SAs): the same verdict and bytes.
// SAs use fixed test keys; the seed corpus (tests/fuzz/corpus/esp/) holds
// valid packets from these SAs and malformed ones. A fresh inbound SA per
// input keeps runs reproducible.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "overlay/bytes.h"
#include "overlay/esp.h"

using namespace dpu::overlay;

namespace {

constexpr uint32_t kSpi = 0x0a0b0c0d;
constexpr uint32_t kHeadroom = 128;
constexpr uint32_t kTailroom = 64;

EspSaConfig configFor(uint8_t selector) {
  EspSaConfig c;
  c.spi = kSpi;
  c.key.resize(16);
  for (int i = 0; i < 16; ++i) c.key[i] = static_cast<uint8_t>(1 + i);
  c.salt = {0xde, 0xad, 0xbe, 0xef};
  c.mode = selector & 1 ? EspMode::kTunnel : EspMode::kTransport;
  c.esn = selector & 2;
  c.iv_mode = selector & 4 ? EspIvMode::kImplicit : EspIvMode::kExplicit;
  c.backend = selector & 8 ? AeadBackend::kOpenSsl : defaultAeadBackend();
  c.tunnel = EspTunnelConfig::v4({198, 51, 100, 1}, {198, 51, 100, 2});
  return c;
}

// The packet in a buffer with room on both sides, the way the dataplane hands
// mbufs over; a heap allocation of exactly the needed size so ASan sees any
// access beyond it.
struct Buffer {
  Buffer(const uint8_t* data, size_t size) : mem(kHeadroom + size + kTailroom) {
    if (size) std::memcpy(mem.data() + kHeadroom, data, size);
    buf = PacketBuffer(mem.data(), static_cast<uint32_t>(mem.size()), kHeadroom, static_cast<uint32_t>(size));
  }
  std::vector<uint8_t> mem;
  PacketBuffer buf;
};

void decryptRaw(const EspSaConfig& config, const uint8_t* data, size_t size) {
  auto in = EspInboundSa::create(config);
  if (!in) abort();
  Buffer b(data, size);
  const std::vector<uint8_t> before(b.buf.data(), b.buf.data() + b.buf.size());
  const Status s = in->decrypt(b.buf);
  // The failure contract: a rejected packet is left exactly as it came.
  if (s != Status::kOk && std::vector<uint8_t>(b.buf.data(), b.buf.data() + b.buf.size()) != before) abort();
  // As the dataplane receives it: parsed once (espParse), decrypted with
  // that layout where it lies by a shared SA, then stripped: the same
  // verdict and the same bytes (a refused packet untouched, as above).
  auto shared = EspInboundSa::create(config);
  if (!shared) abort();
  Buffer c(data, size);
  EspLayout layout;
  uint32_t spi = 0;
  const Status parsed = espParse({c.buf.data(), c.buf.size()}, layout, spi);
  if (parsed != Status::kOk) return;
  EspOpened opened;
  const Status t = shared->decryptPlacedShared(c.buf, layout, opened);
  if (t == Status::kOk) EspInboundSa::stripPlaced(c.buf, layout, opened);
  if (t != s || c.buf.headroom() != b.buf.headroom() || c.buf.size() != b.buf.size() ||
      std::memcmp(c.buf.data(), b.buf.data(), b.buf.size()) != 0) {
    abort();
  }
  // And by an SA one thread owns (a dataplane with one worker): the same again.
  auto owned = EspInboundSa::create(config);
  if (!owned) abort();
  Buffer d(data, size);
  const Status u = owned->decryptPlacedOwned(d.buf, layout, opened);
  if (u == Status::kOk) EspInboundSa::stripPlaced(d.buf, layout, opened);
  if (u != s || d.buf.headroom() != b.buf.headroom() || d.buf.size() != b.buf.size() ||
      std::memcmp(d.buf.data(), b.buf.data(), b.buf.size()) != 0) {
    abort();
  }
}

void encryptMutateDecrypt(const EspSaConfig& config, const uint8_t* data, size_t size) {
  if (size < 1) return;
  const size_t mutations = data[0] & 7;
  ++data;
  --size;
  if (size < 3 * mutations) return;
  const uint8_t* mutation = data;
  data += 3 * mutations;
  size -= 3 * mutations;

  auto out = EspOutboundSa::create(config);
  auto in = EspInboundSa::create(config);
  if (!out || !in) abort();
  Buffer b(data, size);
  if (out->encrypt(b.buf) != Status::kOk) return;
  for (size_t i = 0; i < mutations; ++i) {
    const uint32_t offset = load16(mutation + 3 * i) % b.buf.size();
    b.buf.data()[offset] ^= mutation[3 * i + 2];
  }
  const Status s = in->decrypt(b.buf);
  if (mutations == 0) {
    // Round trip: the plaintext comes back (bytes past the IP length are
    // dropped by encrypt; an IPv4 checksum of 0xffff, never valid, may come
    // back as its other ones' complement zero 0x0000).
    // A plaintext whose next header is 59 (no next header) reads as an RFC
    // 4303 §2.6 dummy packet on the way back: discarded, by design.
    if (s == Status::kEspDummy) return;
    if (s != Status::kOk || b.buf.size() > size) abort();
    for (uint32_t i = 0; i < b.buf.size(); ++i) {
      if (b.buf.data()[i] == data[i]) continue;
      const bool v4_checksum = config.mode == EspMode::kTransport && (data[0] >> 4) == 4 && (i == 10 || i == 11) &&
                               load16(data + 10) == 0xffff;
      if (!v4_checksum) abort();
    }
  }
}

void sealHostile(const EspSaConfig& config, bool outer_v6, const uint8_t* data, size_t size) {
  if (size > 2000) return;
  const uint32_t iv = config.iv_mode == EspIvMode::kExplicit ? 8 : 0;
  const uint32_t outer = outer_v6 ? 40 : 20;
  std::vector<uint8_t> p(outer + 8 + iv + size + 16);
  if (p.size() > 65535) return;
  if (outer_v6) {
    store32(p.data(), 6u << 28);
    store16(p.data() + 4, static_cast<uint16_t>(p.size() - 40));
    p[6] = 50;
    p[7] = 64;
  } else {
    p[0] = 0x45;
    store16(p.data() + 2, static_cast<uint16_t>(p.size()));
    p[8] = 64;
    p[9] = 50;
  }
  const uint64_t seq = 1;
  store32(p.data() + outer, kSpi);
  store32(p.data() + outer + 4, static_cast<uint32_t>(seq));
  if (iv) store64(p.data() + outer + 8, seq);
  if (size) std::memcpy(p.data() + outer + 8 + iv, data, size);
  auto aead = createAeadContext(*config.backend, AeadAlgorithm::kAes128Gcm, config.key);
  if (!aead) abort();
  AeadNonce nonce;
  std::memcpy(nonce.data(), config.salt.data(), 4);
  store64(nonce.data() + 4, seq);
  uint8_t aad[12];
  store32(aad, kSpi);
  uint32_t aad_len = 8;
  if (config.esn) {
    store64(aad + 4, seq);
    aad_len = 12;
  } else {
    store32(aad + 4, static_cast<uint32_t>(seq));
  }
  uint8_t* ct = p.data() + outer + 8 + iv;
  if ((*aead)->seal(nonce, {aad, aad_len}, {ct, size}, ct + size) != Status::kOk) abort();
  decryptRaw(config, p.data(), p.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const EspSaConfig config = configFor(selector);
  ++data;
  --size;
  switch ((selector >> 4) & 3) {
    case 0:
      decryptRaw(config, data, size);
      break;
    case 1:
      encryptMutateDecrypt(config, data, size);
      break;
    case 2:
      sealHostile(config, selector & 0x40, data, size);
      break;
    case 3: {
      // The inline path for the usual packet says what the full parse says.
      uint32_t spi = 0, any_spi = 0;
      EspLayout layout, any;
      const Status s = espParse({data, size}, layout, spi);
      if (s != detail::espParseAny({data, size}, any, any_spi)) __builtin_trap();
      if (s == Status::kOk && (spi != any_spi || layout.header_len != any.header_len ||
                               layout.packet_len != any.packet_len || layout.next_header_at != any.next_header_at ||
                               layout.ipv6 != any.ipv6)) {
        __builtin_trap();
      }
      break;
    }
  }
  return 0;
}
