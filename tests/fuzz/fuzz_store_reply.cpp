// The store client's reply parsing (bootstrap/store_protocol.h): a stream
// of replies to requests 1, 2, 3, ... as the client reads them; the first
// malformed header ends the stream, as the client drops the connection.
#include <zcomm/zcomm.h>

#include "bootstrap/store_protocol.h"
#include "common/status.h"
#include "fuzz_input.h"

using namespace zc::store;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* p = data;
  size_t left = size;
  for (uint32_t id = 1; left >= kHeaderBytes; ++id) {
    Header r = DecodeHeader(p);
    std::string bad = CheckReplyHeader(r, id, static_cast<uint32_t>(ZC_ERR_INTERNAL));
    if (!bad.empty()) return 0;
    if (kHeaderBytes + r.value_len > left) return 0;  // the client waits (deadline)
    std::string value(reinterpret_cast<const char*>(p + kHeaderBytes), r.value_len);
    if (r.op_or_status != ZC_OK) {
      zc::Status st(static_cast<zc_status>(r.op_or_status), "store: " + value);
      zc::fuzz::CheckStatus(st);  // what the caller sees
    } else {
      int64_t counter = 0;
      (void)ParseCounter(value, &counter);
    }
    p += kHeaderBytes + r.value_len;
    left -= kHeaderBytes + r.value_len;
  }
  return 0;
}
