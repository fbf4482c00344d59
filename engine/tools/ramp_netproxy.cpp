// ramp_netproxy: a forwarding TCP proxy that adds delay, jitter and loss in user space, for
// clusters on one machine (scripts/netns-cluster.sh) where the kernel has no netem qdisc.
//
// Every chunk read from one side is written to the other side no earlier than
// read time + delay ± jitter (uniform). Chunks of one direction keep their order: a chunk is
// never released before the one read before it, so jitter never reorders bytes (it only
// delays later chunks behind an earlier, later-released one, as a real TCP stream would).
// Loss is modelled the way TCP shows it to applications:
//   --loss PCT   a chunk is "lost" with probability PCT % and arrives one retransmission
//                timeout (--rto-us, default 200 ms = Linux's minimum RTO) late; the chunks
//                behind it wait for it (head-of-line blocking);
//   --reset PCT  with probability PCT % per chunk the connection is reset instead (both sides
//                get an RST), as after a long outage.
// A chunk is what one read() returned (up to 64 KiB), not a packet.
// A single thread serves all connections (epoll + a timerfd armed to the next due chunk);
// SIGHUP re-reads --config (lines "delay_us = N", "jitter_us", "loss_pct", "reset_pct",
// "rto_us"), so a harness can change a link's delay without dropping connections.
//
// Other modes, to measure it: --echo ADDR (an echo server), --ping ADDR (round trips, prints
// RTT percentiles), --selftest (echo + proxy + ping in one process on loopback: checks that
// the byte stream arrives intact and in order and that the added RTT is about 2 × delay).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

const char* kUsage = R"(usage: ramp_netproxy --listen HOST:PORT --to HOST:PORT [link options]
       ramp_netproxy --echo HOST:PORT
       ramp_netproxy --ping HOST:PORT [--count N] [--size BYTES] [--interval-us N]
       ramp_netproxy --selftest [link options] [--count N]

Forwards TCP connections from --listen to --to, delaying every chunk in both directions.
  --delay-us N     one-way delay added to each direction (default 0): RTT grows by 2 N
  --jitter-us N    uniform jitter ±N around the delay (order is kept)
  --loss PCT       per chunk: arrives one --rto-us late (TCP retransmission), in percent
  --rto-us N       (default 200000)
  --reset PCT      per chunk: the connection is reset, in percent
  --seed N         random seed (default: from the clock)
  --config FILE    link options as "delay_us = N" lines; SIGHUP re-reads it
  --pid-file FILE  written once listening
)";

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool ParseAddr(const std::string& s, sockaddr_in* out) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  char* end = nullptr;
  const long port = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return false;
  out->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Closes with an RST rather than a FIN.
void CloseReset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

int ListenOn(const sockaddr_in& addr, std::string* err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 512) != 0) {
    *err = std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

struct LinkParams {
  int64_t delay_us = 0, jitter_us = 0, rto_us = 200000;
  double loss_pct = 0, reset_pct = 0;
};

bool SetParam(LinkParams* p, const std::string& name, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || v < 0) return false;
  if (name == "delay_us" || name == "delay-us") {
    p->delay_us = static_cast<int64_t>(v);
  } else if (name == "jitter_us" || name == "jitter-us") {
    p->jitter_us = static_cast<int64_t>(v);
  } else if (name == "rto_us" || name == "rto-us") {
    p->rto_us = static_cast<int64_t>(v);
  } else if (name == "loss_pct" || name == "loss") {
    p->loss_pct = v;
  } else if (name == "reset_pct" || name == "reset") {
    p->reset_pct = v;
  } else {
    return false;
  }
  return true;
}

bool LoadParams(const std::string& path, LinkParams* p, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = "cannot read " + path;
    return false;
  }
  LinkParams next = *p;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const size_t eq = line.find('=');
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    if (trim(line).empty()) continue;
    if (eq == std::string::npos ||
        !SetParam(&next, trim(line.substr(0, eq)), trim(line.substr(eq + 1)))) {
      *err = path + ": bad line '" + line + "'";
      return false;
    }
  }
  *p = next;
  return true;
}

// ---- the proxy ----------------------------------------------------------------------------

