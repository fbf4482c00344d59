// The tcp provider (any hosts). One TCP connection carries everything. A one-sided
// operation is a request executed by the target against its registered memory (checked by
// Memory::Resolve with the region check of core/region.h: a forged key, handle or offset
// gets an error reply, never memory) and answered on the same stream; a ring frame is one
// message the target applies as "all but the lead, then the lead"; credits are 8-byte
// writes. The target's side runs either on a responder thread the connection owns (servers)
// or inside the owner's Poll/Receive/Wait (PostgreSQL backends, which must not start
// threads). One stream, applied in order: writes from one connection land in the order they
// were posted.
//
// Batching: everything (requests, frames, responses) is appended to one output buffer and
// sent with one send() when the owner polls, arms, finds nothing more to receive, or the
// buffer passes 64 KiB; credits and responses to the peer's requests go at once. Messages
// sent in a row, and replies to a run of received messages, thus share a system call and
// wake the peer once, not once per message.
//
// Files: tcp_transport.cpp (listen/connect), tcp_connection.cpp (set-up and closing),
// tcp_datapath.cpp (posting, ring writes, progress), tcp_responder.cpp (the target side).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/control_channel.h"
#include "core/handshake.h"
#include "core/ring_connection.h"
#include "core/wire.h"

namespace ramp::transport::detail {

class TcpConnection final : public RingConnection {
 public:
  static Status Establish(UniqueFd sock, const std::string& peer, bool server,
                          const TransportOptions& options, std::shared_ptr<Memory> memory,
                          std::unique_ptr<Connection>* out);
  // Set-up of a connection a listener accepted and authenticated (ServerAuth): the channel
  // holds what the peer sent past AUTH_OK (its SETUP).
  static Status SetUpAccepted(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                              const TransportOptions& options, std::shared_ptr<Memory> memory,
                              std::unique_ptr<Connection>* out);
  ~TcpConnection() override;

  Provider provider() const override { return Provider::kTcp; }
  std::string peer() const override { return peer_; }

  Status Expose(const RemoteRegion& local_region) override;
  void Close() override;

 protected:
  Status PostOneSided(bool write, void* local, const RemoteRegion& remote, uint64_t offset,
                      uint64_t len, uint64_t wr_id, CompletionCallback cb) override;
  Status WriteFrame(uint64_t position, uint64_t size_field, const iovec* body, int iovcnt,
                    size_t body_len) override;
  Status WriteCredits(uint64_t consumed) override;
  void Progress() override;
  void ProgressAfterSend() override;
  void ProgressInput() override;
  void FlushOutput() override;
  bool ArmProvider() override;
  void OnClose() override;
  size_t UnsentBytes() const override;

 private:
  static Status SetUp(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                      const HandshakeParams& params, const TransportOptions& options,
                      std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out);
  struct PendingOp {
    uint64_t request_id;
    bool write;
    uint8_t* local;
    uint64_t len;
    uint64_t wr_id;
    CompletionCallback cb;
  };

  TcpConnection(const TransportOptions& options, std::shared_ptr<Memory> memory, UniqueFd sock,
                std::string peer);

  // ---- the reading side (responder thread, or the owner inline) ----
  void ServeInput();
  // Handles the whole messages in rx_; false when the connection was closed.
  bool ProcessBuffered(bool* woke_owner);
  Status Handle(uint8_t type, const uint8_t* p, size_t n, bool* wake);
  Status ServeRead(const wire::Op& op);
  Status ServeWrite(const wire::Op& op);
  Status ApplyFrame(const wire::Op& op);
  Status ApplyWriteU64(const wire::Op& op);
  // Where a ring frame or credit write of len bytes at offset lands: our own block (the
  // only target a well-behaved peer uses) is checked against its registration without the
  // Memory's lock, which every connection of the process shares; anything else goes through
  // Memory::Resolve. Either way the region check of core/region.h decides.
  Status ResolveRingWrite(const wire::Op& op, uint64_t len, std::shared_ptr<const void>* pin);
  Status Complete(const wire::Op& op);
  void ResponderMain();

  // ---- sending ----
  void FlushTx();
  // Completes every pending operation with Unavailable (on close).
  void FailPending();

  UniqueFd sock_;
  const std::string peer_;
  const bool responder_mode_;
  RemoteRegion peer_block_;
  size_t max_payload_ = 0;

  std::thread responder_;
  UniqueFd wake_;  // wakes the responder: stop, or output waiting for room
  std::atomic<bool> stop_{false};

  mutable std::mutex tx_mu_;
  std::vector<uint8_t> tx_;
  size_t tx_head_ = 0;
  std::atomic<bool> tx_pending_{false};
  bool watching_out_ = false;  // inline: epoll set also waits for room to send
  bool batch_full_ = false;    // owner thread: the last frame filled a batch (flush after Send)

  std::mutex pending_mu_;
  std::deque<PendingOp> pending_;  // in request order: the peer answers in order
  bool pending_failed_ = false;
  uint64_t next_request_ = 1;

  bool responses_pending_ = false;  // ServeInput appended responses to the peer's requests

  std::vector<uint8_t> rx_;
  size_t rx_head_ = 0;
  size_t rx_tail_ = 0;
  std::vector<Span> spans_;
};

}  // namespace ramp::transport::detail
