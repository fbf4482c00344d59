// One channel to one node, and the one way the client library waits (node_channel.h).
#include "client/node_channel.h"

#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace ramp {
namespace {
// The request id of a channel's own HELLO: requests of the client and of the page reader
// are numbered from 1, and nothing else is in flight on a connection before its HELLO.
constexpr uint64_t kHelloRequestId = 0;
}  // namespace

transport::TransportOptions ChannelContext::ConnectOptions() const {
  transport::TransportOptions t;
  t.token = options.token;
  t.ring_bytes = options.ring_bytes;
  t.connect_timeout_ms = options.connect_timeout_ms;
  t.handshake_timeout_ms = options.connect_timeout_ms;
  t.responder_thread = false;  // a backend must not get threads: serve peers while polling
  t.wait_hook = options.wait_hook;
  return t;
}

// ---- DoorbellSet ---------------------------------------------------------------------------

DoorbellSet::~DoorbellSet() {
  if (fd_ >= 0) close(fd_);
}

Status DoorbellSet::Init() {
  if (fd_ >= 0) return Status::OK();
  fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (fd_ < 0) return Status::FromErrno("epoll_create1", errno);
  return Status::OK();
}

Status DoorbellSet::Add(transport::Connection* conn) {
  RAMP_RETURN_IF_ERROR(Init());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = conn;
  if (epoll_ctl(fd_, EPOLL_CTL_ADD, conn->wait_fd(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno);
  }
  members_.push_back(conn);
  return Status::OK();
}

void DoorbellSet::Remove(transport::Connection* conn) {
  auto it = std::find(members_.begin(), members_.end(), conn);
  if (it == members_.end()) return;
  epoll_ctl(fd_, EPOLL_CTL_DEL, conn->wait_fd(), nullptr);
  *it = members_.back();
  members_.pop_back();
}

Status DoorbellSet::Sleep(int timeout_ms) {
  for (transport::Connection* c : members_) {
    if (!c->Arm()) return Status::OK();  // something already waits
  }
  if (fd_ < 0) return Status::OK();
  epoll_event events[16];
  if (sleeps_ != nullptr) ++*sleeps_;
  const int n = epoll_wait(fd_, events, 16, timeout_ms);
  if (n == 0 && timeouts_ != nullptr) ++*timeouts_;
  if (n < 0 && errno != EINTR) return Status::FromErrno("epoll_wait", errno);
  return Status::OK();
}

// ---- NodeChannel ---------------------------------------------------------------------------

NodeChannel::NodeChannel(NodeChannel&& other) noexcept
    : context_(other.context_),
      doorbells_(other.doorbells_),
      node_(other.node_),
      name_(std::move(other.name_)),
      endpoint_(std::move(other.endpoint_)),
      has_endpoint_(other.has_endpoint_),
      conn_(std::move(other.conn_)),  // its doorbell registration goes with it
      hello_(std::move(other.hello_)),
      last_error_(std::move(other.last_error_)) {}

NodeChannel& NodeChannel::operator=(NodeChannel&& other) noexcept {
  if (this == &other) return *this;
  Drop();
  context_ = other.context_;
  doorbells_ = other.doorbells_;
  node_ = other.node_;
  name_ = std::move(other.name_);
  endpoint_ = std::move(other.endpoint_);
  has_endpoint_ = other.has_endpoint_;
  conn_ = std::move(other.conn_);
  hello_ = std::move(other.hello_);
  last_error_ = std::move(other.last_error_);
  return *this;
}

void NodeChannel::Setup(ChannelContext* context, DoorbellSet* doorbells, uint32_t node,
                        std::string name) {
  context_ = context;
  doorbells_ = doorbells;
  node_ = node;
  name_ = std::move(name);
}

void NodeChannel::Drop() {
  if (!conn_) return;
  if (doorbells_ != nullptr) doorbells_->Remove(conn_.get());
  conn_->Close();
  conn_.reset();
}

void NodeChannel::Reset(const Status& why) {
  Drop();
  last_error_ = why;
}

bool NodeChannel::ResetIfClosed() {
  if (!conn_) return false;
  transport::Completion completions[4];
  (void)conn_->Poll(completions, 4);
  // Arming only makes the peer ring the doorbell once more; the next sleep drains it.
  if (!conn_->closed()) (void)conn_->Arm();
  if (conn_->closed()) Reset(conn_->close_status());
  return conn_ != nullptr;
}

Status NodeChannel::Open() {
  Status st = Connect();
  if (!has_endpoint_) return st;  // "<name> has no endpoint"
  if (!st.ok()) {
    return Status(st.code(), "cannot connect to " + name_ + " at " + endpoint_.ToString() + ": " +
                                 st.message());
  }
  st = SayHello();
  if (!st.ok()) return st.Annotate("HELLO to " + name_);
  return Status::OK();
}

Status NodeChannel::Connect() {
  Drop();
  if (!has_endpoint_) {
    last_error_ = Status::Unavailable(name_ + " has no endpoint");
    return last_error_;
  }
  std::unique_ptr<transport::Connection> conn;
  Status st = transport::Connect(endpoint_, context_->ConnectOptions(), context_->memory, &conn);
  if (st.ok() && doorbells_ != nullptr) st = doorbells_->Add(conn.get());
  if (!st.ok()) {
    if (conn) conn->Close();
    last_error_ = st;
    return st;
  }
  conn_ = std::move(conn);
  return Status::OK();
}

Status NodeChannel::SayHello() {
  if (!conn_) return Status::Internal("HELLO on a channel that is not connected");
  protocol::Hello hello;
  hello.client_id = context_->client_id;
  std::string body;
  protocol::Encode(hello, &body);
  Status st = Send(protocol::Op::kHello, 0, kHelloRequestId, body);
  if (st.ok()) st = AwaitHello(kHelloRequestId);
  if (st.ok() && node_ != kAnyNode && hello_.node != node_) {
    st = Status::InvalidArgument("server at " + endpoint_.ToString() + " says it is node " +
                                 std::to_string(hello_.node) + ", the cluster lists it as node " +
                                 std::to_string(node_));
  }
  if (st.ok() && hello_.node >= hello_.node_count) {
    st = Status::Corruption("server at " + endpoint_.ToString() + " says it is node " +
                            std::to_string(hello_.node) + " of " +
                            std::to_string(hello_.node_count));
  }
  if (!st.ok()) {
    Reset(st);
    return st;
  }
  return Status::OK();
}

Status NodeChannel::AwaitHello(uint64_t request_id) {
  Waiter waiter(*context_, doorbells_);
  for (;;) {
    bool did = false;
    transport::Completion completions[16];
    if (conn_->Poll(completions, 16) > 0) did = true;
    transport::MessageView msg;
    if (conn_->Receive(&msg)) {
      std::string_view bytes(reinterpret_cast<const char*>(msg.data), msg.size);
      protocol::Header h;
      Status st = protocol::DecodeHeader(bytes, &h);
      if (st.ok() && !h.is_reply()) st = Status::Corruption("server sent a request to a client");
      if (st.ok() && (h.request_id != request_id || h.base_op() != protocol::Op::kHello)) {
        st = Status::Corruption("the first reply on a connection is not the HELLO reply");
      }
      if (st.ok()) {
        context_->clock.Observe(h.clock);
        const std::string_view body = bytes.substr(protocol::kHeaderBytes);
        st = protocol::DecodeErrorReply(h, body);
        if (st.ok()) st = protocol::Decode(body, &hello_);
      }
      conn_->Release();
      return st;
    }
    if (conn_->closed()) {
      return Status::Unavailable(name_ + " went away: " + conn_->close_status().message());
    }
    RAMP_RETURN_IF_ERROR(waiter.Next(did, [&] {
      return "no reply from " + name_ + " within " + std::to_string(context_->options.timeout_ms) +
             " ms";
    }));
  }
}

Status NodeChannel::Send(protocol::Op op, uint32_t count, uint64_t request_id,
                         std::string_view body) {
  protocol::Header h;
  h.op = static_cast<uint16_t>(op);
  h.count = count;
  h.request_id = request_id;
  h.clock = context_->clock.Peek();
  header_.clear();
  protocol::EncodeHeader(h, &header_);
  iovec iov[2] = {{header_.data(), header_.size()}, {const_cast<char*>(body.data()), body.size()}};
  return conn_->SendV(iov, body.empty() ? 1 : 2);
}

}  // namespace ramp
