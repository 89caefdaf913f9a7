// Status: the outcome of a parse or transform in the overlay library.
//
// The datapath never throws: every function on the packet path returns a
// Status, and every non-Ok value is a drop reason with a counter and a text.
// The list lives in status.def so the enum, the texts and the counters agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dpu::overlay {

enum class Status : uint8_t {
#define X(name, text) k##name,
#include "overlay/status.def"
#undef X
};

inline constexpr size_t kStatusCount = 0
#define X(name, text) +1
#include "overlay/status.def"
#undef X
    ;

// The operator-facing text of a status ("ok" for kOk).
std::string_view statusText(Status s);
// The short machine name ("Truncated"), for counters and metrics labels.
std::string_view statusName(Status s);

}  // namespace dpu::overlay
