// A field of /proc/PID/status in kB (VmRSS:, VmHWM:, ...): the benches' memory
// figures. PID "self" for the bench's own process; -1 when it is not there.
#pragma once

#include <cstring>
#include <fstream>
#include <string>

namespace dpu::bench {

inline long procStatusKb(const std::string& pid, const char* field) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return -1;
}

}  // namespace dpu::bench