class Proxy {
 public:
  Proxy(int listen_fd, sockaddr_in to, LinkParams params, uint64_t seed)
      : listen_fd_(listen_fd), to_(to), params_(params), rng_(seed) {}

  // Serves until stop_fd (an eventfd, or -1) becomes readable or a signal of sig_fd (-1: none)
  // asks to stop. SIGHUP calls reload.
  int Run(int stop_fd, int sig_fd, const std::string& config) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    Watch(listen_fd_, EPOLLIN);
    Watch(timer_, EPOLLIN);
    if (stop_fd >= 0) Watch(stop_fd, EPOLLIN);
    if (sig_fd >= 0) Watch(sig_fd, EPOLLIN);
    std::vector<epoll_event> evs(256);
    for (;;) {
      const int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("ramp_netproxy: epoll_wait");
        return 2;
      }
      for (int i = 0; i < n; i++) {
        const int fd = evs[i].data.fd;
        if (fd == listen_fd_) {
          Accept();
        } else if (fd == timer_) {
          uint64_t x;
          while (read(timer_, &x, sizeof(x)) > 0) {
          }
        } else if (fd == stop_fd) {
          return 0;
        } else if (fd == sig_fd) {
          signalfd_siginfo si;
          while (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
            if (si.ssi_signo != SIGHUP) return 0;
            std::string err;
            if (config.empty()) continue;
            if (LoadParams(config, &params_, &err)) {
              std::fprintf(stderr, "ramp_netproxy: delay %lld us, jitter %lld us, loss %g %%\n",
                           static_cast<long long>(params_.delay_us),
                           static_cast<long long>(params_.jitter_us), params_.loss_pct);
            } else {
              std::fprintf(stderr, "ramp_netproxy: %s (kept the old settings)\n", err.c_str());
            }
          }
        } else if (auto it = by_fd_.find(fd); it != by_fd_.end()) {
          Conn* c = it->second;
          if (fd == c->b && !c->connected && (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
            int soerr = 0;
            socklen_t len = sizeof(soerr);
            getsockopt(c->b, SOL_SOCKET, SO_ERROR, &soerr, &len);
            if (soerr != 0) {
              Drop(c, true);
              continue;
            }
            c->connected = true;
          }
          if (evs[i].events & EPOLLERR) {
            Drop(c, true);
            continue;
          }
          if (evs[i].events & (EPOLLIN | EPOLLHUP)) ReadSide(c, fd == c->a);
          if (!c->dead && (evs[i].events & EPOLLHUP)) {
            // Both halves of this socket are closed: fine once it sent its FIN and got ours
            // (epoll reports HUP whatever the mask says, so stop watching it); else a reset.
            const bool is_a = fd == c->a;
            if ((is_a ? c->up.eof : c->down.eof) && (is_a ? c->down.shut : c->up.shut)) {
              epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
              (is_a ? c->ev_a : c->ev_b) = kGone;
            } else {
              Drop(c, true);
              continue;
            }
          }
          if (!c->dead && (evs[i].events & EPOLLOUT)) {
            Flush(c, fd == c->a ? &c->down : &c->up);
          }
          if (!c->dead) Update(c);
        }
      }
      ReleaseDue();
      Reap();
      ArmTimer();
    }
  }

 private:
  struct Chunk {
    int64_t due;
    std::string data;
    size_t off = 0;
  };
  struct Dir {
    std::deque<Chunk> q;
    size_t queued = 0;
    int64_t last_due = 0;
    bool eof = false;      // the source side closed its writing half
    bool shut = false;     // we passed the close on
    bool blocked = false;  // the destination's send buffer is full
  };
  struct Conn {
    uint64_t id;
    int a = -1, b = -1;  // a: accepted (client), b: upstream (server)
    bool connected = false, dead = false;
    Dir up, down;  // up: a -> b, down: b -> a
    uint32_t ev_a = 0, ev_b = 0;
  };
  static constexpr size_t kMaxQueued = 8 << 20;
  static constexpr uint32_t kGone = 0xffffffff;  // no longer watched

  void Watch(int fd, uint32_t events) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e);
  }

  void Accept() {
    for (;;) {
      int a = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (a < 0) return;
      int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      SetNoDelay(a);
      SetNoDelay(b);
      auto c = std::make_unique<Conn>();
      c->id = next_id_++;
      c->a = a;
      c->b = b;
      if (connect(b, reinterpret_cast<const sockaddr*>(&to_), sizeof(to_)) == 0) {
        c->connected = true;
      } else if (errno != EINPROGRESS) {
        CloseReset(a);
        close(b);
        continue;
      }
      by_fd_[a] = c.get();
      by_fd_[b] = c.get();
      c->ev_a = EPOLLIN;
      c->ev_b = EPOLLOUT | EPOLLIN;
      Watch(a, c->ev_a);
      Watch(b, c->ev_b);
      conns_[c->id] = std::move(c);
    }
  }

  int64_t DueFor(Dir* d, int64_t now) {
    int64_t delay = params_.delay_us;
    if (params_.jitter_us > 0) {
      delay += std::uniform_int_distribution<int64_t>(-params_.jitter_us, params_.jitter_us)(rng_);
    }
    if (params_.loss_pct > 0 && Chance(params_.loss_pct)) delay += params_.rto_us;
    const int64_t due = std::max(now + std::max<int64_t>(delay, 0) * 1000, d->last_due);
    d->last_due = due;
    return due;
  }
  bool Chance(double pct) { return std::uniform_real_distribution<double>(0, 100)(rng_) < pct; }

  // Reads what side a (from_a) or b has to send and queues it for the other side.
  void ReadSide(Conn* c, bool from_a) {
    Dir* d = from_a ? &c->up : &c->down;
    const int fd = from_a ? c->a : c->b;
    if (!from_a && !c->connected) return;
    while (!d->eof && d->queued < kMaxQueued) {
      char buf[65536];
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n > 0) {
        if (params_.reset_pct > 0 && Chance(params_.reset_pct)) {
          Drop(c, true);
          return;
        }
        const int64_t now = NowNs();
        d->q.push_back(Chunk{DueFor(d, now), std::string(buf, static_cast<size_t>(n))});
        d->queued += static_cast<size_t>(n);
        timers_.push({d->q.back().due, c->id});
        continue;
      }
      if (n == 0) {
        d->eof = true;
        if (d->q.empty()) Flush(c, d);
        break;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN) Drop(c, true);  // reset by the peer: pass the reset on
      break;
    }
  }

  // Writes the chunks of d that are due.
  void Flush(Conn* c, Dir* d) {
    if (c->dead) return;
    const int to = d == &c->up ? c->b : c->a;
    if (d == &c->up && !c->connected) return;
    const int64_t now = NowNs();
    d->blocked = false;
    while (!d->q.empty() && d->q.front().due <= now) {
      Chunk& ch = d->q.front();
      const ssize_t n = send(to, ch.data.data() + ch.off, ch.data.size() - ch.off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          d->blocked = true;
          return;
        }
        Drop(c, true);
        return;
      }
      ch.off += static_cast<size_t>(n);
      d->queued -= static_cast<size_t>(n);
      if (ch.off < ch.data.size()) {
        d->blocked = true;
        return;
      }
      d->q.pop_front();
    }
    if (d->q.empty() && d->eof && !d->shut) {
      shutdown(to, SHUT_WR);
      d->shut = true;
      if (c->up.shut && c->down.shut) Drop(c, false);
    }
  }

  void Update(Conn* c) {
    uint32_t ea = 0, eb = 0;
    if (!c->up.eof && c->up.queued < kMaxQueued) ea |= EPOLLIN;
    if (c->down.blocked) ea |= EPOLLOUT;
    if (!c->connected) {
      eb = EPOLLOUT;
    } else {
      if (!c->down.eof && c->down.queued < kMaxQueued) eb |= EPOLLIN;
      if (c->up.blocked) eb |= EPOLLOUT;
    }
    auto mod = [this](int fd, uint32_t ev, uint32_t* cur) {
      if (ev == *cur || *cur == kGone) return;
      epoll_event e{};
      e.events = ev;
      e.data.fd = fd;
      epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &e);
      *cur = ev;
    };
    mod(c->a, ea, &c->ev_a);
    mod(c->b, eb, &c->ev_b);
  }

  void Drop(Conn* c, bool reset) {
    if (c->dead) return;
    c->dead = true;
    for (int fd : {c->a, c->b}) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
      by_fd_.erase(fd);
      if (reset) {
        CloseReset(fd);
      } else {
        close(fd);
      }
    }
    dead_.push_back(c->id);
  }

  void Reap() {
    for (uint64_t id : dead_) conns_.erase(id);
    dead_.clear();
  }

  void ReleaseDue() {
    const int64_t now = NowNs();
    while (!timers_.empty() && timers_.top().first <= now) {
      const uint64_t id = timers_.top().second;
      timers_.pop();
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second->dead) continue;
      Conn* c = it->second.get();
      Flush(c, &c->up);
      Flush(c, &c->down);
      if (!c->dead) {
        // Reading may resume once the queue drained below the limit.
        ReadSide(c, true);
        if (!c->dead) ReadSide(c, false);
        if (!c->dead) Update(c);
      }
    }
  }

  void ArmTimer() {
    itimerspec its{};
    if (!timers_.empty()) {
      const int64_t due = std::max<int64_t>(timers_.top().first, 1);
      its.it_value.tv_sec = due / 1000000000;
      its.it_value.tv_nsec = due % 1000000000;
    }
    if (timers_.empty() ? armed_ == 0 : armed_ == timers_.top().first) return;
    armed_ = timers_.empty() ? 0 : timers_.top().first;
    timerfd_settime(timer_, TFD_TIMER_ABSTIME, &its, nullptr);
  }

  int listen_fd_;
  sockaddr_in to_;
  LinkParams params_;
  std::mt19937_64 rng_;
  int ep_ = -1, timer_ = -1;
  int64_t armed_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<int, Conn*> by_fd_;
  std::vector<uint64_t> dead_;
  using Timer = std::pair<int64_t, uint64_t>;  // due, connection id
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
};

