// The store server's request parsing (bootstrap/store_protocol.h), over a
// stream of requests as a client sends them after the handshake: header
// limits, body, WAIT key lists, then what the server does with each request
// (counters, error-message quoting). The server's socket code calls the same
// functions (store_server.cpp).
#include <map>
#include <set>

#include "bootstrap/store_protocol.h"
#include "fuzz_input.h"

using namespace zc::store;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> store;  // the server's data, in small
  const uint8_t* p = data;
  size_t left = size;
  while (left >= kHeaderBytes) {
    Header h = DecodeHeader(p);
    if (!CheckRequestHeader(h).empty()) return 0;  // the server closes
    size_t need = kHeaderBytes + h.key_len + h.value_len;
    if (need > left) return 0;  // the server waits for the rest
    StoreRequest req;
    std::string why;
    RequestVerdict v = ParseStoreRequest(h, p + kHeaderBytes, &req, &why);
    p += need;
    left -= need;
    if (v == RequestVerdict::kClose) return 0;
    if (v == RequestVerdict::kRefuse) continue;
    std::string quoted = QuoteKey(req.key);
    switch (req.op) {
      case kSet:
        store[req.key].assign(reinterpret_cast<const char*>(req.value), req.value_len);
        break;
      case kAdd: {
        int64_t cur = 0, next = 0;
        auto it = store.find(req.key);
        if (it != store.end() && !ParseCounter(it->second, &cur)) break;
        if (__builtin_add_overflow(cur, static_cast<int64_t>(req.arg), &next)) break;
        store[req.key] = std::to_string(next);
        break;
      }
      case kGet:
      case kCheck:
        (void)store.count(req.key);
        break;
      case kWait: {
        std::set<std::string> missing;
        for (const auto& k : req.keys)
          if (!store.count(k)) missing.insert(QuoteKey(k));
        break;
      }
    }
  }
  return 0;
}
