// The multiply-fold step of the tables' keyed hashes, and the random keys
// they take at start.
//
// A table indexed by what packets carry (the flow cache, the connection
// table) hashes with keys no sender knows: with a fixed hash, a client that
// chooses its ports can put every connection it opens in one chain, and each
// lookup there walks them all (hash flooding). Keys are drawn per process
// (per table), so nothing learnt of one process's placement holds for the
// next.
#pragma once

#include <cstdint>
#include <random>

namespace dpu {

// 64x64->128 multiply, halves folded (wyhash's mum): every output bit
// depends on every input bit of both operands.
inline uint64_t mum(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

// Eight hash keys, each a fixed constant XORed with a seed from the
// system's random source (randomSeed), so that without the seed no input can
// be crafted to zero an operand of mum; and the seed itself.
struct HashKeys {
  uint64_t word[8];
  uint64_t seed;
  static HashKeys fromSeed(uint64_t seed) {
    constexpr uint64_t kMul[8] = {0xa0761d6478bd642full, 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull,
                                  0x589965cc75374cc3ull, 0x1d8e4e27c47d124full, 0x9e3779b185ebca87ull,
                                  0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull};
    HashKeys k{};
    for (unsigned i = 0; i < 8; ++i) k.word[i] = seed ^ kMul[i];
    k.seed = seed;
    return k;
  }
  static uint64_t randomSeed() {
    std::random_device rd;
    return uint64_t{rd()} << 32 | rd();
  }
};

}  // namespace dpu
