// The records a rank publishes through the bootstrap while its Device sets
// up, and that every rank reads back for every peer:
//   PeerInfo      ("zc.peers", first): who the rank is (host id, pid, the
//                 job key rank 0 made when the launcher gave none) and, for
//                 every transport in the registry, whether it is viable
//                 here, its domain descriptor, or why it is not viable;
//   PeerAddresses ("zc.connect", after the transports are chosen and
//                 created): where each of the rank's transports listens.
// Both are length-prefixed binary records: any byte may appear in a field
// (host ids contain '|', reasons contain anything). Parse() checks every
// length and count and says what is wrong; the fuzz target
// (tests/fuzz/fuzz_peer_info.cpp) runs both parsers on arbitrary bytes.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace zc {

struct PeerInfo {
  // One registry entry as seen from this rank.
  struct Reach {
    std::string transport;  // registry name ("shm", "tcp", "verbs")
    bool viable = false;
    std::string domain;     // what reaches this rank (viable only)
    std::string why;        // why not viable ("not probed" when not asked)
  };
  std::string host;  // the bootstrap's host id
  int pid = 0;
  std::string key;   // rank 0's job key when the launcher gave none; else empty
  std::vector<Reach> reach;

  // nullptr when the record says nothing about `transport`.
  const Reach* Find(const std::string& transport) const;
  std::string Serialize() const;
  // ZC_ERR_INTERNAL naming the defect (truncated field, bad magic, too many
  // entries, trailing bytes) when `bytes` is not a record Serialize made.
  static Status Parse(const std::string& bytes, PeerInfo* out);
};

struct PeerAddresses {
  struct Entry {
    std::string transport;
    std::string address;  // the backend's own format ("ip:port", ...)
  };
  std::vector<Entry> entries;

  // "" when the record has no entry for `transport`.
  std::string Find(const std::string& transport) const;
  std::string Serialize() const;
  static Status Parse(const std::string& bytes, PeerAddresses* out);
};

}  // namespace zc
