#include "engine/timeline.h"

#include <cerrno>
#include <nlohmann/json.hpp>

namespace zc::engine {

namespace {
constexpr int kPid = 1;
int64_t Micros(Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }
}  // namespace

Timeline::~Timeline() { Close(); }

Status Timeline::Open(const std::string& path) {
  file_ = fopen(path.c_str(), "w");
  if (!file_) return SystemError(errno, "ZC_TIMELINE: cannot write %s", path.c_str());
  origin_ = Clock::now();
  fputs("[\n", file_);
  Write(nlohmann::json{{"name", "process_name"}, {"ph", "M"}, {"pid", kPid},
                       {"args", {{"name", "zcomm engine (rank 0)"}}}}.dump());
  return Status::Ok();
}

int Timeline::Row(const std::string& tensor) {
  auto [it, fresh] = rows_.try_emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (fresh)
    Write(nlohmann::json{{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", it->second},
                         {"args", {{"name", tensor}}}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return it->second;
}

void Timeline::Phase(const std::string& tensor, const char* phase, Clock::time_point start, Clock::time_point end,
                     const std::string& detail) {
  if (!file_) return;
  nlohmann::json ev{{"name", phase}, {"ph", "X"}, {"pid", kPid}, {"tid", Row(tensor)},
                    {"ts", Micros(start - origin_)}, {"dur", std::max<int64_t>(0, Micros(end - start))}};
  if (!detail.empty()) ev["args"] = {{"detail", detail}};
  Write(ev.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void Timeline::Write(const std::string& event) {
  if (!first_) fputs(",\n", file_);
  first_ = false;
  fputs(event.c_str(), file_);
}

void Timeline::Close() {
  if (!file_) return;
  fputs("\n]\n", file_);
  fclose(file_);
  file_ = nullptr;
}

}  // namespace zc::engine
