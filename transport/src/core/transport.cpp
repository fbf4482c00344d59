// Listen / Connect / ProviderAvailable / ReadTokenFile: dispatch on the endpoint's provider.
#include "ramp/transport/transport.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/providers.h"
#include "ramp/log.h"

namespace ramp::transport {

Status Listen(const Endpoint& endpoint, const TransportOptions& options,
              std::shared_ptr<Memory> memory, std::unique_ptr<Listener>* out) {
  if (memory == nullptr) return Status::InvalidArgument("Listen: no Memory given");
  std::string why;
  if (!ProviderAvailable(endpoint.provider, &why)) return Status::NotSupported(why);
  switch (endpoint.provider) {
    case Provider::kShm:
      return detail::ShmListen(endpoint, options, std::move(memory), out);
    case Provider::kTcp:
      return detail::TcpListen(endpoint, options, std::move(memory), out);
    case Provider::kVerbs:
#ifdef RAMP_HAVE_VERBS
      return detail::VerbsListen(endpoint, options, std::move(memory), out);
#else
      break;
#endif
  }
  return Status::NotSupported("unknown provider");
}

Status Connect(const Endpoint& endpoint, const TransportOptions& options,
               std::shared_ptr<Memory> memory, std::unique_ptr<Connection>* out) {
  if (memory == nullptr) return Status::InvalidArgument("Connect: no Memory given");
  std::string why;
  if (!ProviderAvailable(endpoint.provider, &why)) return Status::NotSupported(why);
  switch (endpoint.provider) {
    case Provider::kShm:
      return detail::ShmConnect(endpoint, options, std::move(memory), out);
    case Provider::kTcp:
      return detail::TcpConnect(endpoint, options, std::move(memory), out);
    case Provider::kVerbs:
#ifdef RAMP_HAVE_VERBS
      return detail::VerbsConnect(endpoint, options, std::move(memory), out);
#else
      break;
#endif
  }
  return Status::NotSupported("unknown provider");
}

bool ProviderAvailable(Provider provider, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  switch (provider) {
    case Provider::kTcp:
      return true;
    case Provider::kShm: {
      int fd = memfd_create("ramp-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
      if (fd < 0) {
        *why = "shm provider unavailable: memfd_create failed: " + std::string(strerror(errno));
        return false;
      }
      close(fd);
      return true;
    }
    case Provider::kVerbs:
#ifdef RAMP_HAVE_VERBS
      return detail::VerbsAvailable(why);
#else
      *why = "verbs provider not built: libibverbs/librdmacm were not found at build time";
      return false;
#endif
  }
  *why = "unknown provider";
  return false;
}

Status ReadTokenFile(const std::string& path, std::string* token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno("cannot read token file " + path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  const char* space = " \t\r\n";
  size_t b = t.find_first_not_of(space);
  if (b == std::string::npos) return Status::InvalidArgument("token file " + path + " is empty");
  size_t e = t.find_last_not_of(space);
  t = t.substr(b, e - b + 1);
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    RAMP_WARN("token file %s is accessible to group or others (mode %o): chmod 600 it",
              path.c_str(), static_cast<unsigned>(st.st_mode & 0777));
  }
  *token = std::move(t);
  return Status::OK();
}

}  // namespace ramp::transport
