// Result<T>: the outcome of a control-plane operation — either a value or a
// message that says what failed and what to do about it. One type for every
// component (STYLE.md, "Errors, by plane"): CNI parsing, host-shim plumbing,
// the agent's API and IPAM, dataplane programming, overlay SA setup.
//
// The datapath never uses it: per-packet functions return a Status
// (overlay/status.h), which costs nothing and carries no text.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dpu {

// The error half of a Result: a sentence for an operator.
struct Error {
  std::string message;
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
  Error takeError() && { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

// A Result with no value: success, or an error message.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error.message)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }
  Error takeError() && { return Error{std::move(error_)}; }

 private:
  std::string error_;
  bool failed_ = false;
};

using VoidResult = Result<void>;

// `return prefixed("loading /etc/x.json", std::move(r).takeError());`
inline Error prefixed(const std::string& context, Error e) {
  return Error{context + ": " + e.message};
}

}  // namespace dpu
