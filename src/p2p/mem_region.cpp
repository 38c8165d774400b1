#include "p2p/mem_region.h"

#include <cstring>

namespace zc {

const char* TransportName(TransportKind k) {
  switch (k) {
    case TransportKind::kShm: return "shm";
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kVerbs: return "verbs";
    default: return "none";
  }
}

namespace {
constexpr uint32_t kMagic = 0x5a435244;  // "ZCRD"
struct Wire {
  uint32_t magic;
  uint8_t transport;
  uint8_t pad[3];
  int32_t owner;
  int32_t owner_pid;
  uint64_t id, addr, size;
  uint32_t access_key;
  uint32_t pad2;
  uint64_t seg_offset;
  char seg_name[RemoteRegion::kNameLen];
};
}  // namespace

std::string RemoteRegion::Serialize() const {
  Wire w{};
  w.magic = kMagic;
  w.transport = static_cast<uint8_t>(transport);
  w.owner = owner;
  w.owner_pid = owner_pid;
  w.id = id;
  w.addr = addr;
  w.size = size;
  w.access_key = access_key;
  w.seg_offset = seg_offset;
  memcpy(w.seg_name, seg_name, kNameLen);
  w.seg_name[kNameLen - 1] = '\0';
  return std::string(reinterpret_cast<const char*>(&w), sizeof(w));
}

Status RemoteRegion::Parse(const std::string& bytes, RemoteRegion* out) {
  Wire w;
  if (bytes.size() != sizeof(w))
    return Error(ZC_ERR_INTERNAL, "remote region descriptor has %zu bytes, expected %zu",
                 bytes.size(), sizeof(w));
  memcpy(&w, bytes.data(), sizeof(w));
  if (w.magic != kMagic || w.transport > static_cast<uint8_t>(TransportKind::kVerbs))
    return Error(ZC_ERR_INTERNAL, "remote region descriptor is corrupt (magic %#x)", w.magic);
  RemoteRegion r;
  r.transport = static_cast<TransportKind>(w.transport);
  r.owner = w.owner;
  r.owner_pid = w.owner_pid;
  r.id = w.id;
  r.addr = w.addr;
  r.size = w.size;
  r.access_key = w.access_key;
  r.seg_offset = w.seg_offset;
  memcpy(r.seg_name, w.seg_name, kNameLen);
  r.seg_name[kNameLen - 1] = '\0';
  *out = r;
  return Status::Ok();
}

std::string RemoteRegion::ToString() const {
  return Format("%s region %llu of rank %d (%llu bytes%s%s)", TransportName(transport),
                static_cast<unsigned long long>(id), owner,
                static_cast<unsigned long long>(size), seg_name[0] ? ", segment " : "",
                seg_name);
}

}  // namespace zc
