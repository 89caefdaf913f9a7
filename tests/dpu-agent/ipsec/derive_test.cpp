// The pair derivation: both nodes compute the same SAs (A's outbound is B's
// inbound and the other way round), every input changes the keys, the SPI
// carries both epochs in its top byte and is never a reserved value.
#include <catch2/catch.hpp>

#include <set>

#include "ipsec/derive.h"

using namespace dpu::ipsec;

namespace {

struct Node {
  std::string name;
  uint32_t epoch;
  X25519KeyPair pair;
};

Node node(const std::string& name, uint32_t epoch) { return {name, epoch, *generateX25519()}; }

PairKeys derive(const Node& self, const Node& peer, std::span<const uint8_t> psk = {}, KeySize size = KeySize::k128) {
  PairInputs in;
  in.local_node = self.name;
  in.local_epoch = self.epoch;
  in.local_private = self.pair.private_key;
  in.remote_node = peer.name;
  in.remote_epoch = peer.epoch;
  in.remote_public = peer.pair.public_key;
  in.psk = psk;
  in.key_size = size;
  auto k = derivePairKeys(in);
  REQUIRE(k);
  return std::move(*k);
}

}  // namespace

TEST_CASE("derivation: A's outbound is B's inbound and B's outbound is A's inbound") {
  for (auto size : {KeySize::k128, KeySize::k256}) {
    const Node a = node("node-a", 3), b = node("node-b", 7);
    const SecretBytes psk(40, 0x5a);
    const PairKeys ka = derive(a, b, psk, size), kb = derive(b, a, psk, size);
    CHECK(ka.outbound.key == kb.inbound.key);
    CHECK(ka.outbound.salt == kb.inbound.salt);
    CHECK(ka.outbound.spi == kb.inbound.spi);
    CHECK(ka.inbound.key == kb.outbound.key);
    CHECK(ka.inbound.spi == kb.outbound.spi);
    CHECK(ka.inbound.salt == kb.outbound.salt);
    CHECK(ka.outbound.key.size() == keyBytes(size));
    // The two directions share nothing.
    CHECK(ka.outbound.key != ka.inbound.key);
    CHECK(ka.outbound.spi != ka.inbound.spi);
    CHECK(ka.outbound.salt != ka.inbound.salt);
    // The SPI names the pair of epochs: the receiver's in the top nibble.
    CHECK(spiReceiverNibble(ka.outbound.spi) == 7);  // B receives
    CHECK(spiSenderNibble(ka.outbound.spi) == 3);
    CHECK(spiReceiverNibble(ka.inbound.spi) == 3);
    CHECK(spiSenderNibble(ka.inbound.spi) == 7);
  }
}

TEST_CASE("derivation: every input changes the keys") {
  const Node a = node("node-a", 1), b = node("node-b", 1);
  const PairKeys base = derive(a, b);
  const SecretBytes psk(32, 1), other_psk(32, 2);
  const PairKeys with_psk = derive(a, b, psk);
  CHECK(with_psk.outbound.key != base.outbound.key);
  CHECK(derive(a, b, other_psk).outbound.key != with_psk.outbound.key);
  // A node that holds another PSK computes other keys: it cannot join.
  CHECK(derive(b, a, other_psk).inbound.key != with_psk.outbound.key);
  Node a2 = a;
  a2.epoch = 2;
  CHECK(derive(a2, b).outbound.key != base.outbound.key);
  Node b2 = b;
  b2.epoch = 17;  // same low nibble as 1: the keys still differ
  CHECK(derive(a, b2).outbound.key != base.outbound.key);
  CHECK(spiReceiverNibble(derive(a, b2).outbound.spi) == 1);
  Node renamed = b;
  renamed.name = "node-c";
  CHECK(derive(a, renamed).outbound.key != base.outbound.key);
  // AES-256's key is not AES-128's key extended.
  const PairKeys k256 = derive(a, b, {}, KeySize::k256);
  CHECK(!std::equal(base.outbound.key.begin(), base.outbound.key.end(), k256.outbound.key.begin()));
}

