// Who of two dpu-dataplane processes on one node is active: the locks that
// let a warm standby take over the instant the active one dies.
//
// A restart's outage used to be mostly the new process's start (EAL loading
// its PMDs and calibrating the TSC, the mbuf pool): a standby does that work
// ahead of time, then waits for the active lock. The active dataplane holds
// an flock on `<programming socket>.lock` for its whole life; the kernel
// releases it when the process exits, however it exits (SIGKILL included),
// so the standby wakes at once, opens the ports, binds the sockets and takes
// the agent's resync. No port is opened and no stale XDP program detached
// before the lock is held: two processes never own a port at once.
//
// Each process also holds one of two slots (`<programming socket>.slot-a`,
// `.slot-b`) for its whole life; the slot names its EAL --file-prefix, so the
// active and the standby never share a DPDK runtime directory, and a third
// dataplane for the same sockets is refused.
//
// Pure (flock on files beside the socket); no DPDK.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "common/result.h"

namespace dpu::datapath {

// An flock held on a file; released when this is destroyed or the process exits.
class HeldLock {
 public:
  HeldLock() = default;
  HeldLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  HeldLock(HeldLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  HeldLock& operator=(HeldLock&& o) noexcept;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock();

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // Writes `text` as the file's whole content (who holds it, for operators and the lab).
  Result<void> publish(const std::string& text);

 private:
  int fd_ = -1;
  std::string path_;
};

// `<programming socket>.lock`.
std::string activeLockPath(const std::string& programming_socket);
// The pid an active dataplane wrote into its lock file (0: none readable).
int activeLockOwner(const std::string& programming_socket);

// The active lock, now or never: an error naming the running dataplane when another holds it.
Result<HeldLock> acquireActive(const std::string& programming_socket);
// Waits for the active lock (a standby): a blocking flock on a thread of its
// own, so it returns the instant the holder exits. Returns an error with code
// kClosed when `stop` is set first (checked every `check`); the lock may then
// still come to the waiting thread, which gives it up at once, or at worst
// holds it until the process exits (call this in a process that exits when stopped).
Result<HeldLock> waitForActive(const std::string& programming_socket, const std::atomic<bool>& stop,
                               std::chrono::milliseconds check = std::chrono::milliseconds(100));

struct Slot {
  HeldLock lock;
  std::string name;  // "a" or "b"
};
// Slot a, else slot b; an error when both are held (two dataplanes run already).
Result<Slot> claimSlot(const std::string& programming_socket);

}  // namespace dpu::datapath
