// Host list and rank placement: -H and --hostfile parsing, which hosts are
// this machine, and which rank runs where (hosts filled in order).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace zc::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// "a:2,b,c:1" appended to *out. An empty entry, a bad slot count or a
// malformed name is an error that quotes the entry.
Status ParseHostList(const std::string& text, std::vector<HostSlots>* out);
// One host per line, "host", "host slots=N", "host:N"; '#' comments and
// blank lines ignored. Errors name the file and line.
Status ParseHostfileText(const std::string& text, const std::string& origin,
                         std::vector<HostSlots>* out);
Status ReadHostfile(const std::string& path, std::vector<HostSlots>* out);

// localhost, 127.x.y.z, ::1, this machine's hostname (short or full), or an
// address of one of its interfaces.
bool IsLocalHost(const std::string& name);

struct RankPlace {
  int rank = 0;
  int node = 0;           // index into Placement::nodes
  int local_rank = 0;
  int local_size = 0;
};

struct Node {
  std::string host;       // name as given (first alias for this machine)
  bool local = false;
  int slots = 0;
  int nranks = 0;
};

struct Placement {
  std::vector<Node> nodes;
  std::vector<RankPlace> ranks;  // indexed by rank
  bool all_local() const;
  int local_rank_count() const;
};

// Places np ranks (np == 0: the total slot count) on `hosts` in order; an
// empty list means this machine with np slots. Duplicate names, and every
// alias of this machine, are merged into one node. More ranks than slots go
// round-robin to this machine's node when the list has one, to every node
// with `oversubscribe`, else it is an error.
Status PlaceRanks(const std::vector<HostSlots>& hosts, int np,
                  bool oversubscribe, Placement* out);

}  // namespace zc::launcher