TEST_CASE("SPI: never 0..255, receiver and sender epochs in the top byte") {
  CHECK(spiFor(0, 0, 0) == 256);
  CHECK(spiFor(0, 0, (1u << 24) - 256) == 256);  // wraps inside the range, never below it
  CHECK(spiFor(0, 0, (1u << 24) - 257) == (1u << 24) - 1);
  CHECK(spiFor(0, 0, 0xffffffffu) >= 256);
  CHECK(spiFor(0x12, 0x34, 0) == 0x24000100u);
  std::set<uint32_t> seen;
  for (uint32_t e = 1; e <= 64; ++e) {
    const Node a = node("a", e), b = node("b", e + 1);
    const PairKeys k = derive(a, b);
    CHECK(k.outbound.spi >= 256);
    CHECK(k.inbound.spi >= 256);
    seen.insert(k.outbound.spi);
  }
  CHECK(seen.size() == 64);
}

TEST_CASE("derivation: refuses what cannot name a pair") {
  const Node a = node("node-a", 1), b = node("node-b", 1);
  PairInputs in;
  in.local_node = "node-a";
  in.local_epoch = 1;
  in.local_private = a.pair.private_key;
  in.remote_node = "node-a";
  in.remote_epoch = 1;
  in.remote_public = b.pair.public_key;
  CHECK_THAT(derivePairKeys(in).error(), Catch::Contains("both nodes are named"));
  in.remote_node = "node-b";
  in.remote_epoch = 0;
  CHECK_THAT(derivePairKeys(in).error(), Catch::Contains("epoch 0"));
  in.remote_epoch = 1;
  in.remote_public = X25519Key{};
  CHECK_THAT(derivePairKeys(in).error(), Catch::Contains("node node-b's public key"));
}

TEST_CASE("derivation: the worked example of docs/ipsec.md") {
  // node-a holds RFC 7748 §6.1's Alice key at epoch 1, node-b Bob's at epoch 2,
  // the PSK is the bytes 0x00..0x1f.
  auto unhex = [](const std::string& h) {
    X25519Key k{};
    for (size_t i = 0; i < 32; ++i) k[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
    return k;
  };
  const X25519Key alice = unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const X25519Key bob = unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  SecretBytes psk;
  for (uint8_t i = 0; i < 32; ++i) psk.push_back(i);
  const auto prk = hkdfExtract(std::span(reinterpret_cast<const uint8_t*>(kExtractSalt.data()), kExtractSalt.size()), [&] {
    SecretBytes ikm = *x25519(alice, *x25519PublicKey(bob));
    ikm.insert(ikm.end(), psk.begin(), psk.end());
    return ikm;
  }());
  REQUIRE(prk);
  CHECK(hex(*prk) == "6fbe25c97aa2dda34ca8141448b3722cffd6c45578d4b549b1eb34cc04b9bb30");
  PairInputs in{"node-a", 1, alice, "node-b", 2, *x25519PublicKey(bob), psk, KeySize::k128};
  auto with_psk = derivePairKeys(in);
  REQUIRE(with_psk);
  CHECK(hex(with_psk->outbound.key) == "4b663ea20f6897467f4b82a7b8deb744");
  CHECK(hex(with_psk->outbound.salt) == "135096be");
  CHECK(with_psk->outbound.spi == 0x21f23afcu);
  CHECK(hex(with_psk->inbound.key) == "45b3491ae1d6c3b7bb89805232ae40c5");
  CHECK(hex(with_psk->inbound.salt) == "e8b519bb");
  CHECK(with_psk->inbound.spi == 0x12072b8au);
  PairInputs no_psk{"node-a", 1, alice, "node-b", 2, *x25519PublicKey(bob), {}, KeySize::k256};
  auto k = derivePairKeys(no_psk);
  REQUIRE(k);
  CHECK(hex(k->outbound.key) == "49daebec23a9260dbbc95fa1ed53c4b5cd8247f48496763b11f4c6ffbd8df81b");
  CHECK(hex(k->outbound.salt) == "431ec995");
  CHECK(k->outbound.spi == 0x2169ff2au);
  CHECK(k->inbound.spi == 0x12ef4820u);
}
