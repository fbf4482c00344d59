// Listen / Connect / availability for the verbs provider (built only with libibverbs).
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "core/providers.h"
#include "ramp/log.h"
#include "verbs/verbs_connection.h"

namespace ramp::transport::detail {
namespace {

constexpr int kResolveTimeoutMs = 2000;

// Owns an event channel and a cm id until handed to a connection.
struct CmGuard {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ~CmGuard() {
    if (id != nullptr) rdma_destroy_id(id);
    if (channel != nullptr) rdma_destroy_event_channel(channel);
  }
  Status Create() {
    channel = rdma_create_event_channel();
    if (channel == nullptr) return Status::FromErrno("rdma_create_event_channel", errno);
    RAMP_RETURN_IF_ERROR(SetNonBlocking(channel->fd));
    if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) {
      id = nullptr;
      return Status::FromErrno("rdma_create_id", errno);
    }
    return Status::OK();
  }
};

Status ResolveAddress(const Endpoint& e, bool passive, addrinfo** out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(e.port);
  int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, out);
  if (rc != 0) {
    return Status::InvalidArgument("cannot resolve host '" + e.host + "': " + gai_strerror(rc));
  }
  return Status::OK();
}

class VerbsListener final : public Listener {
 public:
  VerbsListener(CmGuard* cm, Endpoint bound, const TransportOptions& options,
                std::shared_ptr<Memory> memory)
      : endpoint_(std::move(bound)), options_(options), memory_(std::move(memory)) {
    std::swap(cm_.channel, cm->channel);
    std::swap(cm_.id, cm->id);
  }
  const Endpoint& endpoint() const override { return endpoint_; }
  int fd() const override { return cm_.channel != nullptr ? cm_.channel->fd : -1; }

  Status Accept(int timeout_ms, std::unique_ptr<Connection>* out) override {
    if (cm_.channel == nullptr) {
      return Status::Unavailable("listener " + endpoint_.ToString() + " is closed");
    }
    const Deadline deadline = Deadline::After(timeout_ms);
    for (;;) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(cm_.channel, &ev) == 0) {
        const rdma_cm_event_type type = ev->event;
        rdma_cm_id* id = ev->id;
        rdma_ack_cm_event(ev);
        if (type != RDMA_CM_EVENT_CONNECT_REQUEST) continue;  // nothing else concerns us
        // The new connection gets its own event channel (its disconnect lands there).
        CmGuard conn;
        conn.channel = rdma_create_event_channel();
        if (conn.channel == nullptr || rdma_migrate_id(id, conn.channel) != 0) {
          const int err = errno;
          rdma_reject(id, nullptr, 0);
          rdma_destroy_id(id);
          return Status::FromErrno("preparing an accepted verbs connection", err);
        }
        const std::string peer = VerbsPeerName(id);
        rdma_event_channel* channel = conn.channel;
        conn.channel = nullptr;
        Status s = VerbsConnection::Establish(channel, id, /*server=*/true, options_, memory_, out);
        if (!s.ok() && !s.Is(Status::Code::kPermissionDenied)) {
          RAMP_WARN("listener %s: connection from %s failed: %s", endpoint_.ToString().c_str(),
                    peer.c_str(), s.ToString().c_str());
        }
        return s;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Status::FromErrno("rdma_get_cm_event on " + endpoint_.ToString(), errno);
      }
      RAMP_RETURN_IF_ERROR(WaitFd(cm_.channel->fd, POLLIN, deadline, options_.wait_hook,
                                  "a connection on " + endpoint_.ToString()));
    }
  }

  void Close() override {
    if (cm_.id != nullptr) rdma_destroy_id(cm_.id);
    cm_.id = nullptr;
    if (cm_.channel != nullptr) rdma_destroy_event_channel(cm_.channel);
    cm_.channel = nullptr;
  }
  ~VerbsListener() override { Close(); }

 private:
  CmGuard cm_;
  Endpoint endpoint_;
  TransportOptions options_;
  std::shared_ptr<Memory> memory_;
};

}  // namespace

bool VerbsAvailable(std::string* why) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  if (n <= 0) {
    *why = "no RDMA device: ibv_get_device_list found 0 devices";
    return false;
  }
  return true;
}

Status VerbsListen(const Endpoint& endpoint, const TransportOptions& options,
                   std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  CmGuard cm;
  RAMP_RETURN_IF_ERROR(cm.Create());
  addrinfo* list = nullptr;
  RAMP_RETURN_IF_ERROR(ResolveAddress(endpoint, true, &list));
  int rc = rdma_bind_addr(cm.id, list->ai_addr);
  const int err = errno;
  freeaddrinfo(list);
  if (rc != 0) return Status::FromErrno("rdma_bind_addr " + endpoint.ToString(), err);
  if (rdma_listen(cm.id, 128) != 0) {
    return Status::FromErrno("rdma_listen " + endpoint.ToString(), errno);
  }
  Endpoint bound = endpoint;
  bound.port = ntohs(rdma_get_src_port(cm.id));
  *out = std::make_unique<VerbsListener>(&cm, bound, options, std::move(memory));
  return Status::OK();
}

Status VerbsConnect(const Endpoint& endpoint, const TransportOptions& options,
                    std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  CmGuard cm;
  RAMP_RETURN_IF_ERROR(cm.Create());
  addrinfo* list = nullptr;
  RAMP_RETURN_IF_ERROR(ResolveAddress(endpoint, false, &list));
  int rc = rdma_resolve_addr(cm.id, nullptr, list->ai_addr, kResolveTimeoutMs);
  const int err = errno;
  freeaddrinfo(list);
  if (rc != 0) return Status::FromErrno("rdma_resolve_addr " + endpoint.ToString(), err);
  const Deadline deadline = Deadline::After(options.connect_timeout_ms);
  const std::string what = "connect to " + endpoint.ToString();
  RAMP_RETURN_IF_ERROR(
      WaitCmEvent(cm.channel, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, options.wait_hook, what));
  if (rdma_resolve_route(cm.id, kResolveTimeoutMs) != 0) {
    return Status::FromErrno("rdma_resolve_route " + endpoint.ToString(), errno);
  }
  RAMP_RETURN_IF_ERROR(
      WaitCmEvent(cm.channel, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, options.wait_hook, what));
  rdma_event_channel* channel = cm.channel;
  rdma_cm_id* id = cm.id;
  cm.channel = nullptr;
  cm.id = nullptr;
  return VerbsConnection::Establish(channel, id, /*server=*/false, options, std::move(memory), out);
}

}  // namespace ramp::transport::detail
