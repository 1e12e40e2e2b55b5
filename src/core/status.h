// Status and Result<T>: the channel for *expected* failures (bad config, missing or corrupt
// file, unsupported combination). They travel up to apps/, which print one line and exit
// non-zero. Broken invariants use SPARQ_CHECK (check.h) instead and abort the job.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sparq {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status ok() { return Status(); }
  template <typename... Args>
  static Status error(fmt::format_string<Args...> format, Args&&... args) {
    Status s;
    s.message_ = fmt::format(format, std::forward<Args>(args)...);
    s.failed_ = true;
    return s;
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("while reading shard x: ...") and returns the same failure.
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    Status s = *this;
    s.message_ = context + ": " + message_;
    return s;
  }

 private:
  std::string message_;
  bool failed_ = false;
};

// Either a value or a failed Status. Accessing value() of a failure is a programming error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.is_ok()) status_ = Status::error("Result constructed from an ok Status");
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }

  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  // Const too: a `const Result<T>&` handed to a function could be read only through value()
  // (review of the embedding API, 2026-12-07).
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->checked(); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->checked(); }
  T&& operator*() && { return std::move(checked()); }

 private:
  T& checked();
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void fatal_result_access(const std::string& message);

template <typename T>
T& Result<T>::checked() {
  if (!value_) fatal_result_access(status_.message());
  return *value_;
}

}  // namespace sparq

// Propagate a failed Status from an expression returning Status.
#define SPARQ_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::sparq::Status sparq_status_ = (expr);    \
    if (!sparq_status_.is_ok()) return sparq_status_; \
  } while (0)

#define SPARQ_CONCAT_INNER_(a, b) a##b
#define SPARQ_CONCAT_(a, b) SPARQ_CONCAT_INNER_(a, b)

// `SPARQ_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the failure.
#define SPARQ_ASSIGN_OR_RETURN(lhs, expr) \
  SPARQ_ASSIGN_OR_RETURN_IMPL_(SPARQ_CONCAT_(sparq_result_, __LINE__), lhs, expr)
#define SPARQ_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
