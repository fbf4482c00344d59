#include "core/handshake.h"

#include "ramp/log.h"
#include "ramp/transport/auth.h"

namespace ramp::transport::detail {
namespace {

constexpr const char* kClientRole = "ramp-client";
constexpr const char* kServerRole = "ramp-server";

Status Unexpected(const ControlMessage& m, const char* expected, const std::string& peer) {
  if (m.type == static_cast<uint8_t>(wire::Type::kError)) {
    Status::Code code;
    std::string reason;
    Status s = wire::DecodeReason(m.payload.data(), m.payload.size(), &code, &reason);
    if (!s.ok()) return s.Annotate("peer " + peer);
    return Status(code, "peer " + peer + " refused the connection: " + reason);
  }
  return Status::Corruption("peer " + peer + " sent message type " + std::to_string(m.type) +
                            " where " + expected + " was expected");
}

}  // namespace

void SendError(MessageChannel* channel, const Status& status) {
  std::vector<uint8_t> payload;
  wire::EncodeReason(status.code(), status.message(), &payload);
  (void)channel->Send(wire::Type::kError, payload, Deadline::After(100), nullptr);
}

Status ClientHandshake(MessageChannel* channel, const HandshakeParams& params) {
  const std::string& peer = channel->peer();
  wire::Hello hello;
  hello.provider = static_cast<uint8_t>(params.provider);
  RandomNonce(&hello.client_nonce);
  std::vector<uint8_t> payload;
  wire::EncodeHello(hello, &payload);
  RAMP_RETURN_IF_ERROR(channel->Send(wire::Type::kHello, payload, params.deadline, params.hook));

  ControlMessage m;
  RAMP_RETURN_IF_ERROR(
      channel->Receive(&m, params.deadline, params.hook, "the handshake challenge"));
  if (m.type != static_cast<uint8_t>(wire::Type::kChallenge)) {
    return Unexpected(m, "CHALLENGE", peer);
  }
  wire::Challenge challenge;
  RAMP_RETURN_IF_ERROR(wire::DecodeChallenge(m.payload.data(), m.payload.size(), &challenge)
                           .Annotate("peer " + peer));

  const Digest expected =
      Proof(params.token, kServerRole, hello.client_nonce, challenge.server_nonce);
  if (!DigestEqual(expected, challenge.server_proof)) {
    // Tell the server why we leave, so that both sides report the mismatch.
    payload.clear();
    wire::EncodeReason(Status::Code::kPermissionDenied,
                       "the server's proof did not verify: cluster token mismatch", &payload);
    (void)channel->Send(wire::Type::kAuthAbort, payload, params.deadline, params.hook);
    return Status::PermissionDenied("server " + peer +
                                    " failed authentication: cluster token mismatch");
  }

  payload.clear();
  wire::EncodeProof(Proof(params.token, kClientRole, hello.client_nonce, challenge.server_nonce),
                    &payload);
  RAMP_RETURN_IF_ERROR(channel->Send(wire::Type::kProof, payload, params.deadline, params.hook));

  RAMP_RETURN_IF_ERROR(
      channel->Receive(&m, params.deadline, params.hook, "the authentication verdict"));
  if (m.type == static_cast<uint8_t>(wire::Type::kAuthOk)) {
    if (!m.payload.empty()) return Status::Corruption("peer " + peer + ": AUTH_OK with payload");
    return Status::OK();
  }
  if (m.type == static_cast<uint8_t>(wire::Type::kAuthFailed)) {
    return Status::PermissionDenied("server " + peer + " rejected us: cluster token mismatch");
  }
  return Unexpected(m, "AUTH_OK", peer);
}

namespace {

void ErrorReply(const Status& s, AuthReply* reply) {
  reply->present = true;
  reply->type = wire::Type::kError;
  reply->payload.clear();
  wire::EncodeReason(s.code(), s.message(), &reply->payload);
}

}  // namespace

const char* ServerAuth::awaiting() const {
  switch (state_) {
    case State::kHello:
      return "HELLO";
    case State::kProof:
      return "the client's proof";
    case State::kDone:
      break;
  }
  return "SETUP";
}

Status ServerAuth::OnMessage(const ControlMessage& m, AuthReply* reply, bool* done) {
  reply->present = false;
  *done = false;
  switch (state_) {
    case State::kHello:
      return OnHello(m, reply);
    case State::kProof: {
      Status s = OnProof(m, reply);
      *done = s.ok();
      return s;
    }
    case State::kDone:
      break;
  }
  return Status::Internal("handshake with " + peer_ + " is already complete");
}

Status ServerAuth::OnHello(const ControlMessage& m, AuthReply* reply) {
  if (m.type != static_cast<uint8_t>(wire::Type::kHello)) {
    Status s = Status::Corruption("peer " + peer_ + " did not start with HELLO (type " +
                                  std::to_string(m.type) + ")");
    ErrorReply(s, reply);
    return s;
  }
  wire::Hello hello;
  Status s = wire::DecodeHello(m.payload.data(), m.payload.size(), &hello);
  if (!s.ok()) {
    s = s.Annotate("peer " + peer_);
    ErrorReply(s, reply);
    return s;
  }
  if (hello.version != wire::kProtocolVersion) {
    s = Status::NotSupported("transport protocol version " + std::to_string(hello.version) +
                             " not supported (this side speaks " +
                             std::to_string(wire::kProtocolVersion) + ")");
    ErrorReply(s, reply);
    return s.Annotate("peer " + peer_);
  }
  if (hello.provider != static_cast<uint8_t>(provider_)) {
    s = Status::InvalidArgument("provider " + std::to_string(hello.provider) + " asked of a " +
                                ProviderName(provider_) + " listener");
    ErrorReply(s, reply);
    return s.Annotate("peer " + peer_);
  }
  client_nonce_ = hello.client_nonce;
  wire::Challenge challenge;
  RandomNonce(&challenge.server_nonce);
  server_nonce_ = challenge.server_nonce;
  challenge.server_proof = Proof(token_, kServerRole, client_nonce_, server_nonce_);
  reply->present = true;
  reply->type = wire::Type::kChallenge;
  reply->payload.clear();
  wire::EncodeChallenge(challenge, &reply->payload);
  state_ = State::kProof;
  return Status::OK();
}

Status ServerAuth::OnProof(const ControlMessage& m, AuthReply* reply) {
  if (m.type == static_cast<uint8_t>(wire::Type::kAuthAbort)) {
    RAMP_WARN("peer %s rejected: cluster token mismatch (it could not verify our proof)",
              peer_.c_str());
    return Status::PermissionDenied("peer " + peer_ +
                                    " rejected: cluster token mismatch (it could not verify "
                                    "our proof)");
  }
  if (m.type != static_cast<uint8_t>(wire::Type::kProof)) {
    Status s = Unexpected(m, "PROOF", peer_);
    ErrorReply(s, reply);
    return s;
  }
  Digest proof;
  Status s = wire::DecodeProof(m.payload.data(), m.payload.size(), &proof);
  if (!s.ok()) {
    s = s.Annotate("peer " + peer_);
    ErrorReply(s, reply);
    return s;
  }
  const Digest expected = Proof(token_, kClientRole, client_nonce_, server_nonce_);
  if (!DigestEqual(expected, proof)) {
    reply->present = true;
    reply->type = wire::Type::kAuthFailed;
    reply->payload.clear();
    wire::EncodeReason(Status::Code::kPermissionDenied, "cluster token mismatch", &reply->payload);
    RAMP_WARN("peer %s rejected: cluster token mismatch", peer_.c_str());
    return Status::PermissionDenied("peer " + peer_ + " rejected: cluster token mismatch");
  }
  reply->present = true;
  reply->type = wire::Type::kAuthOk;
  reply->payload.clear();
  state_ = State::kDone;
  return Status::OK();
}

Status ServerHandshake(MessageChannel* channel, const HandshakeParams& params) {
  ServerAuth auth(params.provider, params.token, channel->peer());
  for (;;) {
    ControlMessage m;
    RAMP_RETURN_IF_ERROR(channel->Receive(&m, params.deadline, params.hook, auth.awaiting()));
    AuthReply reply;
    bool done = false;
    Status s = auth.OnMessage(m, &reply, &done);
    if (!s.ok()) {
      // A goodbye: best effort, it must not hold up the caller.
      if (reply.present) {
        (void)channel->Send(reply.type, reply.payload, Deadline::After(100), nullptr);
      }
      return s;
    }
    if (reply.present) {
      RAMP_RETURN_IF_ERROR(channel->Send(reply.type, reply.payload, params.deadline, params.hook));
    }
    if (done) return Status::OK();
  }
}

Status ExchangeSetup(MessageChannel* channel, const wire::Setup& mine, const int* fds, int nfds,
                     size_t expect_fds, const HandshakeParams& params, wire::Setup* theirs,
                     std::vector<UniqueFd>* their_fds) {
  std::vector<uint8_t> payload;
  wire::EncodeSetup(mine, &payload);
  RAMP_RETURN_IF_ERROR(
      channel->Send(wire::Type::kSetup, payload, params.deadline, params.hook, fds, nfds));
  ControlMessage m;
  RAMP_RETURN_IF_ERROR(channel->Receive(&m, params.deadline, params.hook, "SETUP"));
  if (m.type != static_cast<uint8_t>(wire::Type::kSetup)) {
    return Unexpected(m, "SETUP", channel->peer());
  }
  RAMP_RETURN_IF_ERROR(wire::DecodeSetup(m.payload.data(), m.payload.size(), theirs)
                           .Annotate("peer " + channel->peer()));
  if (expect_fds > 0) RAMP_RETURN_IF_ERROR(channel->TakeFds(expect_fds, their_fds));
  return Status::OK();
}

}  // namespace ramp::transport::detail
