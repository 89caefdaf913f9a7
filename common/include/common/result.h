// Result<T>: the outcome of a control-plane operation — either a value or a
// message that says what failed and what to do about it. One type for every
// component (STYLE.md, "Errors, by plane"): CNI parsing, host-shim plumbing,
// the agent's API and IPAM, dataplane programming, overlay SA setup.
//
// The datapath never uses it: per-packet functions return a Status
// (overlay/status.h), which costs nothing and carries no text.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace dpu {

// What kind of failure an Error is, so a boundary can map it without parsing
// the sentence: the attach API to an HTTP status, host-shim to a CNI error
// code, the IPC layer to "peer closed" versus "timed out".
enum class ErrorCode : uint8_t {
  kFailed = 0,    // no more specific kind (the default)
  kInvalid,       // the input is wrong: fix it, retrying changes nothing
  kNotFound,      // the object named does not exist
  kConflict,      // held by someone else (Error::holder names it)
  kUnavailable,   // the peer or resource is not there now: retry later
  kTimeout,       // no answer within the deadline
  kClosed,        // the peer closed the connection cleanly
  kTooLarge,      // over a size limit
  kForbidden,     // the caller is not allowed to do this
  kExhausted,     // a capacity limit is reached (ports, addresses, table entries)
  kNotSupported,  // this build or device cannot do it
};

// Short lower-case name of a code, for logs and JSON ("invalid", "conflict").
inline const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kFailed: return "failed";
    case ErrorCode::kInvalid: return "invalid";
    case ErrorCode::kNotFound: return "not-found";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kClosed: return "closed";
    case ErrorCode::kTooLarge: return "too-large";
    case ErrorCode::kForbidden: return "forbidden";
    case ErrorCode::kExhausted: return "exhausted";
    case ErrorCode::kNotSupported: return "not-supported";
  }
  return "failed";
}

// The error half of a Result: a sentence for an operator, its kind, and for
// kConflict the object that holds what was asked for.
struct Error {
  Error() = default;
  explicit Error(std::string message_, ErrorCode code_ = ErrorCode::kFailed, std::string holder_ = {})
      : message(std::move(message_)), code(code_), holder(std::move(holder_)) {}

  std::string message;
  ErrorCode code = ErrorCode::kFailed;
  std::string holder;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT: implicit on purpose, `return value;`
  Result(Error error) : state_(std::move(error)) {}  // NOLINT: `return Error{"..."};`

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Only valid when ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // Only valid when !ok().
  const std::string& error() const { return std::get<1>(state_).message; }
  ErrorCode code() const { return std::get<1>(state_).code; }
  const Error& failure() const { return std::get<1>(state_); }
  Error takeError() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

// A Result with no value: success, or an error message.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_.message; }
  ErrorCode code() const { return error_.code; }
  const Error& failure() const { return error_; }
  Error takeError() && { return std::move(error_); }

 private:
  Error error_;
  bool failed_ = false;
};

using VoidResult = Result<void>;

// `return prefixed("loading /etc/x.json", std::move(r).takeError());` keeps the code and holder.
inline Error prefixed(const std::string& context, Error e) {
  e.message = context + ": " + e.message;
  return e;
}

}  // namespace dpu
