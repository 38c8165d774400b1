// Wire format of the key-value store (after the job-key handshake).
// Every message is a fixed 24-byte little-endian header followed by
// key_len bytes of key and value_len bytes of value:
//   request : op, id, arg (op-specific), key, value
//   response: status (zc_status), id (echoed), arg, no key, value
// GET/WAIT: arg = timeout in ms; the server answers when the key(s) exist or
//   with ZC_ERR_TIMEOUT when the timeout passes. WAIT's value is the key list
//   (u32 length + bytes, repeated).
// ADD: arg = int64 delta; counters are stored as decimal text (so GET of a
//   counter gives "3"); the response's arg is the new value.
// CHECK: response arg = 1 if the key exists.
// On failure the response's value is the error message.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace zc::store {

enum StoreOp : uint32_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5 };

constexpr size_t kHeaderBytes = 24;
constexpr uint32_t kMaxKeyBytes = 4096;
constexpr uint32_t kMaxValueBytes = 64u << 20;
constexpr uint32_t kMaxWaitKeys = 65536;

struct Header {
  uint32_t op_or_status = 0;
  uint32_t id = 0;
  uint64_t arg = 0;
  uint32_t key_len = 0;
  uint32_t value_len = 0;
};

inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline void EncodeHeader(const Header& h, uint8_t* out) {
  PutU32(out, h.op_or_status);
  PutU32(out + 4, h.id);
  PutU64(out + 8, h.arg);
  PutU32(out + 16, h.key_len);
  PutU32(out + 20, h.value_len);
}
inline Header DecodeHeader(const uint8_t* in) {
  Header h;
  h.op_or_status = GetU32(in);
  h.id = GetU32(in + 4);
  h.arg = GetU64(in + 8);
  h.key_len = GetU32(in + 16);
  h.value_len = GetU32(in + 20);
  return h;
}

inline std::string EncodeKeyList(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) {
    uint8_t len[4];
    PutU32(len, static_cast<uint32_t>(k.size()));
    out.append(reinterpret_cast<const char*>(len), 4);
    out += k;
  }
  return out;
}

// Returns false on a malformed list (truncated, empty or oversize key).
inline bool DecodeKeyList(const uint8_t* p, size_t len,
                          std::vector<std::string>* keys) {
  keys->clear();
  size_t pos = 0;
  while (pos < len) {
    if (len - pos < 4 || keys->size() >= kMaxWaitKeys) return false;
    uint32_t n = GetU32(p + pos);
    pos += 4;
    if (n == 0 || n > kMaxKeyBytes || n > len - pos) return false;
    keys->emplace_back(reinterpret_cast<const char*>(p + pos), n);
    pos += n;
  }
  return true;
}

// Keys may be binary: quote them with non-printable bytes escaped and long
// keys shortened, for error messages.
inline std::string QuoteKey(const std::string& key) {
  std::string out = "'";
  size_t n = key.size() > 200 ? 200 : key.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (n < key.size()) out += "...";
  out += "'";
  return out;
}

// ---- Parsing what arrives from the other end (pure: the server's and the
// client's socket code call these, and so do the fuzz targets) -------------

// Server: a request header, before its body is read. "" when it is within
// the limits, else why the connection is closed.
inline std::string CheckRequestHeader(const Header& h) {
  bool bad_op = h.op_or_status < kSet || h.op_or_status > kCheck;
  if (!bad_op && h.key_len <= kMaxKeyBytes && h.value_len <= kMaxValueBytes) return {};
  return "malformed request (op " + std::to_string(h.op_or_status) + ", key " +
         std::to_string(h.key_len) + " bytes, value " + std::to_string(h.value_len) +
         " bytes; limits " + std::to_string(kMaxKeyBytes) + " and " +
         std::to_string(kMaxValueBytes) + ")";
}

// A request whose header passed CheckRequestHeader, with its body.
struct StoreRequest {
  uint32_t op = 0;
  uint32_t id = 0;
  uint64_t arg = 0;
  std::string key;                 // all but WAIT
  std::vector<std::string> keys;   // WAIT: the key list (may repeat keys)
  const uint8_t* value = nullptr;  // SET: the value (points into the body)
  uint32_t value_len = 0;
};

enum class RequestVerdict {
  kOk,
  kRefuse,  // answer with ZC_ERR_INVALID_ARG and *why, keep the connection
  kClose,   // the stream cannot be trusted: close the connection (*why)
};

// Server: the body (key_len + value_len bytes after the header).
inline RequestVerdict ParseStoreRequest(const Header& h, const uint8_t* body, StoreRequest* out,
                                   std::string* why) {
  out->op = h.op_or_status;
  out->id = h.id;
  out->arg = h.arg;
  out->key.assign(reinterpret_cast<const char*>(body), h.key_len);
  out->keys.clear();
  out->value = body + h.key_len;
  out->value_len = h.value_len;
  if (out->op != kWait && out->key.empty()) {
    *why = "empty key";
    return RequestVerdict::kRefuse;
  }
  if (out->op == kGet && h.value_len != 0) {
    *why = "malformed GET (carries a value)";
    return RequestVerdict::kClose;
  }
  if (out->op == kWait &&
      (!out->key.empty() || !DecodeKeyList(out->value, h.value_len, &out->keys))) {
    *why = "malformed WAIT key list";
    return RequestVerdict::kClose;
  }
  return RequestVerdict::kOk;
}

// Strict decimal int64 (counters are stored as text).
inline bool ParseCounter(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9') return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Client: a reply header to request `id`. "" when well-formed, else what is
// wrong (the stream is then out of step and must be dropped).
inline std::string CheckReplyHeader(const Header& r, uint32_t id, uint32_t max_status) {
  if (r.id == id && r.key_len == 0 && r.value_len <= kMaxValueBytes + 65536u &&
      r.op_or_status <= max_status)
    return {};
  return "malformed reply (id " + std::to_string(r.id) + " for request " + std::to_string(id) +
         ", status " + std::to_string(r.op_or_status) + ", " + std::to_string(r.value_len) +
         " value bytes)";
}

}  // namespace zc::store