// ---- echo and ping (to measure) -------------------------------------------------------------

bool ReadFull(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool WriteFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Serves echo connections (a thread each) until the listening socket is shut down.
void EchoServe(int listen_fd) {
  const int flags = fcntl(listen_fd, F_GETFL);
  fcntl(listen_fd, F_SETFL, flags & ~O_NONBLOCK);
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    SetNoDelay(fd);
    std::thread([fd] {
      char buf[65536];
      for (;;) {
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0 || !WriteFull(fd, buf, static_cast<size_t>(n))) break;
      }
      close(fd);
    }).detach();
  }
}

int Connect(const sockaddr_in& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  SetNoDelay(fd);
  return fd;
}

struct PingStats {
  bool ok = false;
  std::string error;
  std::vector<int64_t> rtt_us;  // sorted
  int64_t Pct(double p) const {
    if (rtt_us.empty()) return 0;
    return rtt_us[std::min(rtt_us.size() - 1, static_cast<size_t>(p / 100.0 * rtt_us.size()))];
  }
  std::string Line(const char* what) const {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "%s: %zu round trips, rtt us: min %lld p50 %lld p90 %lld p99 %lld max %lld", what,
                  rtt_us.size(), static_cast<long long>(Pct(0)), static_cast<long long>(Pct(50)),
                  static_cast<long long>(Pct(90)), static_cast<long long>(Pct(99)),
                  static_cast<long long>(rtt_us.empty() ? 0 : rtt_us.back()));
    return buf;
  }
};

