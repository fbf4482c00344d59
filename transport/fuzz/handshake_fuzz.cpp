// Fuzzes every decoder of control and data-path bytes (wire.h), then runs the real server
// and client handshakes against the input as the peer's byte stream. Build (not wired into
// CMake):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Ibase/include \
//     -Itransport/include -Itransport/src transport/fuzz/handshake_fuzz.cpp \
//     transport/src/core/{wire,control_channel,handshake,fd,auth,sha256,endpoint}.cpp \
//     base/src/{log,status}.cpp -o handshake_fuzz
// (scripts/fuzz.sh builds it with the whole library.)
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/control_channel.h"
#include "core/handshake.h"
#include "core/wire.h"
#include "ramp/log.h"

using namespace ramp;
using namespace ramp::transport;

namespace {

void DecodeEverything(const uint8_t* p, size_t n) {
  wire::Hello hello;
  (void)wire::DecodeHello(p, n, &hello);
  wire::Challenge challenge;
  (void)wire::DecodeChallenge(p, n, &challenge);
  Digest proof;
  (void)wire::DecodeProof(p, n, &proof);
  Status::Code code;
  std::string reason;
  (void)wire::DecodeReason(p, n, &code, &reason);
  wire::Setup setup;
  if (wire::DecodeSetup(p, n, &setup).ok()) {
    if (setup.block.length < setup.ring_bytes + 128) abort();  // the checks held
  }
  std::vector<wire::SegmentInfo> segments;
  (void)wire::DecodeSegments(p, n, &segments);
  wire::Expose expose;
  if (wire::DecodeExpose(p, n, &expose).ok()) {
    uint64_t total = 0;
    for (const auto& piece : expose.pieces) total += piece.length;
    if (total != expose.region.length) abort();
  }
  wire::VerbsExpose verbs_expose;
  (void)wire::DecodeVerbsExpose(p, n, &verbs_expose);
  for (uint8_t type = 32; type <= 37; type++) {
    wire::Op op;
    if (wire::DecodeOp(type, p, n, &op).ok() && op.data_length > 0) {
      if (op.data < p || op.data + op.data_length > p + n) abort();
    }
  }
}

// The input is the byte stream a peer sends during a handshake.
void RunHandshake(const uint8_t* p, size_t n, bool server) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return;
  if (n > 0 && write(sv[1], p, n) < 0) {
    // the socket buffer holds more than any input we are given
  }
  shutdown(sv[1], SHUT_WR);
  (void)detail::SetNonBlocking(sv[0]);
  detail::ControlChannel channel(sv[0], "fuzz-peer");
  detail::HandshakeParams params{Provider::kTcp, "token", detail::Deadline::After(0), nullptr};
  Status s = server ? detail::ServerHandshake(&channel, params)
                    : detail::ClientHandshake(&channel, params);
  if (s.ok()) {
    wire::Setup mine;
    wire::Setup theirs;
    (void)detail::ExchangeSetup(&channel, mine, nullptr, 0, 0, params, &theirs, nullptr);
  }
  close(sv[0]);
  close(sv[1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    SetLogLevel(LogLevel::kError);  // rejections are logged as warnings
    return true;
  }();
  (void)quiet;
  DecodeEverything(data, size);
  // Also as framed messages: header, then payload.
  size_t at = 0;
  while (size - at >= wire::kHeaderBytes) {
    uint8_t type;
    uint32_t len;
    if (!wire::DecodeHeader(data + at, 1 << 20, &type, &len).ok()) break;
    if (size - at - wire::kHeaderBytes < len) break;
    DecodeEverything(data + at + wire::kHeaderBytes, len);
    at += wire::kHeaderBytes + len;
  }
  if (size < 65536) {
    RunHandshake(data, size, /*server=*/true);
    RunHandshake(data, size, /*server=*/false);
  }
  return 0;
}
