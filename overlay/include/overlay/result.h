// Result<T>: the outcome of a control-plane operation (SA setup, key
// installation): either a value or a message that says what failed and what to
// do about it.
//
// The datapath never uses it: per-packet functions return a Status (status.h),
// which costs nothing and carries no text. Setup code returns Result so a bad
// key length or an unavailable crypto backend reaches the operator as a
// sentence, not as a bare error code (STYLE.md, "Errors, by plane").
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dpu::overlay {

// The error half of a Result: a message for an operator.
struct Error {
  std::string message;
};

template <typename T>
class Result {
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

  // Only valid when !ok().
  const std::string& error() const { return std::get<1>(state_).message; }

 private:
  std::variant<T, Error> state_;
};

}  // namespace dpu::overlay
