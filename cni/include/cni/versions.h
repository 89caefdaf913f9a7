// Which CNI spec versions dpu-cni speaks and how a request's version is chosen.
// The result format differs by version (0.3.x/0.4.0: ips carry "version";
// 1.0.0: no "version"; 1.1.0: interfaces may carry mtu/pciID, routes mtu), so
// the negotiated version travels with the request and picks the renderer.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dpu::cni {

// Oldest first. 0.3.x results are shaped as 0.4.0's; CHECK needs 0.4.0 or later.
std::span<const std::string_view> supportedVersions();
inline constexpr std::string_view kNewestVersion = "1.1.0";

struct SpecVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const SpecVersion&) const = default;
};

// "1.0.0" → {1,0,0}; "1.0" is accepted as libcni does; anything else is nullopt.
std::optional<SpecVersion> parseSpecVersion(std::string_view text);
bool isSupported(std::string_view version);
// The highest version in `offered` that we support (CNI 1.1.0 "cniVersions").
std::optional<std::string> highestCommon(const std::vector<std::string>& offered);

// Result shape per version.
enum class ResultShape { k040, k100, k110 };
ResultShape shapeOf(std::string_view version);
bool allowsCheck(std::string_view version);

}  // namespace dpu::cni
