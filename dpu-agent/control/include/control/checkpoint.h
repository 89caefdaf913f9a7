// The agent's checkpoint (proto dpu.checkpoint.v1.AgentCheckpoint): its
// attachments, port keys, recently released addresses and boot id, written
// atomically (common/atomic_file.h) before the API answers, so whatever a
// client was told survives kill -9.
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "dpu/checkpoint/v1/checkpoint.pb.h"

namespace dpu::control {

inline constexpr uint32_t kAgentCheckpointVersion = 1;

// std::nullopt when there is no checkpoint (first start); an error when the
// file exists but cannot be used (corrupt, wrong version) — the caller then
// starts with a new boot id, so clients replay their attachments.
Result<std::optional<::dpu::checkpoint::v1::AgentCheckpoint>> loadAgentCheckpoint(const std::string& path);
Result<void> saveAgentCheckpoint(const std::string& path, const ::dpu::checkpoint::v1::AgentCheckpoint& cp);

}  // namespace dpu::control
