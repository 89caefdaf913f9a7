// The active and slot locks of dpu-dataplane (takeover.h).
#include "datapath/takeover.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/atomic_file.h"

namespace dpu::datapath {
namespace {

std::string errnoText(int err) { return std::strerror(err); }

// Opens (creating) a lock file beside the socket; -1 with `error` set.
int openLockFile(const std::string& path, std::string& error) {
  if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    if (auto made = makeDirectories(path.substr(0, slash), 0755); !made) {
      error = made.error();
      return -1;
    }
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) error = "cannot open " + path + ": " + errnoText(errno);
  return fd;
}

// 0: taken; EWOULDBLOCK: held by another process; else the errno.
int tryLock(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno; }

}  // namespace

HeldLock& HeldLock::operator=(HeldLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

HeldLock::~HeldLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> HeldLock::publish(const std::string& text) {
  if (fd_ < 0) return Error{"no lock held"};
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return Error{"cannot write " + path_ + ": " + errnoText(errno)};
  }
  return {};
}

std::string activeLockPath(const std::string& programming_socket) { return programming_socket + ".lock"; }

int activeLockOwner(const std::string& programming_socket) {
  int fd = ::open(activeLockPath(programming_socket).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  return n > 0 ? std::atoi(buf) : 0;
}

Result<HeldLock> acquireActive(const std::string& programming_socket) {
  const std::string path = activeLockPath(programming_socket);
  std::string error;
  int fd = openLockFile(path, error);
  if (fd < 0) return Error{error};
  if (int err = tryLock(fd); err != 0) {
    ::close(fd);
    if (err != EWOULDBLOCK) return Error{"cannot lock " + path + ": " + errnoText(err)};
    const int owner = activeLockOwner(programming_socket);
    return Error{"another dpu-dataplane" + (owner > 0 ? " (pid " + std::to_string(owner) + ")" : std::string()) +
                     " is active for " + programming_socket + " (it holds " + path +
                     "); stop it, or start this one with --standby to take over when it exits",
                 ErrorCode::kConflict};
  }
  return HeldLock(fd, path);
}

Result<HeldLock> waitForActive(const std::string& programming_socket, const std::atomic<bool>& stop,
                               std::chrono::milliseconds check) {
  const std::string path = activeLockPath(programming_socket);
  std::string error;
  int fd = openLockFile(path, error);
  if (fd < 0) return Error{error};
  if (int err = tryLock(fd); err == 0) {
    return HeldLock(fd, path);
  } else if (err != EWOULDBLOCK) {
    ::close(fd);
    return Error{"cannot lock " + path + ": " + errnoText(err)};
  }
  // A blocking flock on its own thread wakes the instant the holder exits;
  // this thread only watches `stop` (a signal may land on any thread, so
  // EINTR cannot be relied on to end the wait).
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(fd);
    return Error{"pipe: " + errnoText(errno)};
  }
  std::thread([fd, done = pipe_fds[1]] {
    // Nobody may read any more (the caller stopped): EPIPE, not a SIGPIPE
    // for the process. The lock, if it came, then goes with the descriptor.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    const char got = rc == 0 ? 1 : 0;
    if (::write(done, &got, 1) != 1) ::close(fd);
    ::close(done);
  }).detach();
  while (!stop.load()) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(check.count())) <= 0) continue;
    char got = 0;
    const bool read_one = ::read(pipe_fds[0], &got, 1) == 1;
    ::close(pipe_fds[0]);
    if (read_one && got == 1) return HeldLock(fd, path);
    ::close(fd);
    return Error{"cannot lock " + path};
  }
  // Stopped while waiting: the waiting thread closes `fd` when the lock comes
  // and nobody reads (or the process exits first).
  ::close(pipe_fds[0]);
  return Error{"stopped while waiting for the active dataplane to exit", ErrorCode::kClosed};
}

Result<Slot> claimSlot(const std::string& programming_socket) {
  std::string error;
  for (const char* name : {"a", "b"}) {
    const std::string path = programming_socket + ".slot-" + name;
    int fd = openLockFile(path, error);
    if (fd < 0) return Error{error};
    if (int err = tryLock(fd); err == 0) {
      return Slot{HeldLock(fd, path), name};
    } else if (err != EWOULDBLOCK) {
      ::close(fd);
      return Error{"cannot lock " + path + ": " + errnoText(err)};
    }
    ::close(fd);
  }
  return Error{"two dpu-dataplane processes (an active one and a standby) run already for " + programming_socket +
                   " (they hold its .slot-a and .slot-b locks); stop one before starting another",
               ErrorCode::kConflict};
}

}  // namespace dpu::datapath
