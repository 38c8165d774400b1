// Segment: a POSIX shared-memory object (/dev/shm/<name>) mapped into this
// process. The owner creates and unlinks it; local peers map it by name.
// Names are "zc-<job tag>-<rank>-<pid>-<n>": zcrun removes the job's segments
// when the job ends, and SweepStale() removes segments whose owner pid is
// gone, so a rank that dies leaves nothing behind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace zc {

class Segment {
 public:
  static Status Create(const std::string& name, size_t bytes, std::unique_ptr<Segment>* out);
  static Status Open(const std::string& name, std::unique_ptr<Segment>* out);
  ~Segment();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

  // Removes /dev/shm/zc-* segments whose owner process no longer exists.
  static int SweepStale();

 private:
  Segment() = default;
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
};

}  // namespace zc
