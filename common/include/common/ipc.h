// Local IPC over unix stream sockets: dpu-cni → host-shim, dpu-agent →
// dpu-dataplane, dpuctl → dpu-dataplane. Each message is framed as a 4-byte
// big-endian length and the payload (a serialized protobuf, see ipc_proto.h).
// Every blocking call takes a deadline, so a dead or wedged peer turns into an
// error the caller can report ("host-shim did not answer within 5 s"), never a
// hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dpu::ipc {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline after(std::chrono::milliseconds d) { return Clock::now() + d; }

// Largest frame either side accepts unless told otherwise.
inline constexpr size_t kDefaultMaxFrame = 16u << 20;

// An owned socket descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void close();

 private:
  int fd_ = -1;
};

Result<Socket> connectUnix(const std::string& path, Deadline deadline);
// Binds and listens; replaces a stale socket file left by a dead process, but
// refuses when another process is still listening on it. Creates the parent
// directory. The socket file appears with `mode` (bound under a temporary
// name, then renamed into place): there is no moment it is more open.
Result<Socket> listenUnix(const std::string& path, unsigned mode = 0660, int backlog = 128);
// Waits for a connection until the deadline; an invalid Socket on timeout.
Result<Socket> acceptUnix(const Socket& listener, Deadline deadline);

Result<void> sendFrame(const Socket& s, std::string_view payload, Deadline deadline);
// One frame's payload, or why none came, by its code: kClosed — the peer
// closed cleanly between frames (normal for a server loop); kTimeout — the
// deadline passed before a frame began (ask again); kTooLarge — the length is
// over `max_size`; kFailed — the connection broke or stalled mid-frame (a
// begun frame's rest gets at least a second past the deadline) or the socket
// failed.
Result<std::string> recvFrame(const Socket& s, Deadline deadline, size_t max_size = kDefaultMaxFrame);

// The peer's pid/uid/gid (SO_PEERCRED), for logs and access checks.
struct PeerCredentials {
  int pid = -1;
  unsigned uid = 0;
  unsigned gid = 0;
};
Result<PeerCredentials> peerCredentials(const Socket& s);

}  // namespace dpu::ipc
