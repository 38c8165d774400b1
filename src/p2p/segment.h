// Segment: a POSIX shared-memory object (/dev/shm/<name>) mapped into this
// process. The owner creates and unlinks it; local peers map it by name.
// Names are "zc-<job tag>-<rank>-<pid>-<n>": zcrun removes the job's segments
// when the job ends.
//
// Ownership survives pid namespaces: the owner holds an exclusive flock() on
// the segment for its whole life (the name appears already locked, see
// Create), so SweepStale() removes exactly the segments whose lock it can
// take: their owner is dead, whatever namespace it ran in. A pid in the name
// would not do: the same number means another process (or none) across a
// pid-namespace boundary.
#pragma once

#include <sys/types.h>

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

  // Removes the zc-* segments of `dir` (default /dev/shm) whose owner is
  // gone: nobody holds their lock. Returns how many.
  static int SweepStale(const char* dir = "/dev/shm");
  // Whether `dir` holds a segment of job `tag` made by `rank` ("zc-<tag>-<rank>-").
  static bool HasSegmentOf(const std::string& tag, int rank, const char* dir = "/dev/shm");
  // Whether a segment "zc-<tag>-<rank>-<pid>-..." of a process that no
  // longer exists (on this host) is in dir.
  static bool HasSegmentOfDeadProcess(const std::string& tag, const char* dir = "/dev/shm");

  // Unlinks this process's own segments "zc-<tag>-<rank>-<pid>-<n>" from
  // /dev/shm (the mappings stay valid). Async-signal-safe (raw system calls,
  // no allocation): used when the process is about to die. Returns how many.
  static int UnlinkOwned(const char* tag, pid_t pid);

 private:
  Segment() = default;
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
  int lock_fd_ = -1;  // owner: the open segment, holding its flock
};

}  // namespace zc
