// The OpenSSL 3 EVP backend of the AEAD interface: portable AES-GCM (AES-NI on
// x86, ARMv8 crypto extensions on the DPU's Arm cores).
//
// Per-packet cost is kept to the EVP calls themselves: the cipher is fetched
// and the key schedule computed once, in EVP_CIPHER_CTX pairs (one per
// direction) allocated at creation. Each operation only resets the IV
// (EVP_*Init_ex with a null cipher and key keeps the schedule), so nothing is
// allocated per packet.
//
// An EVP_CIPHER_CTX holds per-operation state, yet the context may be used by
// several threads at once (aead.h): it keeps kLanes pairs, each taken with
// its own flag for the one operation. A thread starts at its own lane (given
// out round robin on its first call), so up to kLanes threads never meet; more
// share lanes, correctly, and wait only for one packet's crypto.
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <atomic>
#include <string>

#include "aead_backends.h"

namespace dpu::overlay::detail {
namespace {

struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;

constexpr unsigned kLanes = 8;

unsigned myLane() {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned lane = next.fetch_add(1, std::memory_order_relaxed) % kLanes;
  return lane;
}

struct alignas(64) Lane {
  CipherCtx enc;
  CipherCtx dec;
  std::atomic_flag busy = ATOMIC_FLAG_INIT;
};

class OpenSslContext final : public AeadContext {
 public:
  OpenSslContext(AeadAlgorithm algorithm, std::unique_ptr<Lane[]> lanes)
      : algorithm_(algorithm), lanes_(std::move(lanes)) {}

  AeadBackend backend() const override { return AeadBackend::kOpenSsl; }
  AeadAlgorithm algorithm() const override { return algorithm_; }

  Status seal(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data, uint8_t* tag) override {
    Lane& lane = acquire();
    const Status s = sealOn(lane.enc.get(), nonce, aad, data, tag);
    lane.busy.clear(std::memory_order_release);
    return s;
  }

  Status open(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data,
              const uint8_t* tag) override {
    Lane& lane = acquire();
    const Status s = openOn(lane, nonce, aad, data, tag);
    lane.busy.clear(std::memory_order_release);
    return s;
  }

 private:
  // A free lane, this thread's own first.
  Lane& acquire() {
    for (unsigned i = myLane();; i = (i + 1) % kLanes) {
      if (!lanes_[i].busy.test_and_set(std::memory_order_acquire)) return lanes_[i];
    }
  }

  static Status sealOn(EVP_CIPHER_CTX* ctx, const AeadNonce& nonce, std::span<const uint8_t> aad,
                       std::span<uint8_t> data, uint8_t* tag) {
    int len = 0;
    if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) return Status::kEspCryptoError;
    if (!aad.empty() && EVP_EncryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1) {
      return Status::kEspCryptoError;
    }
    if (!data.empty() && EVP_EncryptUpdate(ctx, data.data(), &len, data.data(), static_cast<int>(data.size())) != 1) {
      return Status::kEspCryptoError;
    }
    uint8_t final_block[16];  // GCM writes nothing at Final; the buffer satisfies the API.
    if (EVP_EncryptFinal_ex(ctx, final_block, &len) != 1) return Status::kEspCryptoError;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kAeadTagSize, tag) != 1) return Status::kEspCryptoError;
    return Status::kOk;
  }

  static Status openOn(Lane& lane, const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data,
                       const uint8_t* tag) {
    EVP_CIPHER_CTX* ctx = lane.dec.get();
    int len = 0;
    if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) return Status::kEspCryptoError;
    if (!aad.empty() && EVP_DecryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1) {
      return Status::kEspCryptoError;
    }
    if (!data.empty() && EVP_DecryptUpdate(ctx, data.data(), &len, data.data(), static_cast<int>(data.size())) != 1) {
      return Status::kEspCryptoError;
    }
    // SET_TAG copies the tag; the const_cast only satisfies the void* signature.
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kAeadTagSize, const_cast<uint8_t*>(tag)) != 1) {
      return Status::kEspCryptoError;
    }
    uint8_t final_block[16];
    if (EVP_DecryptFinal_ex(ctx, final_block, &len) == 1) return Status::kOk;
    // EVP decrypts while it hashes, so the buffer now holds unauthenticated
    // plaintext. Encrypting it again under the same nonce regenerates the same
    // key stream (CTR mode) and restores the ciphertext exactly; it reveals
    // nothing new and keeps the contract that a failed open changes nothing.
    uint8_t scratch_tag[kAeadTagSize];
    if (sealOn(lane.enc.get(), nonce, aad, data, scratch_tag) != Status::kOk) return Status::kEspCryptoError;
    return Status::kEspAuthFailed;
  }

  AeadAlgorithm algorithm_;
  std::unique_ptr<Lane[]> lanes_;
};

std::string openSslError(const char* what) {
  return std::string("OpenSSL ") + what + " failed for AES-GCM: is the default provider loadable?";
}

}  // namespace

Result<std::unique_ptr<AeadContext>> createOpenSslContext(AeadAlgorithm algorithm, std::span<const uint8_t> key) {
  // An explicit fetch, so the per-packet EVP calls never go through the
  // implicit (locking, caching) fetch of EVP_aes_*_gcm().
  EVP_CIPHER* cipher =
      EVP_CIPHER_fetch(nullptr, algorithm == AeadAlgorithm::kAes128Gcm ? "AES-128-GCM" : "AES-256-GCM", nullptr);
  if (cipher == nullptr) return Error{openSslError("EVP_CIPHER_fetch")};
  auto lanes = std::make_unique<Lane[]>(kLanes);
  bool ok = true;
  for (unsigned i = 0; ok && i < kLanes; ++i) {
    CipherCtx& enc = lanes[i].enc;
    CipherCtx& dec = lanes[i].dec;
    enc.reset(EVP_CIPHER_CTX_new());
    dec.reset(EVP_CIPHER_CTX_new());
    ok = enc && dec && EVP_EncryptInit_ex(enc.get(), cipher, nullptr, key.data(), nullptr) == 1 &&
         EVP_DecryptInit_ex(dec.get(), cipher, nullptr, key.data(), nullptr) == 1 &&
         EVP_CIPHER_CTX_ctrl(enc.get(), EVP_CTRL_GCM_SET_IVLEN, kAeadNonceSize, nullptr) == 1 &&
         EVP_CIPHER_CTX_ctrl(dec.get(), EVP_CTRL_GCM_SET_IVLEN, kAeadNonceSize, nullptr) == 1;
  }
  EVP_CIPHER_free(cipher);  // the contexts hold their own reference
  if (!ok) return Error{openSslError("EVP_CIPHER_CTX setup")};
  return std::unique_ptr<AeadContext>(std::make_unique<OpenSslContext>(algorithm, std::move(lanes)));
}

}  // namespace dpu::overlay::detail
