// Byte formats of the stream sockets (unix and TCP): the handshake, the shm control path and
// the tcp data path. Pure functions, bounds-checked (ByteReader) and fuzzed.
//
// Every message on a stream socket is  [u32 LE payload length][u8 type][payload].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/transport/auth.h"
#include "ramp/transport/memory.h"

namespace ramp::transport::wire {

inline constexpr size_t kHeaderBytes = 5;
inline constexpr char kMagic[8] = {'R', 'A', 'M', 'P', 'T', 'R', 'N', '1'};
inline constexpr uint16_t kProtocolVersion = 1;
// Control messages are small; this bounds what a peer can make us buffer before it has
// authenticated.
inline constexpr size_t kMaxControlPayload = 1u << 20;
// Segments (and their fds) per SEGMENTS message: below SCM_MAX_FD (253).
inline constexpr size_t kMaxSegmentsPerMessage = 64;
// Pieces per EXPOSE message.
inline constexpr size_t kMaxExposePieces = (kMaxControlPayload - 64) / 24;
// Reason strings in errors.
inline constexpr size_t kMaxReasonBytes = 4096;

enum class Type : uint8_t {
  // handshake
  kHello = 1,       // client → server: magic, version, provider, client nonce
  kChallenge = 2,   // server → client: server nonce, server proof
  kProof = 3,       // client → server: client proof
  kAuthOk = 4,      // server → client
  kAuthFailed = 5,  // server → client: the client's proof did not verify (reason)
  kAuthAbort = 6,   // client → server: the server's proof did not verify (reason)
  kError = 7,       // either way, then close: status code + reason
  kSetup = 8,       // both ways after kAuthOk: ring and credit-word handles
  // shm control path
  kSegments = 16,  // segment descriptions; their fds travel as SCM_RIGHTS
  kExpose = 17,    // a region in segment coordinates
  // verbs control path
  kVerbsExpose = 18,  // a region as (address, rkey, length) pieces
  // tcp data path
  kRead = 32,
  kWrite = 33,
  kFrame = 34,  // a ring frame: applied as everything but byte 8, then byte 8 (lead)
  kWriteU64 = 35,
  kReadResponse = 36,
  kWriteResponse = 37,
};

// Parses a header: OK with type and payload length, or Corruption when the length passes
// max_payload.
Status DecodeHeader(const uint8_t* p, size_t max_payload, uint8_t* type, uint32_t* payload_len);
void EncodeHeader(uint8_t type, uint32_t payload_len, uint8_t* out5);

struct Hello {
  uint16_t version = kProtocolVersion;
  uint8_t provider = 0;
  Nonce client_nonce{};
};
void EncodeHello(const Hello& m, std::vector<uint8_t>* out);
// Corruption for a wrong magic (not a pg_ramp peer) or a malformed message.
Status DecodeHello(const uint8_t* p, size_t n, Hello* out);

struct Challenge {
  Nonce server_nonce{};
  Digest server_proof{};
};
void EncodeChallenge(const Challenge& m, std::vector<uint8_t>* out);
Status DecodeChallenge(const uint8_t* p, size_t n, Challenge* out);

void EncodeProof(const Digest& proof, std::vector<uint8_t>* out);
Status DecodeProof(const uint8_t* p, size_t n, Digest* out);

// kAuthFailed, kAuthAbort, kError: a status code and a reason.
void EncodeReason(Status::Code code, const std::string& reason, std::vector<uint8_t>* out);
Status DecodeReason(const uint8_t* p, size_t n, Status::Code* code, std::string* reason);

// What each side tells the other after authentication: its receive ring (and, next to it,
// the control block and its credit word), in one registered region of its Memory.
struct Setup {
  uint64_t ring_bytes = 0;
  uint64_t max_message_bytes = 0;
  RemoteRegion block;
  // shm: the segment holding the block (its fd and the doorbell eventfd travel along).
  // verbs: the block's rkey and virtual address.
  uint64_t block_segment_id = 0;
  uint64_t block_segment_offset = 0;
};
void EncodeSetup(const Setup& m, std::vector<uint8_t>* out);
// Also checks what a peer could use to hurt us: ring size (multiple of 16, 4 KiB..1 GiB),
// a block large enough for ring + control block + credit word.
Status DecodeSetup(const uint8_t* p, size_t n, Setup* out);

struct SegmentInfo {
  uint64_t segment_id = 0;
  uint64_t length = 0;
  bool writable = false;
};
void EncodeSegments(const std::vector<SegmentInfo>& m, std::vector<uint8_t>* out);
Status DecodeSegments(const uint8_t* p, size_t n, std::vector<SegmentInfo>* out);

struct Expose {
  RemoteRegion region;
  std::vector<SegmentPiece> pieces;
};
void EncodeExpose(const Expose& m, std::vector<uint8_t>* out);
// Checks that the pieces add up to the region's length.
Status DecodeExpose(const uint8_t* p, size_t n, Expose* out);

// A region as the verbs provider exposes it: where each piece lives in the owner's address
// space and the rkey of the memory registration covering it.
struct RemotePiece {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
};
struct VerbsExpose {
  RemoteRegion region;
  std::vector<RemotePiece> pieces;
};
inline constexpr size_t kVerbsPieceBytes = 20;
void EncodeVerbsExpose(const VerbsExpose& m, std::vector<uint8_t>* out);
// Checks that the pieces add up to the region's length.
Status DecodeVerbsExpose(const uint8_t* p, size_t n, VerbsExpose* out);

// ---- tcp data path ------------------------------------------------------------------------
struct Op {
  Type type = Type::kRead;
  uint64_t request_id = 0;  // kRead, kWrite (0: no response wanted), responses
  RemoteRegion target;      // id and key of the region addressed
  uint64_t offset = 0;
  uint64_t length = 0;            // kRead: bytes asked for
  const uint8_t* data = nullptr;  // kWrite, kFrame, kReadResponse: bytes carried
  size_t data_length = 0;
  uint64_t value = 0;                     // kWriteU64
  Status::Code code = Status::Code::kOk;  // responses
  std::string reason;                     // responses with an error
};
// Fixed part of each op's payload (what precedes the data).
inline constexpr size_t kReadPayload = 40;
inline constexpr size_t kWritePrefix = 32;
inline constexpr size_t kFramePrefix = 24;
inline constexpr size_t kWriteU64Payload = 32;
inline constexpr size_t kResponsePrefix = 9;

// Decodes a data-path message; Corruption for a malformed one (the connection is closed).
Status DecodeOp(uint8_t type, const uint8_t* p, size_t n, Op* out);

// Encoders append header + payload to out (the data of kWrite/kFrame/kReadResponse is
// appended by the caller right after, already counted in data_length).
void AppendRead(uint64_t request_id, const RemoteRegion& r, uint64_t offset, uint64_t len,
                std::vector<uint8_t>* out);
void AppendWriteHeader(uint64_t request_id, const RemoteRegion& r, uint64_t offset,
                       uint64_t data_length, std::vector<uint8_t>* out);
void AppendFrameHeader(const RemoteRegion& r, uint64_t offset, uint64_t data_length,
                       std::vector<uint8_t>* out);
void AppendWriteU64(const RemoteRegion& r, uint64_t offset, uint64_t value,
                    std::vector<uint8_t>* out);
// A response: OK carries data_length bytes appended by the caller (reads); an error
// carries its reason.
void AppendResponseHeader(Type type, uint64_t request_id, const Status& status,
                          uint64_t data_length, std::vector<uint8_t>* out);

}  // namespace ramp::transport::wire
