// The peer record every rank publishes when its Device starts
// ("host|pid|verbs|key|why", p2p/peer_record.h), parsed as Device::Init
// parses the records of all ranks, then the job tag derived from rank 0's key.
#include <cctype>

#include "p2p/peer_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  zc::PeerRecord rec;
  if (!zc::ParsePeerRecord(s, &rec)) return 0;
  std::string job_tag = rec.key.substr(0, 16);
  for (char& ch : job_tag)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = 'x';
  // Published again, a parsed record reads back the same.
  zc::PeerRecord again;
  if (!zc::ParsePeerRecord(zc::FormatPeerRecord(rec), &again) || again.host != rec.host ||
      again.pid != rec.pid || again.verbs != rec.verbs || again.key != rec.key ||
      again.why != rec.why)
    __builtin_trap();
  return 0;
}
