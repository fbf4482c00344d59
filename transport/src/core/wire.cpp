#include "core/wire.h"

#include <cstring>

#include "ramp/bytes.h"
#include "ramp/transport/ring.h"

namespace ramp::transport::wire {
namespace {

Status Truncated(const char* what) {
  return Status::Corruption(std::string(what) + " message is truncated");
}

void PutRegion(ByteWriter* w, const RemoteRegion& r) {
  w->PutU64(r.id);
  w->PutU64(r.key);
  w->PutU64(r.length);
  w->PutU32(r.access);
}

bool GetRegion(ByteReader* r, RemoteRegion* out) {
  return r->GetU64(&out->id) && r->GetU64(&out->key) && r->GetU64(&out->length) &&
         r->GetU32(&out->access);
}

Status CheckAccess(uint32_t access, const char* what) {
  if (access == 0 || (access & ~uint32_t{kAccessReadWrite}) != 0) {
    return Status::Corruption(std::string(what) + ": invalid access bits " +
                              std::to_string(access));
  }
  return Status::OK();
}

// Appends a header whose payload length is patched once the payload is complete.
size_t BeginMessage(Type type, std::vector<uint8_t>* out) {
  size_t at = out->size();
  out->resize(at + kHeaderBytes);
  (*out)[at + 4] = static_cast<uint8_t>(type);
  return at;
}

void EndMessage(size_t at, uint64_t extra_data, std::vector<uint8_t>* out) {
  uint64_t len = out->size() - at - kHeaderBytes + extra_data;
  for (int i = 0; i < 4; i++) (*out)[at + i] = static_cast<uint8_t>(len >> (8 * i));
}

}  // namespace

Status DecodeHeader(const uint8_t* p, size_t max_payload, uint8_t* type, uint32_t* payload_len) {
  ByteReader r(p, kHeaderBytes);
  uint32_t len = 0;
  uint8_t t = 0;
  r.GetU32(&len);
  r.GetU8(&t);
  if (len > max_payload) {
    return Status::Corruption("message of " + std::to_string(len) + " bytes (type " +
                              std::to_string(t) + ") exceeds the limit of " +
                              std::to_string(max_payload));
  }
  *type = t;
  *payload_len = len;
  return Status::OK();
}

void EncodeHeader(uint8_t type, uint32_t payload_len, uint8_t* out5) {
  for (int i = 0; i < 4; i++) out5[i] = static_cast<uint8_t>(payload_len >> (8 * i));
  out5[4] = type;
}

void EncodeHello(const Hello& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.PutBytes(kMagic, sizeof(kMagic));
  w.PutU16(m.version);
  w.PutU8(m.provider);
  w.PutBytes(m.client_nonce.data(), m.client_nonce.size());
}

Status DecodeHello(const uint8_t* p, size_t n, Hello* out) {
  ByteReader r(p, n);
  char magic[sizeof(kMagic)];
  if (!r.GetBytes(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return Status::Corruption("not a pg_ramp transport peer (bad magic in HELLO)");
  }
  Hello h;
  if (!r.GetU16(&h.version) || !r.GetU8(&h.provider) ||
      !r.GetBytes(h.client_nonce.data(), h.client_nonce.size())) {
    return Truncated("HELLO");
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("HELLO"));
  *out = h;
  return Status::OK();
}

void EncodeChallenge(const Challenge& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.PutBytes(m.server_nonce.data(), m.server_nonce.size());
  w.PutBytes(m.server_proof.data(), m.server_proof.size());
}

Status DecodeChallenge(const uint8_t* p, size_t n, Challenge* out) {
  ByteReader r(p, n);
  Challenge c;
  if (!r.GetBytes(c.server_nonce.data(), c.server_nonce.size()) ||
      !r.GetBytes(c.server_proof.data(), c.server_proof.size())) {
    return Truncated("CHALLENGE");
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("CHALLENGE"));
  *out = c;
  return Status::OK();
}

void EncodeProof(const Digest& proof, std::vector<uint8_t>* out) {
  ByteWriter(out).PutBytes(proof.data(), proof.size());
}

Status DecodeProof(const uint8_t* p, size_t n, Digest* out) {
  ByteReader r(p, n);
  Digest d;
  if (!r.GetBytes(d.data(), d.size())) return Truncated("PROOF");
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("PROOF"));
  *out = d;
  return Status::OK();
}

void EncodeReason(Status::Code code, const std::string& reason, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.PutU8(static_cast<uint8_t>(code));
  w.PutString(reason.size() > kMaxReasonBytes ? reason.substr(0, kMaxReasonBytes) : reason);
}

Status DecodeReason(const uint8_t* p, size_t n, Status::Code* code, std::string* reason) {
  ByteReader r(p, n);
  uint8_t c = 0;
  std::string text;
  if (!r.GetU8(&c) || !r.GetString(&text, kMaxReasonBytes)) return Truncated("error");
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("error"));
  if (c == 0 || c > static_cast<uint8_t>(Status::Code::kInternal)) {
    return Status::Corruption("error message with unknown status code " + std::to_string(c));
  }
  *code = static_cast<Status::Code>(c);
  *reason = std::move(text);
  return Status::OK();
}

