// Reading and writing the agent checkpoint (see checkpoint.h).
#include "control/checkpoint.h"

#include "common/atomic_file.h"

namespace dpu::control {

Result<std::optional<::dpu::checkpoint::v1::AgentCheckpoint>> loadAgentCheckpoint(const std::string& path) {
  if (!fileExists(path)) return std::optional<::dpu::checkpoint::v1::AgentCheckpoint>{};
  auto bytes = readFile(path);
  if (!bytes) return std::move(bytes).takeError();
  ::dpu::checkpoint::v1::AgentCheckpoint cp;
  if (!cp.ParseFromString(*bytes)) {
    return Error{"checkpoint " + path + " is corrupt (" + std::to_string(bytes->size()) + " bytes do not parse)"};
  }
  if (cp.version() != kAgentCheckpointVersion) {
    return Error{"checkpoint " + path + " has version " + std::to_string(cp.version()) + ", this agent reads version " +
                 std::to_string(kAgentCheckpointVersion)};
  }
  if (cp.boot_id().empty()) return Error{"checkpoint " + path + " has no boot id"};
  return std::optional<::dpu::checkpoint::v1::AgentCheckpoint>(std::move(cp));
}

Result<void> saveAgentCheckpoint(const std::string& path, const ::dpu::checkpoint::v1::AgentCheckpoint& cp) {
  std::string bytes;
  if (!cp.SerializeToString(&bytes)) return Error{"cannot serialize the agent checkpoint"};
  if (auto w = writeFileAtomic(path, bytes); !w) return prefixed("writing checkpoint " + path, std::move(w).takeError());
  return {};
}

}  // namespace dpu::control
