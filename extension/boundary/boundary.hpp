// The C++/PostgreSQL error boundary (DESIGN §8).
//
// Two worlds meet in this extension:
//  - C++ code (our table/index AM logic, the ramp client library) reports errors by throwing
//    and relies on destructors running while the stack unwinds;
//  - PostgreSQL reports errors with ereport(ERROR), which longjmp()s to the nearest
//    PG_TRY/sigsetjmp and skips every C++ destructor on the way.
//
// The rules, used by every entry point of the extension:
//  1. Every function PostgreSQL calls (SQL functions, AM callbacks, hooks, xact callbacks)
//     that runs C++ code runs that code inside Boundary(). Boundary catches every exception,
//     lets the C++ frames unwind completely, and only then calls ereport(ERROR) from a frame
//     whose locals are trivially destructible. An entry point that only runs PostgreSQL code
//     (C-style locals, no C++ objects) needs no boundary.
//  2. C++ code (inside a Boundary) calls PostgreSQL functions that may ereport only through
//     PgCall(), which turns the ereport into a PgError exception carrying the ErrorData;
//     Boundary re-raises that ErrorData unchanged (same SQLSTATE, message, detail, hint,
//     context), so callers see PostgreSQL's original error. The lambda given to PgCall must
//     itself hold no C++ objects with destructors. Plain accessors that cannot fail
//     (GetCurrentSubTransactionId, RelationGetRelid, reading struct fields) need no PgCall.
//  3. An error caught by PgCall is always propagated to the boundary (never swallowed):
//     PostgreSQL's state (locks, pins, held LWLocks) is only cleaned up by the transaction
//     abort that the re-raised error causes. Destructors that run during the unwinding must
//     not call PostgreSQL.
//  4. Status::Cancelled (the client library's wait hook saw a pending cancel/die) makes the
//     boundary call CHECK_FOR_INTERRUPTS() after unwinding, so statement_timeout and
//     pg_cancel_backend() produce PostgreSQL's usual errors.
#pragma once

#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ramp/status.h"

#include "boundary/pg.hpp"

namespace pgramp {

// A non-OK ramp::Status from the client library, with what the extension was doing.
// The boundary maps the code to a SQLSTATE (see boundary.cpp).
class RampError : public std::exception {
 public:
  RampError(ramp::Status status, std::string context)
      : status_(std::move(status)), context_(std::move(context)) {}
  const ramp::Status& status() const { return status_; }
  const std::string& context() const { return context_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  ramp::Status status_;
  std::string context_;
};

// An error of the extension itself, with its SQLSTATE (bad usage, unsupported feature).
class SqlError : public std::exception {
 public:
  SqlError(int sqlstate, std::string message, std::string detail = {}, std::string hint = {})
      : sqlstate_(sqlstate),
        message_(std::move(message)),
        detail_(std::move(detail)),
        hint_(std::move(hint)) {}
  int sqlstate() const { return sqlstate_; }
  const std::string& message() const { return message_; }
  const std::string& detail() const { return detail_; }
  const std::string& hint() const { return hint_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int sqlstate_;
  std::string message_, detail_, hint_;
};

// An ereport(ERROR) raised by PostgreSQL code called through PgCall. The ErrorData lives in
// the boundary's transit memory context until the boundary re-raises it.
class PgError : public std::exception {
 public:
  explicit PgError(ErrorData* edata) : edata_(edata) {}
  ErrorData* edata() const { return edata_; }
  const char* what() const noexcept override;

