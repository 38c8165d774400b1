#include "p2p/shm/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace zc {

Status Segment::Create(const std::string& name, size_t bytes, std::unique_ptr<Segment>* out) {
  std::string path = "/" + name;
  int fd = shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError(errno, "shm: cannot create segment /dev/shm/%s", name.c_str());
  // posix_fallocate, not just ftruncate: tmpfs pages are reserved now, so a
  // full /dev/shm is an error here instead of a SIGBUS at first touch.
  int ferr = ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno
                                                            : posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (ferr != 0) {
    int err = ferr;
    close(fd);
    shm_unlink(path.c_str());
    return SystemError(err, "shm: cannot size segment /dev/shm/%s to %zu bytes (is /dev/shm full?)",
                       name.c_str(), bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(path.c_str());
    return SystemError(err, "shm: cannot map segment /dev/shm/%s (%zu bytes)", name.c_str(), bytes);
  }
  auto s = std::unique_ptr<Segment>(new Segment());
  s->name_ = name;
  s->data_ = p;
  s->size_ = bytes;
  s->owner_ = true;
  *out = std::move(s);
  return Status::Ok();
}

Status Segment::Open(const std::string& name, std::unique_ptr<Segment>* out) {
  std::string path = "/" + name;
  int fd = shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError(errno, "shm: cannot open peer segment /dev/shm/%s", name.c_str());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return SystemError(err, "shm: cannot stat /dev/shm/%s", name.c_str());
  }
  size_t bytes = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED) return SystemError(err, "shm: cannot map peer segment /dev/shm/%s", name.c_str());
  auto s = std::unique_ptr<Segment>(new Segment());
  s->name_ = name;
  s->data_ = p;
  s->size_ = bytes;
  *out = std::move(s);
  return Status::Ok();
}

Segment::~Segment() {
  if (data_) munmap(data_, size_);
  if (owner_) shm_unlink(("/" + name_).c_str());
}

int Segment::SweepStale() {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  while (struct dirent* e = readdir(d)) {
    // zc-<tag>-<rank>-<pid>-<n>
    if (strncmp(e->d_name, "zc-", 3) != 0) continue;
    const char* p = e->d_name + 3;
    int dashes = 0;
    const char* pid_start = nullptr;
    for (const char* q = p; *q; ++q)
      if (*q == '-' && ++dashes == 2) pid_start = q + 1;
    if (!pid_start) continue;
    long pid = strtol(pid_start, nullptr, 10);
    if (pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
    }
  }
  closedir(d);
  if (removed) ZC_INFO(kShm, "removed %d stale segment(s) of dead processes from /dev/shm", removed);
  return removed;
}

}  // namespace zc
