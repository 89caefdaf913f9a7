// The HTTP(S) listener of the attach API (cpprestsdk http_listener): reads the
// request, refuses a body over kMaxBodyBytes while reading it (413, and the
// connection closes: a declared Content-Length is refused before any of it is
// read, a chunked body as soon as its running total passes the limit), and
// hands the rest to the ApiRouter. With TLS files it serves HTTPS and, given a
// client CA, requires and verifies client certificates (mTLS between host-shim
// and DPU); `client_node` set, the certificate must also name that node (the
// host node this agent serves) in its CN or a DNS subjectAltName, or the
// handshake fails and the log names the expected and the presented names.
// The metrics listener (config `metrics.listen`) is a second ApiServer with
// Scope::kMetricsOnly: it answers GET /metrics, /healthz and /readyz and 404
// for everything else, so the attach API never becomes reachable from the
// network the scraper is on.
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
  enum class Scope { kAll, kMetricsOnly };
  ApiServer(ApiRouter& router, std::string uri, TlsConfig tls, Scope scope = Scope::kAll, std::string client_node = "");
  ~ApiServer();
  // Binds and serves; an error names what failed (address in use, unreadable certificate).
  Result<void> start();
  void stop();

 private:
  ApiRouter& router_;
  std::string uri_;
  TlsConfig tls_;
  Scope scope_;
  std::string client_node_;
  bool metrics_only() const { return scope_ == Scope::kMetricsOnly; }
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

}  // namespace dpu::control
