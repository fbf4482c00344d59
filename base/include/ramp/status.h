// Status: the result of an operation in engine and transport code (leveldb style).
// Engine code returns Status values instead of throwing; the PostgreSQL boundary turns
// a non-OK Status into an ereport with the matching SQLSTATE.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace ramp {

class Status {
 public:
  enum class Code : unsigned char {
    kOk = 0,
    kInvalidArgument,   // the caller asked for something malformed
    kNotFound,          // key, version, region, partition does not exist
    kCorruption,        // bytes failed a check (checksum, frame, record)
    kIOError,           // the operating system refused an I/O
    kPermissionDenied,  // bad token, access rights of a region
    kTimeout,           // a wait passed its deadline
    kUnavailable,       // peer unreachable or gone
    kBusy,              // no room right now (ring credits); retry after progress
    kConflict,          // write-write conflict (serialization failure)
    kTooLarge,          // a configured limit was crossed
    kCancelled,         // the wait hook asked to stop (query cancel)
    kMoved,             // the partition now lives elsewhere
    kAborted,           // the transaction was aborted
    kNotSupported,      // feature or provider not available here
    kNoSpace,           // disk or memory budget exhausted
    kInternal,          // a bug: an invariant did not hold
  };

  // User-provided (not `= default`): `Status()` and Status::OK() then only set the code and
  // an empty message. With a defaulted constructor value-initialization zeroes all 40 bytes
  // first, which GCC emits as a rep stos, the dearest part of returning OK on a hot path.
  Status() noexcept {}
  Status(Code code, std::string_view message) : code_(code), message_(message) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view m) { return {Code::kInvalidArgument, m}; }
  static Status NotFound(std::string_view m) { return {Code::kNotFound, m}; }
  static Status Corruption(std::string_view m) { return {Code::kCorruption, m}; }
  static Status IOError(std::string_view m) { return {Code::kIOError, m}; }
  static Status PermissionDenied(std::string_view m) { return {Code::kPermissionDenied, m}; }
  static Status Timeout(std::string_view m) { return {Code::kTimeout, m}; }
  static Status Unavailable(std::string_view m) { return {Code::kUnavailable, m}; }
  static Status Busy(std::string_view m) { return {Code::kBusy, m}; }
  static Status Conflict(std::string_view m) { return {Code::kConflict, m}; }
  static Status TooLarge(std::string_view m) { return {Code::kTooLarge, m}; }
  static Status Cancelled(std::string_view m) { return {Code::kCancelled, m}; }
  static Status Moved(std::string_view m) { return {Code::kMoved, m}; }
  static Status Aborted(std::string_view m) { return {Code::kAborted, m}; }
  static Status NotSupported(std::string_view m) { return {Code::kNotSupported, m}; }
  static Status NoSpace(std::string_view m) { return {Code::kNoSpace, m}; }
  static Status Internal(std::string_view m) { return {Code::kInternal, m}; }
  // errno-based I/O error: "<context>: <strerror(err)>".
  static Status FromErrno(std::string_view context, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool Is(Code c) const { return code_ == c; }

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  static const char* CodeName(Code c);

  // Prefixes the message with context, keeping the code: "ctx: message".
  Status Annotate(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace ramp

// Returns the Status of an expression from the enclosing function when it is not OK.
#define RAMP_RETURN_IF_ERROR(expr)             \
  do {                                         \
    ::ramp::Status _ramp_status = (expr);      \
    if (!_ramp_status.ok()) return _ramp_status; \
  } while (0)
