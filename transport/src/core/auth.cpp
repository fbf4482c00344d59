#include "ramp/transport/auth.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

#include "core/sha256.h"
#include "ramp/log.h"

namespace ramp::transport {
namespace {

// getrandom never fails for small requests once the pool is initialised; if it does, there
// is no safe fallback for secrets (nonces, region keys), so we stop the process loudly.
void FillRandom(void* out, size_t len) {
  uint8_t* p = static_cast<uint8_t*>(out);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      RAMP_ERROR("getrandom failed (errno %d): cannot draw secrets", errno);
      abort();
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

}  // namespace

void RandomNonce(Nonce* out) {
  FillRandom(out->data(), out->size());
}

uint64_t RandomU64() {
  uint64_t v;
  FillRandom(&v, sizeof(v));
  return v;
}

Digest Proof(std::string_view token, std::string_view role, const Nonce& client_nonce,
             const Nonce& server_nonce) {
  HmacSha256Context ctx(token);
  // role || client_nonce || server_nonce. The two roles have the same length, so the
  // concatenation is unambiguous and one side's proof never verifies as the other's.
  ctx.Update(role.data(), role.size());
  ctx.Update(client_nonce.data(), client_nonce.size());
  ctx.Update(server_nonce.data(), server_nonce.size());
  return ctx.Finish();
}

bool DigestEqual(const Digest& a, const Digest& b) {
  // No early exit: the time taken does not depend on where the digests differ.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); i++) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace ramp::transport
