// host-shim's CNI server: the unix socket dpu-cni talks to. One CniRequest and
// one CniResponse per connection (proto/dpu/cni/v1/cni.proto, framed by
// common/ipc.h); each connection is served on its own thread so ADDs for
// different pods run concurrently and a slow DPU never blocks STATUS.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "common/ipc.h"
#include "common/result.h"
#include "host-shim/attach_service.h"

namespace dpu::hostshim {

class CniServer {
 public:
  CniServer(AttachService& service, std::string socket_path, uint32_t request_timeout_ms);
  Result<void> listen();
  // Serves until stop() is called (from any thread), then waits for the
  // requests in flight to finish.
  void serve();
  void stop() { stopping_ = true; }

 private:
  void serveOne(ipc::Socket conn);

  AttachService& service_;
  std::string path_;
  uint32_t timeout_ms_;
  ipc::Socket listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
};

}  // namespace dpu::hostshim
