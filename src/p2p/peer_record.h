// The record every rank publishes through the bootstrap when its Device
// starts ("zc.peers"): "host|pid|verbs|key|why". host is the bootstrap's
// host id (it may itself contain '|', so the fields are found from the
// right), verbs is 1 when the rank can use RDMA, key is the job key rank 0
// made when the launcher gave none (empty elsewhere), and why says why verbs
// is not usable ('|' replaced by '/'). Pure: the Device and the fuzz target
// (tests/fuzz/fuzz_peer_record.cpp) both call these.
#pragma once

#include <cstdlib>
#include <string>

namespace zc {

struct PeerRecord {
  std::string host;
  int pid = 0;
  bool verbs = false;
  std::string key;
  std::string why;
};

// Joined, not printf-formatted: the fields are bytes (a NUL in one stays).
inline std::string FormatPeerRecord(const PeerRecord& r) {
  std::string why = r.why;
  for (char& ch : why)
    if (ch == '|') ch = '/';
  return r.host + "|" + std::to_string(r.pid) + "|" + (r.verbs ? "1" : "0") + "|" + r.key + "|" +
         why;
}

// false when the record lacks its four separators.
inline bool ParsePeerRecord(const std::string& s, PeerRecord* out) {
  size_t w = s.rfind('|');
  size_t a = w == 0 || w == std::string::npos ? std::string::npos : s.rfind('|', w - 1);
  size_t b = a == 0 || a == std::string::npos ? std::string::npos : s.rfind('|', a - 1);
  size_t c = b == 0 || b == std::string::npos ? std::string::npos : s.rfind('|', b - 1);
  if (c == std::string::npos) return false;
  out->host = s.substr(0, c);
  out->pid = atoi(s.substr(c + 1, b - c - 1).c_str());
  out->verbs = s.substr(b + 1, a - b - 1) == "1";
  out->key = s.substr(a + 1, w - a - 1);
  out->why = s.substr(w + 1);
  return true;
}

}  // namespace zc
