// Remote-region descriptors (p2p/mem_region.h): Parse of what a peer sent,
// the range checks made with it, and Serialize/Parse giving back the same
// descriptor.
#include <cstring>

#include "fuzz_input.h"
#include "p2p/mem_region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zc::fuzz::Input in(data, size);
  const uint64_t off = in.Get<uint64_t>(), len = in.Get<uint64_t>();
  zc::RemoteRegion r;
  if (!zc::RemoteRegion::Parse(in.Rest(), &r).ok()) return 0;
  (void)r.valid();
  (void)r.ToString();
  if (r.Contains(off, len) && (off > r.size || len > r.size - off)) __builtin_trap();
  zc::RemoteRegion again;
  if (!zc::RemoteRegion::Parse(r.Serialize(), &again).ok()) __builtin_trap();
  if (again.transport != r.transport || again.owner != r.owner || again.owner_pid != r.owner_pid ||
      again.id != r.id || again.addr != r.addr || again.size != r.size || again.access_key != r.access_key ||
      again.seg_offset != r.seg_offset || memcmp(again.seg_name, r.seg_name, sizeof(r.seg_name)))
    __builtin_trap();
  return 0;
}
