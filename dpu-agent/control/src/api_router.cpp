// The attach API's request handling (see api_router.h).
#include "control/api_router.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <cctype>

namespace dpu::control {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The media type without parameters ("application/json; charset=utf-8" → "application/json").
std::string mediaType(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  return t;
}

const std::string kAttachmentsPrefix = "/v1/attachments/";

}  // namespace

std::optional<BodyFormat> bodyFormatOf(const std::string& content_type) {
  std::string t = mediaType(content_type);
  if (t.empty() || t == kProtobufType || t == "application/protobuf" || t == "application/vnd.google.protobuf" ||
      t == "application/octet-stream") {
    return BodyFormat::kProtobuf;
  }
  if (t == kJsonType) return BodyFormat::kJson;
  return std::nullopt;
}

BodyFormat answerFormat(const std::string& accept, std::optional<BodyFormat> request_format) {
  std::string a = lower(accept);
  bool json = a.find("application/json") != std::string::npos;
  bool proto = a.find("protobuf") != std::string::npos;
  if (json && !proto) return BodyFormat::kJson;
  if (proto && !json) return BodyFormat::kProtobuf;
  return request_format.value_or(BodyFormat::kProtobuf);
}

std::string encodeBody(const google::protobuf::Message& m, BodyFormat f) {
  if (f == BodyFormat::kProtobuf) return m.SerializeAsString();
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out + "\n";
}

Result<void> parseBody(const ApiRequest& req, google::protobuf::Message& out) {
  auto fmt = bodyFormatOf(req.content_type);
  if (!fmt) {
    return Error{"Content-Type '" + req.content_type +
                     "' is not supported: send application/x-protobuf or application/json",
                 ErrorCode::kNotSupported};
  }
  if (req.body.size() > kMaxBodyBytes) {
    return Error{"body of " + std::to_string(req.body.size()) + " bytes is larger than the limit of " +
                     std::to_string(kMaxBodyBytes),
                 ErrorCode::kTooLarge};
  }
  if (*fmt == BodyFormat::kProtobuf) {
    if (!out.ParseFromString(req.body)) {
      return Error{"body is not a valid " + out.GetTypeName() + " protobuf (" + std::to_string(req.body.size()) +
                       " bytes); send a serialized " + out.GetTypeName() +
                       " or JSON with Content-Type application/json",
                   ErrorCode::kInvalid};
    }
    return {};
  }
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(req.body, &out, opts);
  if (!status.ok())
    return Error{"body is not a valid " + out.GetTypeName() + " in JSON: " + std::string(status.message()),
                 ErrorCode::kInvalid};
  return {};
}

uint16_t httpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalid: return 400;
    case ErrorCode::kForbidden: return 403;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kNotSupported: return 415;  // the API's only unsupported thing is a body's media type
    case ErrorCode::kUnavailable:
    case ErrorCode::kTimeout:
    case ErrorCode::kClosed: return 503;
    case ErrorCode::kExhausted: return 507;
    case ErrorCode::kFailed: return 500;
  }
  return 500;
}

ApiRouter::ApiRouter(Agent& agent, Hooks hooks)
    : agent_(agent), hooks_(std::move(hooks)), latency_(Histogram::latencyBounds()) {}

std::map<uint16_t, uint64_t> ApiRouter::statusCounts() const {
  std::lock_guard lock(mu_);
  return status_counts_;
}

ApiAnswer ApiRouter::message(uint16_t status, const google::protobuf::Message& m, std::optional<BodyFormat> fmt,
                             const std::string& accept) {
  BodyFormat f = answerFormat(accept, fmt);
  return ApiAnswer{status, f == BodyFormat::kJson ? kJsonType : kProtobufType, encodeBody(m, f)};
}

ApiAnswer ApiRouter::error(uint16_t status, const std::string& msg, std::optional<BodyFormat> fmt, const std::string& accept,
                           const std::string& holder) {
  attv1::ApiError e;
  e.set_http_status(status);
  e.set_message(msg);
  e.set_holder(holder);
  return message(status, e, fmt, accept);
}

ApiAnswer ApiRouter::refusal(const Error& e, std::optional<BodyFormat> fmt, const std::string& accept) {
  return error(httpStatusOf(e.code), e.message, fmt, accept, e.holder);
}

ApiAnswer ApiRouter::handle(const ApiRequest& req) {
  auto started = std::chrono::steady_clock::now();
  ApiAnswer a;
  try {
    a = route(req);
  } catch (const std::exception& ex) {
    a = error(500, std::string("internal error: ") + ex.what(), std::nullopt, req.accept);
  }
  latency_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::lock_guard lock(mu_);
  ++status_counts_[a.status];
  return a;
}

