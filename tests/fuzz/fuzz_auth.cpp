// The job-key handshake (common/auth.h) from both sides: the input is what
// the peer sends, cut into the messages the state machine asks for (hello,
// proof, verdict). The first byte picks our role; the challenge and key are
// fixed so that the recorded handshakes in the seed corpus (a real exchange
// between two AuthHandshakes) get past the proof.
#include "common/auth.h"
#include "fuzz_input.h"

using namespace zc::net;

namespace {
// The seed generator (fuzz_make_corpus.cpp) uses the same three values.
const uint8_t kServerNonce[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
const uint8_t kClientNonce[32] = {32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                  16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
const char kKey[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zc::fuzz::Input in(data, size);
  bool server = (in.Get<uint8_t>() & 1) == 0;
  AuthHandshake hs(server ? AuthRole::kServer : AuthRole::kClient, kKey,
                   server ? kServerNonce : kClientNonce);
  (void)hs.Start();
  std::string reply;
  // At most a few messages: the handshake has three.
  for (int i = 0; i < 8 && hs.want() > 0 && in.left() >= hs.want(); ++i) {
    size_t n = hs.want();
    zc::Status st = hs.OnMessage(in.here(), n, &reply);
    in.Skip(n);
    if (!st.ok()) break;
  }
  return 0;
}
