// The primitives the IPsec keys are made of, over OpenSSL 3: X25519 (RFC 7748)
// for the per-node key pairs and their shared secrets, HKDF-SHA256 (RFC 5869)
// to turn a shared secret into SA keys, strict base64 for what is published
// and stored, and buffers that wipe themselves. Control plane only: these
// allocate and report failures as a Result; nothing here is per packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dpu::ipsec {

// Wipes `bytes` in a way the compiler cannot drop (OPENSSL_cleanse).
void wipe(std::span<uint8_t> bytes);

// An allocator whose memory is wiped before it is freed, so secrets held in
// a SecretBytes (private keys, shared secrets, SA keys) do not linger in freed
// heap blocks.
template <typename T>
struct WipingAllocator {
  using value_type = T;
  WipingAllocator() = default;
  template <typename U>
  WipingAllocator(const WipingAllocator<U>&) {}  // NOLINT: rebinding is implicit by design
  T* allocate(size_t n) { return std::allocator<T>{}.allocate(n); }
  void deallocate(T* p, size_t n) {
    wipe({reinterpret_cast<uint8_t*>(p), n * sizeof(T)});
    std::allocator<T>{}.deallocate(p, n);
  }
  template <typename U>
  bool operator==(const WipingAllocator<U>&) const { return true; }
};
using SecretBytes = std::vector<uint8_t, WipingAllocator<uint8_t>>;

inline constexpr size_t kX25519KeySize = 32;
using X25519Key = std::array<uint8_t, kX25519KeySize>;

// A key pair. The private half is wiped when the object goes away.
struct X25519KeyPair {
  X25519Key private_key{};
  X25519Key public_key{};
  X25519KeyPair() = default;
  X25519KeyPair(const X25519KeyPair&) = default;
  X25519KeyPair& operator=(const X25519KeyPair&) = default;
  ~X25519KeyPair() { wipe(private_key); }
};

// A fresh key pair from the system's random source.
Result<X25519KeyPair> generateX25519();
// The public key of a private key (RFC 7748 §6.1: X25519(k, 9)).
Result<X25519Key> x25519PublicKey(const X25519Key& private_key);
// X25519(k, u) (RFC 7748 §5). Fails for an all-zero result, which a peer's
// low-order public key produces (RFC 7748 §6.1: check, and abort).
Result<SecretBytes> x25519(const X25519Key& private_key, const X25519Key& peer_public);

// HKDF with SHA-256 (RFC 5869). An empty salt is HashLen zero bytes (§2.2).
Result<SecretBytes> hkdfExtract(std::span<const uint8_t> salt, std::span<const uint8_t> ikm);
// `length` bytes, at most 255 * 32.
Result<SecretBytes> hkdfExpand(std::span<const uint8_t> prk, std::span<const uint8_t> info, size_t length);

// SHA-256 of `data`.
std::array<uint8_t, 32> sha256(std::span<const uint8_t> data);

// Standard base64 (RFC 4648 §4) with padding.
std::string base64Encode(std::span<const uint8_t> bytes);
// Accepts exactly what base64Encode writes (no whitespace, correct padding);
// the error says what is wrong, never the text (it may be a secret).
Result<SecretBytes> base64Decode(std::string_view text);

// Lower-case hex.
std::string hex(std::span<const uint8_t> bytes);

}  // namespace dpu::ipsec
