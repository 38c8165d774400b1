// The setup records every rank publishes when its Device starts
// (p2p/peer_info.h): PeerInfo ("zc.peers") and PeerAddresses ("zc.connect"),
// parsed as Device::ExchangePeerInfo and Device::ConnectTransports parse the
// records of all ranks, then the job tag derived from rank 0's key.
#include <cctype>

#include "p2p/peer_info.h"

namespace {

void CheckInfo(const std::string& s) {
  zc::PeerInfo info;
  if (!zc::PeerInfo::Parse(s, &info).ok()) return;
  std::string job_tag = info.key.substr(0, 16);
  for (char& ch : job_tag)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = 'x';
  // Published again, a parsed record reads back the same bytes.
  zc::PeerInfo again;
  if (!zc::PeerInfo::Parse(info.Serialize(), &again).ok() || again.Serialize() != s) __builtin_trap();
  for (const auto& r : info.reach)
    if (info.Find(r.transport) == nullptr) __builtin_trap();
}

void CheckAddresses(const std::string& s) {
  zc::PeerAddresses a;
  if (!zc::PeerAddresses::Parse(s, &a).ok()) return;
  zc::PeerAddresses again;
  if (!zc::PeerAddresses::Parse(a.Serialize(), &again).ok() || again.Serialize() != s) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  CheckInfo(s);
  CheckAddresses(s);
  return 0;
}
