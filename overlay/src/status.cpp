// Texts for Status, generated from status.def so the list is written once.
#include "overlay/status.h"

#include <array>

namespace dpu::overlay {
namespace {

constexpr std::array<std::string_view, kStatusCount> kTexts = {
#define X(name, text) text,
#include "overlay/status.def"
#undef X
};

constexpr std::array<std::string_view, kStatusCount> kNames = {
#define X(name, text) #name,
#include "overlay/status.def"
#undef X
};

}  // namespace

std::string_view statusText(Status s) {
  auto i = static_cast<size_t>(s);
  return i < kTexts.size() ? kTexts[i] : std::string_view("unknown status");
}

std::string_view statusName(Status s) {
  auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : std::string_view("Unknown");
}

}  // namespace dpu::overlay
