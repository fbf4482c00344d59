#include "core/control_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ramp::transport::detail {
namespace {

constexpr size_t kMaxFdsPerRead = wire::kMaxSegmentsPerMessage;

}  // namespace

Status ControlChannel::Send(wire::Type type, const std::vector<uint8_t>& payload,
                            const Deadline& deadline, const WaitHook& hook, const int* fds,
                            int nfds) {
  if (payload.size() > max_payload_) {
    return Status::Internal("control message of " + std::to_string(payload.size()) +
                            " bytes exceeds the limit");
  }
  uint8_t header[wire::kHeaderBytes];
  wire::EncodeHeader(static_cast<uint8_t>(type), static_cast<uint32_t>(payload.size()), header);
  size_t total = sizeof(header) + payload.size();
  size_t sent = 0;
  bool fds_sent = nfds == 0;
  while (sent < total) {
    iovec iov[2];
    int iovcnt = 0;
    if (sent < sizeof(header)) {
      iov[iovcnt++] = {header + sent, sizeof(header) - sent};
      if (!payload.empty()) {
        iov[iovcnt++] = {const_cast<uint8_t*>(payload.data()), payload.size()};
      }
    } else {
      size_t off = sent - sizeof(header);
      iov[iovcnt++] = {const_cast<uint8_t*>(payload.data()) + off, payload.size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
    if (!fds_sent) {
      if (nfds < 0 || static_cast<size_t>(nfds) > kMaxFdsPerRead) {
        return Status::Internal("too many file descriptors in one control message");
      }
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(nfds));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(nfds));
      std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(nfds));
    }
    ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      fds_sent = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RAMP_RETURN_IF_ERROR(WaitFd(fd_, POLLOUT, deadline, hook, "room to send to " + peer_));
      continue;
    }
    int err = n < 0 ? errno : EPIPE;
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
      return Status::Unavailable("peer " + peer_ + " closed the connection");
    }
    return Status::FromErrno("sending to " + peer_, err);
  }
  return Status::OK();
}

Status ControlChannel::ReadSome(bool* eof, bool* read_any) {
  *eof = false;
  *read_any = false;
  if (head_ > 0 && head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  } else if (head_ > 65536) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }
  const size_t chunk = 16384;
  size_t at = buf_.size();
  buf_.resize(at + chunk);
  iovec iov{buf_.data() + at, chunk};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    buf_.resize(at);
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
    if (errno == ECONNRESET || errno == ENOTCONN) {
      *eof = true;
      return Status::OK();
    }
    return Status::FromErrno("receiving from " + peer_, errno);
  }
  buf_.resize(at + static_cast<size_t>(n));
  // Take every descriptor first so none leaks, whatever we decide about the message.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; i++) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    return Status::Corruption("peer " + peer_ + " sent more file descriptors than allowed");
  }
  if (fds_.size() > 4 * kMaxFdsPerRead) {
    return Status::Corruption("peer " + peer_ + " sent file descriptors nobody asked for");
  }
  if (n == 0) *eof = true;
  *read_any = n > 0;
  return Status::OK();
}

bool ControlChannel::Extract(ControlMessage* out, Status* error) {
  size_t avail = buf_.size() - head_;
  if (avail < wire::kHeaderBytes) return false;
  uint8_t type = 0;
  uint32_t len = 0;
  Status s = wire::DecodeHeader(buf_.data() + head_, max_payload_, &type, &len);
  if (!s.ok()) {
    *error = s.Annotate("control message from " + peer_);
    return false;
  }
  if (avail < wire::kHeaderBytes + len) return false;
  out->type = type;
  const uint8_t* p = buf_.data() + head_ + wire::kHeaderBytes;
  out->payload.assign(p, p + len);
  head_ += wire::kHeaderBytes + len;
  return true;
}

Status ControlChannel::TryReceive(ControlMessage* out, bool* got) {
  *got = false;
  Status error;
  if (Extract(out, &error)) {
    *got = true;
    return Status::OK();
  }
  if (!error.ok()) return error;
  if (eof_) return Status::Unavailable("peer " + peer_ + " closed the connection");
  for (;;) {
    bool eof = false;
    bool read_any = false;
    RAMP_RETURN_IF_ERROR(ReadSome(&eof, &read_any));
    if (Extract(out, &error)) {
      *got = true;
      if (eof) eof_ = true;
      return Status::OK();
    }
    if (!error.ok()) return error;
    if (eof) {
      eof_ = true;
      return Status::Unavailable("peer " + peer_ + " closed the connection");
    }
    if (!read_any) return Status::OK();
  }
}

Status ControlChannel::Fill(bool* whole) {
  *whole = false;
  for (;;) {
    const size_t avail = buf_.size() - head_;
    if (avail >= wire::kHeaderBytes) {
      uint8_t type = 0;
      uint32_t len = 0;
      Status s = wire::DecodeHeader(buf_.data() + head_, max_payload_, &type, &len);
      if (!s.ok()) return s.Annotate("control message from " + peer_);
      if (avail >= wire::kHeaderBytes + len) {
        *whole = true;
        return Status::OK();
      }
    }
    if (eof_) return Status::Unavailable("peer " + peer_ + " closed the connection");
    bool eof = false;
    bool read_any = false;
    RAMP_RETURN_IF_ERROR(ReadSome(&eof, &read_any));
    if (eof) eof_ = true;
    if (!read_any && !eof) return Status::OK();
  }
}

Status ControlChannel::Receive(ControlMessage* out, const Deadline& deadline, const WaitHook& hook,
                               const std::string& what) {
  for (;;) {
    bool got = false;
    RAMP_RETURN_IF_ERROR(TryReceive(out, &got));
    if (got) return Status::OK();
    RAMP_RETURN_IF_ERROR(WaitFd(fd_, POLLIN, deadline, hook, what + " from " + peer_));
  }
}

Status ControlChannel::TakeFds(size_t n, std::vector<UniqueFd>* out) {
  if (fds_.size() < n) {
    return Status::Corruption("peer " + peer_ + " announced " + std::to_string(n) +
                              " file descriptors but sent " + std::to_string(fds_.size()));
  }
  out->clear();
  for (size_t i = 0; i < n; i++) {
    out->push_back(std::move(fds_.front()));
    fds_.pop_front();
  }
  return Status::OK();
}

}  // namespace ramp::transport::detail
