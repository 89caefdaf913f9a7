// host-shim's CNI server: the unix socket dpu-cni talks to. One CniRequest and
// one CniResponse per connection (proto/dpu/cni/v1/cni.proto, framed by
// common/ipc.h); each connection is served on its own thread so ADDs for
// different pods run concurrently and a slow DPU never blocks STATUS.
//
// The socket is the host's door into pod networking, so: it appears with its
// mode (socketMode, never more open in between) and takes its group
// (socketGroup) right after, which only ever widens it to what was asked;
// the file's mode is the first gate, the peer's uid the second: each peer's credentials
// (SO_PEERCRED) are checked, root or a uid in socketAllowedUids, anyone else
// answered code 104 without its request being served; and at most maxConnections
// requests are served at once, more are answered 11 (try again later) at once
// rather than piling up threads behind a DPU that hangs. A request must arrive
// within 5 s of the connection (dpu-cni sends it right away).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/ipc.h"
#include "common/result.h"
#include "host-shim/attach_service.h"

namespace dpu::hostshim {

struct CniServerOptions {
  std::string socket_path;
  uint32_t mode = 0660;
  std::optional<uint32_t> group;  // the socket file's group; unset: root's
  std::set<uint32_t> allowed_uids;  // besides root
  uint32_t max_connections = 64;
  uint32_t request_timeout_ms = 15000;
};

class CniServer {
 public:
  CniServer(AttachService& service, CniServerOptions options);
  Result<void> listen();
  // Serves until stop() is called (from any thread), then waits for the
  // requests in flight to finish.
  void serve();
  void stop() { stopping_ = true; }

 private:
  void serveOne(ipc::Socket conn);
  // Answers `resp` without serving the connection (refused or busy).
  void turnAway(ipc::Socket conn, const cni::v1::CniResponse& resp);

  AttachService& service_;
  const CniServerOptions options_;
  ipc::Socket listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  uint32_t in_flight_ = 0;
  uint32_t turning_away_ = 0;
  std::chrono::steady_clock::time_point last_busy_log_{};
};

}  // namespace dpu::hostshim