ApiAnswer ApiRouter::refuse(const ApiRequest& req, uint16_t status, const std::string& msg) {
  std::optional<BodyFormat> fmt = bodyFormatOf(req.content_type);
  ApiAnswer a = error(status, msg, fmt ? fmt : BodyFormat::kJson, req.accept);
  std::lock_guard lock(mu_);
  ++status_counts_[a.status];
  return a;
}

ApiAnswer ApiRouter::route(const ApiRequest& req) {
  const std::string& p = req.path;
  const std::string& m = req.method;
  std::optional<BodyFormat> fmt = bodyFormatOf(req.content_type);
  if (!fmt) fmt = BodyFormat::kJson;  // answer an unreadable request in readable form

  if (p == "/healthz") {
    if (m != "GET") return error(405, "use GET", fmt, req.accept);
    return {200, "text/plain", "ok\n"};
  }
  if (p == "/readyz") {
    if (m != "GET") return error(405, "use GET", fmt, req.accept);
    std::string why = hooks_.not_ready_reason ? hooks_.not_ready_reason() : "";
    if (why.empty()) return {200, "text/plain", "ready\n"};
    return {503, "text/plain", "not ready: " + why + "\n"};
  }
  if (p == "/metrics") {
    if (m != "GET") return error(405, "use GET", fmt, req.accept);
    std::string text = hooks_.metrics_text ? hooks_.metrics_text() : "";
    PromWriter w;
    w.histogram("dpu_agent_api_request_duration_seconds", "Time to answer an API request.", latency_.snapshot());
    std::vector<std::pair<Labels, double>> codes;
    for (const auto& [code, n] : statusCounts()) codes.push_back({{{"code", std::to_string(code)}}, static_cast<double>(n)});
    w.family("dpu_agent_api_requests_total", "counter", "API requests answered, by HTTP status.", codes);
    return {200, "text/plain; version=0.0.4; charset=utf-8", text + w.text()};
  }
  if (p == "/v1/health") {
    if (m != "GET") return error(405, "use GET", fmt, req.accept);
    attv1::Health h;
    h.set_boot_id(agent_.bootId());
    std::string why = hooks_.not_ready_reason ? hooks_.not_ready_reason() : "";
    h.set_ready(why.empty());
    h.set_reason(why);
    h.set_version(hooks_.version);
    h.set_node_name(agent_.config().node_name);
    return message(200, h, std::nullopt, req.accept);
  }
  if (p == "/v1/attachments") {
    if (m == "GET") return message(200, agent_.list(), std::nullopt, req.accept);
    if (m != "POST") return error(405, "use POST to attach or GET to list", fmt, req.accept);
    attv1::AttachRequest ar;
    if (auto bad = parseBody(req, ar); !bad) return refusal(bad.failure(), fmt, req.accept);
    auto r = agent_.attach(ar);
    if (!r.ok()) return refusal(r.failure(), fmt, req.accept);
    return message(200, *r, fmt, req.accept);
  }
  if (p == "/v1/attachments:detach") {
    if (m != "POST") return error(405, "use POST", fmt, req.accept);
    attv1::DetachRequest dr;
    if (auto bad = parseBody(req, dr); !bad) return refusal(bad.failure(), fmt, req.accept);
    auto r = agent_.detach(dr);
    if (!r.ok()) return refusal(r.failure(), fmt, req.accept);
    return message(200, *r, fmt, req.accept);
  }
  if (p == "/v1/attachments:reconcile") {
    if (m != "POST") return error(405, "use POST", fmt, req.accept);
    attv1::ReconcileRequest rr;
    if (auto bad = parseBody(req, rr); !bad) return refusal(bad.failure(), fmt, req.accept);
    auto r = agent_.reconcile(rr);
    if (!r.ok()) return refusal(r.failure(), fmt, req.accept);
    return message(200, *r, fmt, req.accept);
  }
  if (p.rfind(kAttachmentsPrefix, 0) == 0) {
    std::string id = p.substr(kAttachmentsPrefix.size());
    if (m != "DELETE" && m != "GET") {
      return error(405, "use GET /v1/attachments/{id} to read it or DELETE to detach", fmt, req.accept);
    }
    if (id.empty() || id.find('/') != std::string::npos) return error(404, "no such resource: " + p, fmt, req.accept);
    if (m == "GET") {
      auto r = agent_.get(id);
      if (!r.ok()) return refusal(r.failure(), std::nullopt, req.accept);
      return message(200, *r, std::nullopt, req.accept);
    }
    attv1::DetachRequest dr;
    dr.set_id(id);
    auto r = agent_.detach(dr);
    if (!r.ok()) return refusal(r.failure(), fmt, req.accept);
    return message(200, *r, std::nullopt, req.accept);
  }
  return error(404, "no such resource: " + p + " (the API is under /v1/attachments, /v1/health)", fmt, req.accept);
}

}  // namespace dpu::control
