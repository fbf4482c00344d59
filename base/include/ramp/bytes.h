// ByteWriter / ByteReader: little-endian encoding of protocol messages.
//
// Every decoder of bytes that came from a peer goes through ByteReader: each Get* checks
// that the bytes are there and returns false (leaving the output untouched) when they are
// not, so a truncated or forged message can never make a decoder read past its buffer.
// Values are little-endian on the wire whatever the host order is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"

namespace ramp {

// Appends to a byte container (std::vector<uint8_t> or std::string).
template <class Buffer>
class BasicByteWriter {
 public:
  explicit BasicByteWriter(Buffer* out) : out_(out) {}

  void PutU8(uint8_t v) { out_->push_back(static_cast<typename Buffer::value_type>(v)); }
  void PutU16(uint16_t v) { PutLittleEndian(v, 2); }
  void PutU32(uint32_t v) { PutLittleEndian(v, 4); }
  void PutU64(uint64_t v) { PutLittleEndian(v, 8); }
  void PutBytes(const void* data, size_t n) {
    if (n == 0) return;
    const size_t at = out_->size();
    out_->resize(at + n);
    std::memcpy(out_->data() + at, data, n);
  }
  // A u32 length followed by the bytes.
  void PutString(std::string_view s) {
    PutU32(static_cast<uint32_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  // Overwrites a u32 written earlier at byte position `at` (length prefixes).
  void PatchU32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) {
      (*out_)[at + i] = static_cast<typename Buffer::value_type>((v >> (8 * i)) & 0xff);
    }
  }
  size_t size() const { return out_->size(); }

 private:
  void PutLittleEndian(uint64_t v, int n) {
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = static_cast<uint8_t>(v >> (8 * i));
    PutBytes(b, n);
  }
  Buffer* out_;
};

using ByteWriter = BasicByteWriter<std::vector<uint8_t>>;
using StringByteWriter = BasicByteWriter<std::string>;

// Reads from a buffer it does not own. Each Get* returns false on overrun and then consumes
// nothing; decoders return a Status naming what was truncated.
class ByteReader {
 public:
  ByteReader(const void* data, size_t size)
      : p_(static_cast<const uint8_t*>(data)), left_(data == nullptr ? 0 : size) {}
  explicit ByteReader(std::string_view s) : ByteReader(s.data(), s.size()) {}

  bool GetU8(uint8_t* v) { return GetLittleEndian(v, 1); }
  bool GetU16(uint16_t* v) { return GetLittleEndian(v, 2); }
  bool GetU32(uint32_t* v) { return GetLittleEndian(v, 4); }
  bool GetU64(uint64_t* v) { return GetLittleEndian(v, 8); }
  bool GetBytes(void* out, size_t n) {
    if (n > left_) return false;
    if (n > 0) std::memcpy(out, p_, n);
    Advance(n);
    return true;
  }
  // Points *out at the next n bytes inside the buffer (no copy).
  bool GetView(size_t n, const uint8_t** out) {
    if (n > left_) return false;
    *out = p_;
    Advance(n);
    return true;
  }
  // A u32 length followed by that many bytes; false when longer than max_len or truncated.
  bool GetString(std::string* out, size_t max_len) {
    ByteReader save = *this;
    uint32_t n = 0;
    const uint8_t* bytes = nullptr;
    if (!GetU32(&n) || n > max_len || !GetView(n, &bytes)) {
      *this = save;
      return false;
    }
    out->assign(reinterpret_cast<const char*>(bytes), n);
    return true;
  }
  bool Skip(size_t n) {
    if (n > left_) return false;
    Advance(n);
    return true;
  }

  size_t remaining() const { return left_; }
  bool empty() const { return left_ == 0; }
  const uint8_t* position() const { return p_; }

  // Corruption naming the message when bytes are left over (a decoder expects an exact
  // size), OK otherwise.
  Status ExpectEnd(std::string_view what) const {
    if (left_ == 0) return Status::OK();
    return Status::Corruption(std::string(what) + ": " + std::to_string(left_) +
                              " unexpected trailing bytes");
  }

 private:
  template <class T>
  bool GetLittleEndian(T* v, int n) {
    if (static_cast<size_t>(n) > left_) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x |= static_cast<uint64_t>(p_[i]) << (8 * i);
    *v = static_cast<T>(x);
    Advance(n);
    return true;
  }
  void Advance(size_t n) {
    if (n == 0) return;  // p_ may be null for an empty buffer
    p_ += n;
    left_ -= n;
  }
  const uint8_t* p_;
  size_t left_;
};

}  // namespace ramp
