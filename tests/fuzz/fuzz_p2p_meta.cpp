// Two-sided send/recv control messages (p2p/p2p_protocol.h), as a receive
// of an expected size takes them (TakeMeta: eager payload straight into the
// user's buffer, or a rendezvous descriptor), then the descriptor and the
// read range the receiver would use, and the ack-class messages a sender or
// a restaging receiver reads (ParseAck, ParseRestaged). send_recv.cpp and
// messenger.cpp call the same functions.
#include <zcomm/zcomm.h>

#include <vector>

#include "fuzz_input.h"
#include "p2p/mem_region.h"
#include "p2p/p2p_protocol.h"

using namespace zc::p2p_wire;

namespace {
void UseDescriptor(const std::string& desc, const Meta& m, size_t bytes) {
  zc::RemoteRegion src;
  if (!zc::RemoteRegion::Parse(desc, &src).ok()) return;
  // What a channel's Read checks before it touches the peer's memory.
  (void)src.Contains(m.offset, bytes);
  (void)src.ToString();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zc::fuzz::Input in(data, size);
  const uint8_t which = in.Get<uint8_t>();
  // The receive's size: small, so that an eager payload may match it.
  const size_t bytes = in.Get<uint8_t>();
  std::vector<char> buf(bytes);  // the user's receive buffer, exact size
  std::string msg = in.Rest();
  if ((which & 1) == 0) {
    // Meta class, as a receive takes it.
    Arrival a{buf.data(), bytes};
    zc::Status st = TakeMeta(&a, msg.data(), msg.size());
    if (!st.ok()) return 0;
    if (a.meta.bytes != bytes || a.meta.mode == kEager) return 0;
    UseDescriptor(a.desc, a.meta, bytes);
    return 0;
  }
  // Ack class.
  Ack ack{};
  if (!ParseAck(msg.data(), msg.size(), &ack)) return 0;
  Meta m{};
  std::string desc;
  if (ParseRestaged(msg, &ack, &m, &desc) && m.bytes == bytes) UseDescriptor(desc, m, bytes);
  return 0;
}
