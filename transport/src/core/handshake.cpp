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

Status ServerHandshake(MessageChannel* channel, const HandshakeParams& params) {
  const std::string& peer = channel->peer();
  ControlMessage m;
  RAMP_RETURN_IF_ERROR(channel->Receive(&m, params.deadline, params.hook, "HELLO"));
  if (m.type != static_cast<uint8_t>(wire::Type::kHello)) {
    Status s = Status::Corruption("peer " + peer + " did not start with HELLO (type " +
                                  std::to_string(m.type) + ")");
    SendError(channel, s);
    return s;
  }
  wire::Hello hello;
  Status s = wire::DecodeHello(m.payload.data(), m.payload.size(), &hello);
  if (!s.ok()) {
    s = s.Annotate("peer " + peer);
    SendError(channel, s);
    return s;
  }
  if (hello.version != wire::kProtocolVersion) {
    s = Status::NotSupported("transport protocol version " + std::to_string(hello.version) +
                             " not supported (this side speaks " +
                             std::to_string(wire::kProtocolVersion) + ")");
    SendError(channel, s);
    return s.Annotate("peer " + peer);
  }
  if (hello.provider != static_cast<uint8_t>(params.provider)) {
    s = Status::InvalidArgument("provider " + std::to_string(hello.provider) + " asked of a " +
                                ProviderName(params.provider) + " listener");
    SendError(channel, s);
    return s.Annotate("peer " + peer);
  }

  wire::Challenge challenge;
  RandomNonce(&challenge.server_nonce);
  challenge.server_proof =
      Proof(params.token, kServerRole, hello.client_nonce, challenge.server_nonce);
  std::vector<uint8_t> payload;
  wire::EncodeChallenge(challenge, &payload);
  RAMP_RETURN_IF_ERROR(
      channel->Send(wire::Type::kChallenge, payload, params.deadline, params.hook));

  RAMP_RETURN_IF_ERROR(channel->Receive(&m, params.deadline, params.hook, "the client's proof"));
  if (m.type == static_cast<uint8_t>(wire::Type::kAuthAbort)) {
    RAMP_WARN("peer %s rejected: cluster token mismatch (it could not verify our proof)",
              peer.c_str());
    return Status::PermissionDenied("peer " + peer +
                                    " rejected: cluster token mismatch (it could not verify "
                                    "our proof)");
  }
  if (m.type != static_cast<uint8_t>(wire::Type::kProof)) {
    s = Unexpected(m, "PROOF", peer);
    SendError(channel, s);
    return s;
  }
  Digest proof;
  s = wire::DecodeProof(m.payload.data(), m.payload.size(), &proof);
  if (!s.ok()) {
    s = s.Annotate("peer " + peer);
    SendError(channel, s);
    return s;
  }
  const Digest expected =
      Proof(params.token, kClientRole, hello.client_nonce, challenge.server_nonce);
  if (!DigestEqual(expected, proof)) {
    payload.clear();
    wire::EncodeReason(Status::Code::kPermissionDenied, "cluster token mismatch", &payload);
    (void)channel->Send(wire::Type::kAuthFailed, payload, params.deadline, params.hook);
    RAMP_WARN("peer %s rejected: cluster token mismatch", peer.c_str());
    return Status::PermissionDenied("peer " + peer + " rejected: cluster token mismatch");
  }
  payload.clear();
  return channel->Send(wire::Type::kAuthOk, payload, params.deadline, params.hook);
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
