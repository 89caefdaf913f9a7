// The AEAD interface, run over every backend available here: McGrew-Viega /
// NIST GCM known answers for AES-128 and AES-256, tag mismatch rejection that
// leaves the data unchanged, and agreement between backends at every length.
#include <catch2/catch.hpp>
#include <random>

#include "esp_test_util.h"
#include "golden.h"
#include "overlay/aead.h"

using namespace dpu::overlay;
using dpu::test::fromHex;

namespace {

struct GcmVector {
  const char* name;
  const char* key;
  const char* iv;
  const char* aad;
  const char* plaintext;
  const char* ciphertext;
  const char* tag;
};

// The GCM specification's test cases (McGrew and Viega, "The Galois/Counter
// Mode of Operation", 2005; also NIST's gcmEncryptExtIV vectors), cases with
// a 96-bit IV: 1-4 (AES-128) and 13-16 (AES-256).
constexpr const char* kP =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de6"
    "57ba637b391aafd255";
constexpr const char* kP60 =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de6"
    "57ba637b39";
const GcmVector kVectors[] = {
    {"tc1", "00000000000000000000000000000000", "000000000000000000000000", "", "", "",
     "58e2fccefa7e3061367f1d57a4e7455a"},
    {"tc2", "00000000000000000000000000000000", "000000000000000000000000", "", "00000000000000000000000000000000",
     "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"},
    {"tc3", "feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "", kP,
     "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aa"
     "c973d58e091473f5985",
     "4d5c2af327cd64a62cf35abd2ba6fab4"},
    {"tc4", "feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     kP60,
     "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aa"
     "c973d58e091",
     "5bc94fbc3221a5db94fae95ae7121a47"},
    {"tc13", "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "", "", "",
     "530f8afbc74536b9a963b4f1c4cb738b"},
    {"tc14", "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
     "00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {"tc15", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "", kP,
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7"
     "a0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"tc16", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2", kP60,
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7"
     "a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

std::unique_ptr<AeadContext> makeContext(AeadBackend backend, const std::vector<uint8_t>& key) {
  auto ctx = createAeadContext(backend, *aeadAlgorithmForKeySize(key.size()), key);
  REQUIRE(ctx.ok());
  return std::move(ctx).value();
}

AeadNonce nonceOf(const std::vector<uint8_t>& iv) {
  AeadNonce n{};
  REQUIRE(iv.size() == n.size());
  std::copy(iv.begin(), iv.end(), n.begin());
  return n;
}

}  // namespace

TEST_CASE("AEAD backends: OpenSSL always, intel-ipsec-mb on x86 builds", "[aead]") {
  auto backends = availableAeadBackends();
  REQUIRE(!backends.empty());
  CHECK(aeadBackendAvailable(AeadBackend::kOpenSsl));
  CHECK(defaultAeadBackend() == backends.front());
#ifdef DPU_HAVE_IPSEC_MB
  // This machine has AES-NI (the test host and every production x86 DPU host).
  CHECK(backends.front() == AeadBackend::kIpsecMb);
#endif
  for (AeadBackend b : {AeadBackend::kIpsecMb, AeadBackend::kOpenSsl}) {
    CHECK(aeadBackendFromName(aeadBackendName(b)) == b);
  }
  CHECK(!aeadBackendFromName("aesni").has_value());
}

TEST_CASE("AEAD creation rejects wrong key sizes with a message", "[aead]") {
  for (AeadBackend b : availableAeadBackends()) {
    std::vector<uint8_t> key(24, 1);
    auto r = createAeadContext(b, AeadAlgorithm::kAes128Gcm, key);
    REQUIRE(!r.ok());
    CHECK(r.error().find("16-byte key") != std::string::npos);
    CHECK(!createAeadContext(b, AeadAlgorithm::kAes256Gcm, std::vector<uint8_t>(16, 1)).ok());
  }
}

TEST_CASE("AEAD known answers (GCM spec test cases 1-4, 13-16)", "[aead]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (const GcmVector& v : kVectors) {
      INFO(dpu::test::backendName(backend) << " " << v.name);
      auto ctx = makeContext(backend, fromHex(v.key));
      const AeadNonce nonce = nonceOf(fromHex(v.iv));
      const auto aad = fromHex(v.aad);
      auto data = fromHex(v.plaintext);
      uint8_t tag[kAeadTagSize];
      REQUIRE(ctx->seal(nonce, aad, data, tag) == Status::kOk);
      CHECK(dpu::test::toHex(data) == v.ciphertext);
      CHECK(dpu::test::toHex(tag, sizeof tag) == v.tag);

      REQUIRE(ctx->open(nonce, aad, data, tag) == Status::kOk);
      CHECK(dpu::test::toHex(data) == v.plaintext);
    }
  }
}

