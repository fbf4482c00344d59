// Incremental SHA-256 and HMAC-SHA256 (the one-shot functions are in ramp/transport/auth.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ramp/transport/auth.h"

namespace ramp::transport {

class Sha256Context {
 public:
  Sha256Context();
  void Update(const void* data, size_t len);
  Digest Finish();  // the context is spent afterwards

 private:
  void Block(const uint8_t* p);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

class HmacSha256Context {
 public:
  explicit HmacSha256Context(std::string_view key);
  void Update(const void* data, size_t len) { inner_.Update(data, len); }
  Digest Finish();

 private:
  Sha256Context inner_;
  uint8_t outer_key_[64];
};

}  // namespace ramp::transport
