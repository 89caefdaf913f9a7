// The optional cluster pre-shared key: a file the agent reads (in Kubernetes a
// Secret mounted only into the DPU side), mixed into every pair derivation, so
// that whoever can write Node annotations but does not hold the PSK cannot
// derive any SA (WireGuard's PSK plays the same role).
//
// The file holds the PSK as one line of standard base64 (what
// `openssl rand -base64 32` or `wg genpsk` prints) of 32 to 64 bytes;
// surrounding whitespace is ignored. The agent re-reads it when its identity
// changes (a Secret update swaps a symlink), and a new PSK starts a new epoch.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "ipsec/crypto.h"

namespace dpu::ipsec {

inline constexpr size_t kMinPskBytes = 32;
inline constexpr size_t kMaxPskBytes = 64;

struct Psk {
  SecretBytes bytes;
  // A public name for this PSK: the first 8 bytes of
  // SHA-256("dpu-cni ipsec v1 psk id" || PSK), hex. Says whether two
  // nodes (or two starts) hold the same PSK without saying anything of it.
  std::string id;
};

// Reads and checks the file; the error names the file and what to fix, and
// never quotes its content. Refused: not a regular file (after symlinks), or
// writable by group or others (whoever can write it can change the cluster's key).
Result<Psk> loadPsk(const std::string& path);
// The PSK from its text (the file's content).
Result<Psk> parsePsk(const std::string& text);

// What loadPsk would read changed since `stamp` (device, inode, size, mtime of
// the target): a cheap poll for a Secret update.
std::string pskFileStamp(const std::string& path);

}  // namespace dpu::ipsec
