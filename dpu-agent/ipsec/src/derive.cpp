// Pair key derivation (see derive.h and docs/ipsec.md, "Derivation").
#include "ipsec/derive.h"

namespace dpu::ipsec {
namespace {

void appendBe(SecretBytes& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void appendText(SecretBytes& out, std::string_view s) { out.insert(out.end(), s.begin(), s.end()); }

// One direction: `from` sends, `to` receives.
Result<SaKeys> direction(std::span<const uint8_t> prk, uint8_t d, KeySize size, const std::string& lo,
                         uint32_t lo_epoch, const std::string& hi, uint32_t hi_epoch, uint32_t sender_epoch,
                         uint32_t receiver_epoch) {
  SecretBytes info;
  appendText(info, kSaInfoLabel);
  info.push_back(d);
  info.push_back(algorithmId(size));
  appendBe(info, lo_epoch, 4);
  appendBe(info, hi_epoch, 4);
  appendBe(info, lo.size(), 2);
  appendText(info, lo);
  appendBe(info, hi.size(), 2);
  appendText(info, hi);
  const size_t kl = keyBytes(size);
  auto okm = hkdfExpand(prk, info, kl + kSaltSize + 4);
  if (!okm) return std::move(okm).takeError();
  SaKeys k;
  k.key.assign(okm->begin(), okm->begin() + static_cast<ptrdiff_t>(kl));
  std::copy(okm->begin() + static_cast<ptrdiff_t>(kl), okm->begin() + static_cast<ptrdiff_t>(kl + kSaltSize),
            k.salt.begin());
  const uint8_t* r = okm->data() + kl + kSaltSize;
  const uint32_t rv = (uint32_t{r[0]} << 24) | (uint32_t{r[1]} << 16) | (uint32_t{r[2]} << 8) | r[3];
  k.spi = spiFor(receiver_epoch, sender_epoch, rv);
  return k;
}

}  // namespace

Result<PairKeys> derivePairKeys(const PairInputs& in) {
  auto invalid = [](std::string m) { return Error{std::move(m), ErrorCode::kInvalid}; };
  if (in.local_node.empty() || in.remote_node.empty()) return invalid("a node name is empty");
  if (in.local_node == in.remote_node) return invalid("both nodes are named " + in.local_node);
  if (in.local_node.size() > 0xffff || in.remote_node.size() > 0xffff) return invalid("a node name is over 65535 bytes");
  if (in.local_epoch == 0 || in.remote_epoch == 0) return invalid("epoch 0 is not an epoch (they start at 1)");
  auto shared = x25519(in.local_private, in.remote_public);
  if (!shared) return prefixed("node " + in.remote_node + "'s public key", std::move(shared).takeError());
  SecretBytes ikm = std::move(*shared);
  ikm.insert(ikm.end(), in.psk.begin(), in.psk.end());
  const std::span<const uint8_t> salt(reinterpret_cast<const uint8_t*>(kExtractSalt.data()), kExtractSalt.size());
  auto prk = hkdfExtract(salt, ikm);
  if (!prk) return std::move(prk).takeError();

  const bool local_is_lo = in.local_node < in.remote_node;
  const std::string& lo = local_is_lo ? in.local_node : in.remote_node;
  const std::string& hi = local_is_lo ? in.remote_node : in.local_node;
  const uint32_t lo_epoch = local_is_lo ? in.local_epoch : in.remote_epoch;
  const uint32_t hi_epoch = local_is_lo ? in.remote_epoch : in.local_epoch;
  // d = 0: lo sends to hi; d = 1: hi sends to lo.
  auto lo_to_hi = direction(*prk, 0, in.key_size, lo, lo_epoch, hi, hi_epoch, lo_epoch, hi_epoch);
  if (!lo_to_hi) return std::move(lo_to_hi).takeError();
  auto hi_to_lo = direction(*prk, 1, in.key_size, lo, lo_epoch, hi, hi_epoch, hi_epoch, lo_epoch);
  if (!hi_to_lo) return std::move(hi_to_lo).takeError();
  PairKeys out;
  out.outbound = std::move(local_is_lo ? *lo_to_hi : *hi_to_lo);
  out.inbound = std::move(local_is_lo ? *hi_to_lo : *lo_to_hi);
  return out;
}

}  // namespace dpu::ipsec
