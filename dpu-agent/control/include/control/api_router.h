// The attach API and the operator endpoints, independent of the HTTP server:
// a request (method, path, headers that matter, body) in, an answer out. The
// cpprestsdk listener (api_server.h) is a thin shell around it, so every rule
// here — body formats, size limit, validation, status codes — is unit-tested
// without sockets.
//
// Bodies: protobuf (Content-Type application/x-protobuf, also the default when
// no Content-Type is given) or JSON (application/json, protobuf's canonical
// JSON mapping; unknown fields are refused so typos do not pass silently).
// Answers use JSON when the Accept header asks for it or the request was JSON,
// protobuf otherwise. Errors carry an ApiError saying what to fix; the
// Agent's Result<T> codes become HTTP statuses here and nowhere else.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <google/protobuf/message.h>

#include "control/agent.h"
#include "control/metrics.h"

namespace dpu::control {

inline constexpr size_t kMaxBodyBytes = 64 * 1024;
inline constexpr const char* kProtobufType = "application/x-protobuf";
inline constexpr const char* kJsonType = "application/json";

enum class BodyFormat { kProtobuf, kJson };

struct ApiRequest {
  std::string method;        // GET, POST, DELETE, ...
  std::string path;          // "/v1/attachments"
  std::string content_type;
  std::string accept;
  std::string body;
};

struct ApiAnswer {
  uint16_t status = 200;
  std::string content_type;
  std::string body;
};

// Which format a Content-Type names; nullopt for anything else.
std::optional<BodyFormat> bodyFormatOf(const std::string& content_type);
BodyFormat answerFormat(const std::string& accept, std::optional<BodyFormat> request_format);
// Fills `out` from the body; on failure says why (kNotSupported: the media
// type, kTooLarge: over kMaxBodyBytes, kInvalid: not the message).
Result<void> parseBody(const ApiRequest& req, google::protobuf::Message& out);
// The HTTP status of a control-plane ErrorCode: the one place the attach API's
// errors become statuses (400, 403, 404, 409, 413, 415, 500, 503, 507).
uint16_t httpStatusOf(ErrorCode code);
std::string encodeBody(const google::protobuf::Message& m, BodyFormat f);

class ApiRouter {
 public:
  struct Hooks {
    std::function<std::string()> not_ready_reason;  // "" when ready
    std::function<std::string()> metrics_text;      // the rest of /metrics
    std::string version = "0.1.0";
  };

  ApiRouter(Agent& agent, Hooks hooks);

  ApiAnswer handle(const ApiRequest& req);
  // An answer the listener gives without routing (a body over the limit, a
  // client certificate of another node): an ApiError in the request's format,
  // counted like every other answer.
  ApiAnswer refuse(const ApiRequest& req, uint16_t status, const std::string& message);
  // Requests answered so far, by HTTP status, and how long they took.
  std::map<uint16_t, uint64_t> statusCounts() const;
  const Histogram& latency() const { return latency_; }

 private:
  ApiAnswer route(const ApiRequest& req);
  ApiAnswer error(uint16_t status, const std::string& message, std::optional<BodyFormat> fmt, const std::string& accept,
                  const std::string& holder = "");
  // An ApiError for a refused operation, its status from the error's code.
  ApiAnswer refusal(const Error& e, std::optional<BodyFormat> fmt, const std::string& accept);
  ApiAnswer message(uint16_t status, const google::protobuf::Message& m, std::optional<BodyFormat> fmt, const std::string& accept);

  Agent& agent_;
  Hooks hooks_;
  Histogram latency_;
  mutable std::mutex mu_;
  std::map<uint16_t, uint64_t> status_counts_;
};

}  // namespace dpu::control
