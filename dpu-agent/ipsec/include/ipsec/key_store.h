// The node's own X25519 key pairs, one per key epoch, kept in one file in the
// agent's IPsec state directory: made on first start, loaded on every later
// start, a new one added at each rotation, the old one removed when its grace
// period is over. The private keys never leave this file and the process.
//
// The file (JSON; docs/ipsec.md, "Key file", and the independent check
// tests/dpu-agent/ipsec/ipsec_keys.py read it):
//
//   {"version": 1, "node": "node-a",
//    "keys": [{"epoch": 1, "privateKey": "<base64 of the 32-byte X25519 scalar>"}, ...]}
//
// It is written with common/atomic_file (temporary file, fsync, rename, fsync
// of the directory) with mode 0600 in a 0700 directory. Loading refuses, with a
// message saying what to do, a file that is not a regular file of ours, one
// that group or others may read or write, one of another node, and any
// malformed content: a key file is never half-used or silently replaced,
// because a new key pair changes every SA the peers hold for this node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "ipsec/crypto.h"

namespace dpu::ipsec {

struct OwnKey {
  uint32_t epoch = 0;
  X25519KeyPair pair;
};

class KeyStore {
 public:
  KeyStore(std::string path, std::string node_name);

  // Loads the file. A missing file is an empty store (first start); anything
  // else that is wrong is an error naming the file and what to do.
  Result<void> load();

  // The keys, oldest epoch first.
  const std::vector<OwnKey>& keys() const { return keys_; }
  const OwnKey* find(uint32_t epoch) const;
  uint32_t newestEpoch() const { return keys_.empty() ? 0 : keys_.back().epoch; }

  // Makes a key pair for epoch max(newest + 1, min_epoch) and writes the file
  // before returning it; on a write error nothing changes.
  Result<uint32_t> addNew(uint32_t min_epoch = 1);
  // Removes epoch `epoch` and rewrites the file (nothing when absent).
  Result<void> remove(uint32_t epoch);

  const std::string& path() const { return path_; }

  // The file's text for `keys`, and its parse: exposed for tests.
  static std::string format(const std::string& node, const std::vector<OwnKey>& keys);
  static Result<std::vector<OwnKey>> parse(const std::string& text, const std::string& node);

 private:
  Result<void> save(const std::vector<OwnKey>& keys) const;

  std::string path_;
  std::string node_;
  std::vector<OwnKey> keys_;
};

}  // namespace dpu::ipsec
