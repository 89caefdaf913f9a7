// The HTTP(S) listener of the attach API (cpprestsdk http_listener): reads the
// request, refuses bodies over the limit before reading them, and hands the
// rest to the ApiRouter. With TLS files it serves HTTPS and, given a client CA,
// requires and verifies client certificates (mTLS between host-shim and DPU).
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "control/agent_config.h"
#include "control/api_router.h"

namespace web::http::experimental::listener {
class http_listener;
}

namespace dpu::control {

class ApiServer {
 public:
  ApiServer(ApiRouter& router, std::string uri, TlsConfig tls);
  ~ApiServer();
  // Binds and serves; an error names what failed (address in use, unreadable certificate).
  Result<void> start();
  void stop();

 private:
  ApiRouter& router_;
  std::string uri_;
  TlsConfig tls_;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace dpu::control