void EncodeSetup(const Setup& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.PutU64(m.ring_bytes);
  w.PutU64(m.max_message_bytes);
  PutRegion(&w, m.block);
  w.PutU64(m.block_segment_id);
  w.PutU64(m.block_segment_offset);
}

Status DecodeSetup(const uint8_t* p, size_t n, Setup* out) {
  ByteReader r(p, n);
  Setup s;
  if (!r.GetU64(&s.ring_bytes) || !r.GetU64(&s.max_message_bytes) || !GetRegion(&r, &s.block) ||
      !r.GetU64(&s.block_segment_id) || !r.GetU64(&s.block_segment_offset)) {
    return Truncated("SETUP");
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("SETUP"));
  if (s.ring_bytes % ring::kAlign != 0 || s.ring_bytes < 4096 || s.ring_bytes > (1ull << 30)) {
    return Status::Corruption("SETUP: ring of " + std::to_string(s.ring_bytes) +
                              " bytes (must be a multiple of 16 between 4 KiB and 1 GiB)");
  }
  if (s.block.length < s.ring_bytes + 128) {
    return Status::Corruption("SETUP: ring block of " + std::to_string(s.block.length) +
                              " bytes cannot hold a " + std::to_string(s.ring_bytes) +
                              "-byte ring and its control words");
  }
  if (s.block.id == 0 || s.block.access != kAccessReadWrite) {
    return Status::Corruption("SETUP: ring block must be a read-write region");
  }
  if (s.max_message_bytes == 0) return Status::Corruption("SETUP: zero max_message_bytes");
  *out = s;
  return Status::OK();
}

void EncodeSegments(const std::vector<SegmentInfo>& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.PutU32(static_cast<uint32_t>(m.size()));
  for (const SegmentInfo& s : m) {
    w.PutU64(s.segment_id);
    w.PutU64(s.length);
    w.PutU8(s.writable ? 1 : 0);
  }
}

Status DecodeSegments(const uint8_t* p, size_t n, std::vector<SegmentInfo>* out) {
  ByteReader r(p, n);
  uint32_t count = 0;
  if (!r.GetU32(&count)) return Truncated("SEGMENTS");
  if (count == 0 || count > kMaxSegmentsPerMessage) {
    return Status::Corruption("SEGMENTS with " + std::to_string(count) + " segments");
  }
  std::vector<SegmentInfo> v(count);
  for (SegmentInfo& s : v) {
    uint8_t writable = 0;
    if (!r.GetU64(&s.segment_id) || !r.GetU64(&s.length) || !r.GetU8(&writable)) {
      return Truncated("SEGMENTS");
    }
    if (writable > 1) return Status::Corruption("SEGMENTS: bad writable flag");
    if (s.segment_id == 0 || s.length == 0) {
      return Status::Corruption("SEGMENTS: zero segment id or length");
    }
    s.writable = writable == 1;
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("SEGMENTS"));
  *out = std::move(v);
  return Status::OK();
}

void EncodeExpose(const Expose& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  PutRegion(&w, m.region);
  w.PutU32(static_cast<uint32_t>(m.pieces.size()));
  for (const SegmentPiece& p : m.pieces) {
    w.PutU64(p.segment_id);
    w.PutU64(p.offset);
    w.PutU64(p.length);
  }
}

