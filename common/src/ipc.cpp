// Framed unix-socket IPC with deadlines (see ipc.h).
#include "common/ipc.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/atomic_file.h"

namespace dpu::ipc {
namespace {

std::string errnoText() { return std::strerror(errno); }

int remainingMs(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
}

// Waits until fd is ready for `events`; false on timeout or error (errno set).
bool waitFor(int fd, short events, Deadline d) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remainingMs(d));
    if (n > 0) return true;
    if (n == 0) {
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) return false;
  }
}

Result<sockaddr_un> addressOf(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return Error{"socket path " + path + " is longer than " + std::to_string(sizeof addr.sun_path - 1) +
                 " bytes: choose a shorter path"};
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}
Socket::~Socket() { close(); }
int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}
void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> connectUnix(const std::string& path, Deadline deadline) {
  auto addr = addressOf(path);
  if (!addr) return std::move(addr).takeError();
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return Error{"socket(): " + errnoText()};
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) {
      return Error{"cannot connect to " + path + ": " + errnoText()};
    }
    if (!waitFor(s.fd(), POLLOUT, deadline)) return Error{"cannot connect to " + path + ": " + errnoText()};
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Error{"cannot connect to " + path + ": " + std::strerror(err)};
  }
  return s;
}

Result<Socket> listenUnix(const std::string& path, unsigned mode, int backlog) {
  auto addr = addressOf(path);
  if (!addr) return std::move(addr).takeError();
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (auto r = makeDirectories(path.substr(0, slash), 0755); !r) return std::move(r).takeError();
  }
  if (fileExists(path)) {
    // A live listener answers a connect; a stale file from a dead process does not.
    auto probe = connectUnix(path, after(std::chrono::milliseconds(200)));
    if (probe) return Error{"another process is already listening on " + path};
    ::unlink(path.c_str());
  }
  Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return Error{"socket(): " + errnoText()};
  // The socket appears at `path` with its mode, never more open: it is bound
  // under a temporary name (bind gives the file the socket inode's mode less
  // the umask, so fchmod first: never more than `mode`), set to exactly
  // `mode` there, then renamed into place, which connect() follows.
  // A path too long for a temporary name beside it is bound in place: still
  // never more open than `mode`, and chmod'ed to it at once.
  static std::atomic<unsigned> serial{0};
  const std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
  std::string tmp = dir + "/.sock" + std::to_string(::getpid()) + "." + std::to_string(serial++);
  auto tmp_addr = addressOf(tmp);
  if (!tmp_addr) tmp = path;
  auto bind_addr = tmp == path ? addr : tmp_addr;
  if (tmp != path) ::unlink(tmp.c_str());
  if (::fchmod(s.fd(), mode) != 0) return Error{"cannot set the mode of the socket for " + path + ": " + errnoText()};
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&*bind_addr), sizeof *bind_addr) != 0) {
    return Error{"cannot bind " + path + ": " + errnoText()};
  }
  if (::chmod(tmp.c_str(), mode) != 0 || (tmp != path && ::rename(tmp.c_str(), path.c_str()) != 0)) {
    Error e{"cannot put the socket in place at " + path + ": " + errnoText()};
    ::unlink(tmp.c_str());
    return e;
  }
  if (::listen(s.fd(), backlog) != 0) return Error{"cannot listen on " + path + ": " + errnoText()};
  return s;
}

Result<Socket> acceptUnix(const Socket& listener, Deadline deadline) {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) return Socket(fd);
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Error{"accept(): " + errnoText()};
    if (!waitFor(listener.fd(), POLLIN, deadline)) {
      if (errno == ETIMEDOUT) return Socket();
      return Error{"accept(): " + errnoText()};
    }
  }
}

Result<void> sendFrame(const Socket& s, std::string_view payload, Deadline deadline) {
  if (payload.size() > UINT32_MAX) return Error{"frame too large"};
  uint32_t n = static_cast<uint32_t>(payload.size());
  uint8_t header[4] = {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 8),
                       static_cast<uint8_t>(n)};
  // Header and payload in one sendmsg: a reader polling with a short deadline
  // then finds a whole frame, not a header whose payload is still in this
  // process (preempted between two sends on a loaded machine).
  size_t sent = 0;
  const size_t total = 4 + payload.size();
  while (sent < total) {
    iovec iov[2];
    int count = 0;
    if (sent < 4) iov[count++] = {header + sent, 4 - sent};
    const size_t from = sent < 4 ? 0 : sent - 4;
    if (from < payload.size()) iov[count++] = {const_cast<char*>(payload.data()) + from, payload.size() - from};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t w = ::sendmsg(s.fd(), &msg, MSG_NOSIGNAL);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(s.fd(), POLLOUT, deadline)) return Error{"send timed out"};
      continue;
    }
    return Error{"send failed: " + errnoText()};
  }
  return {};
}

namespace {

// Reads exactly n bytes; `started` says whether a partial frame was already read.
Result<void> readExactly(const Socket& s, char* out, size_t n, Deadline d, bool started) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(s.fd(), out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      if (got == 0 && !started) return Error{"peer closed the connection", ErrorCode::kClosed};
      return Error{"peer closed the connection in the middle of a message"};
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFor(s.fd(), POLLIN, d)) {
        // kTimeout means "nothing came, ask again"; a frame cut off in the
        // middle cannot be asked for again (the next read would take its
        // rest for a header), so that one is an error of its own.
        if (errno == ETIMEDOUT && started) return Error{"timed out in the middle of a message"};
        if (errno == ETIMEDOUT) return Error{"timed out waiting for the peer", ErrorCode::kTimeout};
        return Error{"poll failed: " + errnoText()};
      }
      continue;
    }
    return Error{"recv failed: " + errnoText()};
  }
  return {};
}

}  // namespace

Result<std::string> recvFrame(const Socket& s, Deadline deadline, size_t max_size) {
  uint8_t header[4];
  if (auto r = readExactly(s, reinterpret_cast<char*>(header), 4, deadline, false); !r) return std::move(r).takeError();
  size_t n = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) | (size_t{header[2]} << 8) | header[3];
  if (n > max_size) {
    return Error{"message of " + std::to_string(n) + " bytes exceeds the limit of " + std::to_string(max_size),
                 ErrorCode::kTooLarge};
  }
  std::string payload(n, '\0');
  // The frame has begun: its rest gets at least a second, whatever the
  // caller's (possibly short, polling) deadline.
  const Deadline rest = std::max(deadline, after(std::chrono::seconds(1)));
  if (auto r = readExactly(s, payload.data(), n, rest, true); !r) return std::move(r).takeError();
  return payload;
}

Result<PeerCredentials> peerCredentials(const Socket& s) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(s.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Error{"SO_PEERCRED: " + errnoText()};
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

}  // namespace dpu::ipc
