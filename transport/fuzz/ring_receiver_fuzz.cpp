// Fuzzes ring::Receiver with arbitrary ring contents, the way a hostile peer could fill our
// ring (shm peers write it directly). Build (not wired into CMake):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Ibase/include \
//     -Itransport/include -Itransport/src transport/fuzz/ring_receiver_fuzz.cpp \
//     transport/src/core/ring.cpp base/src/status.cpp -o ring_receiver_fuzz
//
// Input: byte 0 picks the ring size (64 B .. 8 KiB); the rest fills the ring, and whatever
// does not fit refills the slots the receiver consumes, so frames at every position and
// across wrap-around are exercised. Peek must never read outside the ring, and every frame it
// returns must lie inside it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ramp/transport/ring.h"

using namespace ramp::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t capacity = size_t{64} << (data[0] % 8);
  data++;
  size--;
  std::vector<uint8_t> ring(capacity, 0);
  size_t take = size < capacity ? size : capacity;
  std::memcpy(ring.data(), data, take);
  data += take;
  size -= take;

  ring::Receiver rx(ring.data(), capacity);
  for (int i = 0; i < 4096; i++) {
    const uint8_t* body = nullptr;
    size_t len = 0;
    bool more = false;
    const uint64_t before = rx.consumed();
    ramp::Status s = rx.Peek(&body, &len, &more);
    if (!s.ok()) break;  // NotFound or Corruption: the connection would stop here
    // The frame and its trailing indicator lie inside the ring.
    if (body < ring.data() || body + len + 1 > ring.data() + capacity) abort();
    volatile uint8_t sink = 0;
    for (size_t k = 0; k < len; k++) sink = sink ^ body[k];
    (void)rx.FrameReady();
    rx.Consume();
    if (rx.consumed() <= before) abort();  // always advances
    if (rx.CreditsDue() || rx.IdleCreditsDue()) {
      rx.ZeroConsumed();
      rx.MarkPublished();
    }
    // Refill the consumed bytes from the input (zeroed ones stay zero when it runs out).
    const size_t pos = before % capacity;
    const size_t n = static_cast<size_t>(rx.consumed() - before);
    for (size_t k = 0; k < n && size > 0; k++, data++, size--) {
      ring[(pos + k) % capacity] = *data;
    }
  }
  return 0;
}
