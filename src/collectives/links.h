// Links: the persistent point-to-point streams collectives run on. A link to
// a peer is a pair of SlotStreams (static placement, §3.2 of the paper): K
// slots of Config::chunk_bytes in the peer's pool memory that I write, and K
// slots in mine that the peer writes, each slot completed by a monotonic
// flag and returned with a credit. Links are made once per peer pair (slot
// descriptors exchanged over control messages) and then reused by every
// collective, so steady-state traffic is one-sided writes and flags only.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "p2p/group.h"
#include "p2p/slot_stream.h"

namespace zc::coll {

struct Link {
  SlotWriter writer;  // into the peer's slots
  SlotReader reader;  // from my slots
  MemRegion* slots = nullptr;   // my slots (peer writes)
  // My credit word (peer writes), then kSlots direct-write flags (peer
  // writes, see OpCtx::WriteDirect), one cache line each.
  MemRegion* credit = nullptr;
  RemoteRegion their_words;  // the peer's credit word and direct-write flags
  // Writes to this peer may go straight into its buffers (OpCtx::WriteDirect)
  // rather than through the slots; alike on both ends (see Links::Ensure).
  bool direct = false;
  // Direct writes sent to / awaited from the peer per flag word, over the
  // link's life (flags are monotonic, never cleared).
  uint64_t direct_sent[4] = {}, direct_seen[4] = {};
};

class Links {
 public:
  static constexpr uint32_t kSlots = 4;
  // The credit region: the slot writer's credit word, then kSlots flags.
  static constexpr uint64_t kWordsBytes = SlotLayout::kWriterBytes + kSlots * 64;
  static uint64_t DirectFlagOffset(uint32_t j) { return SlotLayout::kWriterBytes + uint64_t{j} * 64; }

  Links(Group* group, size_t chunk_bytes);
  ~Links();
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;

  // Makes links to every peer in `peers` that has none yet. Collective
  // between each pair: both sides must ask for each other in the same
  // collective (all sends happen before any receive, so any order of peers
  // on either side works).
  Status Ensure(const std::vector<int>& peers, const Deadline& dl);
  bool has(int peer) const { return links_.count(peer) != 0; }
  // Waits until every peer has returned the credits of all our messages
  // (before the links' memory is freed while the Device lives on).
  Status Quiesce(const Deadline& dl);
  Link& at(int peer) { return *links_.at(peer); }
  // Whether writes to peer should go straight into its memory (Link::direct).
  bool direct(int peer) const { return links_.at(peer)->direct; }
  size_t chunk_bytes() const { return layout_.slot_bytes; }

 private:
  // Checks the peer's link descriptors (msg) and sets up l's streams and
  // its way of writing to p.
  Status Connect(int p, const std::string& msg, Link* l);

  Group* group_;
  SlotLayout layout_;
  std::map<int, std::unique_ptr<Link>> links_;
};

static_assert(Links::kSlots == sizeof(Link::direct_sent) / sizeof(uint64_t), "a direct flag per slot");

}  // namespace zc::coll
