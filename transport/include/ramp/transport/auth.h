// Cluster-token authentication: HMAC-SHA256 challenge-response in both directions, so
// each peer proves it knows the token without sending it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ramp::transport {

using Digest = std::array<uint8_t, 32>;
using Nonce = std::array<uint8_t, 32>;

Digest Sha256(const void* data, size_t len);
Digest HmacSha256(std::string_view key, const void* data, size_t len);

// Fills a nonce from the kernel's random source.
void RandomNonce(Nonce* out);
uint64_t RandomU64();

// The proof a side sends: HMAC(token, role || client_nonce || server_nonce), role being
// "ramp-client" or "ramp-server" so that one side's proof cannot be replayed as the other's.
Digest Proof(std::string_view token, std::string_view role, const Nonce& client_nonce,
             const Nonce& server_nonce);

// Constant-time comparison.
bool DigestEqual(const Digest& a, const Digest& b);

}  // namespace ramp::transport
