// The C++/PostgreSQL error boundary: exception classification and reporting.
#include <cstdio>
#include <new>
#include <string>

#include "boundary/boundary.hpp"
#include "sqlapi/guc.hpp"

namespace pgramp {

const char* PgError::what() const noexcept {
  return edata_ != nullptr && edata_->message != nullptr ? edata_->message : "PostgreSQL error";
}

namespace detail {

int boundary_depth = 0;

namespace {

// Error data copied out of ErrorContext waits here until the boundary re-raises it
// (ReThrowError copies it back into ErrorContext). Reset when a new outermost boundary
// starts: nothing can be in flight then.
MemoryContext transit_context = nullptr;
bool transit_used = false;

void CopyText(char* out, size_t size, std::string_view text) noexcept {
  const size_t n = text.size() < size - 1 ? text.size() : size - 1;
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

void SetReport(Failure* f, int sqlstate, std::string_view message, std::string_view detail,
               std::string_view hint) noexcept {
  f->kind = Failure::kReport;
  f->sqlstate = sqlstate;
  CopyText(f->message, sizeof f->message, message);
  CopyText(f->detail, sizeof f->detail, detail);
  CopyText(f->hint, sizeof f->hint, hint);
}

const char* NodesSetting() noexcept {
  return guc::nodes != nullptr && guc::nodes[0] != '\0' ? guc::nodes : "(empty)";
}

// Status code → SQLSTATE, message and hint (DESIGN §8: a timeout or an unreachable server is
// a clear ERROR with a hint, a write-write conflict is a serialization failure).
void CaptureRamp(Failure* f, const RampError& e) noexcept {
  using Code = ramp::Status::Code;
  const ramp::Status& s = e.status();
  char detail[sizeof f->detail];
  if (e.context().empty()) {
    snprintf(detail, sizeof detail, "%s", s.message().c_str());
  } else {
    snprintf(detail, sizeof detail, "%s: %s", e.context().c_str(), s.message().c_str());
  }
  char hint[sizeof f->hint];
  switch (s.code()) {
    case Code::kConflict:
      SetReport(f, ERRCODE_T_R_SERIALIZATION_FAILURE,
                "could not serialize access due to a concurrent update of ramp data", detail,
                "The transaction might succeed if retried.");
      return;
    case Code::kUnavailable:
    case Code::kMoved:
      if (s.message().find("Permission denied") != std::string::npos) {
        // A server that is up but whose shm socket this backend's OS user may not open.
        snprintf(hint, sizeof hint,
                 "The PostgreSQL server's OS user may not open the socket of a rampd server "
                 "named by ramp.nodes ('%s'): start rampd with --shm-socket-mode 0660 and "
                 "--shm-socket-group set to that user's group.",
                 NodesSetting());
      } else {
        snprintf(hint, sizeof hint,
                 "Check that the rampd servers named by ramp.nodes ('%s') are running and "
                 "reachable.",
                 NodesSetting());
      }
      SetReport(f, ERRCODE_CONNECTION_FAILURE, "cannot reach the ramp cluster", detail, hint);
      return;
    case Code::kTimeout: {
      char message[sizeof f->message];
      snprintf(message, sizeof message,
               "the ramp cluster did not answer within ramp.timeout_ms (%d ms)", guc::timeout_ms);
      snprintf(hint, sizeof hint,
               "Check the rampd servers named by ramp.nodes ('%s'), or raise ramp.timeout_ms.",
               NodesSetting());
      SetReport(f, ERRCODE_CONNECTION_FAILURE, message, detail, hint);
      return;
    }
    case Code::kTooLarge:
      SetReport(f, ERRCODE_PROGRAM_LIMIT_EXCEEDED, "ramp limit exceeded", detail,
                "Rows, keys and the writes of one transaction are limited by the client "
                "library (max_value_bytes, max_key_bytes, max_batch_items).");
      return;
    case Code::kInvalidArgument:
      SetReport(f, ERRCODE_INVALID_PARAMETER_VALUE, "invalid ramp request", detail, "");
      return;
    case Code::kPermissionDenied:
      SetReport(f, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
                "the ramp cluster refused this client", detail,
                "Check that ramp.token_file names the cluster's token file.");
      return;
    case Code::kNotSupported:
      SetReport(f, ERRCODE_FEATURE_NOT_SUPPORTED, "not supported by the ramp cluster client",
                detail, "");
      return;
    case Code::kCancelled:
      f->kind = Failure::kCancelled;
      CopyText(f->detail, sizeof f->detail, detail);
      return;
    case Code::kNoSpace:
      SetReport(f, ERRCODE_DISK_FULL, "the ramp cluster is out of space", detail, "");
      return;
    case Code::kCorruption:
      SetReport(f, ERRCODE_DATA_CORRUPTED, "corrupt data from the ramp cluster", detail, "");
      return;
    default:
      SetReport(f, ERRCODE_INTERNAL_ERROR, "ramp cluster error", detail, "");
      return;
  }
}

}  // namespace

void EnterBoundary() {
  if (boundary_depth++ == 0 && transit_used) {
    MemoryContextReset(transit_context);
    transit_used = false;
  }
}

void Capture(Failure* f) noexcept {
  try {
    throw;
  } catch (const PgError& e) {
    f->kind = Failure::kPostgres;
    f->edata = e.edata();
  } catch (const RampError& e) {
    CaptureRamp(f, e);
  } catch (const SqlError& e) {
    SetReport(f, e.sqlstate(), e.message(), e.detail(), e.hint());
  } catch (const std::bad_alloc&) {
    SetReport(f, ERRCODE_OUT_OF_MEMORY, "out of memory", "in pg_ramp", "");
  } catch (const std::exception& e) {
    SetReport(f, ERRCODE_INTERNAL_ERROR, "internal error in pg_ramp", e.what(), "");
  } catch (...) {
    SetReport(f, ERRCODE_INTERNAL_ERROR, "internal error in pg_ramp", "unknown exception", "");
  }
}

void Raise(const Failure* f) {
  switch (f->kind) {
    case Failure::kPostgres:
      ReThrowError(f->edata);
    case Failure::kCancelled:
      // The wait hook only returns Cancelled when an interrupt is pending and processable:
      // let PostgreSQL raise its usual error (cancel, statement timeout, termination).
      CHECK_FOR_INTERRUPTS();
      ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED),
                      errmsg("canceling statement: a wait on the ramp cluster was interrupted"),
                      f->detail[0] ? errdetail_internal("%s", f->detail) : 0));
      break;
    default:
      ereport(ERROR, (errcode(f->sqlstate), errmsg_internal("%s", f->message),
                      f->detail[0] ? errdetail_internal("%s", f->detail) : 0,
                      f->hint[0] ? errhint("%s", f->hint) : 0));
      break;
  }
  pg_unreachable();
}

void Warn(const Failure* f, const char* what) {
  switch (f->kind) {
    case Failure::kPostgres:
      ereport(WARNING, (errmsg("%s: %s", what,
                               f->edata && f->edata->message ? f->edata->message : "error")));
      break;
    case Failure::kCancelled:
      ereport(WARNING, (errmsg("%s: interrupted", what)));
      break;
    default:
      ereport(WARNING, (errcode(f->sqlstate), errmsg("%s: %s", what, f->message),
                        f->detail[0] ? errdetail_internal("%s", f->detail) : 0,
                        f->hint[0] ? errhint("%s", f->hint) : 0));
      break;
  }
}

ErrorData* TakeError(MemoryContext resume_in) {
  if (transit_context == nullptr) {
    transit_context =
        AllocSetContextCreate(TopMemoryContext, "pg_ramp error transit", ALLOCSET_SMALL_SIZES);
  }
  MemoryContextSwitchTo(transit_context);
  ErrorData* edata = CopyErrorData();
  FlushErrorState();
  transit_used = true;
  MemoryContextSwitchTo(resume_in);
  return edata;
}

}  // namespace detail

void ResetBoundaryState() {
  detail::boundary_depth = 0;
}

}  // namespace pgramp
