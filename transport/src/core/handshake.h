// The connection handshake (DESIGN §4): mutual challenge-response with the cluster token,
// before either side reveals a memory handle; then the exchange of set-up data.
//
//   client → server  HELLO     magic "RAMPTRN1", protocol version, provider, client nonce
//   server → client  CHALLENGE server nonce, Proof(token, "ramp-server", cn, sn)
//   client → server  PROOF     Proof(token, "ramp-client", cn, sn)   (or AUTH_ABORT when the
//                                                                     server's proof fails)
//   server → client  AUTH_OK | AUTH_FAILED
//   both ways        SETUP     ring size, limits, the region holding ring + control words
//
// A wrong token ends with PermissionDenied on both sides. Every read is bounded by the
// deadline and calls the wait hook while it waits.
#pragma once

#include <string>
#include <vector>

#include "core/control_channel.h"
#include "core/fd.h"
#include "core/wire.h"
#include "ramp/status.h"
#include "ramp/transport/endpoint.h"

namespace ramp::transport::detail {

struct HandshakeParams {
  Provider provider = Provider::kTcp;
  std::string token;
  Deadline deadline;
  WaitHook hook;
};

Status ClientHandshake(MessageChannel* channel, const HandshakeParams& params);
// Logs the rejection of a peer without the token.
Status ServerHandshake(MessageChannel* channel, const HandshakeParams& params);

// Sends our SETUP (with fds, shm) and receives the peer's (taking expect_fds descriptors).
Status ExchangeSetup(MessageChannel* channel, const wire::Setup& mine, const int* fds, int nfds,
                     size_t expect_fds, const HandshakeParams& params, wire::Setup* theirs,
                     std::vector<UniqueFd>* their_fds);

// Sends a kError with the status to the peer (best effort, short deadline) before closing.
void SendError(MessageChannel* channel, const Status& status);

}  // namespace ramp::transport::detail
