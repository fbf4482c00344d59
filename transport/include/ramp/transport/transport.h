// Listening and connecting: the entry points of libramp_transport.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ramp/status.h"
#include "ramp/transport/connection.h"
#include "ramp/transport/endpoint.h"
#include "ramp/transport/memory.h"

namespace ramp::transport {

struct TransportOptions {
  // The cluster token. Both ends prove they know it (HMAC-SHA256 challenge-response) before
  // either reveals a memory handle; the token itself never crosses the wire.
  std::string token;
  // Bytes of each receive ring (one per direction per connection). The largest message is
  // a little under half of it.
  size_t ring_bytes = 1u << 20;
  // The largest message Send accepts and Receive reassembles (fragments beyond that close
  // the connection as malformed).
  size_t max_message_bytes = 64u << 20;
  // Bytes Send may queue for want of ring credits before it says Busy.
  size_t max_queued_bytes = 256u << 20;
  int connect_timeout_ms = 5000;
  int handshake_timeout_ms = 5000;
  // Listeners: bounds on accepted connections that have not finished the handshake, so that
  // idle or slow peers (no token needed) cannot keep anyone out. Handshakes run side by side
  // on the accepting thread, none waits on another. Such a connection is closed once
  // min(handshake_timeout_ms, pending_handshake_timeout_ms) passed since its accept; a new one
  // is refused beyond max_pending_handshakes in total or max_pending_handshakes_per_source
  // from one source address (tcp; every shm peer is local, only the total applies). Each
  // drop and refusal is logged with the peer's address. rampd: --handshake-timeout-ms,
  // --max-pending-handshakes, --max-pending-handshakes-per-source.
  int pending_handshake_timeout_ms = 3000;
  size_t max_pending_handshakes = 512;
  size_t max_pending_handshakes_per_source = 64;
  // shm listeners: the socket file's permission bits and group, set after bind and before
  // listen, on every start (a restarted server re-creates the file). -1: leave them (the
  // umask and the process's group decide). Whoever can open the file can connect; the token
  // still decides who gets in. Memory regions travel as descriptors over the socket, so
  // they need no mode of their own. rampd: --shm-socket-mode, --shm-socket-group.
  int shm_socket_mode = -1;
  int64_t shm_socket_gid = -1;
  // Operations a connection keeps outstanding before Post* returns Busy.
  size_t max_outstanding = 4096;
  // tcp: serve the peer's one-sided operations on a responder thread (servers). When false
  // they are served inside Poll/Receive of the owning thread (PostgreSQL backends, which
  // must not start threads).
  bool responder_thread = true;
  // Called now and then while an operation blocks (connect, handshake, Wait); a non-OK
  // status aborts the wait with that status (a backend checks for query cancel here).
  std::function<Status()> wait_hook;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // The endpoint actually bound (port filled in when 0 was asked for).
  virtual const Endpoint& endpoint() const = 0;
  // Readable when a connection attempt is pending.
  virtual int fd() const = 0;
  // Returns the next connection whose handshake ended: the connection, or why it failed
  // (PermissionDenied for a peer without the token, Timeout for one that did not finish in
  // time: closed and logged, the listener stays usable). Timeout when none ended in time.
  // Handshakes progress only while Accept runs (stream listeners drive them all at once);
  // connections refused for the bounds above are logged, not returned.
  virtual Status Accept(int timeout_ms, std::unique_ptr<Connection>* out) = 0;
  virtual void Close() = 0;
};

Status Listen(const Endpoint& endpoint, const TransportOptions& options,
              std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out);

Status Connect(const Endpoint& endpoint, const TransportOptions& options,
               std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out);

// True when the provider can run on this machine; *why says why not (e.g. "no RDMA device:
// ibv_get_device_list found 0 devices").
bool ProviderAvailable(Provider provider, std::string* why);

// Reads a token file (whitespace trimmed). An empty file is an error.
Status ReadTokenFile(const std::string& path, std::string* token);

}  // namespace ramp::transport
