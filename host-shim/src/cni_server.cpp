// The CNI server loop (see cni_server.h).
#include "host-shim/cni_server.h"

#include <unistd.h>

#include <thread>

#include "common/ipc_proto.h"
#include "common/log.h"
#include "host-shim/cni_errors.h"

namespace dpu::hostshim {

CniServer::CniServer(AttachService& service, std::string socket_path, uint32_t request_timeout_ms)
    : service_(service), path_(std::move(socket_path)), timeout_ms_(request_timeout_ms) {}

Result<void> CniServer::listen() {
  auto l = ipc::listenUnix(path_, 0660);
  if (!l) return prefixed("socket " + path_, std::move(l).takeError());
  listener_ = std::move(*l);
  return {};
}

void CniServer::serve() {
  using namespace std::chrono_literals;
  while (!stopping_) {
    auto conn = ipc::acceptUnix(listener_, ipc::after(200ms));
    if (!conn) {
      DPU_LOG(kError, "host-shim") << "accept: " << conn.error();
      std::this_thread::sleep_for(50ms);
      continue;
    }
    if (!conn->valid()) continue;
    {
      std::lock_guard lk(mu_);
      ++in_flight_;
    }
    std::thread([this, c = std::move(*conn)]() mutable {
      serveOne(std::move(c));
      {
        std::lock_guard lk(mu_);
        --in_flight_;
      }
      cv_.notify_all();
    }).detach();
  }
  listener_.close();
  ::unlink(path_.c_str());
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms_), [&] { return in_flight_ == 0; });
}

void CniServer::serveOne(ipc::Socket conn) {
  auto deadline = ipc::after(std::chrono::milliseconds(timeout_ms_));
  cni::v1::CniRequest req;
  ipc::Frame f = ipc::recvMessage(conn, req, deadline);
  cni::v1::CniResponse resp;
  if (f.failure == ipc::RecvFailure::kClosed) return;
  if (!f.ok())
    resp = cniError(CniCode::kDecodeFailure, "cannot read the request",
                    f.error + "; dpu-cni and host-shim must be the same version");
  else
    resp = service_.handle(req);
  if (resp.has_error()) {
    DPU_LOG(kWarn, "host-shim") << cni::v1::Command_Name(req.command())
                                << (req.container_id().empty() ? "" : " " + req.container_id() + "/" + req.ifname())
                                << ": code " << resp.error().code() << " " << resp.error().msg() << ": "
                                << resp.error().details();
  }
  if (auto s = ipc::sendMessage(conn, resp, deadline); !s) {
    DPU_LOG(kWarn, "host-shim") << "cannot answer " << cni::v1::Command_Name(req.command()) << ": " << s.error();
  }
}

}  // namespace dpu::hostshim
