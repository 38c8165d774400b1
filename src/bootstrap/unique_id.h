// The unique id of zc_get_unique_id / zc_comm_init_rank: 128 plain bytes
// that name a rendezvous (a store served by the process that made the id)
// and carry the job key that authenticates every connection of the job.
//
//   bytes 0..3     magic "ZCID"
//   byte  4        format version (1)
//   byte  5        address family (4: IPv4)
//   bytes 6..7     port, big-endian
//   bytes 8..23    address (IPv4 in the first 4 bytes)
//   bytes 24..55   job key (32 random bytes; the job key is their hex)
//   bytes 56..63   nonce (random; names the rendezvous in its server)
//   bytes 64..71   creation time, unix seconds (for messages)
//   bytes 72..119  zero
//   bytes 120..127 the first 8 bytes of SHA-256 over bytes 0..119
//
// Decode checks the magic, version and checksum before anything is
// connected, so a corrupted id never sends a packet.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/store_server.h"
#include "common/config.h"
#include "common/status.h"

namespace zc {

constexpr size_t kUniqueIdBytes = 128;

struct UniqueId {
  std::string host;     // dotted IPv4
  int port = 0;
  std::string job_key;  // 64 hex characters
  uint64_t nonce = 0;
  int64_t created = 0;  // unix seconds

  std::string address() const { return host + ":" + std::to_string(port); }
  void Encode(char out[kUniqueIdBytes]) const;
  static Status Decode(const char in[kUniqueIdBytes], UniqueId* out);
};

// Makes a fresh id and serves its rendezvous from this process (a store on
// the address ZC_SOCKET_IFNAME picks, authenticated by a new random key)
// until a communicator of this process takes it over (TakeServed) or the
// process exits.
Status ServeUniqueId(const Config& config, UniqueId* id);
// The server of an id this process made, handed to the communicator that
// joins with it; null when the id was made elsewhere (or taken already).
std::unique_ptr<StoreServer> TakeServed(uint64_t nonce);

class StoreClient;

// What ranks write into the rendezvous store (read back by the others).
namespace rendezvous {
// A rank's claim: "<rank> <nranks> <pid> <host>".
struct Claim {
  int rank = -1, nranks = -1;
  long pid = 0;
  std::string host;
  std::string Who() const { return Format("pid %ld on %s", pid, host.c_str()); }
};
bool ParseClaim(const std::string& s, Claim* c);
// The coordinator's verdict: "ok <nranks>", or "<code> <message>".
Status ParseVerdict(const std::string& v, int* nranks);
}  // namespace rendezvous

// Every rank's first step with an id: proves it holds the id's key, claims
// its rank and waits until all nranks ranks have claimed theirs. The rank
// that serves the id (coordinator) checks every claim as it arrives: the
// same nranks everywhere, a rank in range, no rank claimed twice; and at
// the deadline names the ranks that never arrived. Every rank returns the
// coordinator's verdict, so one bad claim fails the whole job at once.
Status JoinRendezvous(StoreClient* store, const UniqueId& id, int nranks, int rank,
                      bool coordinator, double timeout_s);

}  // namespace zc
