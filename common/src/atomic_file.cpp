// Crash-safe file replacement (see atomic_file.h).
#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace dpu {
namespace {

std::string errnoText() { return std::strerror(errno); }

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Result<void> makeDirectories(const std::string& path, unsigned mode) {
  if (path.empty()) return {};
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return Error{"cannot create directory " + partial + ": " + errnoText()};
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error{path + " exists and is not a directory"};
  }
  return {};
}

Result<void> writeFileAtomic(const std::string& path, std::string_view content, unsigned mode) {
  std::string dir = parentOf(path);
  if (auto r = makeDirectories(dir); !r) return r;
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Error{"cannot create " + tmp + ": " + errnoText()};
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = errnoText();
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error{"cannot write " + tmp + ": " + why};
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    std::string why = errnoText();
    ::close(fd);
    ::unlink(tmp.c_str());
    return Error{"cannot fsync " + tmp + ": " + why};
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errnoText();
    ::unlink(tmp.c_str());
    return Error{"cannot rename " + tmp + " to " + path + ": " + why};
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself must reach the disk
    ::close(dfd);
  }
  return {};
}

Result<std::string> readFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open " + path + ": " + errnoText()};
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = errnoText();
      ::close(fd);
      return Error{"cannot read " + path + ": " + why};
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool fileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace dpu
