#include "engine/message_table.h"

#include <algorithm>

namespace zc::engine {

void MessageTable::Add(int rank, const Request& req, Clock::time_point now) {
  auto [it, fresh] = entries_.try_emplace(req.name);
  Entry& e = it->second;
  auto since = now - std::chrono::milliseconds(req.waited_ms);
  if (fresh) {
    e.order = next_order_++;
    e.resp.per_rank.resize(size_);
    e.resp.present.assign(size_, 0);
    e.since = since;
  }
  e.since = std::min(e.since, since);
  e.resp.per_rank[rank] = req;
  e.resp.present[rank] = 1;
}

std::vector<Response> MessageTable::TakeReady(const std::vector<uint8_t>& joined) {
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (auto& [name, e] : entries_) {
    bool all = true;
    for (int r = 0; r < size_ && all; ++r) all = e.resp.present[r] || joined[r];
    if (all) ready.emplace_back(e.order, name);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<Response> out;
  for (auto& [order, name] : ready) {
    out.push_back(std::move(entries_[name].resp));
    entries_.erase(name);
  }
  return out;
}

std::vector<Response> MessageTable::TakeAllButAllreduces() {
  std::vector<std::pair<uint64_t, std::string>> found;
  for (auto& [name, e] : entries_)
    if (e.resp.lead().type != OpType::kAllreduce) found.emplace_back(e.order, name);
  std::sort(found.begin(), found.end());
  std::vector<Response> out;
  for (auto& [order, name] : found) {
    out.push_back(std::move(entries_[name].resp));
    entries_.erase(name);
  }
  return out;
}

std::vector<MessageTable::Stall> MessageTable::Stalled(Clock::time_point now, double after_s,
                                                       const std::vector<uint8_t>& joined, bool repeat) {
  std::vector<std::pair<uint64_t, Stall>> found;
  auto after = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(after_s));
  for (auto& [name, e] : entries_) {
    if (now - e.since < after) continue;
    if (repeat && e.reported != Clock::time_point() && now - e.reported < after) continue;
    if (repeat) e.reported = now;
    Stall s{name, {}, std::chrono::duration<double>(now - e.since).count()};
    for (int r = 0; r < size_; ++r)
      if (!e.resp.present[r] && !joined[r]) s.missing.push_back(r);
    found.emplace_back(e.order, std::move(s));
  }
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<Stall> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string DescribeStalls(const std::vector<MessageTable::Stall>& stalls, bool with_age) {
  std::string s;
  for (const auto& st : stalls) {
    if (!s.empty()) s += "; ";
    s += "'" + st.name + "' (missing ranks ";
    for (size_t i = 0; i < st.missing.size(); ++i) s += (i ? ", " : "") + std::to_string(st.missing[i]);
    if (with_age) s += Format("; waiting %.1f s", st.age_s);
    s += ")";
  }
  return s;
}

}  // namespace zc::engine
