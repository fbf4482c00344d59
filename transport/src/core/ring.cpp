#include "ramp/transport/ring.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace ramp::transport::ring {
namespace {

// The indicator bytes are written by another thread or process (the sender, or a tcp
// responder applying the sender's writes): read them through atomic_ref so the
// acquire on the lead orders every read of the frame after it.
inline uint8_t LoadIndicator(const uint8_t* p) {
  return std::atomic_ref<const uint8_t>(*p).load(std::memory_order_acquire);
}

inline uint64_t LoadSize(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

void EncodeSize(uint8_t* head8, uint64_t size_field) {
  for (int i = 0; i < 8; i++) head8[i] = static_cast<uint8_t>(size_field >> (8 * i));
}

Receiver::Receiver(uint8_t* ring, size_t capacity) : ring_(ring), capacity_(capacity) {}

bool Receiver::FrameReady() const {
  if (capacity_ == 0) return false;
  if (pending_frame_ != 0) return true;
  return LoadIndicator(ring_ + consumed_ % capacity_ + kLeadOffset) != 0;
}

bool Receiver::SkipWrap() {
  const size_t pos = consumed_ % capacity_;
  consumed_ += capacity_ - pos;
  return true;
}

void Receiver::ZeroConsumed() {
  uint64_t left = consumed_ - zeroed_;
  while (left > 0) {
    const size_t pos = zeroed_ % capacity_;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, capacity_ - pos));
    std::memset(ring_ + pos, 0, n);
    zeroed_ += n;
    left -= n;
  }
}

Status Receiver::Peek(const uint8_t** data, size_t* size, bool* more) {
  if (capacity_ == 0) return Status::Internal("ring receiver used before set-up");
  // A frame returned by an earlier Peek and not consumed yet is returned again.
  for (int wraps = 0;; wraps++) {
    const size_t pos = consumed_ % capacity_;
    if (pos % kAlign != 0) {
      return Status::Corruption("ring position " + std::to_string(pos) + " is not " +
                                std::to_string(kAlign) + "-byte aligned");
    }
    uint8_t* frame = ring_ + pos;
    const uint8_t lead = LoadIndicator(frame + kLeadOffset);
    if (lead == 0) return Status::NotFound("ring empty");
    if (lead != kIndicator) {
      return Status::Corruption("bad lead indicator " + std::to_string(lead) + " at ring offset " +
                                std::to_string(pos));
    }
    const uint64_t size_field = LoadSize(frame);
    if (size_field == kWrapMarker) {
      // A wrap marker at 0 would send us around forever; a sender never writes one there
      // (every legal frame fits at 0), and two markers in a row are as impossible.
      if (pos == 0 || wraps > 0) {
        return Status::Corruption("wrap marker at ring offset " + std::to_string(pos));
      }
      SkipWrap();
      continue;
    }
    if ((size_field & ~(kMoreFragments | kBodySizeMask)) != 0) {
      char hex[17];
      snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(size_field));
      return Status::Corruption("frame size field 0x" + std::string(hex) +
                                " has reserved bits set at ring offset " + std::to_string(pos));
    }
    const uint64_t body = size_field & kBodySizeMask;
    if (body > MaxBody(capacity_)) {
      return Status::Corruption("frame body of " + std::to_string(body) + " bytes is more than a " +
                                std::to_string(capacity_) + "-byte ring can hold");
    }
    const size_t frame_bytes = FrameBytes(body);
    if (pos + frame_bytes > capacity_) {
      return Status::Corruption("frame of " + std::to_string(frame_bytes) + " bytes at offset " +
                                std::to_string(pos) + " runs past the end of the ring");
    }
    const uint8_t trail = LoadIndicator(frame + kBodyOffset + body);
    if (trail != kIndicator) {
      // The lead is written last, so a complete frame always has its trail: a missing one
      // means the size field or the frame is garbage.
      return Status::Corruption("frame at ring offset " + std::to_string(pos) + " (body " +
                                std::to_string(body) + " bytes) has no trailing indicator");
    }
    *data = frame + kBodyOffset;
    *size = body;
    *more = (size_field & kMoreFragments) != 0;
    pending_frame_ = frame_bytes;
    return Status::OK();
  }
}

void Receiver::Consume() {
  consumed_ += pending_frame_;
  pending_frame_ = 0;
}

Status Sender::Place(size_t body, Placement* out) {
  if (capacity_ == 0) return Status::Internal("ring sender used before set-up");
  if (body > MaxBody(capacity_)) {
    return Status::TooLarge("frame body of " + std::to_string(body) + " bytes exceeds " +
                            std::to_string(MaxBody(capacity_)) + " for a " +
                            std::to_string(capacity_) + "-byte ring");
  }
  const size_t frame_bytes = FrameBytes(body);
  const uint64_t pos = written_ % capacity_;
  const uint64_t skip = (pos + frame_bytes > capacity_) ? capacity_ - pos : 0;
  if (written_ + skip + frame_bytes - credits_ > capacity_) {
    return Status::Busy("ring full: waiting for the receiver's credits");
  }
  out->wrap = skip != 0;
  out->wrap_position = pos;
  out->position = skip != 0 ? 0 : pos;
  out->frame_bytes = frame_bytes;
  return Status::OK();
}

void Sender::Commit(const Placement& p) {
  if (p.wrap) written_ += capacity_ - p.wrap_position;
  written_ += p.frame_bytes;
}

}  // namespace ramp::transport::ring
