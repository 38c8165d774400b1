// Timeline: Chrome-trace JSON (chrome://tracing, Perfetto) of the engine's
// work, written by rank 0 when ZC_TIMELINE names a file. One row (thread)
// per tensor name; complete ("X") events for each phase: QUEUE (submitted,
// not yet seen by the engine thread), NEGOTIATE (until every rank agreed),
// MEMCPY_IN_FUSION_BUFFER, the collective (ALLREDUCE, ...), and
// MEMCPY_OUT_FUSION_BUFFER. Events are serialized with nlohmann::json and
// streamed one per line into a JSON array, closed at shutdown.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "common/deadline.h"
#include "common/status.h"

namespace zc::engine {

class Timeline {
 public:
  ~Timeline();
  Status Open(const std::string& path);
  bool active() const { return file_ != nullptr; }
  // One phase of one tensor, [start, end).
  void Phase(const std::string& tensor, const char* phase, Clock::time_point start, Clock::time_point end,
             const std::string& detail = "");
  // Writes the array's end and closes the file.
  void Close();

 private:
  int Row(const std::string& tensor);
  void Write(const std::string& event);
  FILE* file_ = nullptr;
  bool first_ = true;
  Clock::time_point origin_;
  std::map<std::string, int> rows_;
};

}  // namespace zc::engine
