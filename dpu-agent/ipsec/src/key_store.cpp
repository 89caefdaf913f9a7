// The node's key pairs on disk (see key_store.h).
#include "ipsec/key_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/config_doc.h"

namespace dpu::ipsec {
namespace {

constexpr int kVersion = 1;

std::string modeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

KeyStore::KeyStore(std::string path, std::string node_name) : path_(std::move(path)), node_(std::move(node_name)) {}

const OwnKey* KeyStore::find(uint32_t epoch) const {
  for (const auto& k : keys_) {
    if (k.epoch == epoch) return &k;
  }
  return nullptr;
}

std::string KeyStore::format(const std::string& node, const std::vector<OwnKey>& keys) {
  // The caller wipes the returned text once written.
  std::string out = "{\"version\": " + std::to_string(kVersion) + ", \"node\": " + nlohmann::json(node).dump() +
                    ", \"keys\": [";
  for (size_t i = 0; i < keys.size(); ++i) {
    SecretBytes priv(keys[i].pair.private_key.begin(), keys[i].pair.private_key.end());
    out += std::string(i ? ", " : "") + "{\"epoch\": " + std::to_string(keys[i].epoch) + ", \"privateKey\": \"" +
           base64Encode(priv) + "\"}";
  }
  out += "]}\n";
  return out;
}

Result<std::vector<OwnKey>> KeyStore::parse(const std::string& text, const std::string& node) {
  // The parser's own message would quote the text around the error, which
  // may be a private key: only that it failed is said.
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return Error{"is not a JSON object", ErrorCode::kInvalid};
  const nlohmann::json* doc = &parsed;
  FieldReader r(*doc, "key file");
  const uint64_t version = r.uint("version", 1, 1000);
  if (r.ok() && version != kVersion) {
    r.fail("version", "is " + std::to_string(version) + "; this dpu-agent reads version " + std::to_string(kVersion));
  }
  const std::string owner = r.str("node");
  if (r.ok() && owner != node) {
    r.fail("node", "names node \"" + owner + "\", not this node \"" + node +
                       "\": the state directory belongs to another node");
  }
  std::vector<OwnKey> keys;
  std::set<uint32_t> epochs;
  for (auto& k : r.objects("keys", true)) {
    OwnKey key;
    key.epoch = static_cast<uint32_t>(k.uint("epoch", 1, 0xffffffffu));
    const std::string b64 = k.str("privateKey");
    if (k.ok() && !epochs.insert(key.epoch).second) k.fail("epoch", std::to_string(key.epoch) + " is listed twice");
    if (k.ok()) {
      auto raw = base64Decode(b64);
      if (!raw) k.fail("privateKey", raw.error());
      else if (raw->size() != kX25519KeySize)
        k.fail("privateKey", "is " + std::to_string(raw->size()) + " bytes; an X25519 private key is 32");
      else std::copy(raw->begin(), raw->end(), key.pair.private_key.begin());
    }
    if (k.ok()) {
      auto pub = x25519PublicKey(key.pair.private_key);
      if (!pub) k.fail("privateKey", pub.error());
      else key.pair.public_key = *pub;
    }
    if (auto done = k.finish(); !done) return Error{done.error(), ErrorCode::kInvalid};
    keys.push_back(std::move(key));
  }
  if (r.ok() && keys.empty()) r.fail("keys", "is empty; a key file holds at least the current key pair");
  if (auto done = r.finish(); !done) return Error{done.error(), ErrorCode::kInvalid};
  std::sort(keys.begin(), keys.end(), [](const OwnKey& a, const OwnKey& b) { return a.epoch < b.epoch; });
  return keys;
}

Result<void> KeyStore::load() {
  keys_.clear();
  const std::string fix = "; fix or restore it, or delete it to make a new key pair (every peer then derives new SAs "
                          "for this node once it publishes the new public key)";
  // O_NOFOLLOW: the file is ours, written in place; a symlink there is not.
  int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP) return Error{"IPsec key file " + path_ + " is a symbolic link" + fix, ErrorCode::kInvalid};
    return Error{"cannot open IPsec key file " + path_ + ": " + std::strerror(errno)};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return Error{"cannot stat IPsec key file " + path_ + ": " + why};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{"IPsec key file " + path_ + " is not a regular file" + fix, ErrorCode::kInvalid};
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return Error{"IPsec key file " + path_ + " belongs to uid " + std::to_string(st.st_uid) + ", not to this agent (uid " +
                     std::to_string(::geteuid()) + "): chown it, or delete it to make a new key pair",
                 ErrorCode::kForbidden};
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return Error{"IPsec key file " + path_ + " has mode " + modeText(st.st_mode) +
                     ": it holds private keys and must be readable by its owner only; chmod 600 it (and treat "
                     "the keys as exposed: delete the file to make a new key pair)",
                 ErrorCode::kForbidden};
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      wipe({reinterpret_cast<uint8_t*>(text.data()), text.size()});
      return Error{"cannot read IPsec key file " + path_ + ": " + why};
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  wipe({reinterpret_cast<uint8_t*>(buf), sizeof buf});
  ::close(fd);
  auto parsed = parse(text, node_);
  wipe({reinterpret_cast<uint8_t*>(text.data()), text.size()});
  if (!parsed) return Error{"IPsec key file " + path_ + ": " + parsed.error() + fix, ErrorCode::kInvalid};
  keys_ = std::move(*parsed);
  return {};
}

Result<void> KeyStore::save(const std::vector<OwnKey>& keys) const {
  std::string text = format(node_, keys);
  auto written = writeFileAtomic(path_, text, 0600);
  wipe({reinterpret_cast<uint8_t*>(text.data()), text.size()});
  if (!written) return prefixed("writing the IPsec key file", std::move(written).takeError());
  return {};
}

Result<uint32_t> KeyStore::addNew(uint32_t min_epoch) {
  const uint32_t newest = newestEpoch();
  if (newest == 0xffffffffu) return Error{"the key epoch is at its maximum (2^32-1)", ErrorCode::kExhausted};
  const uint32_t epoch = std::max(newest + 1, std::max(min_epoch, 1u));
  auto pair = generateX25519();
  if (!pair) return std::move(pair).takeError();
  std::vector<OwnKey> next = keys_;
  OwnKey k;
  k.epoch = epoch;
  k.pair = *pair;
  next.push_back(std::move(k));
  if (auto saved = save(next); !saved) return std::move(saved).takeError();
  keys_ = std::move(next);
  return epoch;
}

Result<void> KeyStore::remove(uint32_t epoch) {
  std::vector<OwnKey> next;
  for (const auto& k : keys_) {
    if (k.epoch != epoch) next.push_back(k);
  }
  if (next.size() == keys_.size()) return {};
  if (auto saved = save(next); !saved) return saved;
  keys_ = std::move(next);
  return {};
}

}  // namespace dpu::ipsec
