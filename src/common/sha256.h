// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), self-contained so that
// authentication needs no crypto library. Used for the job-key handshake.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace zc {

using Digest256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256() { Reset(); }
  void Reset();
  void Update(const void* data, size_t len);
  // Finishes the hash; the object must be Reset() before reuse.
  Digest256 Final();

  static Digest256 Hash(const void* data, size_t len);
  static Digest256 Hash(const std::string& s) { return Hash(s.data(), s.size()); }

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes hashed so far
};

// Incremental HMAC-SHA256: key of any length (longer than a block is hashed).
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t key_len);
  void Update(const void* data, size_t len) { inner_.Update(data, len); }
  Digest256 Final();

  static Digest256 Mac(const void* key, size_t key_len, const void* data,
                       size_t len);

 private:
  Sha256 inner_;
  uint8_t opad_key_[64];
};

// Compares in time independent of where the inputs differ.
bool ConstantTimeEqual(const void* a, const void* b, size_t len);

std::string ToHex(const void* data, size_t len);
inline std::string ToHex(const Digest256& d) { return ToHex(d.data(), d.size()); }

}  // namespace zc