TEST_CASE("AEAD open rejects any tampering and leaves the ciphertext as it was", "[aead]") {
  for (AeadBackend backend : availableAeadBackends()) {
    for (size_t key_size : {16u, 32u}) {
      INFO(dpu::test::backendName(backend) << " key " << key_size);
      auto ctx = makeContext(backend, dpu::test::pattern(key_size, 3));
      const AeadNonce nonce = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
      const std::vector<uint8_t> aad = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1};
      auto data = dpu::test::pattern(77, 9);
      uint8_t tag[kAeadTagSize];
      REQUIRE(ctx->seal(nonce, aad, data, tag) == Status::kOk);
      const auto sealed = data;

      // The tag, any ciphertext byte, the AAD, the nonce.
      for (size_t i = 0; i < kAeadTagSize; ++i) {
        uint8_t bad[kAeadTagSize];
        std::copy(tag, tag + kAeadTagSize, bad);
        bad[i] ^= 0x01;
        CHECK(ctx->open(nonce, aad, data, bad) == Status::kEspAuthFailed);
        CHECK(data == sealed);
      }
      for (size_t i = 0; i < data.size(); ++i) {
        data[i] ^= 0x80;
        auto tampered = data;
        CHECK(ctx->open(nonce, aad, data, tag) == Status::kEspAuthFailed);
        CHECK(data == tampered);
        data[i] ^= 0x80;
      }
      auto bad_aad = aad;
      bad_aad[7] = 2;
      CHECK(ctx->open(nonce, bad_aad, data, tag) == Status::kEspAuthFailed);
      AeadNonce bad_nonce = nonce;
      bad_nonce[11] ^= 1;
      CHECK(ctx->open(bad_nonce, aad, data, tag) == Status::kEspAuthFailed);
      CHECK(data == sealed);
      // And the untouched message still opens.
      CHECK(ctx->open(nonce, aad, data, tag) == Status::kOk);
      CHECK(data == dpu::test::pattern(77, 9));
    }
  }
}

TEST_CASE("AEAD backends agree at every length from 0 to 300 bytes", "[aead]") {
  auto backends = availableAeadBackends();
  if (backends.size() < 2) {
    WARN("only one AEAD backend on this build: nothing to compare");
    return;
  }
  std::mt19937 rng(42);
  for (size_t key_size : {16u, 32u}) {
    const auto key = dpu::test::pattern(key_size, 77);
    auto a = makeContext(backends[0], key);
    auto b = makeContext(backends[1], key);
    for (size_t len = 0; len <= 300; ++len) {
      AeadNonce nonce;
      for (auto& x : nonce) x = static_cast<uint8_t>(rng());
      std::vector<uint8_t> aad(len % 13), data(len);
      for (auto& x : aad) x = static_cast<uint8_t>(rng());
      for (auto& x : data) x = static_cast<uint8_t>(rng());
      auto da = data, db = data;
      uint8_t ta[kAeadTagSize], tb[kAeadTagSize];
      REQUIRE(a->seal(nonce, aad, da, ta) == Status::kOk);
      REQUIRE(b->seal(nonce, aad, db, tb) == Status::kOk);
      REQUIRE(da == db);
      REQUIRE(std::equal(ta, ta + kAeadTagSize, tb));
      // Each opens what the other sealed.
      REQUIRE(b->open(nonce, aad, da, ta) == Status::kOk);
      REQUIRE(da == data);
      REQUIRE(a->open(nonce, aad, db, tb) == Status::kOk);
      REQUIRE(db == data);
    }
  }
}
