#include "p2p/peer_info.h"

#include <cstdint>
#include <cstring>

namespace zc {
namespace {

// Bounds on what a record may hold: a host id or a reason is a line of
// text, an address a few dozen bytes; the registry has a handful of entries.
constexpr size_t kMaxField = 4096;
constexpr uint32_t kMaxEntries = 16;
constexpr char kInfoMagic[4] = {'Z', 'C', 'P', 'I'};
constexpr char kAddrMagic[4] = {'Z', 'C', 'P', 'A'};
constexpr uint8_t kVersion = 1;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutField(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
std::string Header(const char* magic) {
  std::string out(magic, 4);
  out.push_back(static_cast<char>(kVersion));
  return out;
}

// Reads fields front to back; the first defect sticks and names the field.
class Reader {
 public:
  Reader(const std::string& bytes, const char* what) : b_(bytes), what_(what) {}
  bool Header(const char* magic) {
    if (b_.size() < 5 || memcmp(b_.data(), magic, 4) != 0)
      return Fail(Format("does not start with the %.4s magic", magic));
    if (static_cast<uint8_t>(b_[4]) != kVersion)
      return Fail(Format("has version %u, expected %u", static_cast<uint8_t>(b_[4]), kVersion));
    pos_ = 5;
    return true;
  }
  bool U32(const char* field, uint32_t* v) {
    if (!st_.ok()) return false;
    if (b_.size() - pos_ < 4) return Fail(Format("is truncated at byte %zu (field %s)", pos_, field));
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(b_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool Field(const char* field, std::string* s) {
    uint32_t n = 0;
    if (!U32(field, &n)) return false;
    if (n > kMaxField) return Fail(Format("field %s claims %u bytes (at most %zu)", field, n, kMaxField));
    if (b_.size() - pos_ < n)
      return Fail(Format("field %s claims %u bytes, %zu remain", field, n, b_.size() - pos_));
    s->assign(b_, pos_, n);
    pos_ += n;
    return true;
  }
  bool Count(const char* field, uint32_t* n) {
    if (!U32(field, n)) return false;
    if (*n > kMaxEntries) return Fail(Format("claims %u %s (at most %u)", *n, field, kMaxEntries));
    return true;
  }
  Status Finish() {
    if (st_.ok() && pos_ != b_.size()) Fail(Format("has %zu trailing bytes", b_.size() - pos_));
    return st_;
  }
  bool Fail(const std::string& why) {
    if (st_.ok()) st_ = Error(ZC_ERR_INTERNAL, "%s of %zu bytes %s", what_, b_.size(), why.c_str());
    return false;
  }

 private:
  const std::string& b_;
  const char* what_;
  size_t pos_ = 0;
  Status st_;
};

}  // namespace

const PeerInfo::Reach* PeerInfo::Find(const std::string& transport) const {
  for (const Reach& r : reach)
    if (r.transport == transport) return &r;
  return nullptr;
}

std::string PeerInfo::Serialize() const {
  std::string out = Header(kInfoMagic);
  PutField(&out, host);
  PutU32(&out, static_cast<uint32_t>(pid));
  PutField(&out, key);
  PutU32(&out, static_cast<uint32_t>(reach.size()));
  for (const Reach& r : reach) {
    PutField(&out, r.transport);
    PutU32(&out, r.viable ? 1 : 0);
    PutField(&out, r.domain);
    PutField(&out, r.why);
  }
  return out;
}

Status PeerInfo::Parse(const std::string& bytes, PeerInfo* out) {
  Reader in(bytes, "peer info record");
  PeerInfo info;
  uint32_t pid = 0, n = 0;
  if (in.Header(kInfoMagic) && in.Field("host", &info.host) && in.U32("pid", &pid) &&
      in.Field("key", &info.key) && in.Count("transports", &n)) {
    if (pid > INT32_MAX) in.Fail(Format("has pid %u out of range", pid));
    info.pid = static_cast<int>(pid);
    for (uint32_t i = 0; i < n; ++i) {
      Reach r;
      uint32_t viable = 0;
      if (!in.Field("transport", &r.transport) || !in.U32("viable", &viable) ||
          !in.Field("domain", &r.domain) || !in.Field("why", &r.why))
        break;
      if (viable > 1) {
        in.Fail(Format("says transport %s viable=%u (0 or 1)", r.transport.c_str(), viable));
        break;
      }
      r.viable = viable == 1;
      info.reach.push_back(std::move(r));
    }
  }
  ZC_RETURN_IF_ERROR(in.Finish());
  *out = std::move(info);
  return Status::Ok();
}

std::string PeerAddresses::Find(const std::string& transport) const {
  for (const Entry& e : entries)
    if (e.transport == transport) return e.address;
  return std::string();
}

std::string PeerAddresses::Serialize() const {
  std::string out = Header(kAddrMagic);
  PutU32(&out, static_cast<uint32_t>(entries.size()));
  for (const Entry& e : entries) {
    PutField(&out, e.transport);
    PutField(&out, e.address);
  }
  return out;
}

Status PeerAddresses::Parse(const std::string& bytes, PeerAddresses* out) {
  Reader in(bytes, "transport address record");
  PeerAddresses a;
  uint32_t n = 0;
  if (in.Header(kAddrMagic) && in.Count("transports", &n)) {
    for (uint32_t i = 0; i < n; ++i) {
      Entry e;
      if (!in.Field("transport", &e.transport) || !in.Field("address", &e.address)) break;
      a.entries.push_back(std::move(e));
    }
  }
  ZC_RETURN_IF_ERROR(in.Finish());
  *out = std::move(a);
  return Status::Ok();
}

}  // namespace zc
