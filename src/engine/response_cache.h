// ResponseCache: Responses agreed before, by position, replicated on every
// rank (every change follows agreed responses or an agreed invalidation, in
// the same order everywhere), so that a position means the same name on
// every rank and a cycle agrees on cached names with one bit-vector
// allreduce (Horovod's response cache). Positions freed by invalidation are
// reused lowest first; when full, new names are simply not cached.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request.h"

namespace zc::engine {

class ResponseCache {
 public:
  explicit ResponseCache(int capacity) : capacity_(capacity) {}

  // Number of positions (the bit vector's length), holes included.
  size_t positions() const { return slots_.size(); }
  size_t entries() const { return by_name_.size(); }
  // Position of name, or -1.
  int Find(const std::string& name) const;
  const Response* At(int pos) const { return slots_[pos] ? &*slots_[pos] : nullptr; }
  // Caches resp under its name (replacing an entry of that name) if there is
  // room; barriers and joins are never cached.
  void Put(const Response& resp);
  void Erase(int pos);

 private:
  int capacity_;
  std::vector<std::optional<Response>> slots_;
  std::unordered_map<std::string, int> by_name_;
};

}  // namespace zc::engine
