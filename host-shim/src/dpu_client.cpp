// cpprestsdk client for the attach API. cpprestsdk reports transport failures
// (refused, timeout, TLS) as exceptions; they stop here and become
// ErrorCode::kUnavailable errors so nothing escapes the library.
//
// The request timeout is ours, not cpprestsdk's: each call waits for its
// answer, body included, until its own deadline and then cancels the request.
// cpprestsdk's timer (set a second later, to close what a cancel leaves) was
// seen to fire only when a hanging agent let the connection go, 20 s late.
#include "host-shim/dpu_client.h"

#include <google/protobuf/util/json_util.h>

#include <cpprest/http_client.h>

#include <chrono>
#include <future>

namespace dpu::hostshim {

namespace http = web::http;

struct DpuClient::Impl {
  std::unique_ptr<http::client::http_client> client;
  std::string init_error;
  std::chrono::milliseconds timeout{0};
};

DpuClient::DpuClient(const DpuConfig& config) : url_(config.url), impl_(std::make_unique<Impl>()) {
  impl_->timeout = std::chrono::milliseconds(config.request_timeout_ms);
  http::client::http_client_config cfg;
  cfg.set_timeout(impl_->timeout + std::chrono::seconds(1));
  if (!config.ca_file.empty() || !config.cert_file.empty()) {
    std::string ca = config.ca_file, cert = config.cert_file, key = config.key_file;
    cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
      if (!ca.empty()) ctx.load_verify_file(ca);
      if (!cert.empty()) {
        ctx.use_certificate_chain_file(cert);
        ctx.use_private_key_file(key, boost::asio::ssl::context::pem);
      }
    });
  }
  try {
    impl_->client = std::make_unique<http::client::http_client>(utility::conversions::to_string_t(config.url), cfg);
  } catch (const std::exception& e) {
    impl_->init_error = std::string("bad DPU URL ") + config.url + ": " + e.what();
  }
}

DpuClient::~DpuClient() = default;

ErrorCode errorCodeForHttpStatus(unsigned status) {
  switch (status) {
    case 403: return ErrorCode::kForbidden;
    case 404: return ErrorCode::kNotFound;
    case 409: return ErrorCode::kConflict;
    case 413: return ErrorCode::kTooLarge;
    case 507: return ErrorCode::kExhausted;
    default: break;
  }
  // 5xx (overloaded, not ready) is worth retrying later; 4xx is our request.
  return status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInvalid;
}

namespace {

// A failure with no answer from the agent (transport), as opposed to an
// answer with a status: only those are retried on a fresh connection.
struct Attempt {
  bool answered = false;
  bool late = false;  // our deadline passed: the caller's bound is spent
};

// Whether `task` finished by `deadline`; if not, the request is cancelled
// (cpprestsdk closes its connection). The continuation observes the task's
// outcome, so an abandoned task's exception never reaches pplx's handler for
// unobserved exceptions, which terminates the process.
template <typename T>
bool finishedBy(const pplx::task<T>& task, std::chrono::steady_clock::time_point deadline,
                pplx::cancellation_token_source& cancel) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  task.then([done](pplx::task<T> t) {
    try {
      (void)t.get();
    } catch (...) {
    }
    done->set_value();
  });
  if (finished.wait_until(deadline) == std::future_status::ready) return true;
  cancel.cancel();
  return false;
}

