// Allocation records on disk (see allocation.h). The record is a JSON line so an
// operator can read it with cat; the lock file is separate so that removing a
// record never races with a waiter holding the lock on the old inode.
#include "host-shim/allocation.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"

namespace fs = std::filesystem;

namespace dpu::hostshim {

namespace {

// Holds an exclusive flock on a per-VF lock file for the scope.
class VfLock {
 public:
  explicit VfLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      error_ = "cannot open lock file " + path + ": " + std::strerror(errno);
      return;
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      error_ = "cannot lock " + path + ": " + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
  ~VfLock() {
    if (fd_ >= 0) ::close(fd_);  // closing drops the flock
  }
  VfLock(const VfLock&) = delete;
  VfLock& operator=(const VfLock&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

std::optional<AllocationRecord> readRecord(const std::string& path) {
  if (!fileExists(path)) return std::nullopt;
  auto text = readFile(path);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  AllocationRecord r;
  r.vf.pf_index = j.value("pf", 0u);
  r.vf.vf_index = j.value("vf", 0u);
  r.owner = j.value("owner", "");
  r.pci_address = j.value("pci", "");
  r.returning = j.value("returning", false);
  r.problem = j.value("problem", "");
  return r;
}

Result<void> writeRecord(const std::string& path, const AllocationRecord& r) {
  nlohmann::json j = {{"pf", r.vf.pf_index}, {"vf", r.vf.vf_index}, {"owner", r.owner}, {"pci", r.pci_address}};
  if (r.returning) j["returning"] = true;
  if (!r.problem.empty()) j["problem"] = r.problem;
  return writeFileAtomic(path, j.dump() + "\n");
}

std::string describeVf(const AllocationRecord& r) {
  return "VF " + std::to_string(r.vf.vf_index) + " of PF " + std::to_string(r.vf.pf_index) + " (" + r.pci_address +
         ")";
}

}  // namespace

AllocationStore::AllocationStore(std::string state_dir) : dir_(std::move(state_dir) + "/vfs") {}

Result<void> AllocationStore::init() { return makeDirectories(dir_); }

Result<void> AllocationStore::claim(const AllocationRecord& record) {
  VfLock lock(dir_ + "/" + record.vf.str() + ".lock");
  if (!lock.ok()) return Error{lock.error()};
  std::string path = dir_ + "/" + record.vf.str() + ".json";
  if (auto existing = readRecord(path)) {
    if (existing->returning)
      return Error{describeVf(record) + " is still returning to the host after the DEL of " + existing->owner +
                       (existing->problem.empty() ? "" : " (" + existing->problem + ")"),
                   ErrorCode::kUnavailable, existing->owner};
    if (existing->owner == record.owner) return {};
    return Error{describeVf(record) + " is held by " + existing->owner, ErrorCode::kConflict, existing->owner};
  }
  AllocationRecord fresh = record;
  fresh.returning = false;
  fresh.problem.clear();
  if (auto w = writeRecord(path, fresh); !w) return Error{w.error()};
  return {};
}

Result<void> AllocationStore::release(const VfKey& vf, const std::string& owner, Release how) {
  VfLock lock(dir_ + "/" + vf.str() + ".lock");
  if (!lock.ok()) return Error{lock.error()};
  std::string path = dir_ + "/" + vf.str() + ".json";
  auto existing = readRecord(path);
  if (!existing) return {};
  if (existing->returning && how != Release::kReturnDone) return {};
  if (!owner.empty() && existing->owner != owner)
    return Error{"VF " + vf.str() + " is held by " + existing->owner + ", not " + owner};
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return Error{"cannot remove " + path + ": " + ec.message()};
  return {};
}

Result<void> AllocationStore::markReturning(const AllocationRecord& record) {
  VfLock lock(dir_ + "/" + record.vf.str() + ".lock");
  if (!lock.ok()) return Error{lock.error()};
  std::string path = dir_ + "/" + record.vf.str() + ".json";
  if (auto existing = readRecord(path); existing && existing->owner != record.owner)
    return Error{describeVf(record) + " is held by " + existing->owner + ", not " + record.owner};
  AllocationRecord r = record;
  r.returning = true;
  return writeRecord(path, r);
}

std::optional<AllocationRecord> AllocationStore::get(const VfKey& vf) const {
  return readRecord(dir_ + "/" + vf.str() + ".json");
}

std::vector<AllocationRecord> AllocationStore::list() const {
  std::vector<AllocationRecord> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".json") continue;
    if (auto r = readRecord(e.path().string())) out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.vf < b.vf; });
  return out;
}

}  // namespace dpu::hostshim
