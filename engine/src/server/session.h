// One peer connection as the server sees it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ramp/transport/connection.h"

namespace ramp::server {

struct Session {
  uint64_t id = 0;  // unique within the server: deferred replies name their session by it
  std::unique_ptr<transport::Connection> conn;
  std::string peer;      // for logs
  bool greeted = false;  // HELLO done
  uint64_t client_id = 0;
  uint8_t peer_kind = 0;  // 0 = client, 1 = server
  bool counted = false;   // counted in the server's ClientPresence (terminator.h)
  Status violation;       // why the server closed the connection (protocol violation)
  // READ_PAGES batches of this connection not yet answered (their replies decrement it,
  // from whichever thread lets go of them last): bounds the staging memory one peer holds.
  std::shared_ptr<std::atomic<int>> page_batches = std::make_shared<std::atomic<int>>(0);
};

}  // namespace ramp::server
