// The SA keys of a pair of nodes, computed by each of the two alone from its
// own private key, the other's published public key, both epochs, both names
// and the optional cluster PSK (docs/ipsec.md, "Derivation", is the normative
// text; an independent implementation computes the same bytes, as
// tests/dpu-agent/ipsec/ipsec_keys.py does):
//
//   shared = X25519(our private key, their public key)              32 bytes
//   PRK    = HKDF-Extract(salt = "dpu-cni ipsec v1", IKM = shared || PSK)
//   per direction d (0: lo → hi, 1: hi → lo; lo = the bytewise smaller name):
//   info   = "dpu-cni ipsec v1 sa" || d || alg || be32(epoch lo) || be32(epoch hi)
//            || be16(len lo) || lo || be16(len hi) || hi
//   OKM    = HKDF-Expand(PRK, info, keylen + 8)
//   key = OKM[0, keylen)   salt = OKM[keylen, keylen+4)   r = be32(OKM[keylen+4, keylen+8))
//   SPI = (receiver epoch mod 16) << 28 | (sender epoch mod 16) << 24 | (256 + r mod (2^24 - 256))
//
// So the two directions have unrelated keys, a pair of epochs names its SAs
// in the SPI's top byte (old and new coexist, a receiver tells them apart),
// and no SPI is below 256 (RFC 4303 §2.1 reserves 1..255; 0 is never sent).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "ipsec/crypto.h"

namespace dpu::ipsec {

// AES-GCM key length: AES-128-GCM or AES-256-GCM (RFC 4106), 4-byte salt either way.
enum class KeySize : uint8_t { k128 = 16, k256 = 32 };
inline constexpr size_t kSaltSize = 4;
// The algorithm byte of the info string (docs/ipsec.md).
inline uint8_t algorithmId(KeySize size) { return size == KeySize::k128 ? 1 : 2; }
inline size_t keyBytes(KeySize size) { return static_cast<size_t>(size); }

// The fixed strings of the derivation (ASCII, no terminator).
inline constexpr std::string_view kExtractSalt = "dpu-cni ipsec v1";
inline constexpr std::string_view kSaInfoLabel = "dpu-cni ipsec v1 sa";

// One direction's SA material. `key` is secret.
struct SaKeys {
  uint32_t spi = 0;
  SecretBytes key;
  std::array<uint8_t, kSaltSize> salt{};
};

struct PairInputs {
  std::string local_node;
  uint32_t local_epoch = 0;
  X25519Key local_private{};
  std::string remote_node;
  uint32_t remote_epoch = 0;
  X25519Key remote_public{};
  std::span<const uint8_t> psk;  // empty: no PSK
  KeySize key_size = KeySize::k128;
};

// Both directions as seen from the local node: what it sends with
// (outbound, local → remote) and what it receives with (inbound).
struct PairKeys {
  SaKeys outbound;
  SaKeys inbound;
};

// Fails (kInvalid) for equal or empty names, names over 65535 bytes, epoch 0,
// or a public key that gives the all-zero shared secret.
Result<PairKeys> derivePairKeys(const PairInputs& in);

// The SPI formula above, from the 32-bit value r of the OKM.
constexpr uint32_t spiFor(uint32_t receiver_epoch, uint32_t sender_epoch, uint32_t r) {
  return ((receiver_epoch & 0xfu) << 28) | ((sender_epoch & 0xfu) << 24) | (256u + r % ((1u << 24) - 256u));
}
// The epochs' low nibbles an SPI carries.
constexpr uint32_t spiReceiverNibble(uint32_t spi) { return spi >> 28; }
constexpr uint32_t spiSenderNibble(uint32_t spi) { return (spi >> 24) & 0xfu; }

}  // namespace dpu::ipsec
