// The parameter server's control messages (ps/protocol.h): a worker's
// declaration as a server reads it and a server's answer as a worker reads
// it, then what each does with the fields (ps/server.cpp Declare: the
// dtype's name and size; ps/worker.cpp: the verdict and the descriptors).
#include <zcomm/zcomm.h>

#include "collectives/dtype.h"
#include "fuzz_input.h"
#include "p2p/mem_region.h"
#include "ps/protocol.h"

using namespace zc::ps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string msg(reinterpret_cast<const char*>(data) + 1, size - 1);
  zc::RemoteRegion a, b;
  if ((data[0] & 1) == 0) {
    Declaration d;
    if (!ParseDeclaration(msg, &d)) return 0;
    const char* name = zc::DtypeName(static_cast<zc_dtype>(d.head.dtype));
    size_t es = zc::DtypeSize(static_cast<zc_dtype>(d.head.dtype));
    (void)name;
    (void)es;
    if (zc::RemoteRegion::Parse(d.reply_slots, &a).ok()) (void)zc::RemoteRegion::Parse(d.push_credits, &b);
    return 0;
  }
  Answer ans;
  if (!ParseAnswer(msg, &ans)) return 0;
  if (ans.head.code != ZC_OK) {
    zc::Status verdict = zc::StatusFromPeer(ans.head.code, ans.text);  // as ps/worker.cpp
    zc::fuzz::CheckStatus(verdict);  // what zc_ps_declare returns
    return 0;
  }
  if (zc::RemoteRegion::Parse(ans.push_slots, &a).ok()) (void)zc::RemoteRegion::Parse(ans.reply_credits, &b);
  return 0;
}
