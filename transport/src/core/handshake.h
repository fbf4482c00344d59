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
#include "ramp/transport/auth.h"
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

// A message the server's side of the handshake wants sent.
struct AuthReply {
  bool present = false;
  wire::Type type = wire::Type::kError;
  std::vector<uint8_t> payload;
};

// The server's side of the authentication (HELLO .. AUTH_OK) as a state machine that takes
// one message at a time and never waits: a listener drives many of them from one thread
// (stream_listener.cpp), ServerHandshake drives one with blocking reads. Same messages on the
// wire either way.
class ServerAuth {
 public:
  ServerAuth(Provider provider, std::string token, std::string peer)
      : provider_(provider), token_(std::move(token)), peer_(std::move(peer)) {}
  // Feeds the client's next message. *reply, when present, is to be sent: on OK it is the
  // next step (CHALLENGE, AUTH_OK; send failures end the handshake), on an error a
  // best-effort goodbye (ERROR, AUTH_FAILED). *done once the peer proved the token (the reply
  // is AUTH_OK). Logs the rejection of a peer without the token.
  Status OnMessage(const ControlMessage& m, AuthReply* reply, bool* done);
  // The message awaited next (for Timeout messages).
  const char* awaiting() const;
  bool authenticated() const { return state_ == State::kDone; }

 private:
  enum class State { kHello, kProof, kDone };
  Status OnHello(const ControlMessage& m, AuthReply* reply);
  Status OnProof(const ControlMessage& m, AuthReply* reply);

  Provider provider_;
  std::string token_;
  std::string peer_;
  State state_ = State::kHello;
  Nonce client_nonce_{};
  Nonce server_nonce_{};
};

// Sends our SETUP (with fds, shm) and receives the peer's (taking expect_fds descriptors).
Status ExchangeSetup(MessageChannel* channel, const wire::Setup& mine, const int* fds, int nfds,
                     size_t expect_fds, const HandshakeParams& params, wire::Setup* theirs,
                     std::vector<UniqueFd>* their_fds);

// Sends a kError with the status to the peer (best effort, short deadline) before closing.
void SendError(MessageChannel* channel, const Status& status);

}  // namespace ramp::transport::detail
