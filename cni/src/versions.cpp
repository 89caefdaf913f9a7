// CNI spec versions (see versions.h).
#include "cni/versions.h"

#include <array>
#include <charconv>

namespace dpu::cni {
namespace {

constexpr std::array<std::string_view, 5> kSupported = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

bool parseNumber(std::string_view s, int& out) {
  if (s.empty() || s.size() > 6) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

}  // namespace

std::span<const std::string_view> supportedVersions() { return kSupported; }

std::optional<SpecVersion> parseSpecVersion(std::string_view text) {
  SpecVersion v;
  int* parts[] = {&v.major, &v.minor, &v.patch};
  size_t i = 0;
  while (true) {
    if (i == 3) return std::nullopt;
    size_t dot = text.find('.');
    if (!parseNumber(text.substr(0, dot), *parts[i])) return std::nullopt;
    ++i;
    if (dot == std::string_view::npos) break;
    text.remove_prefix(dot + 1);
  }
  if (i < 2) return std::nullopt;
  return v;
}

bool isSupported(std::string_view version) {
  for (auto v : kSupported) {
    if (v == version) return true;
  }
  return false;
}

std::optional<std::string> highestCommon(const std::vector<std::string>& offered) {
  std::optional<std::string> best;
  SpecVersion best_v;
  for (const auto& o : offered) {
    if (!isSupported(o)) continue;
    auto v = parseSpecVersion(o);
    if (v && (!best || *v > best_v)) {
      best = o;
      best_v = *v;
    }
  }
  return best;
}

ResultShape shapeOf(std::string_view version) {
  if (version == "1.1.0") return ResultShape::k110;
  if (version == "1.0.0") return ResultShape::k100;
  return ResultShape::k040;
}

bool allowsCheck(std::string_view version) {
  auto v = parseSpecVersion(version);
  return v && *v >= SpecVersion{0, 4, 0};
}

}  // namespace dpu::cni
