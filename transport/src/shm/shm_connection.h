// The shm provider (same host). Control path: a unix stream socket, over which the
// handshake runs and memfd segments travel (SCM_RIGHTS). Data path: the peer's memory is
// mapped into ours; a one-sided read or write is a memcpy checked against the region's
// description, and a ring frame is written straight into the peer's mapped ring. The
// target's CPU does nothing.
//
// Files: shm_transport.cpp (listen/connect on the unix socket), shm_connection.cpp (set-up
// and control path), shm_import.* (what the peer exposed to us), shm_datapath.cpp (one-sided
// copies, ring writes).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/control_channel.h"
#include "core/handshake.h"
#include "core/ring_connection.h"
#include "shm/shm_import.h"

namespace ramp::transport::detail {

class ShmConnection final : public RingConnection {
 public:
  // Handshake + set-up on a connected unix socket.
  static Status Establish(UniqueFd sock, const std::string& peer, bool server,
                          const TransportOptions& options, std::shared_ptr<Memory> memory,
                          std::unique_ptr<Connection>* out);
  // Set-up of a connection a listener accepted and authenticated (ServerAuth): the channel
  // holds what the peer sent past AUTH_OK (its SETUP and descriptors).
  static Status SetUpAccepted(UniqueFd sock, ControlChannel* channel, const std::string& peer,
                              const TransportOptions& options, std::shared_ptr<Memory> memory,
                              std::unique_ptr<Connection>* out);
  ~ShmConnection() override;

  Provider provider() const override { return Provider::kShm; }
  std::string peer() const override { return peer_; }

  Status Expose(const RemoteRegion& local_region) override;

 protected:
  Status PostOneSided(bool write, void* local, const RemoteRegion& remote, uint64_t offset,
                      uint64_t len, uint64_t wr_id, CompletionCallback cb) override;
  Status WriteFrame(uint64_t position, uint64_t size_field, const iovec* body, int iovcnt,
                    size_t body_len) override;
  Status WriteCredits(uint64_t consumed) override;
  void Progress() override;
  bool ArmProvider() override;
  void OnClose() override;

 private:
  ShmConnection(const TransportOptions& options, std::shared_ptr<Memory> memory, UniqueFd sock,
                std::string peer);
  Status AttachShm(const wire::Setup& theirs, std::vector<UniqueFd> fds);
  Status SetUp(const HandshakeParams& params);
  // Reads every control message waiting on the socket.
  void DrainControl();
  Status HandleControl(const ControlMessage& m);
  // Tells the peer a control message waits and wakes it if it sleeps.
  void FlagControlPending();
  void RingPeerIfArmed();

  UniqueFd sock_;
  std::string peer_;
  ControlChannel channel_;
  ImportTable imports_;
  UniqueFd peer_doorbell_;
  uint8_t* peer_ring_ = nullptr;
  ring::ControlBlock* peer_control_ = nullptr;
  uint64_t* peer_credit_word_ = nullptr;
  // Segments already sent, by (id, writable).
  std::set<std::pair<uint64_t, bool>> sent_segments_;
  uint64_t progress_calls_ = 0;
  int64_t last_control_check_ms_ = 0;
};

}  // namespace ramp::transport::detail
