// ipsec-derive: the C++ side of the independent check of the IPsec key
// derivation (ipsec_python_check.sh). A test tool: it prints SA keys, which
// nothing in the product ever does.
//
//   ipsec-derive make-keys KEYFILE NODE COUNT      a key file with epochs 1..COUNT (the agent's format)
//   ipsec-derive derive NODE=KEYFILE NODE=KEYFILE [--psk FILE] [--key-bits 128|256]
//       one JSON line per direction and pair of epochs, computed by the sender
//       and checked against the receiver's own computation:
//       {"from","to","sender_epoch","receiver_epoch","spi","key","salt"} (hex)
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "ipsec/derive.h"
#include "ipsec/key_store.h"
#include "ipsec/psk.h"

using namespace dpu::ipsec;

namespace {

int usage() {
  std::cerr << "usage: ipsec-derive make-keys KEYFILE NODE COUNT\n"
               "       ipsec-derive derive NODE=KEYFILE NODE=KEYFILE [--psk FILE] [--key-bits 128|256]\n";
  return 2;
}

struct Side {
  std::string node;
  std::unique_ptr<KeyStore> keys;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "make-keys") {
    KeyStore ks(args[1], args[2]);
    if (auto r = ks.load(); !r) {
      std::cerr << r.error() << "\n";
      return 1;
    }
    for (int i = 0; i < std::stoi(args[3]); ++i) {
      if (auto e = ks.addNew(); !e) {
        std::cerr << e.error() << "\n";
        return 1;
      }
    }
    return 0;
  }
  if (args.size() < 3 || args[0] != "derive") return usage();
  std::vector<Side> sides;
  SecretBytes psk;
  KeySize size = KeySize::k128;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--psk" && i + 1 < args.size()) {
      auto p = loadPsk(args[++i]);
      if (!p) {
        std::cerr << p.error() << "\n";
        return 1;
      }
      psk = p->bytes;
    } else if (args[i] == "--key-bits" && i + 1 < args.size()) {
      size = args[++i] == "256" ? KeySize::k256 : KeySize::k128;
    } else if (auto eq = args[i].find('='); eq != std::string::npos) {
      Side s;
      s.node = args[i].substr(0, eq);
      s.keys = std::make_unique<KeyStore>(args[i].substr(eq + 1), s.node);
      if (auto r = s.keys->load(); !r) {
        std::cerr << r.error() << "\n";
        return 1;
      }
      sides.push_back(std::move(s));
    } else {
      return usage();
    }
  }
  if (sides.size() != 2) return usage();
  for (int from = 0; from < 2; ++from) {
    const Side& s = sides[from];
    const Side& r = sides[1 - from];
    for (const auto& sk : s.keys->keys()) {
      for (const auto& rk : r.keys->keys()) {
        PairInputs at_sender{s.node, sk.epoch, sk.pair.private_key, r.node, rk.epoch, rk.pair.public_key, psk, size};
        PairInputs at_receiver{r.node, rk.epoch, rk.pair.private_key, s.node, sk.epoch, sk.pair.public_key, psk, size};
        auto out = derivePairKeys(at_sender);
        auto in = derivePairKeys(at_receiver);
        if (!out || !in) {
          std::cerr << (out ? in.error() : out.error()) << "\n";
          return 1;
        }
        if (out->outbound.key != in->inbound.key || out->outbound.spi != in->inbound.spi ||
            out->outbound.salt != in->inbound.salt) {
          std::cerr << "the receiver's inbound SA differs from the sender's outbound SA\n";
          return 1;
        }
        char spi[9];
        std::snprintf(spi, sizeof spi, "%08x", out->outbound.spi);
        std::cout << "{\"from\": \"" << s.node << "\", \"to\": \"" << r.node << "\", \"sender_epoch\": " << sk.epoch
                  << ", \"receiver_epoch\": " << rk.epoch << ", \"spi\": \"" << spi << "\", \"key\": \""
                  << hex(out->outbound.key) << "\", \"salt\": \"" << hex(out->outbound.salt) << "\"}\n";
      }
    }
  }
  return 0;
}
