// One request at a time per attachment key: CNI runtimes may send an ADD and
// a DEL of one attachment close together (a retry, a repair), and host-shim's
// own work on an attachment (GC, a replay after a DPU reboot) must not run
// under a verb in flight. Requests for different keys run concurrently.
#pragma once

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

namespace dpu::hostshim {

class KeyLocks {
 public:
  // Holds the key for its scope; waits while another holds it.
  class Guard {
   public:
    Guard(KeyLocks& locks, std::string key);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    KeyLocks& locks_;
    std::string key_;
  };

  Guard lock(std::string key) { return Guard(*this, std::move(key)); }
  bool busy(const std::string& key) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> busy_;
};

}  // namespace dpu::hostshim
