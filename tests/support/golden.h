// Golden packets: byte strings produced by an independent implementation
// (scapy) and committed under tests/**/golden/*.golden, one per line:
//   <name> <hex bytes>
// Blank lines and lines starting with '#' are ignored. The scripts beside the
// files regenerate them; `golden_up_to_date` in ctest checks they still match.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpu::test {

inline std::vector<uint8_t> fromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else continue;
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

inline std::string toHex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

inline std::string toHex(const std::vector<uint8_t>& v) { return toHex(v.data(), v.size()); }

// Loads the packet `name` from `file`, a path relative to the repository root
// (e.g. "tests/overlay/golden/packets.golden"). Throws if it is missing: a test
// that cannot find its golden must fail, not pass vacuously.
inline std::vector<uint8_t> golden(const std::string& file, const std::string& name) {
  std::ifstream in(std::string(DPU_SOURCE_DIR) + "/" + file);
  if (!in) throw std::runtime_error("golden file not found: " + file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string key, hex;
    ls >> key >> hex;
    if (key == name) return fromHex(hex);
  }
  throw std::runtime_error("golden packet '" + name + "' not in " + file);
}

}  // namespace dpu::test
