// The Kubernetes source's one connection to the API server, shared by every
// reflector and the Node publisher (kube_source.cpp puts them together):
// the HTTPS clients (one with the request timeout, one whose inactivity
// timeout outlasts a watch), the bearer token (re-read when the kubelet
// rotates it, dropped after a 401), request building, the API's Status
// answers in words, and cancelling everything in flight on stop.
//
// Private to dpu_control_kube.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <streambuf>
#include <string>

#include <cpprest/http_client.h>

#include "common/result.h"
#include "control/kube_config.h"

namespace dpu::control::kube {

// The last problem any part of the source met, for stats().last_error.
class LastError {
 public:
  void record(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    last_ = e;
  }
  std::string get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  mutable std::mutex mu_;
  std::string last_;
};

class Transport {
 public:
  // Which client carries a request: lists and patches time out after the
  // request timeout; a watch is idle between events, so its client's
  // inactivity timeout outlasts the watch's timeoutSeconds and the server,
  // not us, ends a quiet stream.
  enum class Use { kRequest, kWatch };

  Transport(KubeConnection connection, std::chrono::seconds request_timeout, std::chrono::seconds watch_timeout,
            std::chrono::seconds token_reread, LastError& errors);

  // Starts a request (list pages are pipelined: the next is in flight while
  // one is decoded). A request that cannot even start is a failed task.
  pplx::task<web::http::http_response> start(Use use, const web::http::method& method, const std::string& path,
                                             const std::string& body = "", const std::string& content_type = "");
  // Waits for a started request: the response whatever its status, or an
  // Error naming the server and path. A 401 makes the token be re-read.
  Result<web::http::http_response> await(pplx::task<web::http::http_response>& task, const std::string& path,
                                         Use use = Use::kRequest);
  // start() and await().
  Result<web::http::http_response> send(Use use, const web::http::method& method, const std::string& path,
                                        const std::string& body = "", const std::string& content_type = "");

  // A non-2xx answer in words: "HTTP 403 Forbidden: <the Status message>
  // (RBAC: ...)", with what to check for 401 and 403.
  static std::string httpError(int code, const std::string& body);
  // A response's body as text, "" when it cannot be read.
  static std::string bodyText(web::http::http_response& response);

  // How long a request of `use` may go without a byte from the server (the
  // answer's head, or the next part of its body) before it is given up:
  // cpprestsdk's timer, which closes the connection.
  std::chrono::seconds idleLimit(Use use) const { return use == Use::kWatch ? watch_idle_ : request_idle_; }
  // An error that is that timer's, in words ("" for any other).
  static std::string idleError(const std::exception& e, std::chrono::seconds limit, const char* waiting_for);

  // Ends every request in flight and refuses new ones (the source stops).
  void cancel() { cts_.cancel(); }
  const std::string& server() const { return conn_.server; }
  const std::string& origin() const { return conn_.origin; }

 private:
  web::http::http_request makeRequest(const web::http::method& method, const std::string& path,
                                      const std::string& body, const std::string& content_type);
  std::unique_ptr<web::http::client::http_client> makeClient(std::chrono::seconds timeout) const;

  KubeConnection conn_;
  std::chrono::seconds request_idle_, watch_idle_;
  KubeTokenSource token_;
  LastError& errors_;
  std::unique_ptr<web::http::client::http_client> client_;
  std::unique_ptr<web::http::client::http_client> watch_client_;
  pplx::cancellation_token_source cts_;
};

// A std::streambuf over a response body that hands out whatever has arrived
// instead of waiting for a full buffer (producer_consumer_buffer::getn waits
// for `count` bytes, which would stall a watch stream until 64 KiB of events
// pile up).
class BodyStreamBuf : public std::streambuf {
 public:
  // `idle_limit`: the transport's for the request (Transport::idleLimit), to
  // say so when its timer ends the body.
  BodyStreamBuf(const concurrency::streams::istream& body, std::chrono::seconds idle_limit)
      : body_(body.streambuf()), idle_limit_(idle_limit) {}

  // Blocks until at least one byte arrived; 0 at the end of the body or on error.
  size_t readSome(char* dst, size_t cap);
  const std::string& error() const { return error_; }
  // Reads until `n` bytes (or the whole body, if shorter) are buffered and
  // returns them without consuming them.
  std::string_view peek(size_t n);

 protected:
  int_type underflow() override;

 private:
  concurrency::streams::streambuf<uint8_t> body_;
  std::chrono::seconds idle_limit_;
  char buf_[64 * 1024];
  std::string error_;
};

// A request in flight that may be given up (a prefetched page whose token
// turned out wrong, or a list abandoned on error or stop). pplx terminates the
// process when a failed task's exception is never observed, so an abandoned
// one gets a continuation that observes it.
class PendingResponse {
 public:
  PendingResponse() = default;
  PendingResponse(const PendingResponse&) = delete;
  PendingResponse& operator=(const PendingResponse&) = delete;
  ~PendingResponse() { abandon(); }

  void set(pplx::task<web::http::http_response> task) {
    abandon();
    task_ = std::move(task);
    live_ = true;
  }
  // Hands the task over to be waited on.
  pplx::task<web::http::http_response>& take() {
    live_ = false;
    return task_;
  }
  void abandon();

 private:
  pplx::task<web::http::http_response> task_;
  bool live_ = false;
};

}  // namespace dpu::control::kube