Status DecodeExpose(const uint8_t* p, size_t n, Expose* out) {
  ByteReader r(p, n);
  Expose e;
  uint32_t count = 0;
  if (!GetRegion(&r, &e.region) || !r.GetU32(&count)) return Truncated("EXPOSE");
  RAMP_RETURN_IF_ERROR(CheckAccess(e.region.access, "EXPOSE"));
  if (e.region.id == 0) return Status::Corruption("EXPOSE: region id 0");
  if (count == 0 || count > kMaxExposePieces || count * 24ull > r.remaining()) {
    return Status::Corruption("EXPOSE with " + std::to_string(count) + " pieces");
  }
  e.pieces.resize(count);
  uint64_t total = 0;
  for (SegmentPiece& piece : e.pieces) {
    if (!r.GetU64(&piece.segment_id) || !r.GetU64(&piece.offset) || !r.GetU64(&piece.length)) {
      return Truncated("EXPOSE");
    }
    if (piece.length == 0 || piece.length > (1ull << 48) || piece.offset > (1ull << 48)) {
      return Status::Corruption("EXPOSE: piece of " + std::to_string(piece.length) + " bytes at " +
                                std::to_string(piece.offset));
    }
    total += piece.length;  // at most 2^16 pieces of 2^48: cannot overflow
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("EXPOSE"));
  if (total != e.region.length) {
    return Status::Corruption("EXPOSE: pieces add up to " + std::to_string(total) +
                              " bytes, region says " + std::to_string(e.region.length));
  }
  *out = std::move(e);
  return Status::OK();
}

void EncodeVerbsExpose(const VerbsExpose& m, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  PutRegion(&w, m.region);
  w.PutU32(static_cast<uint32_t>(m.pieces.size()));
  for (const RemotePiece& p : m.pieces) {
    w.PutU64(p.addr);
    w.PutU32(p.rkey);
    w.PutU64(p.length);
  }
}

Status DecodeVerbsExpose(const uint8_t* p, size_t n, VerbsExpose* out) {
  ByteReader r(p, n);
  VerbsExpose e;
  uint32_t count = 0;
  if (!GetRegion(&r, &e.region) || !r.GetU32(&count)) return Truncated("VERBS_EXPOSE");
  RAMP_RETURN_IF_ERROR(CheckAccess(e.region.access, "VERBS_EXPOSE"));
  if (e.region.id == 0) return Status::Corruption("VERBS_EXPOSE: region id 0");
  if (count == 0 || count * kVerbsPieceBytes > r.remaining()) {
    return Status::Corruption("VERBS_EXPOSE with " + std::to_string(count) + " pieces");
  }
  e.pieces.resize(count);
  uint64_t total = 0;
  for (RemotePiece& piece : e.pieces) {
    if (!r.GetU64(&piece.addr) || !r.GetU32(&piece.rkey) || !r.GetU64(&piece.length)) {
      return Truncated("VERBS_EXPOSE");
    }
    if (piece.length == 0 || piece.length > (1ull << 48) || piece.addr > ~piece.length) {
      return Status::Corruption("VERBS_EXPOSE: piece of " + std::to_string(piece.length) +
                                " bytes");
    }
    total += piece.length;  // count is bounded by the message size: no overflow
  }
  RAMP_RETURN_IF_ERROR(r.ExpectEnd("VERBS_EXPOSE"));
  if (total != e.region.length) {
    return Status::Corruption("VERBS_EXPOSE: pieces add up to " + std::to_string(total) +
                              " bytes, region says " + std::to_string(e.region.length));
  }
  *out = std::move(e);
  return Status::OK();
}