template <typename Reply>
Result<Reply> callOnce(DpuClient::Impl& impl, const std::string& url, const http::method& method,
                       const std::string& path, const google::protobuf::Message* body, Attempt& attempt) {
  auto unreachable = [](std::string msg) { return Error{std::move(msg), ErrorCode::kUnavailable}; };
  if (!impl.client) return unreachable(impl.init_error);
  const auto deadline = std::chrono::steady_clock::now() + impl.timeout;
  auto late = [&](const char* waiting_for) {
    attempt.late = true;
    return unreachable("the DPU agent at " + url + " is unreachable (" + std::string(method) + " " + path + ": " +
                       waiting_for + " within " + std::to_string(impl.timeout.count()) + " ms)");
  };
  try {
    http::http_request req(method);
    req.set_request_uri(utility::conversions::to_string_t(path));
    if (body) {
      std::string bytes;
      body->SerializeToString(&bytes);
      req.set_body(std::vector<unsigned char>(bytes.begin(), bytes.end()));
      req.headers().set_content_type(U("application/x-protobuf"));
    }
    req.headers().add(U("Accept"), U("application/x-protobuf"));
    pplx::cancellation_token_source cancel;
    pplx::task<http::http_response> answer = impl.client->request(req, cancel.get_token());
    if (!finishedBy(answer, deadline, cancel)) return late("no answer");
    http::http_response resp = answer.get();
    attempt.answered = true;
    pplx::task<std::vector<unsigned char>> body_read = resp.extract_vector();
    if (!finishedBy(body_read, deadline, cancel)) return late("no whole answer");
    std::vector<unsigned char> data = body_read.get();
    std::string bytes(data.begin(), data.end());
    bool json = resp.headers().content_type().find(U("json")) != utility::string_t::npos;
    unsigned status = resp.status_code();
    if (status >= 200 && status < 300) {
      Reply reply;
      bool parsed =
          json ? google::protobuf::util::JsonStringToMessage(bytes, &reply).ok() : reply.ParseFromString(bytes);
      if (!parsed)
        return Error{
            "the DPU agent at " + url + " answered " + path + " with a body that is not a " + reply.GetTypeName(),
            ErrorCode::kInvalid};
      return reply;
    }
    attach::v1::ApiError err;
    bool parsed = json ? google::protobuf::util::JsonStringToMessage(bytes, &err).ok() : err.ParseFromString(bytes);
    std::string msg = parsed && !err.message().empty() ? err.message() : bytes.substr(0, 200);
    std::string text = "the DPU agent at " + url + " answered " + std::to_string(status) + " to " +
                       std::string(method) + " " + path + ": " + msg;
    ErrorCode code = errorCodeForHttpStatus(status);
    return Error{std::move(text), code, code == ErrorCode::kConflict && parsed ? err.holder() : std::string()};
  } catch (const http::http_exception& e) {
    return unreachable("the DPU agent at " + url + " is unreachable (" + std::string(method) + " " + path + ": " +
                       e.what() +
                       // Codes past errno's range are OpenSSL's (a TLS failure), which strerror cannot name.
                       (e.error_code().value() < 4096 ? ", " + e.error_code().message() : ", TLS error") + ")");
  } catch (const std::exception& e) {
    return unreachable("the DPU agent at " + url + " is unreachable (" + std::string(method) + " " + path + ": " +
                       e.what() + ")");
  }
}

// A transport failure that comes at once is most often a kept-alive
// connection the agent closed when it restarted ("Broken pipe" on the first
// write): one more try on a fresh connection. Every call of the attach API is
// idempotent (attach answers a retried sandbox+ifname the same), so a request
// that did arrive does no harm twice. A timeout is not retried: the caller's
// bound (an ADD fails within a few seconds when the DPU hangs) stays.
template <typename Reply>
Result<Reply> call(DpuClient::Impl& impl, const std::string& url, const http::method& method,
                   const std::string& path, const google::protobuf::Message* body) {
  const auto start = std::chrono::steady_clock::now();
  Attempt attempt;
  Result<Reply> out = callOnce<Reply>(impl, url, method, path, body, attempt);
  if (!out && !attempt.answered && !attempt.late && impl.client &&
      std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500)) {
    attempt = {};
    out = callOnce<Reply>(impl, url, method, path, body, attempt);
  }
  return out;
}

}  // namespace

Result<attach::v1::AttachResponse> DpuClient::attach(const attach::v1::AttachRequest& r) {
  return call<attach::v1::AttachResponse>(*impl_, url_, http::methods::POST, "/v1/attachments", &r);
}

Result<attach::v1::DetachResponse> DpuClient::detach(const attach::v1::DetachRequest& r) {
  return call<attach::v1::DetachResponse>(*impl_, url_, http::methods::POST, "/v1/attachments:detach", &r);
}

Result<attach::v1::AttachmentList> DpuClient::list() {
  return call<attach::v1::AttachmentList>(*impl_, url_, http::methods::GET, "/v1/attachments", nullptr);
}

Result<attach::v1::AttachResponse> DpuClient::get(const std::string& id) {
  return call<attach::v1::AttachResponse>(*impl_, url_, http::methods::GET,
                                          "/v1/attachments/" + utility::conversions::to_utf8string(
                                                                   web::uri::encode_data_string(id)),
                                          nullptr);
}

Result<attach::v1::Health> DpuClient::health() {
  return call<attach::v1::Health>(*impl_, url_, http::methods::GET, "/v1/health", nullptr);
}

Result<attach::v1::ReconcileResponse> DpuClient::reconcile(const attach::v1::ReconcileRequest& r) {
  return call<attach::v1::ReconcileResponse>(*impl_, url_, http::methods::POST, "/v1/attachments:reconcile", &r);
}

}  // namespace dpu::hostshim
