// X25519, HKDF-SHA256, base64 and wiping over OpenSSL 3 (see crypto.h).
#include "ipsec/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <memory>

namespace dpu::ipsec {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct KdfFree {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxFree {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

std::string opensslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return what;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return what + " (" + buf + ")";
}

Pkey privateKey(const X25519Key& k) {
  return Pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, k.data(), k.size()));
}

X25519Key rawPublic(EVP_PKEY* key, bool& ok) {
  X25519Key out{};
  size_t len = out.size();
  ok = EVP_PKEY_get_raw_public_key(key, out.data(), &len) == 1 && len == out.size();
  return out;
}

// One HKDF step (mode EXTRACT_ONLY or EXPAND_ONLY) through EVP_KDF.
Result<SecretBytes> hkdf(int mode, std::span<const uint8_t> key, std::span<const uint8_t> salt_or_info,
                         size_t length) {
  std::unique_ptr<EVP_KDF, KdfFree> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) return Error{opensslError("HKDF is not available in this OpenSSL")};
  std::unique_ptr<EVP_KDF_CTX, KdfCtxFree> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) return Error{opensslError("cannot make an HKDF context")};
  char digest[] = "SHA256";
  // OpenSSL wants non-const pointers in OSSL_PARAM; it only reads them.
  auto* k = const_cast<uint8_t*>(key.data());
  auto* s = const_cast<uint8_t*>(salt_or_info.data());
  static uint8_t empty = 0;
  OSSL_PARAM params[5];
  size_t n = 0;
  params[n++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key.empty() ? &empty : k, key.size());
  if (mode == EVP_KDF_HKDF_MODE_EXTRACT_ONLY) {
    // RFC 5869 §2.2: no salt is HashLen zeros; OpenSSL does the same for an empty one.
    if (!salt_or_info.empty())
      params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, s, salt_or_info.size());
  } else {
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, salt_or_info.empty() ? &empty : s,
                                                    salt_or_info.size());
  }
  params[n] = OSSL_PARAM_construct_end();
  SecretBytes out(length);
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) {
    return Error{opensslError("HKDF-SHA256 failed")};
  }
  return out;
}

}  // namespace

void wipe(std::span<uint8_t> bytes) {
  if (!bytes.empty()) OPENSSL_cleanse(bytes.data(), bytes.size());
}

Result<X25519KeyPair> generateX25519() {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return Error{opensslError("cannot generate an X25519 key pair")};
  }
  Pkey key(raw);
  X25519KeyPair pair;
  size_t len = pair.private_key.size();
  bool ok = EVP_PKEY_get_raw_private_key(key.get(), pair.private_key.data(), &len) == 1 && len == kX25519KeySize;
  bool pub_ok = false;
  pair.public_key = rawPublic(key.get(), pub_ok);
  if (!ok || !pub_ok) return Error{opensslError("cannot read the generated X25519 key pair")};
  return pair;
}

Result<X25519Key> x25519PublicKey(const X25519Key& private_key) {
  Pkey key = privateKey(private_key);
  if (!key) return Error{opensslError("not a usable X25519 private key")};
  bool ok = false;
  X25519Key pub = rawPublic(key.get(), ok);
  if (!ok) return Error{opensslError("cannot compute the X25519 public key")};
  return pub;
}

Result<SecretBytes> x25519(const X25519Key& private_key, const X25519Key& peer_public) {
  Pkey ours = privateKey(private_key);
  Pkey theirs(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), peer_public.size()));
  if (!ours || !theirs) return Error{opensslError("not a usable X25519 key")};
  PkeyCtx ctx(EVP_PKEY_CTX_new(ours.get(), nullptr));
  SecretBytes shared(kX25519KeySize);
  size_t len = shared.size();
  // OpenSSL refuses an all-zero result itself; the check below says so in our words.
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), theirs.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared.data(), &len) != 1 || len != kX25519KeySize) {
    ERR_clear_error();
    return Error{"X25519 with this public key gives the all-zero secret (a low-order point): the key is unusable",
                 ErrorCode::kInvalid};
  }
  uint8_t any = 0;
  for (uint8_t b : shared) any |= b;
  if (any == 0) {
    return Error{"X25519 with this public key gives the all-zero secret (a low-order point): the key is unusable",
                 ErrorCode::kInvalid};
  }
  return shared;
}

Result<SecretBytes> hkdfExtract(std::span<const uint8_t> salt, std::span<const uint8_t> ikm) {
  return hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, ikm, salt, 32);
}

Result<SecretBytes> hkdfExpand(std::span<const uint8_t> prk, std::span<const uint8_t> info, size_t length) {
  if (length == 0 || length > 255 * 32) return Error{"HKDF-Expand length must be 1..8160", ErrorCode::kInvalid};
  return hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, prk, info, length);
}

std::array<uint8_t, 32> sha256(std::span<const uint8_t> data) {
  std::array<uint8_t, 32> out{};
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string base64Encode(std::span<const uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

Result<SecretBytes> base64Decode(std::string_view text) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (text.empty()) return Error{"is empty", ErrorCode::kInvalid};
  if (text.size() % 4 != 0) return Error{"is not base64: its length is not a multiple of 4", ErrorCode::kInvalid};
  size_t pad = 0;
  while (pad < 2 && text[text.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    if (kAlphabet.find(text[i]) == std::string_view::npos) {
      return Error{"is not base64: character " + std::to_string(i + 1) + " is outside A-Z a-z 0-9 + /",
                   ErrorCode::kInvalid};
    }
  }
  SecretBytes out(text.size() / 4 * 3);
  int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return Error{"is not base64", ErrorCode::kInvalid};
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts the padding as zero bytes
  // Canonical form only: the unused low bits before the padding must be zero,
  // so that one key has one text (a published key is compared as text).
  if (base64Encode(out) != text) return Error{"is not canonical base64 (non-zero bits before the padding)", ErrorCode::kInvalid};
  return out;
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace dpu::ipsec
