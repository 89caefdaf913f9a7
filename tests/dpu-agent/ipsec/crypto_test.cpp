// The primitives under the IPsec keys against their RFCs' own test vectors:
// X25519 (RFC 7748 §5.2 and §6.1) and HKDF-SHA256 (RFC 5869 Appendix A), and
// the strict base64 every published and stored key goes through.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ipsec/crypto.h"

using namespace dpu::ipsec;

namespace {

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
  return out;
}

X25519Key key32(const std::string& h) {
  X25519Key k{};
  auto v = unhex(h);
  REQUIRE(v.size() == 32);
  std::copy(v.begin(), v.end(), k.begin());
  return k;
}

std::string hexOf(const SecretBytes& b) { return hex(b); }

}  // namespace

TEST_CASE("X25519: RFC 7748 §5.2 test vectors") {
  auto one = x25519(key32("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
                    key32("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"));
  REQUIRE(one);
  CHECK(hexOf(*one) == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552");
  auto two = x25519(key32("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d"),
                    key32("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493"));
  REQUIRE(two);
  CHECK(hexOf(*two) == "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957");
}

TEST_CASE("X25519: RFC 7748 §5.2 iterated, 1 and 1000 times") {
  X25519Key k{}, u{};
  k[0] = 9;
  u[0] = 9;
  for (int i = 1; i <= 1000; ++i) {
    auto r = x25519(k, u);
    REQUIRE(r);
    u = k;
    std::copy(r->begin(), r->end(), k.begin());
    if (i == 1) CHECK(hex(k) == "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079");
  }
  CHECK(hex(k) == "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51");
}

TEST_CASE("X25519: RFC 7748 §6.1 Diffie-Hellman") {
  const auto alice = key32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const auto bob = key32("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  auto alice_pub = x25519PublicKey(alice);
  auto bob_pub = x25519PublicKey(bob);
  REQUIRE(alice_pub);
  REQUIRE(bob_pub);
  CHECK(hex(*alice_pub) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  CHECK(hex(*bob_pub) == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  auto k1 = x25519(alice, *bob_pub);
  auto k2 = x25519(bob, *alice_pub);
  REQUIRE(k1);
  REQUIRE(k2);
  CHECK(hexOf(*k1) == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  CHECK(*k1 == *k2);
}

TEST_CASE("X25519: a low-order public key is refused, not turned into an all-zero secret") {
  const auto alice = key32("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  X25519Key zero{};  // the point 0 has order 4: every result is zero
  auto r = x25519(alice, zero);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("low-order"));
  X25519Key one{};
  one[0] = 1;  // order 1
  CHECK_FALSE(x25519(alice, one));
}

TEST_CASE("X25519: generated pairs agree with each other") {
  auto a = generateX25519();
  auto b = generateX25519();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->private_key != b->private_key);
  CHECK(*x25519PublicKey(a->private_key) == a->public_key);
  CHECK(*x25519(a->private_key, b->public_key) == *x25519(b->private_key, a->public_key));
}

TEST_CASE("HKDF-SHA256: RFC 5869 Appendix A.1, A.2, A.3") {
  struct Case {
    std::string ikm, salt, info;
    size_t length;
    std::string prk, okm;
  };
  std::string a2_ikm, a2_salt, a2_info;
  for (int i = 0x00; i <= 0x4f; ++i) a2_ikm += hex(std::vector<uint8_t>{static_cast<uint8_t>(i)});
  for (int i = 0x60; i <= 0xaf; ++i) a2_salt += hex(std::vector<uint8_t>{static_cast<uint8_t>(i)});
  for (int i = 0xb0; i <= 0xff; ++i) a2_info += hex(std::vector<uint8_t>{static_cast<uint8_t>(i)});
  const std::vector<Case> cases = {
      {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9", 42,
       "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
       "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"},
      {a2_ikm, a2_salt, a2_info, 82, "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
       "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c65e590e09da3275600c2f09b"
       "8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"},
      {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "", "", 42,
       "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
       "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"},
  };
  for (const auto& c : cases) {
    auto prk = hkdfExtract(unhex(c.salt), unhex(c.ikm));
    REQUIRE(prk);
    CHECK(hexOf(*prk) == c.prk);
    auto okm = hkdfExpand(*prk, unhex(c.info), c.length);
    REQUIRE(okm);
    CHECK(hexOf(*okm) == c.okm);
  }
  CHECK_FALSE(hkdfExpand(unhex(cases[0].prk), {}, 255 * 32 + 1));
}

TEST_CASE("base64: canonical text only, and errors that never quote the text") {
  const std::vector<uint8_t> bytes = {0xde, 0xad, 0xbe, 0xef, 0x01};
  CHECK(base64Encode(bytes) == "3q2+7wE=");
  auto back = base64Decode("3q2+7wE=");
  REQUIRE(back);
  CHECK(std::vector<uint8_t>(back->begin(), back->end()) == bytes);
  CHECK(base64Decode("").code() == dpu::ErrorCode::kInvalid);
  CHECK_THAT(base64Decode("3q2+7wE").error(), Catch::Contains("multiple of 4"));
  CHECK_THAT(base64Decode("3q2-7wE=").error(), Catch::Contains("character 4"));
  CHECK_THAT(base64Decode("3q2+7wF=").error(), Catch::Contains("canonical"));  // non-zero bits before '='
  CHECK_FALSE(base64Decode("3q2+ 7wE="));
  for (const auto& bad : {"3q2-7wE=", "3q2+7wF=", "3q2+7wE"}) {
    CHECK(base64Decode(bad).error().find(bad) == std::string::npos);
  }
}
