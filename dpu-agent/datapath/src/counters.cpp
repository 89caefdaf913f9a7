// Names and texts of the drop reasons and events, from the one list.
#include "counters.h"

#include <array>

namespace dpu::datapath {
namespace {

constexpr std::array<std::string_view, kDropReasonCount> kDropNames = {
#define X(name, text) #name,
#include "overlay/status.def"
#undef X
#define DROP(name, text) #name,
#define EVENT(name, text)
#include "counters.def"
#undef DROP
#undef EVENT
};
constexpr std::array<std::string_view, kDropReasonCount> kDropTexts = {
#define X(name, text) text,
#include "overlay/status.def"
#undef X
#define DROP(name, text) text,
#define EVENT(name, text)
#include "counters.def"
#undef DROP
#undef EVENT
};
constexpr std::array<std::string_view, kEventCount> kEventNames = {
#define DROP(name, text)
#define EVENT(name, text) #name,
#include "counters.def"
#undef DROP
#undef EVENT
};
constexpr std::array<std::string_view, kEventCount> kEventTexts = {
#define DROP(name, text)
#define EVENT(name, text) text,
#include "counters.def"
#undef DROP
#undef EVENT
};

}  // namespace

std::string_view dropReasonName(DropReason r) {
  const auto i = static_cast<size_t>(r);
  return i < kDropReasonCount ? kDropNames[i] : "Unknown";
}
std::string_view dropReasonText(DropReason r) {
  const auto i = static_cast<size_t>(r);
  return i < kDropReasonCount ? kDropTexts[i] : "unknown reason";
}
std::string_view eventName(Event e) {
  const auto i = static_cast<size_t>(e);
  return i < kEventCount ? kEventNames[i] : "Unknown";
}
std::string_view eventText(Event e) {
  const auto i = static_cast<size_t>(e);
  return i < kEventCount ? kEventTexts[i] : "unknown event";
}

}  // namespace dpu::datapath
