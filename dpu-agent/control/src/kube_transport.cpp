// The Kubernetes source's connection to the API server (see kube_transport.h).
#include "kube_transport.h"

#include <cstring>

#include <boost/asio/ssl.hpp>

#include "control/kube_objects.h"

namespace dpu::control::kube {

namespace http = web::http;
using web::http::client::http_client;
using web::http::client::http_client_config;

Transport::Transport(KubeConnection connection, std::chrono::seconds request_timeout,
                     std::chrono::seconds watch_timeout, std::chrono::seconds token_reread, LastError& errors)
    : conn_(std::move(connection)),
      request_idle_(request_timeout),
      watch_idle_(watch_timeout + std::chrono::seconds(30)),
      token_(conn_, token_reread),
      errors_(errors) {
  client_ = makeClient(request_idle_);
  watch_client_ = makeClient(watch_idle_);
}

std::string Transport::idleError(const std::exception& e, std::chrono::seconds limit, const char* waiting_for) {
  const auto* http_error = dynamic_cast<const http::http_exception*>(&e);
  if (http_error == nullptr || http_error->error_code() != std::errc::timed_out) return "";
  return std::string(waiting_for) + " within " + std::to_string(limit.count()) +
         " s (the API server, or a proxy in between, holds the request; the connection is closed)";
}

std::unique_ptr<http_client> Transport::makeClient(std::chrono::seconds timeout) const {
  http_client_config cfg;
  cfg.set_timeout(timeout);
  cfg.set_validate_certificates(!conn_.insecure_skip_tls_verify);
  std::string ca = conn_.ca_pem, cert = conn_.client_cert_pem, key = conn_.client_key_pem;
  cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
    if (!ca.empty()) ctx.add_certificate_authority(boost::asio::buffer(ca.data(), ca.size()));
    if (!cert.empty()) {
      ctx.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
      ctx.use_private_key(boost::asio::buffer(key.data(), key.size()), boost::asio::ssl::context::pem);
    }
  });
  return std::make_unique<http_client>(web::uri(conn_.server), cfg);
}

std::string Transport::httpError(int code, const std::string& body) {
  KubeStatus st = parseKubeStatus(body);
  std::string s = "HTTP " + std::to_string(code);
  if (!st.reason.empty()) s += " " + st.reason;
  if (!st.message.empty()) s += ": " + st.message;
  if (code == 401) s += " (the bearer token was refused; check the service-account token or kubeconfig user)";
  if (code == 403) s += " (RBAC: the agent's ClusterRole must allow list/watch on this resource)";
  return s;
}

std::string Transport::bodyText(http::http_response& response) {
  try {
    return response.extract_utf8string(true).get();
  } catch (const std::exception&) {
    return {};
  }
}

http::http_request Transport::makeRequest(const http::method& method, const std::string& path, const std::string& body,
                                          const std::string& content_type) {
  http::http_request req(method);
  req.set_request_uri(web::uri(path));
  std::string terr;
  std::string tok = token_.token(&terr);
  if (!terr.empty()) errors_.record("re-reading the token: " + terr);
  if (!tok.empty()) req.headers().add(http::header_names::authorization, "Bearer " + tok);
  req.headers().add(http::header_names::accept, "application/json");
  if (!content_type.empty()) {
    // A byte vector, not a string: set_body(std::string) reinterprets a char
    // stream buffer as a uint8_t one inside cpprestsdk, which UBSan rejects.
    // The Content-Type set first is kept.
    req.headers().add(http::header_names::content_type, content_type);
    req.set_body(std::vector<unsigned char>(body.begin(), body.end()));
  }
  return req;
}

pplx::task<http::http_response> Transport::start(Use use, const http::method& method, const std::string& path,
                                                 const std::string& body, const std::string& content_type) {
  try {
    http_client& client = use == Use::kWatch ? *watch_client_ : *client_;
    return client.request(makeRequest(method, path, body, content_type), cts_.get_token());
  } catch (...) {
    return pplx::task_from_exception<http::http_response>(std::current_exception());
  }
}

Result<http::http_response> Transport::await(pplx::task<http::http_response>& task, const std::string& path,
                                             Use use) {
  try {
    auto resp = task.get();
    if (resp.status_code() == http::status_codes::Unauthorized) token_.invalidate();
    return resp;
  } catch (const std::exception& e) {
    std::string idle = idleError(e, idleLimit(use), "no answer");
    return Error{conn_.server + path + ": " + (idle.empty() ? e.what() : idle), ErrorCode::kUnavailable};
  }
}

Result<http::http_response> Transport::send(Use use, const http::method& method, const std::string& path,
                                            const std::string& body, const std::string& content_type) {
  auto task = start(use, method, path, body, content_type);
  return await(task, path, use);
}

size_t BodyStreamBuf::readSome(char* dst, size_t cap) {
  try {
    size_t avail = body_.in_avail();
    size_t want = avail == 0 ? 1 : std::min(avail, cap);
    return body_.getn(reinterpret_cast<uint8_t*>(dst), want).get();
  } catch (const std::exception& e) {
    std::string idle = Transport::idleError(e, idle_limit_, "no more of the answer");
    error_ = idle.empty() ? e.what() : idle;
    return 0;
  }
}

std::string_view BodyStreamBuf::peek(size_t n) {
  n = std::min(n, sizeof buf_);
  size_t have = static_cast<size_t>(egptr() - gptr());
  if (have == 0) {
    setg(buf_, buf_, buf_);
  } else if (gptr() != buf_) {
    std::memmove(buf_, gptr(), have);
    setg(buf_, buf_, buf_ + have);
  }
  while (have < n) {
    size_t got = readSome(buf_ + have, n - have);
    if (got == 0) break;
    have += got;
    setg(buf_, buf_, buf_ + have);
  }
  return std::string_view(buf_, have);
}

BodyStreamBuf::int_type BodyStreamBuf::underflow() {
  size_t n = readSome(buf_, sizeof buf_);
  if (n == 0) return traits_type::eof();
  setg(buf_, buf_, buf_ + n);
  return traits_type::to_int_type(buf_[0]);
}

void PendingResponse::abandon() {
  if (!live_) return;
  live_ = false;
  task_.then([](pplx::task<http::http_response> t) {
    try {
      t.get();
    } catch (...) {
    }
  });
}

}  // namespace dpu::control::kube
