// Message rings in the format of paper 000 Fig. 2 (after HydraDB).
//
// A ring lives in the receiver's memory and is written one-sided by the sender. Each
// message is a frame at a 16-byte aligned position:
//
//   offset 0        8           9                9+size        9+size+1
//          | size (u64 LE) | lead (1) | body (size bytes) | trail (1) | zero padding to 16 |
//
// lead and trail are the indicators (kIndicator when written, 0 in a free slot). The sender
// places size, body and trail first and the lead indicator last (its provider guarantees
// that a later write becomes visible after an earlier one), so a receiver that sees lead
// set sees the whole frame; it still checks trail and the size, and a frame that fails a
// check is corruption: the connection is closed with the reason.
//
// Fragments: a message larger than MaxBody(capacity) is sent as several frames; every frame
// but the last has kMoreFragments set in its size field (the body size is the low 48 bits).
//
// A frame never straddles the end of the ring: when the next frame does not fit before the
// end, the sender writes a wrap marker (size = kWrapMarker, lead set) and continues at 0.
// After consuming a frame the receiver advances `consumed` (monotonic byte count, wrap skips
// included) and zeroes the frame's bytes -- in batches (ZeroConsumed), always before it
// publishes the credits that let the sender reuse them. Zeroing each frame at once would
// write into cache lines the sender is filling with the next frames. It returns credits by writing
// `consumed` into the sender's credit word one-sided, whenever a quarter of the ring has been
// consumed since the last time; with messages at most half a ring that can never deadlock. A sender
// never writes more than capacity bytes past the last credit it saw, so it never overwrites an
// unread slot.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ramp/status.h"

namespace ramp::transport::ring {

inline constexpr size_t kAlign = 16;
inline constexpr size_t kSizeBytes = 8;
inline constexpr size_t kLeadOffset = 8;
inline constexpr size_t kBodyOffset = 9;
inline constexpr uint8_t kIndicator = 1;
inline constexpr uint64_t kWrapMarker = ~uint64_t{0};
inline constexpr uint64_t kMoreFragments = uint64_t{1} << 63;
inline constexpr uint64_t kBodySizeMask = (uint64_t{1} << 48) - 1;

// Bytes a frame with a body of `body` bytes occupies.
constexpr size_t FrameBytes(size_t body) {
  return (body + kBodyOffset + 1 + kAlign - 1) & ~(kAlign - 1);
}
// The largest body a ring of `capacity` bytes accepts (so that credits cannot deadlock).
constexpr size_t MaxBody(size_t capacity) {
  return capacity / 2 - kAlign;
}

// Shared words next to a receive ring, in the receiver's memory: the doorbell arming flag
// the sender checks after writing a frame.
struct alignas(64) ControlBlock {
  std::atomic<uint32_t> armed;  // receiver is (about to be) asleep on its doorbell
  // Set by a peer that queued a control message on a side channel (shm: the unix socket),
  // so that the owner looks at that channel only when there is something to read instead of
  // making a system call on every poll.
  std::atomic<uint32_t> control_pending;
  uint64_t pad1[7];
};
static_assert(sizeof(ControlBlock) == 64);

// Receiver side: reads frames from ring memory it owns.
class Receiver {
 public:
  Receiver() = default;
  // ring: capacity bytes (a multiple of kAlign, zeroed).
  Receiver(uint8_t* ring, size_t capacity);

  // OK with *data,*size,*more set when a whole frame is there (*more: further fragments of
  // the same message follow); NotFound when the ring is empty (or the next frame is still
  // being written); Corruption when the frame is malformed (size beyond what the ring can
  // hold, a missing trailing indicator, a bad wrap marker).
  Status Peek(const uint8_t** data, size_t* size, bool* more);
  // Advances past the frame returned by the last Peek. Its bytes are zeroed by the next
  // ZeroConsumed.
  void Consume();
  // Zeroes everything consumed since the last call. Call it before publishing credits: a
  // stale lead indicator in a reused slot would read as a new frame.
  void ZeroConsumed();
  // True when a frame (or wrap marker) has its lead indicator set at the read position:
  // a cheap check that does not validate the frame (Arm uses it).
  bool FrameReady() const;
  // Total bytes consumed (the credit value).
  uint64_t consumed() const { return consumed_; }
  // True when credits should be published (a quarter ring consumed since the last time).
  bool CreditsDue() const { return consumed_ - published_ >= capacity_ / 4; }
  // To call when the ring is found empty. The quarter-ring rule alone can deadlock: with
  // less than a quarter unpublished the sender may still lack room for a large frame plus
  // the wrap skip in front of it (published at 0.4 capacity, drained at 0.6: the sender
  // sees 0.8 free but a half-ring frame at 0.6 needs 0.4 skip + 0.5). True when the sender,
  // knowing only the published count, might not fit a largest frame at the current
  // position; publishing then costs about one extra credit write per lap of the ring.
  bool IdleCreditsDue() const {
    const uint64_t unpublished = consumed_ - published_;
    if (unpublished == 0) return false;
    if (CreditsDue()) return true;
    const uint64_t pos = consumed_ % capacity_;
    return pos > capacity_ / 2 && unpublished > pos - capacity_ / 2;
  }
  void MarkPublished() { published_ = consumed_; }
  size_t capacity() const { return capacity_; }

 private:
  bool SkipWrap();
  uint8_t* ring_ = nullptr;
  size_t capacity_ = 0;
  uint64_t consumed_ = 0;
  uint64_t published_ = 0;
  uint64_t zeroed_ = 0;
  size_t pending_frame_ = 0;  // bytes of the frame returned by Peek (0 = none)
};

// Sender side: decides where frames go; the provider moves the bytes.
class Sender {
 public:
  Sender() = default;
  explicit Sender(size_t capacity) : capacity_(capacity) {}

  struct Placement {
    bool wrap = false;  // write a wrap marker at wrap_position first
    uint64_t wrap_position = 0;
    uint64_t position = 0;  // where the frame starts (offset in the ring)
    size_t frame_bytes = 0;
  };
  // Places a frame with a body of `body` bytes. Busy when credits are short, TooLarge when
  // the body exceeds MaxBody(capacity).
  Status Place(size_t body, Placement* out);
  // Records that the placed frame was written.
  void Commit(const Placement& p);
  // The receiver's consumed count, as written into our credit word.
  // A value beyond what we wrote comes from a broken or hostile peer and is ignored (it
  // would otherwise let us overwrite unread frames).
  void UpdateCredits(uint64_t consumed) {
    if (consumed > credits_ && consumed <= written_) credits_ = consumed;
  }
  uint64_t written() const { return written_; }
  uint64_t credits() const { return credits_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_ = 0;
  uint64_t written_ = 0;  // bytes written (monotonic)
  uint64_t credits_ = 0;  // bytes the receiver has consumed (monotonic)
};

// Builds the 9-byte frame head (size, lead indicator) and the trailing byte for a body.
void EncodeSize(uint8_t* head8, uint64_t size_field);

}  // namespace ramp::transport::ring
