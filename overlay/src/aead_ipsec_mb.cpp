// The intel-ipsec-mb backend of the AEAD interface: AES-GCM through the
// library's direct (synchronous, single-buffer) GCM API, which picks the
// VAES/VPCLMULQDQ AVX-512 code on CPUs that have it.
//
// One IMB_MGR per process serves only as the table of function pointers that
// init_mb_mgr_auto() selected for this CPU; it is never used for jobs. Each
// context copies the two pointers it needs and owns its expanded key (AES round
// keys and GHASH key powers, computed once by IMB_AESxxx_GCM_PRE). The per-call
// gcm_context_data lives on the stack, so calls share no mutable state.
#include "aead_backends.h"

#ifdef DPU_HAVE_IPSEC_MB

#include <intel-ipsec-mb.h>
#include <openssl/crypto.h>

#include <cstring>

namespace dpu::overlay::detail {
namespace {

struct MgrDeleter {
  void operator()(IMB_MGR* mgr) const { free_mb_mgr(mgr); }
};

// The function table for this CPU, or null if the library cannot run its
// AES-NI code here (it would fall back to a slow software AES emulation,
// which OpenSSL beats).
IMB_MGR* sharedMgr() {
  static std::unique_ptr<IMB_MGR, MgrDeleter> mgr = [] {
    std::unique_ptr<IMB_MGR, MgrDeleter> m(alloc_mb_mgr(0));
    if (!m) return m;
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(m.get(), &arch);
    if (arch == IMB_ARCH_NONE || arch == IMB_ARCH_NOAESNI || imb_get_errno(m.get()) != 0) m.reset();
    return m;
  }();
  return mgr.get();
}

// The header aligns gcm_key_data to 64 bytes only when LINUX is defined, and
// its AVX-512 code uses aligned loads: align it ourselves.
struct alignas(64) KeyData {
  gcm_key_data data;
};

// Non-null pointer for empty spans: ipsec-mb's parameter checks reject null
// source or AAD pointers regardless of length in some builds.
alignas(16) const uint8_t kEmpty[16] = {};

class IpsecMbContext final : public AeadContext {
 public:
  IpsecMbContext(AeadAlgorithm algorithm, aes_gcm_enc_dec_t enc, aes_gcm_enc_dec_t dec)
      : algorithm_(algorithm), enc_(enc), dec_(dec), key_(std::make_unique<KeyData>()) {}
  ~IpsecMbContext() override { OPENSSL_cleanse(key_.get(), sizeof(KeyData)); }

  gcm_key_data* keyData() { return &key_->data; }

  AeadBackend backend() const override { return AeadBackend::kIpsecMb; }
  AeadAlgorithm algorithm() const override { return algorithm_; }

  Status seal(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data, uint8_t* tag) override {
    gcm_context_data ctx;
    uint8_t* p = data.empty() ? const_cast<uint8_t*>(kEmpty) : data.data();
    enc_(&key_->data, &ctx, p, p, data.size(), nonce.data(), aad.empty() ? kEmpty : aad.data(), aad.size(), tag,
         kAeadTagSize);
    return Status::kOk;
  }

  Status open(const AeadNonce& nonce, std::span<const uint8_t> aad, std::span<uint8_t> data,
              const uint8_t* tag) override {
    gcm_context_data ctx;
    uint8_t computed[kAeadTagSize];
    uint8_t* p = data.empty() ? const_cast<uint8_t*>(kEmpty) : data.data();
    const uint8_t* a = aad.empty() ? kEmpty : aad.data();
    dec_(&key_->data, &ctx, p, p, data.size(), nonce.data(), a, aad.size(), computed, kAeadTagSize);
    // In constant time, as CRYPTO_memcmp (whose call costs more than this).
    static_assert(kAeadTagSize == 16);
    uint64_t x[2], y[2];
    std::memcpy(x, computed, 16);
    std::memcpy(y, tag, 16);
    if (((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0) return Status::kOk;
    // The direct API decrypts while it hashes: re-encrypting under the same
    // nonce restores the ciphertext (same CTR key stream), so a forged packet
    // never leaves plaintext behind.
    enc_(&key_->data, &ctx, p, p, data.size(), nonce.data(), a, aad.size(), computed, kAeadTagSize);
    return Status::kEspAuthFailed;
  }

 private:
  AeadAlgorithm algorithm_;
  aes_gcm_enc_dec_t enc_;
  aes_gcm_enc_dec_t dec_;
  std::unique_ptr<KeyData> key_;
};

}  // namespace

bool ipsecMbAvailable() { return sharedMgr() != nullptr; }

Result<std::unique_ptr<AeadContext>> createIpsecMbContext(AeadAlgorithm algorithm, std::span<const uint8_t> key) {
  IMB_MGR* mgr = sharedMgr();
  if (mgr == nullptr) return Error{"intel-ipsec-mb cannot run AES-GCM on this CPU (no AES-NI)"};
  std::unique_ptr<IpsecMbContext> ctx;
  if (algorithm == AeadAlgorithm::kAes128Gcm) {
    ctx = std::make_unique<IpsecMbContext>(algorithm, mgr->gcm128_enc, mgr->gcm128_dec);
    IMB_AES128_GCM_PRE(mgr, key.data(), ctx->keyData());
  } else {
    ctx = std::make_unique<IpsecMbContext>(algorithm, mgr->gcm256_enc, mgr->gcm256_dec);
    IMB_AES256_GCM_PRE(mgr, key.data(), ctx->keyData());
  }
  return std::unique_ptr<AeadContext>(std::move(ctx));
}

}  // namespace dpu::overlay::detail

#else  // !DPU_HAVE_IPSEC_MB: Arm and other builds without the library.

namespace dpu::overlay::detail {

bool ipsecMbAvailable() { return false; }

Result<std::unique_ptr<AeadContext>> createIpsecMbContext(AeadAlgorithm, std::span<const uint8_t>) {
  return Error{"this build has no intel-ipsec-mb (it exists only for x86-64)"};
}

}  // namespace dpu::overlay::detail

#endif