Status DecodeOp(uint8_t type, const uint8_t* p, size_t n, Op* out) {
  ByteReader r(p, n);
  Op op;
  op.type = static_cast<Type>(type);
  switch (op.type) {
    case Type::kRead:
      if (!r.GetU64(&op.request_id) || !r.GetU64(&op.target.id) || !r.GetU64(&op.target.key) ||
          !r.GetU64(&op.offset) || !r.GetU64(&op.length)) {
        return Truncated("READ");
      }
      RAMP_RETURN_IF_ERROR(r.ExpectEnd("READ"));
      if (op.request_id == 0) return Status::Corruption("READ without a request id");
      break;
    case Type::kWrite:
      if (!r.GetU64(&op.request_id) || !r.GetU64(&op.target.id) || !r.GetU64(&op.target.key) ||
          !r.GetU64(&op.offset)) {
        return Truncated("WRITE");
      }
      op.data_length = r.remaining();
      r.GetView(op.data_length, &op.data);
      op.length = op.data_length;
      break;
    case Type::kFrame:
      if (!r.GetU64(&op.target.id) || !r.GetU64(&op.target.key) || !r.GetU64(&op.offset)) {
        return Truncated("FRAME");
      }
      op.data_length = r.remaining();
      r.GetView(op.data_length, &op.data);
      op.length = op.data_length;
      // Byte 8 is the lead indicator, applied last: a frame has at least size + lead.
      if (op.data_length < ring::kBodyOffset) {
        return Status::Corruption("FRAME of " + std::to_string(op.data_length) + " bytes");
      }
      break;
    case Type::kWriteU64:
      if (!r.GetU64(&op.target.id) || !r.GetU64(&op.target.key) || !r.GetU64(&op.offset) ||
          !r.GetU64(&op.value)) {
        return Truncated("WRITE_U64");
      }
      RAMP_RETURN_IF_ERROR(r.ExpectEnd("WRITE_U64"));
      op.length = 8;
      break;
    case Type::kReadResponse:
    case Type::kWriteResponse: {
      uint8_t code = 0;
      if (!r.GetU64(&op.request_id) || !r.GetU8(&code)) return Truncated("response");
      if (code > static_cast<uint8_t>(Status::Code::kInternal)) {
        return Status::Corruption("response with unknown status code " + std::to_string(code));
      }
      op.code = static_cast<Status::Code>(code);
      if (op.code == Status::Code::kOk) {
        op.data_length = r.remaining();
        r.GetView(op.data_length, &op.data);
        if (op.type == Type::kWriteResponse && op.data_length != 0) {
          return Status::Corruption("write response carrying data");
        }
      } else {
        if (!r.GetString(&op.reason, kMaxReasonBytes)) return Truncated("error response");
        RAMP_RETURN_IF_ERROR(r.ExpectEnd("error response"));
      }
      break;
    }
    default:
      return Status::Corruption("unknown message type " + std::to_string(type) +
                                " on the data path");
  }
  *out = std::move(op);
  return Status::OK();
}

void AppendRead(uint64_t request_id, const RemoteRegion& r, uint64_t offset, uint64_t len,
                std::vector<uint8_t>* out) {
  size_t at = BeginMessage(Type::kRead, out);
  ByteWriter w(out);
  w.PutU64(request_id);
  w.PutU64(r.id);
  w.PutU64(r.key);
  w.PutU64(offset);
  w.PutU64(len);
  EndMessage(at, 0, out);
}

void AppendWriteHeader(uint64_t request_id, const RemoteRegion& r, uint64_t offset,
                       uint64_t data_length, std::vector<uint8_t>* out) {
  size_t at = BeginMessage(Type::kWrite, out);
  ByteWriter w(out);
  w.PutU64(request_id);
  w.PutU64(r.id);
  w.PutU64(r.key);
  w.PutU64(offset);
  EndMessage(at, data_length, out);
}

void AppendFrameHeader(const RemoteRegion& r, uint64_t offset, uint64_t data_length,
                       std::vector<uint8_t>* out) {
  size_t at = BeginMessage(Type::kFrame, out);
  ByteWriter w(out);
  w.PutU64(r.id);
  w.PutU64(r.key);
  w.PutU64(offset);
  EndMessage(at, data_length, out);
}

void AppendWriteU64(const RemoteRegion& r, uint64_t offset, uint64_t value,
                    std::vector<uint8_t>* out) {
  size_t at = BeginMessage(Type::kWriteU64, out);
  ByteWriter w(out);
  w.PutU64(r.id);
  w.PutU64(r.key);
  w.PutU64(offset);
  w.PutU64(value);
  EndMessage(at, 0, out);
}

void AppendResponseHeader(Type type, uint64_t request_id, const Status& status,
                          uint64_t data_length, std::vector<uint8_t>* out) {
  size_t at = BeginMessage(type, out);
  ByteWriter w(out);
  w.PutU64(request_id);
  w.PutU8(static_cast<uint8_t>(status.code()));
  if (!status.ok()) {
    const std::string& m = status.message();
    w.PutString(m.size() > kMaxReasonBytes ? m.substr(0, kMaxReasonBytes) : m);
    data_length = 0;
  }
  EndMessage(at, data_length, out);
}

}  // namespace ramp::transport::wire
