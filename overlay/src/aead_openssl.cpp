// The OpenSSL 3 EVP backend of the AEAD interface: portable AES-GCM (AES-NI on
// x86, ARMv8 crypto extensions on the DPU's Arm cores).
//
// Per-packet cost is kept to the EVP calls themselves: the cipher is fetched
// and the key schedule computed once, in two EVP_CIPHER_CTX (one per
// direction) allocated at creation. Each operation only resets the IV
// (EVP_*Init_ex with a null cipher and key keeps the schedule), so nothing is
// allocated per packet.
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <string>

#include "aead_backends.h"

namespace dpu::overlay::detail {
namespace {

struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;

class OpenSslContext final : public AeadContext {
 public:
  OpenSslContext(AeadAlgorithm algorithm, CipherCtx enc, CipherCtx dec)
      : algorithm_(algorithm), enc_(std::move(enc)), dec_(std::move(dec)) {}

  AeadBackend backend() const override { return AeadBackend::kOpenSsl; }
  AeadAlgorithm algorithm() const override { return algorithm_; }

  Status seal(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data, uint8_t* tag) override {
    EVP_CIPHER_CTX* ctx = enc_.get();
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

  Status open(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data,
              const uint8_t* tag) override {
    EVP_CIPHER_CTX* ctx = dec_.get();
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
    if (seal(nonce, aad, data, scratch_tag) != Status::kOk) return Status::kEspCryptoError;
    return Status::kEspAuthFailed;
  }

 private:
  AeadAlgorithm algorithm_;
  CipherCtx enc_;
  CipherCtx dec_;
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
  CipherCtx enc(EVP_CIPHER_CTX_new());
  CipherCtx dec(EVP_CIPHER_CTX_new());
  bool ok = enc && dec && EVP_EncryptInit_ex(enc.get(), cipher, nullptr, key.data(), nullptr) == 1 &&
            EVP_DecryptInit_ex(dec.get(), cipher, nullptr, key.data(), nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(enc.get(), EVP_CTRL_GCM_SET_IVLEN, kAeadNonceSize, nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(dec.get(), EVP_CTRL_GCM_SET_IVLEN, kAeadNonceSize, nullptr) == 1;
  EVP_CIPHER_free(cipher);  // the contexts hold their own reference
  if (!ok) return Error{openSslError("EVP_CIPHER_CTX setup")};
  return std::unique_ptr<AeadContext>(std::make_unique<OpenSslContext>(algorithm, std::move(enc), std::move(dec)));
}

}  // namespace dpu::overlay::detail
