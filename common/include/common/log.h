// Logging for the daemons and tools (never for the per-packet path). One line
// per event: "<RFC 3339 UTC time> <level> <component>: <message>", to stderr or
// to a file the config names. Thread-safe; a line is written whole.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dpu::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Process-wide settings. setFile("") returns to stderr.
void setLevel(Level level);
Level level();
Result<void> setFile(const std::string& path);
Result<Level> parseLevel(std::string_view name);

void write(Level level, std::string_view component, std::string_view message);

// DPU_LOG(kInfo, "host-shim") << "attached " << id;
class Line {
 public:
  Line(Level level, std::string_view component) : level_(level), component_(component) {}
  ~Line() { write(level_, component_, stream_.str()); }
  template <typename T>
  Line& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  Level level_;
  std::string_view component_;
  std::ostringstream stream_;
};

}  // namespace dpu::log

#define DPU_LOG(lvl, component)                                 \
  if (::dpu::log::Level::lvl < ::dpu::log::level()) {           \
  } else                                                        \
    ::dpu::log::Line(::dpu::log::Level::lvl, component)
