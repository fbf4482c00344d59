// The verbs provider (rdma-core): an RC queue pair set up with rdmacm. Built only when
// libibverbs and librdmacm are present (RAMP_HAVE_VERBS); runs only where a device exists.
//
// Control path: typed messages (the handshake, SETUP, region exposure) as SEND/RECV on the
// queue pair, from small registered buffers. Nothing about memory is sent before the peer
// proved it knows the cluster token.
// Data path:
//   - one-sided reads and writes are RDMA READ/WRITE, checked first against the region
//     description the peer exposed (key, rights, bounds: core/region.h); the adapter enforces the
//     memory registration's bounds and rights as well;
//   - a ring frame is two writes on the queue pair, in order: size + body + trail (with the
//     lead still zero), then the lead byte alone as an inline RDMA WRITE WITH IMMEDIATE. The
//     immediate consumes a receive on the peer and so produces a completion event there: that
//     is the doorbell of a sleeping receiver (Arm() asks for the event with
//     ibv_req_notify_cq). A frame at ring position P is staged at P of a registered mirror of
//     the peer's ring, which is only reused after the peer returned credits for P, so the
//     staging bytes outlive the write that reads them;
//   - credits are inline 8-byte RDMA writes into the peer's credit word.
// Selective signalling: frame and credit writes are unsignalled except every
// kSignalInterval-th, whose completion retires the send-queue slots before it; each
// one-sided operation signals its last work request (RC completes in order).
//
// Memory registrations: each Memory allocation touched is registered once per connection
// (lazily, cached, with remote rights no larger than the allocation's max_access). Local
// buffers of PostRead/PostWrite must lie inside a Memory allocation.
//
// Files: verbs_transport.cpp (rdmacm listen/connect), verbs_connection.cpp (set-up, memory
// registration, control messages), verbs_datapath.cpp (work requests, completions,
// one-sided operations, ring writes), verbs_work_request.h (what both share).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/control_channel.h"
#include "core/ring_connection.h"
#include "core/wire.h"

namespace ramp::transport::detail {

// Waits for one rdmacm event on a non-blocking channel; acks it. Expected event: OK;
// a failure event (rejected, unreachable, ...): Unavailable naming it; anything else
// unexpected: Corruption.
Status WaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected,
                   const Deadline& deadline, const WaitHook& hook, const std::string& what);
std::string VerbsPeerName(rdma_cm_id* id);

class VerbsConnection final : public RingConnection {
 public:
  // Takes ownership of channel and id. server: id came from a CONNECT_REQUEST and is
  // accepted here; client: its route is resolved and it is connected here.
  static Status Establish(rdma_event_channel* channel, rdma_cm_id* id, bool server,
                          const TransportOptions& options, std::shared_ptr<Memory> memory,
                          std::unique_ptr<Connection>* out);
  ~VerbsConnection() override;

  Provider provider() const override { return Provider::kVerbs; }
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
  // The handshake runs over SEND/RECV through this adapter.
  class Channel final : public MessageChannel {
   public:
    explicit Channel(VerbsConnection* c) : c_(c) {}
    using MessageChannel::Send;
    Status Send(wire::Type type, const std::vector<uint8_t>& payload, const Deadline& deadline,
                const WaitHook& hook, const int* fds, int nfds) override;
    Status Receive(ControlMessage* out, const Deadline& deadline, const WaitHook& hook,
                   const std::string& what) override;
    Status TakeFds(size_t n, std::vector<UniqueFd>* out) override;
    const std::string& peer() const override { return c_->peer_; }

   private:
    VerbsConnection* c_;
  };

  struct Mr {
    ibv_mr* mr = nullptr;
    uint8_t* base = nullptr;          // the allocation's address (pieces are offsets from it)
    std::shared_ptr<const void> pin;  // keeps the allocation mapped while registered
  };
  struct Op {
    uint64_t wr_id;
    CompletionCallback cb;
    uint64_t len;
    bool write;
    uint64_t sq_seq;
  };
  struct ImportedPiece {
    uint64_t addr;
    uint32_t rkey;
    uint64_t length;
    uint64_t region_offset;
  };
  struct ImportedRegion {
    RemoteRegion handle;
    std::vector<ImportedPiece> pieces;
  };

  VerbsConnection(const TransportOptions& options, std::shared_ptr<Memory> memory,
                  rdma_event_channel* channel, rdma_cm_id* id);
  Status CreateQueuePair();
  Status Connect(bool server, const Deadline& deadline);
  Status SetUpRings(const wire::Setup& theirs);

  // Memory registration of the allocation holding [p, p+len).
  Status LocalKey(const void* p, size_t len, uint32_t* lkey);
  Status RegisterSegment(uint64_t segment_id, Mr** out);

  Status PostRecv(uint32_t slot);
  // Sends one control message (waits for a free send buffer until the deadline).
  Status SendControl(wire::Type type, const std::vector<uint8_t>& payload, const Deadline& deadline,
                     const WaitHook& hook);
  Status ReceiveControl(ControlMessage* out, const Deadline& deadline, const WaitHook& hook,
                        const std::string& what);
  void HandleControl(const ControlMessage& m);
  // Polls the completion queue; returns how many completions it handled.
  int PollCq();
  void DrainEvents();
  Status WaitForEvents(const Deadline& deadline, const WaitHook& hook, const std::string& what);

  // Posts a chain of work requests, signalling every kSignalInterval-th so that send-queue
  // slots get retired. Busy when the queue is full. *last_seq: the last request's number.
  Status PostSendChain(ibv_send_wr* first, uint64_t* last_seq);
  bool SqHasRoom(int count);
  Status CheckImported(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                       const ImportedRegion** out);

  rdma_event_channel* cm_channel_;
  rdma_cm_id* id_;
  std::string peer_;
  Channel channel_{this};
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_ = nullptr;
  ibv_cq* cq_ = nullptr;
  bool qp_created_ = false;
  uint32_t max_inline_ = 0;
  int sq_depth_ = 0;

  std::unordered_map<uint64_t, Mr> mrs_;  // by segment id

  // Control buffers: kRecvSlots receive slots then kSendSlots send slots, one allocation.
  uint8_t* control_area_ = nullptr;
  uint32_t control_lkey_ = 0;
  std::vector<bool> send_slot_busy_;
  std::vector<uint64_t> send_slot_seq_;
  std::deque<ControlMessage> inbox_;

  // Send-queue accounting: work requests posted / retired (by signalled completions).
  uint64_t sq_posted_ = 0;
  uint64_t sq_retired_ = 0;
  uint64_t unsignalled_run_ = 0;

  // One-sided operations in flight, by operation id.
  std::unordered_map<uint64_t, Op> ops_;
  uint64_t next_op_ = 1;
  std::unordered_map<uint64_t, ImportedRegion> imports_;

  // The peer's ring block and our staging mirror of its ring.
  uint64_t peer_block_addr_ = 0;
  uint32_t peer_block_rkey_ = 0;
  uint8_t* staging_ = nullptr;  // peer ring bytes + 64 (the lead byte source at the end)
  uint32_t staging_lkey_ = 0;

  uint64_t progress_calls_ = 0;
  int64_t last_cm_check_ms_ = 0;
};

}  // namespace ramp::transport::detail
