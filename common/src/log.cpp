// Line-at-a-time logging to stderr or a file (see log.h).
#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>

namespace dpu::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
int g_fd = STDERR_FILENO;

const char* levelName(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "?";
}

}  // namespace

void setLevel(Level level) { g_level.store(level, std::memory_order_relaxed); }
Level level() { return g_level.load(std::memory_order_relaxed); }

Result<Level> parseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error") return Level::kError;
  return Error{"unknown log level \"" + std::string(name) + "\": use debug, info, warn or error"};
}

Result<void> setFile(const std::string& path) {
  std::lock_guard lock(g_mutex);
  int fd = STDERR_FILENO;
  if (!path.empty()) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) return Error{"cannot open log file " + path + ": " + std::strerror(errno)};
  }
  if (g_fd != STDERR_FILENO) ::close(g_fd);
  g_fd = fd;
  return {};
}

void write(Level lvl, std::string_view component, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[40];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line;
  line.reserve(64 + component.size() + message.size());
  line += stamp;
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03dZ ", static_cast<int>(ms));
  line += frac;
  line += levelName(lvl);
  line += ' ';
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  std::lock_guard lock(g_mutex);
  // One write() per line so concurrent processes appending to one file interleave whole lines.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(g_fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace dpu::log