// Round trips of `size` bytes; checks that every echo matches what was sent.
PingStats Ping(const sockaddr_in& addr, int count, size_t size, int interval_us) {
  PingStats s;
  const int fd = Connect(addr);
  if (fd < 0) {
    s.error = std::string("connect: ") + std::strerror(errno);
    return s;
  }
  std::string out(size, '\0'), in(size, '\0');
  for (int i = 0; i < count && s.error.empty(); i++) {
    for (size_t j = 0; j < size; j++) out[j] = static_cast<char>((i * 131 + j) & 0xff);
    const int64_t t0 = NowNs();
    if (!WriteFull(fd, out.data(), size) || !ReadFull(fd, in.data(), size)) {
      s.error = "connection lost after " + std::to_string(i) + " round trips";
      break;
    }
    s.rtt_us.push_back((NowNs() - t0) / 1000);
    if (in != out) s.error = "round trip " + std::to_string(i) + " came back altered";
    if (interval_us > 0) usleep(static_cast<useconds_t>(interval_us));
  }
  close(fd);
  std::sort(s.rtt_us.begin(), s.rtt_us.end());
  s.ok = s.error.empty();
  return s;
}

// Streams `total` bytes of a counting pattern through the echo without waiting for replies
// (many chunks in flight, each with its own jitter) and checks they all come back in order.
std::string StreamCheck(const sockaddr_in& addr, size_t total) {
  const int fd = Connect(addr);
  if (fd < 0) return std::string("connect: ") + std::strerror(errno);
  std::thread writer([fd, total] {
    std::string buf(1000, '\0');
    for (size_t sent = 0; sent < total; sent += buf.size()) {
      for (size_t j = 0; j < buf.size(); j++) buf[j] = static_cast<char>(((sent + j) * 7) & 0xff);
      if (!WriteFull(fd, buf.data(), buf.size())) return;
      usleep(20);
    }
    shutdown(fd, SHUT_WR);
  });
  std::string err;
  size_t got = 0;
  char buf[65536];
  while (got < total) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
      err = "stream cut after " + std::to_string(got) + " of " + std::to_string(total) + " bytes";
      break;
    }
    for (ssize_t j = 0; j < n && err.empty(); j++, got++) {
      if (buf[j] != static_cast<char>((got * 7) & 0xff)) {
        err = "stream reordered or altered at byte " + std::to_string(got);
      }
    }
    if (!err.empty()) break;
  }
  if (err.empty() && read(fd, buf, 1) != 0) err = "the proxy did not pass the close on";
  shutdown(fd, SHUT_RDWR);
  writer.join();
  close(fd);
  return err;
}

