// host-shim's checkpoint (dpu.checkpoint.v1.HostShimCheckpoint): every
// attachment with the VF snapshot needed to undo it and the DPU answer needed
// to replay it, written atomically after each change.
#pragma once

#include <string>

#include "common/result.h"
#include "dpu/checkpoint/v1/checkpoint.pb.h"

namespace dpu::hostshim {

inline constexpr uint32_t kCheckpointVersion = 1;

// A missing file is an empty checkpoint; an unreadable or foreign one is an
// error naming the file (host-shim then refuses to start rather than forget pods).
Result<checkpoint::v1::HostShimCheckpoint> loadCheckpoint(const std::string& path);
Result<void> saveCheckpoint(const std::string& path, const checkpoint::v1::HostShimCheckpoint& c);

}  // namespace dpu::hostshim
