#include "engine/response_cache.h"

namespace zc::engine {

int ResponseCache::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void ResponseCache::Put(const Response& resp) {
  const Request& l = resp.lead();
  if (l.type == OpType::kBarrier || l.type == OpType::kJoin) return;
  int pos = Find(l.name);
  if (pos < 0) {
    for (size_t i = 0; i < slots_.size() && pos < 0; ++i)
      if (!slots_[i]) pos = static_cast<int>(i);
    if (pos < 0) {
      if (static_cast<int>(slots_.size()) >= capacity_) return;
      pos = static_cast<int>(slots_.size());
      slots_.emplace_back();
    }
  }
  slots_[pos] = resp;
  by_name_[l.name] = pos;
}

void ResponseCache::Erase(int pos) {
  if (!slots_[pos]) return;
  by_name_.erase(slots_[pos]->lead().name);
  slots_[pos].reset();
}

}  // namespace zc::engine
