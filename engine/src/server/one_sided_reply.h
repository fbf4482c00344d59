// A reply that must follow one-sided writes into the peer's memory (remote page I/O): the
// I/O worker that read the pages hands the writes and the reply to the worker thread that
// owns the connection (a Connection is driven by one thread), which posts the writes and
// sends the reply once every write completed — the reply tells the peer that the bytes are
// there, so it must never overtake them. A failed write turns the reply into an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "protocol/messages.h"
#include "ramp/status.h"
#include "ramp/transport/memory.h"

namespace ramp::server {

struct OneSidedReply {
  struct Write {
    const uint8_t* local = nullptr;  // staging memory of an I/O worker, or arena frames
    uint64_t offset = 0;             // in dest
    uint64_t len = 0;
  };
  transport::RemoteRegion dest;
  std::vector<Write> writes;
  std::string reply;  // sent when every write completed
  // Runs once every write completed, before the reply goes (writes from arena frames): it
  // may rewrite the reply, e.g. a page whose frame no longer holds it becomes an error.
  std::function<void(std::string* reply)> recheck;
  protocol::Header request;  // for an error reply when a write fails
  // Gives the staging memory back; runs when the last reference goes (writes completed, or
  // the connection was dropped with them outstanding).
  std::function<void()> release;
  std::shared_ptr<std::atomic<int>> in_flight;  // the session's batch count, decremented

  // Worker-thread progress.
  size_t posted = 0;
  size_t completed = 0;
  Status failed;

  ~OneSidedReply() {
    if (release) release();
    if (in_flight) in_flight->fetch_sub(1, std::memory_order_relaxed);
  }
};

using PostWritesFn = std::function<void(uint64_t session, std::shared_ptr<OneSidedReply>)>;

}  // namespace ramp::server
