// The cluster PSK file (see psk.h).
#include "ipsec/psk.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/atomic_file.h"

namespace dpu::ipsec {

Result<Psk> parsePsk(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return Error{"is empty", ErrorCode::kInvalid};
  auto raw = base64Decode(std::string_view(text).substr(first, last - first + 1));
  if (!raw) {
    return Error{"must hold the PSK as one line of base64 (e.g. the output of `openssl rand -base64 32`): it " +
                     raw.error(),
                 ErrorCode::kInvalid};
  }
  if (raw->size() < kMinPskBytes || raw->size() > kMaxPskBytes) {
    return Error{"decodes to " + std::to_string(raw->size()) + " bytes; a PSK is " + std::to_string(kMinPskBytes) +
                     " to " + std::to_string(kMaxPskBytes) + " random bytes (`openssl rand -base64 32`)",
                 ErrorCode::kInvalid};
  }
  Psk psk;
  psk.bytes = std::move(*raw);
  static constexpr std::string_view kIdLabel = "dpu-cni ipsec v1 psk id";
  SecretBytes labelled(kIdLabel.begin(), kIdLabel.end());
  labelled.insert(labelled.end(), psk.bytes.begin(), psk.bytes.end());
  const auto digest = sha256(labelled);
  psk.id = hex(std::span(digest).first(8));
  return psk;
}

Result<Psk> loadPsk(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Error{"IPsec PSK file " + path + ": " + std::strerror(errno) +
                     " (create it with `openssl rand -base64 32`, or leave pskFile out to run without a PSK)",
                 errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kFailed};
  }
  if (!S_ISREG(st.st_mode)) return Error{"IPsec PSK file " + path + " is not a regular file", ErrorCode::kInvalid};
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Error{"IPsec PSK file " + path + " has mode " + mode +
                     ": group or others may write it, and whoever writes it sets the cluster's key; chmod go-w it "
                     "(in Kubernetes, the Secret volume's defaultMode: 0400)",
                 ErrorCode::kForbidden};
  }
  auto text = readFile(path);
  if (!text) return std::move(text).takeError();
  auto psk = parsePsk(*text);
  wipe({reinterpret_cast<uint8_t*>(text->data()), text->size()});
  if (!psk) return Error{"IPsec PSK file " + path + " " + psk.error(), ErrorCode::kInvalid};
  return psk;
}

std::string pskFileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing:" + std::to_string(errno);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace dpu::ipsec
