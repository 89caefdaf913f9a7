// Checkpoint file I/O (see checkpoint.h).
#include "host-shim/checkpoint.h"

#include "common/atomic_file.h"

namespace dpu::hostshim {

Result<checkpoint::v1::HostShimCheckpoint> loadCheckpoint(const std::string& path) {
  checkpoint::v1::HostShimCheckpoint c;
  if (!fileExists(path)) {
    c.set_version(kCheckpointVersion);
    return c;
  }
  auto bytes = readFile(path);
  if (!bytes) return std::move(bytes).takeError();
  if (!c.ParseFromString(*bytes))
    return Error{"checkpoint " + path +
                 " is not a HostShimCheckpoint; move it away to start without it (pods "
                 "attached before will then need a DEL by hand)"};
  if (c.version() != kCheckpointVersion)
    return Error{"checkpoint " + path + " has version " + std::to_string(c.version()) + ", this host-shim reads " +
                 std::to_string(kCheckpointVersion)};
  return c;
}

Result<void> saveCheckpoint(const std::string& path, const checkpoint::v1::HostShimCheckpoint& c) {
  std::string bytes;
  if (!c.SerializeToString(&bytes)) return Error{"cannot serialize the checkpoint"};
  return writeFileAtomic(path, bytes);
}

}  // namespace dpu::hostshim
