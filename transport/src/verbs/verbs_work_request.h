// What the verbs provider's set-up/control path (verbs_connection.cpp) and data path
// (verbs_datapath.cpp) share: queue sizes and the encoding of work request ids.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ramp/status.h"

namespace ramp::transport::detail::verbs {

// Receive slots double as doorbells: every frame's lead write consumes one. They are
// reposted as soon as polled; a burst beyond them makes the sender retry (RNR), not fail.
constexpr uint32_t kRecvSlots = 128;
constexpr uint32_t kSendSlots = 16;
constexpr size_t kSlotBytes = 4096;
constexpr int kSendQueueDepth = 1024;
constexpr uint64_t kSignalInterval = 32;
constexpr int kExposeWaitMs = 50;
constexpr int64_t kCmCheckIntervalMs = 10;

// A work request id: what it is (top byte) and a number (op id, slot, sequence).
enum Kind : uint64_t { kKindOp = 1, kKindRecv = 2, kKindSend = 3, kKindMarker = 4 };
constexpr uint64_t kValueMask = (uint64_t{1} << 56) - 1;
inline uint64_t WrId(Kind k, uint64_t v) {
  return (static_cast<uint64_t>(k) << 56) | (v & kValueMask);
}
inline Kind KindOf(uint64_t id) {
  return static_cast<Kind>(id >> 56);
}
inline uint64_t ValueOf(uint64_t id) {
  return id & kValueMask;
}

inline Status FromCompletion(const ibv_wc& wc, const std::string& peer) {
  const std::string what = std::string(ibv_wc_status_str(wc.status)) + " (peer " + peer + ")";
  switch (wc.status) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
      return Status::PermissionDenied(what);
    case IBV_WC_WR_FLUSH_ERR:
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return Status::Unavailable(what);
    default:
      return Status::IOError(what);
  }
}

}  // namespace ramp::transport::detail::verbs
