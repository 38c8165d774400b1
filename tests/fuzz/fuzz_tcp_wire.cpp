// The tcp transport's connection hello and message headers
// (p2p/tcp/tcp_wire.h), acted on as the transport's progress thread does
// (tcp_messages.cpp, MessageHandler): payloads land in small local regions
// of exact size, flags are stored, read requests are served and read
// responses completed, so AddressSanitizer sees any range check that lets
// a peer reach outside a region.
#include <zcomm/zcomm.h>

#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "p2p/tcp/tcp_wire.h"

using namespace zc::tcp_wire;

namespace {
struct Region {
  uint64_t id;
  std::vector<uint8_t> mem;
};
// The oracle: [off, off + len) past `size`, in 128-bit arithmetic.
bool Beyond(uint64_t off, uint64_t len, uint64_t size) {
  return static_cast<unsigned __int128>(off) + len > size;
}
Region* Find(std::vector<Region>& regions, uint64_t id) {
  for (auto& r : regions)
    if (r.id == id) return &r;
  return nullptr;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zc::fuzz::Input in(data, size);
  const uint8_t shape = in.Get<uint8_t>();
  const int nranks = 1 + (shape & 7), per_peer = 1 + ((shape >> 3) & 3);
  // The accepting side: one socket slot per (rank, index).
  std::vector<std::vector<int>> by_peer(nranks, std::vector<int>(per_peer, -1));
  if (in.left() < kHelloBytes) return 0;
  int peer = -1, idx = -1;
  zc::Status st = ParseHello(in.here(), nranks, per_peer, &peer, &idx);
  in.Skip(kHelloBytes);
  if (!st.ok()) return 0;
  // Checked here too, so the standalone driver (no sanitizers) catches it.
  if (peer < 0 || peer >= nranks || idx < 0 || idx >= per_peer) __builtin_trap();
  by_peer[peer][idx] = 3;  // the accepted descriptor

  // Local regions (ids 1..3, of 64, 8 and 0 bytes) and one pending read.
  std::vector<Region> regions = {{1, std::vector<uint8_t>(64)}, {2, std::vector<uint8_t>(8)},
                                 {3, {}}};
  std::vector<uint8_t> read_dst(16);
  std::vector<uint8_t> offer_dst(24);  // an armed receive (OfferBoard)
  bool read_pending = true;
  const uint64_t read_token = 1;
  while (in.left() >= sizeof(MsgHeader)) {
    MsgHeader h = in.Get<MsgHeader>();
    if (!CheckHeader(h, peer).ok()) return 0;  // the connection is dropped
    switch (h.type) {
      case kWrite: {
        if (h.bytes) {
          Region* r = Find(regions, h.region_id);
          if (h.bytes > in.left()) return 0;  // the socket would wait for the rest
          if (r && RangeInside(h.offset, h.bytes, r->mem.size())) {
            if (Beyond(h.offset, h.bytes, r->mem.size())) __builtin_trap();
            memcpy(r->mem.data() + h.offset, in.here(), h.bytes);
          }
          in.Skip(h.bytes);  // received, or drained
        }
        if (h.flag_region_id) {
          Region* f = Find(regions, h.flag_region_id);
          if (f && FlagInside(h.flag_offset, f->mem.size())) {
            if (Beyond(h.flag_offset, 8, f->mem.size())) __builtin_trap();
            memcpy(f->mem.data() + h.flag_offset, &h.flag_value, 8);
          }
        }
        break;
      }
      case kReadReq: {
        Region* r = Find(regions, h.region_id);
        std::vector<uint8_t> resp;
        if (r && RangeInside(h.offset, h.bytes, r->mem.size())) {
          if (Beyond(h.offset, h.bytes, r->mem.size())) __builtin_trap();
          resp.assign(r->mem.begin() + static_cast<ptrdiff_t>(h.offset),
                      r->mem.begin() + static_cast<ptrdiff_t>(h.offset + h.bytes));
        }
        break;
      }
      case kReadResp: {
        const bool mine = read_pending && h.token == read_token;
        if (!mine || !ReadRespFits(h, read_dst.size())) {
          if (h.bytes > in.left()) return 0;
          in.Skip(h.bytes);  // drained
          break;
        }
        read_pending = false;
        if (h.status) {
          zc::fuzz::CheckStatus(RefusedRead(h, peer));  // what the reader reports
          break;
        }
        if (h.bytes > in.left()) return 0;
        memcpy(read_dst.data(), in.here(), h.bytes);
        in.Skip(h.bytes);
        break;
      }
      case kOffer: {
        // Taken by the armed receive when the sizes agree (the board hands
        // out no target of another size), else refused and drained.
        if (h.bytes > in.left()) return 0;
        if (h.bytes == offer_dst.size()) memcpy(offer_dst.data(), in.here(), h.bytes);
        in.Skip(h.bytes);
        break;
      }
      case kBye:
        break;
    }
  }
  return 0;
}
