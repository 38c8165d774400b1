#include "hosts.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/config.h"

namespace zc::launcher {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool ValidHostName(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    // Names, IPv4 and network-namespace names; no shell metacharacters,
    // because the name is substituted into the remote-shell template.
    if (!(isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_'))
      return false;
  }
  return true;
}

Status ParseSlots(const std::string& text, const std::string& entry,
                  int* slots) {
  long n = 0;
  if (!ParseInt(text.c_str(), 1, 1 << 20, &n))
    return Error(ZC_ERR_INVALID_ARG,
                 "bad host entry '%s': slots must be a number >= 1",
                 entry.c_str());
  *slots = static_cast<int>(n);
  return Status::Ok();
}

// "host" or "host:N".
Status ParseHostEntry(const std::string& entry, HostSlots* out) {
  HostSlots h;
  size_t colon = entry.find(':');
  h.name = entry.substr(0, colon);
  if (colon != std::string::npos) {
    ZC_RETURN_IF_ERROR(ParseSlots(entry.substr(colon + 1), entry, &h.slots));
  }
  if (!ValidHostName(h.name))
    return Error(ZC_ERR_INVALID_ARG,
                 "bad host entry '%s': expected host[:slots] with a host "
                 "name of letters, digits, '.', '-' or '_'",
                 entry.c_str());
  *out = h;
  return Status::Ok();
}

std::string ShortName(const std::string& h) { return h.substr(0, h.find('.')); }

}  // namespace

Status ParseHostList(const std::string& text, std::vector<HostSlots>* out) {
  std::vector<HostSlots> parsed;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string entry = Trim(text.substr(start, comma - start));
    if (entry.empty())
      return Error(ZC_ERR_INVALID_ARG, "bad host list '%s': empty entry",
                   text.c_str());
    HostSlots h;
    ZC_RETURN_IF_ERROR(ParseHostEntry(entry, &h));
    parsed.push_back(h);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  out->insert(out->end(), parsed.begin(), parsed.end());
  return Status::Ok();
}

Status ParseHostfileText(const std::string& text, const std::string& origin,
                         std::vector<HostSlots>* out) {
  std::vector<HostSlots> parsed;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = Trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string host, word;
    words >> host;
    HostSlots h;
    Status st = ParseHostEntry(host, &h);
    while (st.ok() && words >> word) {
      // "slots=N" (Open MPI style) or "max_slots=N" (accepted, ignored).
      if (word.rfind("slots=", 0) == 0) {
        if (host.find(':') != std::string::npos) {
          st = Error(ZC_ERR_INVALID_ARG,
                     "slots given twice in '%s'", line.c_str());
        } else {
          st = ParseSlots(word.substr(6), line, &h.slots);
        }
      } else if (word.rfind("max_slots=", 0) == 0) {
        continue;
      } else {
        st = Error(ZC_ERR_INVALID_ARG,
                   "unexpected '%s' (expected \"host slots=N\" or \"host:N\")",
                   word.c_str());
      }
    }
    if (!st.ok())
      return st.with_context(Format("%s:%d", origin.c_str(), lineno));
    parsed.push_back(h);
  }
  if (parsed.empty())
    return Error(ZC_ERR_INVALID_ARG, "%s: no hosts in the file",
                 origin.c_str());
  out->insert(out->end(), parsed.begin(), parsed.end());
  return Status::Ok();
}

Status ReadHostfile(const std::string& path, std::vector<HostSlots>* out) {
  std::ifstream f(path);
  if (!f) return SystemError(errno, "cannot read hostfile %s", path.c_str());
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseHostfileText(ss.str(), path, out);
}

bool IsLocalHost(const std::string& name) {
  if (name == "localhost" || name == "::1" || name.rfind("127.", 0) == 0 ||
      name == "localhost.localdomain")
    return true;
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) == 0 && buf[0]) {
    std::string self = buf;
    if (name == self || ShortName(name) == ShortName(self)) return true;
  }
  // An address of one of this machine's interfaces.
  struct in_addr a4;
  struct in6_addr a6;
  bool is4 = inet_pton(AF_INET, name.c_str(), &a4) == 1;
  bool is6 = !is4 && inet_pton(AF_INET6, name.c_str(), &a6) == 1;
  if (!is4 && !is6) return false;
  struct ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (struct ifaddrs* p = ifs; p && !found; p = p->ifa_next) {
    if (!p->ifa_addr) continue;
    if (is4 && p->ifa_addr->sa_family == AF_INET) {
      found = memcmp(&reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr,
                     &a4, sizeof(a4)) == 0;
    } else if (is6 && p->ifa_addr->sa_family == AF_INET6) {
      found = memcmp(&reinterpret_cast<sockaddr_in6*>(p->ifa_addr)->sin6_addr,
                     &a6, sizeof(a6)) == 0;
    }
  }
  freeifaddrs(ifs);
  return found;
}

bool Placement::all_local() const {
  for (const Node& n : nodes)
    if (n.nranks > 0 && !n.local) return false;
  return true;
}

int Placement::local_rank_count() const {
  int c = 0;
  for (const Node& n : nodes)
    if (n.local) c += n.nranks;
  return c;
}

Status PlaceRanks(const std::vector<HostSlots>& hosts, int np,
                  bool oversubscribe, Placement* out) {
  Placement p;
  if (hosts.empty()) {
    if (np <= 0)
      return Error(ZC_ERR_INVALID_ARG,
                   "-np is required when no hosts are given");
    p.nodes.push_back(Node{"localhost", true, np, 0});
  } else {
    int local_node = -1;
    for (const HostSlots& h : hosts) {
      bool local = IsLocalHost(h.name);
      int idx = -1;
      for (size_t i = 0; i < p.nodes.size(); ++i) {
        if ((local && p.nodes[i].local) || p.nodes[i].host == h.name) {
          idx = static_cast<int>(i);
          break;
        }
      }
      if (idx < 0) {
        p.nodes.push_back(Node{h.name, local, 0, 0});
        idx = static_cast<int>(p.nodes.size()) - 1;
      }
      p.nodes[idx].slots += h.slots;
      if (local) local_node = idx;
    }
    long total = 0;
    for (const Node& n : p.nodes) total += n.slots;
    if (np <= 0) np = static_cast<int>(std::min<long>(total, 1 << 20));
    if (np > total && !oversubscribe && local_node < 0) {
      std::string names;
      for (const Node& n : p.nodes)
        names += (names.empty() ? "" : ", ") + n.host + ":" +
                 std::to_string(n.slots);
      return Error(ZC_ERR_INVALID_ARG,
                   "%d ranks requested but the hosts have only %ld slots (%s); "
                   "add slots or pass --oversubscribe",
                   np, total, names.c_str());
    }
  }

  // Fill nodes in order up to their slots, then spread the rest.
  int left = np;
  for (Node& n : p.nodes) {
    n.nranks = std::min(n.slots, left);
    left -= n.nranks;
  }
  for (size_t i = 0; left > 0; i = (i + 1) % p.nodes.size()) {
    if (!oversubscribe && !p.nodes[i].local) continue;
    ++p.nodes[i].nranks;
    --left;
  }

  int rank = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (int l = 0; l < p.nodes[i].nranks; ++l) {
      p.ranks.push_back(RankPlace{rank++, static_cast<int>(i), l,
                                  p.nodes[i].nranks});
    }
  }
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace zc::launcher