int SelfTest(const LinkParams& params, int count) {
  std::string err;
  sockaddr_in lo{};
  ParseAddr("127.0.0.1:0", &lo);
  const int echo_fd = ListenOn(lo, &err);
  const int proxy_fd = ListenOn(lo, &err);
  if (echo_fd < 0 || proxy_fd < 0) {
    std::fprintf(stderr, "ramp_netproxy: selftest: listen: %s\n", err.c_str());
    return 2;
  }
  sockaddr_in echo_addr = lo, proxy_addr = lo;
  echo_addr.sin_port = htons(PortOf(echo_fd));
  proxy_addr.sin_port = htons(PortOf(proxy_fd));
  std::thread echo([echo_fd] { EchoServe(echo_fd); });
  const int stop = eventfd(0, EFD_CLOEXEC);
  Proxy proxy(proxy_fd, echo_addr, params, 42);
  std::thread loop([&] { proxy.Run(stop, -1, ""); });

  int failures = 0;
  const PingStats direct = Ping(echo_addr, count, 64, 200);
  const PingStats through = Ping(proxy_addr, count, 64, 200);
  std::printf("%s\n%s\n", direct.Line("direct").c_str(), through.Line("through proxy").c_str());
  if (!direct.ok || !through.ok) {
    std::printf("FAIL: %s\n", (!direct.ok ? direct.error : through.error).c_str());
    failures++;
  } else {
    const int64_t want = 2 * params.delay_us;
    const int64_t added_p50 = through.Pct(50) - direct.Pct(50);
    const int64_t added_min = through.Pct(0) - direct.Pct(0);
    std::printf("RESULT netproxy_configured_rtt_us %lld\n", static_cast<long long>(want));
    std::printf("RESULT netproxy_added_rtt_us_min %lld\n", static_cast<long long>(added_min));
    std::printf("RESULT netproxy_added_rtt_us_p50 %lld\n", static_cast<long long>(added_p50));
    std::printf("RESULT netproxy_added_rtt_us_p99 %lld\n",
                static_cast<long long>(through.Pct(99) - direct.Pct(99)));
    // A chunk is never released early (the timer is absolute and the due time starts when
    // the proxy read it), so the minimum is a hard bound; the median gets a loose upper
    // bound: this runs on loaded machines.
    if (through.Pct(0) < want - params.jitter_us * 2) {
      std::printf("FAIL: a round trip took %lld us, less than the configured %lld us\n",
                  static_cast<long long>(through.Pct(0)), static_cast<long long>(want));
      failures++;
    }
    if (params.loss_pct == 0 && added_p50 > want + params.jitter_us + 3000) {
      std::printf("FAIL: median added RTT %lld us, configured %lld us\n",
                  static_cast<long long>(added_p50), static_cast<long long>(want));
      failures++;
    }
  }
  const std::string stream = StreamCheck(proxy_addr, 2 << 20);
  if (!stream.empty()) {
    std::printf("FAIL: %s\n", stream.c_str());
    failures++;
  } else {
    std::printf("stream: 2 MiB in 1000-byte writes came back intact and in order\n");
  }
  uint64_t one = 1;
  if (write(stop, &one, sizeof(one)) != sizeof(one)) std::perror("eventfd");
  loop.join();
  shutdown(echo_fd, SHUT_RDWR);
  echo.join();
  std::printf("%s\n", failures == 0 ? "selftest: ok" : "selftest: FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Timers fire up to the timer slack late (50 us by default): make it 1 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::string listen, to, echo, ping, config, pid_file;
  bool selftest = false;
  LinkParams params;
  long count = 1000, size = 64, interval_us = 200;
  uint64_t seed = static_cast<uint64_t>(NowNs());
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i], v;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (eq != std::string::npos) return v;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ramp_netproxy: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--selftest") {
      selftest = true;
    } else if (a == "--listen") {
      listen = value();
    } else if (a == "--to") {
      to = value();
    } else if (a == "--echo") {
      echo = value();
    } else if (a == "--ping") {
      ping = value();
    } else if (a == "--config") {
      config = value();
    } else if (a == "--pid-file") {
      pid_file = value();
    } else if (a == "--count") {
      count = std::atol(value().c_str());
    } else if (a == "--size") {
      size = std::max(1L, std::atol(value().c_str()));
    } else if (a == "--interval-us") {
      interval_us = std::atol(value().c_str());
    } else if (a == "--seed") {
      seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a.rfind("--", 0) == 0 && SetParam(&params, a.substr(2), value())) {
    } else {
      std::fprintf(stderr, "ramp_netproxy: bad argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  std::string err;
  if (!config.empty() && !LoadParams(config, &params, &err)) {
    std::fprintf(stderr, "ramp_netproxy: %s\n", err.c_str());
    return 2;
  }
  if (selftest) return SelfTest(params, static_cast<int>(count));
  sockaddr_in addr{};
  if (!ping.empty()) {
    if (!ParseAddr(ping, &addr)) {
      std::fprintf(stderr, "ramp_netproxy: bad address '%s'\n", ping.c_str());
      return 2;
    }
    const PingStats s = Ping(addr, static_cast<int>(count), static_cast<size_t>(size),
                             static_cast<int>(interval_us));
    if (!s.ok) {
      std::fprintf(stderr, "ramp_netproxy: ping %s: %s\n", ping.c_str(), s.error.c_str());
      return 1;
    }
    std::printf("%s\n", s.Line(("ping " + ping).c_str()).c_str());
    return 0;
  }
  const std::string& bind_to = echo.empty() ? listen : echo;
  if (bind_to.empty() || (echo.empty() && to.empty())) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  sockaddr_in dest{};
  if (!ParseAddr(bind_to, &addr) || (echo.empty() && !ParseAddr(to, &dest))) {
    std::fprintf(stderr, "ramp_netproxy: bad address '%s'\n", (echo.empty() ? to : echo).c_str());
    return 2;
  }
  const int fd = ListenOn(addr, &err);
  if (fd < 0) {
    std::fprintf(stderr, "ramp_netproxy: cannot listen on %s: %s\n", bind_to.c_str(), err.c_str());
    return 2;
  }
  if (!pid_file.empty()) {
    std::ofstream(pid_file) << getpid() << "\n";
  }
  if (!echo.empty()) {
    EchoServe(fd);
    return 0;
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  const int sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  Proxy proxy(fd, dest, params, seed);
  return proxy.Run(-1, sig_fd, config);
}
