#include "p2p/transport_registry.h"

#include <algorithm>

#include "zc_build_config.h"

namespace zc {

// The backends, each defined in its own folder (<name>/<name>_entry.cpp).
// An explicit table, not self-registration: nothing depends on which
// objects of the static library the linker keeps.
extern const TransportEntry kShmTransportEntry;
extern const TransportEntry kTcpTransportEntry;
#if ZC_HAVE_VERBS
extern const TransportEntry kVerbsTransportEntry;
#else
namespace {
// This build has no verbs backend: the entry stays so that ZC_TRANSPORT=verbs
// and the passed-over INFO line say why.
bool VerbsNotBuilt(const Config&, std::string* why) {
  *why = "zcomm was built without verbs support (libibverbs, librdmacm)";
  return false;
}
std::string NoDomain(const DomainContext&) { return std::string(); }
bool NeverReaches(const std::string&, const std::string&) { return false; }
Status CreateNotBuilt(TransportHost*, const TransportSetup&, std::unique_ptr<Transport>*) {
  return Error(ZC_ERR_UNSUPPORTED, "transport verbs is not built");
}
const TransportEntry kVerbsTransportEntry = {
    TransportKind::kVerbs, "verbs", 1, VerbsNotBuilt, NoDomain, NeverReaches,
    "has no usable RDMA device", "cannot reach each other over RDMA", "RDMA verbs", CreateNotBuilt};
}  // namespace
#endif

const std::vector<const TransportEntry*>& TransportTable() {
  static const std::vector<const TransportEntry*> table = {&kShmTransportEntry, &kTcpTransportEntry,
                                                           &kVerbsTransportEntry};
  return table;
}

const TransportEntry* FindTransport(const std::string& name) {
  for (const TransportEntry* e : TransportTable())
    if (name == e->name) return e;
  return nullptr;
}

const TransportEntry* FindTransport(TransportKind kind) {
  for (const TransportEntry* e : TransportTable())
    if (e->kind == kind) return e;
  return nullptr;
}

std::vector<PeerInfo::Reach> ProbeTransports(const Config& config, const DomainContext& ctx) {
  std::vector<PeerInfo::Reach> out;
  for (const TransportEntry* e : TransportTable()) {
    PeerInfo::Reach r;
    r.transport = e->name;
    if (config.transport == "auto" || config.transport == e->name) {
      r.viable = e->viable(config, &r.why);
      if (r.viable) {
        r.why.clear();
        r.domain = e->domain(ctx);
      }
    } else {
      r.why = "not probed";
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

struct Side {
  bool viable = false;
  const PeerInfo::Reach* reach = nullptr;
};

Side SideOf(const PeerInfo& info, const TransportEntry* e) {
  Side s;
  s.reach = info.Find(e->name);
  s.viable = s.reach && s.reach->viable;
  return s;
}

// The entry ZC_TRANSPORT forces for ranks i and j, or the error every rank
// reports the same way.
Status ForcedPair(const TransportEntry* e, int i, int j, const std::vector<PeerInfo>& all) {
  Side a = SideOf(all[i], e), b = SideOf(all[j], e);
  if (!a.viable || !b.viable) {
    int bad = a.viable ? j : i;
    const Side& s = a.viable ? b : a;
    std::string why = s.reach ? s.reach->why : std::string();
    return Error(ZC_ERR_UNSUPPORTED, "ZC_TRANSPORT=%s but rank %d %s: %s", e->name, bad, e->not_viable,
                 why.empty() ? "no reason given" : why.c_str());
  }
  if (!e->can_reach(a.reach->domain, b.reach->domain))
    return Error(ZC_ERR_INVALID_ARG, "ZC_TRANSPORT=%s but ranks %d and %d %s", e->name, i, j, e->unreachable);
  return Status::Ok();
}

}  // namespace

Status PlanTransports(const std::string& forced, int rank, const std::vector<PeerInfo>& all,
                      TransportPlan* out) {
  const int n = static_cast<int>(all.size());
  const TransportEntry* force = nullptr;
  if (forced != "auto") {
    force = FindTransport(forced);
    if (!force) return Error(ZC_ERR_INVALID_ARG, "ZC_TRANSPORT=%s: no such transport", forced.c_str());
  }
  std::vector<const TransportEntry*> by_priority = TransportTable();
  std::stable_sort(by_priority.begin(), by_priority.end(),
                   [](const TransportEntry* a, const TransportEntry* b) { return a->priority < b->priority; });
  out->per_peer.assign(n, nullptr);
  out->same_host.assign(n, false);
  out->used.clear();
  bool used[kTransportKinds] = {};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const TransportEntry* pick = nullptr;
      if (force) {
        ZC_RETURN_IF_ERROR(ForcedPair(force, i, j, all));
        pick = force;
      } else {
        for (const TransportEntry* e : by_priority) {
          Side a = SideOf(all[i], e), b = SideOf(all[j], e);
          if (a.viable && b.viable && e->can_reach(a.reach->domain, b.reach->domain)) {
            pick = e;
            break;
          }
        }
        if (!pick) return Error(ZC_ERR_UNSUPPORTED, "no transport reaches rank %d from rank %d", j, i);
      }
      used[static_cast<size_t>(pick->kind)] = true;
      if (i == rank) {
        out->per_peer[j] = pick;
        out->same_host[j] = all[i].host == all[j].host;
      }
    }
  }
  for (size_t k = 0; k < kTransportKinds; ++k)
    if (used[k])
      if (const TransportEntry* e = FindTransport(static_cast<TransportKind>(k))) out->used.push_back(e);
  return Status::Ok();
}

}  // namespace zc
