#include "ramp/status.h"

#include <cstring>
#include <string>

namespace ramp {

Status Status::FromErrno(std::string_view context, int err) {
  // strerror_r (GNU variant) is thread-safe where strerror is not.
  char buf[128];
  const char* text = strerror_r(err, buf, sizeof(buf));
  std::string message(context);
  message += ": ";
  message += text;
  return IOError(message);
}

const char* Status::CodeName(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kNotFound:
      return "NotFound";
    case Code::kCorruption:
      return "Corruption";
    case Code::kIOError:
      return "IOError";
    case Code::kPermissionDenied:
      return "PermissionDenied";
    case Code::kTimeout:
      return "Timeout";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kBusy:
      return "Busy";
    case Code::kConflict:
      return "Conflict";
    case Code::kTooLarge:
      return "TooLarge";
    case Code::kCancelled:
      return "Cancelled";
    case Code::kMoved:
      return "Moved";
    case Code::kAborted:
      return "Aborted";
    case Code::kNotSupported:
      return "NotSupported";
    case Code::kNoSpace:
      return "NoSpace";
    case Code::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = CodeName(code_);
  s += ": ";
  s += message_;
  return s;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, m);
}

}  // namespace ramp
