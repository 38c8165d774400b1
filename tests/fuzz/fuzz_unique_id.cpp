// The 128-byte unique id (bootstrap/unique_id.h) a process gets from
// elsewhere (zc_comm_init_rank), and the rendezvous records ranks read from
// its store (claims, the verdict). Input byte 0 picks: even: the id as
// given; odd: the id with a correct checksum put in first, so that the
// fields behind the checksum get explored too; a second byte >= 0x80 feeds
// the rest to the rendezvous parsers instead.
#include <zcomm/zcomm.h>

#include <cstring>

#include "bootstrap/unique_id.h"
#include "fuzz_input.h"
#include "common/sha256.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  if (data[1] >= 0x80) {
    std::string s(reinterpret_cast<const char*>(data) + 2, size - 2);
    zc::rendezvous::Claim c;
    if (zc::rendezvous::ParseClaim(s, &c)) (void)c.Who();
    int nranks = 0;
    zc::Status v = zc::rendezvous::ParseVerdict(s, &nranks);
    zc::fuzz::CheckStatus(v);  // what zc_comm_init_rank returns
    return 0;
  }
  char id[zc::kUniqueIdBytes] = {};
  size_t n = size - 2 < sizeof(id) ? size - 2 : sizeof(id);
  memcpy(id, data + 2, n);
  if (mode & 1) {
    zc::Digest256 sum = zc::Sha256::Hash(reinterpret_cast<const uint8_t*>(id), 120);
    memcpy(id + 120, sum.data(), 8);
  }
  zc::UniqueId u;
  if (!zc::UniqueId::Decode(id, &u).ok()) return 0;
  (void)u.address();
  // Encoded again, it decodes to the same id.
  char again[zc::kUniqueIdBytes];
  u.Encode(again);
  zc::UniqueId v;
  if (!zc::UniqueId::Decode(again, &v).ok() || v.host != u.host || v.port != u.port ||
      v.job_key != u.job_key || v.nonce != u.nonce || v.created != u.created)
    __builtin_trap();
  return 0;
}
