// Per-key serialization (see key_locks.h).
#include "host-shim/key_locks.h"

namespace dpu::hostshim {

KeyLocks::Guard::Guard(KeyLocks& locks, std::string key) : locks_(locks), key_(std::move(key)) {
  std::unique_lock lk(locks_.mu_);
  locks_.cv_.wait(lk, [&] { return !locks_.busy_.count(key_); });
  locks_.busy_.insert(key_);
}

KeyLocks::Guard::~Guard() {
  {
    std::lock_guard lk(locks_.mu_);
    locks_.busy_.erase(key_);
  }
  locks_.cv_.notify_all();
}

bool KeyLocks::busy(const std::string& key) const {
  std::lock_guard lk(mu_);
  return busy_.count(key) > 0;
}

}  // namespace dpu::hostshim
