// The CNI server loop (see cni_server.h).
#include "host-shim/cni_server.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/ipc_proto.h"
#include "common/log.h"
#include "host-shim/cni_errors.h"

namespace dpu::hostshim {

namespace {

constexpr const char* kLog = "host-shim";
constexpr auto kRequestReadTimeout = std::chrono::milliseconds(5000);
// Connections being answered "refused" or "busy" at once.
constexpr uint32_t kMaxTurningAway = 16;

}  // namespace

CniServer::CniServer(AttachService& service, CniServerOptions options)
    : service_(service), options_(std::move(options)) {}

Result<void> CniServer::listen() {
  auto l = ipc::listenUnix(options_.socket_path, options_.mode);
  if (!l) return prefixed("socket " + options_.socket_path, std::move(l).takeError());
  // Root's group until now (less open than asked), the configured one from here.
  if (options_.group && ::chown(options_.socket_path.c_str(), static_cast<uid_t>(-1), *options_.group) != 0) {
    Error e{"socket " + options_.socket_path + ": cannot give it group " + std::to_string(*options_.group) + ": " +
            std::strerror(errno) + "; check socketGroup"};
    l->close();
    ::unlink(options_.socket_path.c_str());
    return e;
  }
  listener_ = std::move(*l);
  return {};
}

void CniServer::turnAway(ipc::Socket conn, const cni::v1::CniResponse& resp) {
  // The request is read first (dpu-cni sends it right after connecting), so
  // the answer reaches a client that is still sending; on a thread of its
  // own, so the accept loop never waits. These threads are bounded too:
  // past the bound a connection is closed unanswered (dpu-cni then reports
  // host-shim unreachable, code 11 as well).
  {
    std::lock_guard lk(mu_);
    if (turning_away_ >= kMaxTurningAway) return;
    ++turning_away_;
  }
  std::thread([this, c = std::move(conn), resp]() mutable {
    cni::v1::CniRequest ignored;
    auto deadline = ipc::after(std::chrono::milliseconds(1000));
    (void)ipc::recvMessage(c, ignored, deadline);
    (void)ipc::sendMessage(c, resp, deadline);
    c.close();
    {
      std::lock_guard lk(mu_);
      --turning_away_;
    }
    cv_.notify_all();
  }).detach();
}

void CniServer::serve() {
  using namespace std::chrono_literals;
  while (!stopping_) {
    auto conn = ipc::acceptUnix(listener_, ipc::after(200ms));
    if (!conn) {
      DPU_LOG(kError, kLog) << "accept: " << conn.error();
      std::this_thread::sleep_for(50ms);
      continue;
    }
    if (!conn->valid()) continue;
    auto peer = ipc::peerCredentials(*conn);
    if (!peer || (peer->uid != 0 && !options_.allowed_uids.count(peer->uid))) {
      std::string who = peer ? "uid " + std::to_string(peer->uid) + " (pid " + std::to_string(peer->pid) + ")"
                             : "a peer whose credentials cannot be read (" + peer.error() + ")";
      DPU_LOG(kWarn, kLog) << "refused a CNI request from " << who << " on " << options_.socket_path;
      turnAway(std::move(*conn),
               cniError(CniCode::kPermissionDenied, "not allowed to use host-shim",
                        "host-shim serves CNI requests from root and from the uids in socketAllowedUids only, not " +
                            who + "; run the container runtime as root or add its uid to socketAllowedUids"));
      continue;
    }
    {
      std::unique_lock lk(mu_);
      if (in_flight_ >= options_.max_connections) {
        auto now = std::chrono::steady_clock::now();
        bool log = now - last_busy_log_ >= 1s;
        if (log) last_busy_log_ = now;
        lk.unlock();
        if (log) {
          DPU_LOG(kWarn, kLog) << options_.max_connections
                               << " CNI requests in flight (maxConnections): answering more with try again later";
        }
        turnAway(std::move(*conn), cniError(CniCode::kTryAgainLater, "host-shim is busy",
                                            std::to_string(options_.max_connections) +
                                                " CNI requests are in flight (maxConnections in the host-shim "
                                                "config); the runtime retries"));
        continue;
      }
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
  ::unlink(options_.socket_path.c_str());
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(options_.request_timeout_ms),
               [&] { return in_flight_ == 0 && turning_away_ == 0; });
}

void CniServer::serveOne(ipc::Socket conn) {
  auto start = std::chrono::steady_clock::now();
  cni::v1::CniRequest req;
  auto got = ipc::recvMessage(
      conn, req, start + std::min<std::chrono::milliseconds>(kRequestReadTimeout,
                                                             std::chrono::milliseconds(options_.request_timeout_ms)));
  cni::v1::CniResponse resp;
  if (!got && got.code() == ErrorCode::kClosed) return;
  if (!got)
    resp = cniError(CniCode::kDecodeFailure, "cannot read the request",
                    got.error() + "; dpu-cni and host-shim must be the same version");
  else
    resp = service_.handle(req);
  if (resp.has_error()) {
    DPU_LOG(kWarn, kLog) << cni::v1::Command_Name(req.command())
                         << (req.container_id().empty() ? "" : " " + req.container_id() + "/" + req.ifname())
                         << ": code " << resp.error().code() << " " << resp.error().msg() << ": "
                         << resp.error().details();
  }
  auto deadline = start + std::chrono::milliseconds(options_.request_timeout_ms);
  if (auto s = ipc::sendMessage(conn, resp, deadline); !s) {
    DPU_LOG(kWarn, kLog) << "cannot answer " << cni::v1::Command_Name(req.command()) << ": " << s.error();
  }
}

}  // namespace dpu::hostshim