 private:
  ErrorData* edata_;
};

// Throws RampError(status, context) when status is not OK.
inline void Check(const ramp::Status& status, std::string_view context) {
  if (!status.ok()) throw RampError(status, std::string(context));
}

namespace detail {

// What the boundary must report, captured inside the catch handler into fixed buffers (no
// allocation, no PostgreSQL call while an exception is in flight).
struct Failure {
  enum Kind : int { kNone = 0, kPostgres, kReport, kCancelled };
  int kind;
  int sqlstate;
  int elevel;
  ErrorData* edata;
  char message[1024];
  char detail[1024];
  char hint[512];
};

extern int boundary_depth;

void EnterBoundary();
// Classifies the exception being handled (call only inside a catch handler).
void Capture(Failure* failure) noexcept;
// Reports a captured failure with ereport(ERROR); never returns.
[[noreturn]] void Raise(const Failure* failure);
// Reports a captured failure at WARNING level (used where an ERROR is not allowed).
void Warn(const Failure* failure, const char* what);
// Copies the current PostgreSQL error out of ErrorContext and clears it (PG_CATCH only).
ErrorData* TakeError(MemoryContext resume_in);

}  // namespace detail

// Runs body (C++), turning any exception into ereport(ERROR) after the C++ frames are gone.
template <class Body>
auto Boundary(Body&& body) -> decltype(body()) {
  using Result = decltype(body());
  static_assert(std::is_void_v<Result> || std::is_trivially_destructible_v<Result>,
                "a boundary returns plain values to PostgreSQL");
  detail::Failure failure;
  failure.kind = detail::Failure::kNone;
  detail::EnterBoundary();
  try {
    if constexpr (std::is_void_v<Result>) {
      body();
      --detail::boundary_depth;
      return;
    } else {
      Result result = body();
      --detail::boundary_depth;
      return result;
    }
  } catch (...) {
    detail::Capture(&failure);
  }
  // The exception object and every C++ frame of body are gone here.
  --detail::boundary_depth;
  detail::Raise(&failure);
}

// Like Boundary, for places where an ERROR is not allowed (after the transaction committed):
// failures become a WARNING prefixed with `what`. Returns false on failure.
template <class Body>
bool BoundaryWarn(const char* what, Body&& body) {
  detail::Failure failure;
  failure.kind = detail::Failure::kNone;
  detail::EnterBoundary();
  try {
    body();
  } catch (...) {
    detail::Capture(&failure);
  }
  --detail::boundary_depth;
  if (failure.kind == detail::Failure::kNone) return true;
  detail::Warn(&failure, what);
  return false;
}

// Calls PostgreSQL code from C++: an ereport(ERROR) inside fn becomes a PgError exception.
// fn must not own C++ objects with destructors while it calls PostgreSQL (a longjmp would skip
// them); its result must be a plain value. A C++ exception thrown by fn is caught inside the
// PG_TRY block (it must not unwind past PG_TRY, which would leave PG_exception_stack pointing
// at a dead frame) and rethrown after PG_END_TRY.
template <class Fn>
auto PgCall(Fn&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  static_assert(std::is_void_v<Result> || std::is_trivially_copyable_v<Result>,
                "PgCall returns plain values");
  MemoryContext const resume_in = CurrentMemoryContext;
  ErrorData* edata = nullptr;
  std::exception_ptr cxx_error;
  if constexpr (std::is_void_v<Result>) {
    PG_TRY();
    {
      try {
        fn();
      } catch (...) {
        cxx_error = std::current_exception();
      }
    }
    PG_CATCH();
    { edata = detail::TakeError(resume_in); }
    PG_END_TRY();
    if (edata != nullptr) throw PgError(edata);
    if (cxx_error) std::rethrow_exception(cxx_error);
  } else {
    Result result{};
    PG_TRY();
    {
      try {
        result = fn();
      } catch (...) {
        cxx_error = std::current_exception();
      }
    }
    PG_CATCH();
    { edata = detail::TakeError(resume_in); }
    PG_END_TRY();
    if (edata != nullptr) throw PgError(edata);
    if (cxx_error) std::rethrow_exception(cxx_error);
    return result;
  }
}

// Resets the boundary bookkeeping at transaction end (after an error that skipped frames).
void ResetBoundaryState();

}  // namespace pgramp
