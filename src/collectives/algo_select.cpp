#include "collectives/algo_select.h"

#include <sstream>

namespace zc::coll {
namespace {

constexpr Kind kKinds[] = {Kind::kAllreduce,  Kind::kBroadcast,  Kind::kReduce,
                           Kind::kAllgather,  Kind::kReduceScatter, Kind::kAlltoall,
                           Kind::kBarrier,    Kind::kAllgatherv, Kind::kAlltoallv,
                           Kind::kGather,     Kind::kScatter};

bool ParseAlgo(const std::string& s, Algo* out) {
  for (int a = 1; a <= static_cast<int>(Algo::kHier); ++a) {
    Algo algo = static_cast<Algo>(a);
    if (algo != Algo::kLocal && s == AlgoName(algo)) {
      *out = algo;
      return true;
    }
  }
  return false;
}

bool ParseKind(const std::string& s, Kind* out) {
  for (Kind k : kKinds)
    if (s == KindName(k)) {
      *out = k;
      return true;
    }
  return false;
}

std::string Names(const std::vector<Algo>& algos) {
  std::string s;
  for (Algo a : algos) s += std::string(s.empty() ? "" : ", ") + AlgoName(a);
  return s;
}

bool Has(Kind k, Algo a) {
  for (Algo x : AlgosOf(k))
    if (x == a) return true;
  return false;
}

}  // namespace

const std::vector<Algo>& AlgosOf(Kind k) {
  static const std::vector<Algo> kNoAlgos;
  static const std::vector<Algo> kAllreduce = {Algo::kRing, Algo::kHd, Algo::kShm, Algo::kHier};
  static const std::vector<Algo> kTrees = {Algo::kTree, Algo::kChain};
  static const std::vector<Algo> kRing = {Algo::kRing};
  static const std::vector<Algo> kPairwise = {Algo::kPairwise};
  static const std::vector<Algo> kDissemination = {Algo::kDissemination};
  static const std::vector<Algo> kDirect = {Algo::kDirect};
  switch (k) {
    case Kind::kAllreduce: return kAllreduce;
    case Kind::kBroadcast:
    case Kind::kReduce: return kTrees;
    case Kind::kAllgather:
    case Kind::kReduceScatter:
    case Kind::kAllgatherv: return kRing;
    case Kind::kAlltoall:
    case Kind::kAlltoallv: return kPairwise;
    case Kind::kBarrier: return kDissemination;
    case Kind::kGather:
    case Kind::kScatter: return kDirect;
    case Kind::kNone: break;
  }
  return kNoAlgos;
}

Status AlgoSelect::Parse(const std::string& spec, AlgoSelect* out) {
  AlgoSelect sel;
  auto bad = [&](const std::string& why) {
    return Error(ZC_ERR_INVALID_ARG,
                 "ZC_ALGO=%s: %s (expected auto, an algorithm name such as ring, or a list "
                 "such as allreduce=ring,broadcast=chain)",
                 spec.c_str(), why.c_str());
  };
  if (spec.empty() || spec == "auto") {
    *out = sel;
    return Status::Ok();
  }
  if (spec.find('=') == std::string::npos) {
    // A bare name: every collective that has it.
    Algo a;
    if (!ParseAlgo(spec, &a)) return bad(Format("unknown algorithm \"%s\"", spec.c_str()));
    bool any = false;
    for (Kind k : kKinds)
      if (Has(k, a)) {
        sel.forced_[static_cast<int>(k)] = a;
        any = true;
      }
    if (!any) return bad(Format("no collective has algorithm \"%s\"", spec.c_str()));
    *out = sel;
    return Status::Ok();
  }
  std::stringstream items(spec);
  std::string item;
  bool seen[kNumKinds] = {};
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return bad(Format("\"%s\" is not collective=algorithm (a bare name must stand alone)",
                        item.c_str()));
    std::string kname = item.substr(0, eq), aname = item.substr(eq + 1);
    Kind k;
    if (!ParseKind(kname, &k)) return bad(Format("unknown collective \"%s\"", kname.c_str()));
    if (seen[static_cast<int>(k)])
      return bad(Format("%s is given more than once", kname.c_str()));
    seen[static_cast<int>(k)] = true;
    if (aname == "auto") continue;
    Algo a;
    if (!ParseAlgo(aname, &a) || !Has(k, a))
      return bad(Format("%s has no algorithm \"%s\" (it has %s)", kname.c_str(), aname.c_str(),
                        Names(AlgosOf(k)).c_str()));
    sel.forced_[static_cast<int>(k)] = a;
  }
  *out = sel;
  return Status::Ok();
}

std::string AlgoSelect::Describe() const {
  std::string s;
  for (Kind k : kKinds) {
    Algo a = forced(k);
    if (a == Algo::kNone) continue;
    s += Format("%s%s=%s", s.empty() ? "" : ", ", KindName(k), AlgoName(a));
  }
  return s.empty() ? "auto" : s;
}

}  // namespace zc::coll
