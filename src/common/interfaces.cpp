#include "common/interfaces.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

namespace zc::net {
namespace {

// NCCL's automatic order when no value is given: IPoIB first, then any
// interface but containers' bridges, loopback and libvirt's bridges, then
// those three as a last resort.
const char* const kAutomaticOrder[] = {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"};

std::string JoinNames(const std::vector<std::string>& names, const char* last_sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? last_sep : ", ";
    out += names[i];
  }
  return out;
}

bool Usable(const NetInterface& i) { return i.up && !i.ipv4.empty(); }

// The first usable interface that spec matches, or nullptr.
const NetInterface* FirstMatch(const InterfaceSpec& spec,
                               const std::vector<NetInterface>& ifs) {
  for (const auto& i : ifs)
    if (Usable(i) && spec.Matches(i.name)) return &i;
  return nullptr;
}

NetInterface* FindByName(std::vector<NetInterface>* ifs, const std::string& name) {
  for (auto& i : *ifs)
    if (i.name == name) return &i;
  ifs->push_back(NetInterface{name, "", false, false});
  return &ifs->back();
}

}  // namespace

Status InterfaceSpec::Parse(const std::string& text, InterfaceSpec* out) {
  InterfaceSpec spec;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') { spec.exclude_ = true; ++pos; }
  if (pos < text.size() && text[pos] == '=') { spec.exact_ = true; ++pos; }
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    item = item.substr(0, item.find(':'));  // NCCL's ":port", unused for sockets
    if (!item.empty()) spec.names_.push_back(item);
    pos = comma + 1;
  }
  if (spec.names_.empty())
    return Error(ZC_ERR_INVALID_ARG,
                 "ZC_SOCKET_IFNAME='%s' names no interface (NCCL_SOCKET_IFNAME's "
                 "grammar: prefixes such as eth,ib; ^ to exclude; = for exact names)",
                 text.c_str());
  *out = std::move(spec);
  return Status::Ok();
}

bool InterfaceSpec::Matches(const std::string& name) const {
  bool listed = false;
  for (const auto& n : names_) {
    if (exact_ ? name == n : name.compare(0, n.size(), n) == 0) {
      listed = true;
      break;
    }
  }
  return listed != exclude_;
}

std::string InterfaceSpec::Describe() const {
  const char* how = exact_ ? "equal to " : "starting with ";
  if (exclude_) return std::string(how) + "none of " + JoinNames(names_, ", ");
  return how + JoinNames(names_, " or ");
}

Status ListInterfaces(std::vector<NetInterface>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return SystemError(errno, "getifaddrs");
  std::vector<NetInterface> ifs;
  // One entry per address (and one AF_PACKET entry per link, which gives
  // the interfaces without an IP address too): grouped by name, in order.
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_name) continue;
    NetInterface* i = FindByName(&ifs, a->ifa_name);
    i->up |= (a->ifa_flags & IFF_UP) != 0;
    i->loopback |= (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && i->ipv4.empty()) {
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf,
                sizeof(buf));
      i->ipv4 = buf;
    }
  }
  freeifaddrs(list);
  *out = std::move(ifs);
  return Status::Ok();
}

std::string DescribeInterfaces(const std::vector<NetInterface>& ifs) {
  if (ifs.empty()) return "none";
  std::string out;
  for (const auto& i : ifs) {
    if (!out.empty()) out += ", ";
    out += i.name;
    if (i.ipv4.empty()) out += " (no IPv4 address)";
    else out += " " + i.ipv4 + (i.up ? "" : " (down)");
  }
  return out;
}

Status ChooseInterface(const std::string& spec, const std::vector<NetInterface>& ifs,
                       NetInterface* chosen) {
  if (spec.empty()) {
    for (const char* step : kAutomaticOrder) {
      InterfaceSpec s;
      ZC_RETURN_IF_ERROR(InterfaceSpec::Parse(step, &s));
      if (const NetInterface* i = FirstMatch(s, ifs)) {
        *chosen = *i;
        return Status::Ok();
      }
    }
    return Error(ZC_ERR_INVALID_ARG,
                 "ZC_SOCKET_IFNAME unset and no interface is up with an IPv4 address "
                 "(interfaces here: %s)", DescribeInterfaces(ifs).c_str());
  }
  InterfaceSpec s;
  ZC_RETURN_IF_ERROR(InterfaceSpec::Parse(spec, &s));
  if (const NetInterface* i = FirstMatch(s, ifs)) {
    *chosen = *i;
    return Status::Ok();
  }
  return Error(ZC_ERR_INVALID_ARG,
               "ZC_SOCKET_IFNAME='%s': no interface that is up with an IPv4 address has "
               "a name %s (interfaces here: %s)",
               spec.c_str(), s.Describe().c_str(), DescribeInterfaces(ifs).c_str());
}

}  // namespace zc::net
