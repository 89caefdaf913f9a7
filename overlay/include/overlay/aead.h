// AEAD: AES-GCM with a 16-byte tag behind one interface with run-time chosen
// backends, for ESP (RFC 4106) and anything else that seals packets in place.
//
// Contract (every backend):
//  - A context is created once per key (per SA direction) by createAeadContext().
//    Creation does the expensive part: key schedule, GHASH key powers, the
//    OpenSSL cipher fetch and EVP_CIPHER_CTX allocation. It may allocate and
//    reports failures as a Result with a message.
//  - seal()/open() are synchronous, in place, and never allocate, lock, log or
//    throw. The nonce is always 12 bytes (RFC 4106 §4: salt || IV), the tag 16
//    bytes (RFC 4106 §3 ICV, the only length we accept). AAD and data may be
//    empty.
//  - open() compares tags in constant time. On a mismatch it returns
//    kEspAuthFailed and `data` holds its original ciphertext again: no
//    unauthenticated plaintext is ever left in the caller's buffer.
//  - Threading: seal() and open() may be called on one context by several
//    threads at once (an SA whose traffic several lcores carry): the
//    intel-ipsec-mb backend keeps per-operation state on the stack, the
//    OpenSSL one in a small set of EVP_CIPHER_CTX, one per operation in
//    flight. Creating and destroying contexts from any thread is safe;
//    destroying one while it is in use is not.
//
// Backends:
//  - kIpsecMb: intel-ipsec-mb's direct GCM API (x86-64 only; present when built
//    with DPU_HAVE_IPSEC_MB and the CPU has AES-NI and PCLMULQDQ; uses the
//    VAES/AVX-512 code paths where the CPU has them).
//  - kOpenSsl: OpenSSL 3 EVP, portable (Arm DPUs use its ARMv8 crypto code).
// A lookaside crypto PMD (mlx5 on a BlueField) is asynchronous and belongs to
// the dataplane's burst pipeline, not behind this synchronous interface.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "overlay/result.h"
#include "overlay/status.h"

namespace dpu::overlay {

enum class AeadAlgorithm : uint8_t { kAes128Gcm, kAes256Gcm };

enum class AeadBackend : uint8_t { kIpsecMb, kOpenSsl };

inline constexpr size_t kAeadNonceSize = 12;
inline constexpr size_t kAeadTagSize = 16;
using AeadNonce = std::array<uint8_t, kAeadNonceSize>;

// Key length in bytes of an algorithm (16 or 32).
size_t aeadKeySize(AeadAlgorithm algorithm);
// The algorithm for a key length, if it is 16 or 32 bytes.
std::optional<AeadAlgorithm> aeadAlgorithmForKeySize(size_t key_size);
std::string_view aeadAlgorithmName(AeadAlgorithm algorithm);  // "aes-128-gcm"

// "ipsec-mb" or "openssl", the names operators write in configuration.
std::string_view aeadBackendName(AeadBackend backend);
std::optional<AeadBackend> aeadBackendFromName(std::string_view name);

// Backends usable on this build and this CPU, best first. Computed once.
std::span<const AeadBackend> availableAeadBackends();
bool aeadBackendAvailable(AeadBackend backend);
// The first of availableAeadBackends(); OpenSSL is always available.
AeadBackend defaultAeadBackend();

class AeadContext {
 public:
  virtual ~AeadContext() = default;
  AeadContext(const AeadContext&) = delete;
  AeadContext& operator=(const AeadContext&) = delete;

  virtual AeadBackend backend() const = 0;
  virtual AeadAlgorithm algorithm() const = 0;

  // Encrypts `data` in place and writes the tag to `tag` (kAeadTagSize bytes,
  // may directly follow `data`). kOk, or kEspCryptoError if the backend failed
  // (then `data` is unspecified).
  virtual Status seal(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data, uint8_t* tag) = 0;

  // Verifies `tag` over `aad` and `data` and decrypts `data` in place. kOk, or
  // kEspAuthFailed with `data` unchanged, or kEspCryptoError.
  virtual Status open(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data,
                      const uint8_t* tag) = 0;

 protected:
  AeadContext() = default;
};

// Creates a context for `key` (16 bytes for AES-128-GCM, 32 for AES-256-GCM)
// on `backend`. Fails with a message if the key length does not match the
// algorithm or the backend is not available here.
Result<std::unique_ptr<AeadContext>> createAeadContext(AeadBackend backend, AeadAlgorithm algorithm,
                                                       std::span<const uint8_t> key);

}  // namespace dpu::overlay
