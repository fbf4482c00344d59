// Listen and Connect for the shm provider: a unix stream socket at the endpoint's path.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/providers.h"
#include "core/stream_listener.h"
#include "shm/shm_connection.h"

namespace ramp::transport::detail {
namespace {

Status MakeAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) {
    return Status::InvalidArgument("shm socket path '" + path + "' is empty or too long");
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return Status::OK();
}

Status NewUnixSocket(UniqueFd* out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket(AF_UNIX)", errno);
  out->reset(fd);
  return Status::OK();
}

// A socket file left by a listener that died is in the way of bind(); one that a live
// listener owns must not be stolen. Tell them apart by connecting.
Status RemoveStaleSocket(const std::string& path, const sockaddr_un& addr) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Status::FromErrno("stat " + path, errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Status::InvalidArgument("refusing to replace '" + path + "': not a socket");
  }
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return Status::FromErrno("socket(AF_UNIX)", errno);
  int rc = connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  close(probe);
  if (rc == 0) {
    return Status::InvalidArgument("shm address in use: a listener is running at '" + path + "'");
  }
  if (err != ECONNREFUSED) return Status::FromErrno("probing " + path, err);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::FromErrno("removing stale socket " + path, errno);
  }
  return Status::OK();
}

std::string AcceptedPeerName(const std::string& path, int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  std::string name = "shm://" + path;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    name += " (pid " + std::to_string(cred.pid) + ")";
  }
  return name;
}

}  // namespace

Status ShmListen(const Endpoint& endpoint, const TransportOptions& options,
                 std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  RAMP_RETURN_IF_ERROR(ValidateListenOptions(options));
  sockaddr_un addr;
  RAMP_RETURN_IF_ERROR(MakeAddress(endpoint.path, &addr));
  RAMP_RETURN_IF_ERROR(RemoveStaleSocket(endpoint.path, addr));
  UniqueFd fd;
  RAMP_RETURN_IF_ERROR(NewUnixSocket(&fd));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::FromErrno("bind " + endpoint.ToString(), errno);
  }
  // Mode and group before listen(): no connection can come in under the old ones.
  if (options.shm_socket_gid >= 0 && chown(endpoint.path.c_str(), static_cast<uid_t>(-1),
                                           static_cast<gid_t>(options.shm_socket_gid)) != 0) {
    const int err = errno;
    unlink(endpoint.path.c_str());
    return Status::FromErrno("setting the group of " + endpoint.path, err);
  }
  if (options.shm_socket_mode >= 0 &&
      chmod(endpoint.path.c_str(), static_cast<mode_t>(options.shm_socket_mode)) != 0) {
    const int err = errno;
    unlink(endpoint.path.c_str());
    return Status::FromErrno("setting the mode of " + endpoint.path, err);
  }
  struct stat st;
  if (stat(endpoint.path.c_str(), &st) != 0) {
    return Status::FromErrno("stat " + endpoint.path, errno);
  }
  if (listen(fd.get(), 128) != 0) return Status::FromErrno("listen " + endpoint.ToString(), errno);
  const std::string path = endpoint.path;
  const ino_t ino = st.st_ino;
  *out = std::make_unique<StreamListener>(
      std::move(fd), endpoint, options, std::move(memory), Provider::kShm,
      // Every peer is a local process that may open the socket file: no per-source bound.
      [path](int s, std::string* peer, std::string* source) {
        *peer = AcceptedPeerName(path, s);
        source->clear();
      },
      ShmConnection::SetUpAccepted,
      // Remove our socket file, not one a newer listener bound since.
      [path, ino]() {
        struct stat now;
        if (stat(path.c_str(), &now) == 0 && now.st_ino == ino) unlink(path.c_str());
      });
  return Status::OK();
}

Status ShmConnect(const Endpoint& endpoint, const TransportOptions& options,
                  std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out) {
  RAMP_RETURN_IF_ERROR(ValidateOptions(options));
  sockaddr_un addr;
  RAMP_RETURN_IF_ERROR(MakeAddress(endpoint.path, &addr));
  UniqueFd fd;
  RAMP_RETURN_IF_ERROR(NewUnixSocket(&fd));
  const Deadline deadline = Deadline::After(options.connect_timeout_ms);
  for (;;) {
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) {
      // The listener's backlog is full: it is alive but busy.
      if (deadline.Expired()) {
        return Status::Timeout("connect to " + endpoint.ToString() + ": listener backlog full");
      }
      if (options.wait_hook) RAMP_RETURN_IF_ERROR(options.wait_hook());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (err == ENOENT || err == ECONNREFUSED) {
      return Status::Unavailable("no shm listener at " + endpoint.ToString() +
                                 (err == ENOENT ? " (no socket file)" : " (stale socket file)"));
    }
    if (err == EACCES || err == EPERM) {
      // The server may be fine, but this user may not open its socket file: refused, as
      // unreachable as a server that is down (rampd --shm-socket-mode/--shm-socket-group).
      return Status::Unavailable(
          Status::FromErrno("connect to " + endpoint.ToString(), err).message() +
          " (the socket file's mode or group does not admit this user)");
    }
    return Status::FromErrno("connect to " + endpoint.ToString(), err);
  }
  return ShmConnection::Establish(std::move(fd), endpoint.ToString(), /*server=*/false, options,
                                  std::move(memory), out);
}

}  // namespace ramp::transport::detail
