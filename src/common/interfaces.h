// Which network interface zcomm's sockets use. ZC_SOCKET_IFNAME takes
// NCCL_SOCKET_IFNAME's grammar, so a value that works for NCCL picks the
// same interface here (docs/environment.md):
//   "eth,ib"       an interface whose name starts with one of the prefixes
//   "^docker,lo"   one whose name starts with none of them
//   "=eth0,eth1"   exactly one of these names
//   "^=docker0"    any name but these
// Unset (or empty), NCCL's automatic order: "ib", then "^docker,lo,virbr",
// then "docker", "lo", "virbr".
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace zc::net {

// One network interface as the system lists it.
struct NetInterface {
  std::string name;
  std::string ipv4;  // its first IPv4 address; empty when it has none
  bool up = false;
  bool loopback = false;
};

// A parsed ZC_SOCKET_IFNAME value. As in NCCL, empty items are skipped and
// an item's ":suffix" (NCCL's port field) is ignored.
class InterfaceSpec {
 public:
  // ZC_ERR_INVALID_ARG when the value names no interface ("^", "=", ",").
  static Status Parse(const std::string& text, InterfaceSpec* out);

  bool Matches(const std::string& name) const;
  // In words, for messages (after "a name"): "starting with eth or ib",
  // "equal to none of docker0, lo".
  std::string Describe() const;

  bool exclude() const { return exclude_; }
  bool exact() const { return exact_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// The interfaces of this network namespace, in the system's order (by
// interface index, as `ip link` lists them).
Status ListInterfaces(std::vector<NetInterface>* out);

// The first interface of `ifs` (in its order) that is up, has an IPv4
// address and matches `spec` (empty: the automatic order above). None:
// ZC_ERR_INVALID_ARG naming the value and every interface in `ifs`.
Status ChooseInterface(const std::string& spec,
                       const std::vector<NetInterface>& ifs,
                       NetInterface* chosen);

// "lo 127.0.0.1, eth0 10.0.0.2, eth1 (down), wg0 (no IPv4 address)".
std::string DescribeInterfaces(const std::vector<NetInterface>& ifs);

}  // namespace zc::net
