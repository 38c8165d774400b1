#include "p2p/segment.h"

#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace zc {

Status Segment::Create(const std::string& name, size_t bytes, std::unique_ptr<Segment>* out) {
  std::string path = "/dev/shm/" + name;
  // The name appears with the lock already held: an unnamed file (O_TMPFILE)
  // is locked and sized first, then linked under its name. Without O_TMPFILE
  // the name exists unlocked for the few instructions up to flock().
  int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  bool named = fd < 0;
  if (named) fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError(errno, "shm: cannot create segment %s", path.c_str());
  auto fail = [&](int err, const char* what, const char* hint = "") {
    close(fd);
    if (named) unlink(path.c_str());
    return SystemError(err, "shm: %s %s (%zu bytes)%s", what, path.c_str(), bytes, hint);
  };
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return fail(errno, "cannot lock segment");
  // posix_fallocate, not just ftruncate: tmpfs pages are reserved now, so a
  // full /dev/shm is an error here instead of a SIGBUS at first touch.
  int ferr = ftruncate(fd, static_cast<off_t>(bytes)) != 0 ? errno
                                                            : posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (ferr != 0) return fail(ferr, "cannot size segment", ferr == ENOSPC ? " (/dev/shm is full)" : "");
  if (!named) {
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, self, AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return fail(errno, "cannot name segment");
    named = true;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(errno, "cannot map segment");
  auto s = std::unique_ptr<Segment>(new Segment());
  s->name_ = name;
  s->data_ = p;
  s->size_ = bytes;
  s->owner_ = true;
  s->lock_fd_ = fd;  // kept open: the lock says "alive" to SweepStale
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
  // Unlink before unlocking: a sweep never sees our name unlocked.
  if (owner_) shm_unlink(("/" + name_).c_str());
  if (lock_fd_ >= 0) close(lock_fd_);
}

int Segment::SweepStale(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return 0;
  int removed = 0;
  while (struct dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "zc-", 3) != 0) continue;
    int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;  // gone meanwhile, or not ours to judge
    // Taking the lock proves the owner is gone (in any pid namespace).
    // Holding it while unlinking, and checking that the name still is this
    // file, keeps a new segment of the same name safe.
    struct stat held, named;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &held) == 0 &&
        fstatat(dirfd(d), e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev &&
        unlinkat(dirfd(d), e->d_name, 0) == 0)
      ++removed;
    close(fd);
  }
  closedir(d);
  if (removed) ZC_INFO(kShm, "removed %d stale segment(s) of dead processes from %s", removed, dir);
  return removed;
}

bool Segment::HasSegmentOf(const std::string& tag, int rank, const char* dir) {
  const std::string head = "zc-" + tag + "-" + std::to_string(rank) + "-";
  DIR* d = opendir(dir);
  if (!d) return false;
  bool found = false;
  while (struct dirent* e = readdir(d))
    if (strncmp(e->d_name, head.c_str(), head.size()) == 0) found = true;
  closedir(d);
  return found;
}

bool Segment::HasSegmentOfDeadProcess(const std::string& tag, const char* dir) {
  const std::string head = "zc-" + tag + "-";
  DIR* d = opendir(dir);
  if (!d) return false;
  bool found = false;
  while (struct dirent* e = readdir(d)) {
    if (strncmp(e->d_name, head.c_str(), head.size()) != 0) continue;
    const char* q = e->d_name + head.size();
    char* end = nullptr;
    strtol(q, &end, 10);  // the rank
    if (end == q || *end != '-') continue;
    long pid = strtol(end + 1, &end, 10);
    if (pid > 0 && *end == '-' && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) found = true;
  }
  closedir(d);
  return found;
}

namespace {
struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

// Decimal digits of v at p (no terminator); returns the count.
int PutDecimal(char* p, long v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < 24);
  for (int i = 0; i < n; ++i) p[i] = tmp[n - 1 - i];
  return n;
}
}  // namespace

int Segment::UnlinkOwned(const char* tag, pid_t pid) {
  // "zc-<tag>-" then the rank's digits, then "-<pid>-".
  char head[64], mid[32];
  size_t tag_len = strnlen(tag, 40);
  if (tag_len == 0) return 0;
  memcpy(head, "zc-", 3);
  memcpy(head + 3, tag, tag_len);
  head[3 + tag_len] = '-';
  size_t head_len = 4 + tag_len;
  mid[0] = '-';
  size_t mid_len = 1 + static_cast<size_t>(PutDecimal(mid + 1, pid));
  mid[mid_len++] = '-';
  int dfd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  int removed = 0;
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* e = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += e->d_reclen;
      const char* name = e->d_name;
      if (strncmp(name, head, head_len) != 0) continue;
      const char* q = name + head_len;
      while (*q >= '0' && *q <= '9') ++q;
      if (q == name + head_len || strncmp(q, mid, mid_len) != 0) continue;
      if (unlinkat(dfd, name, 0) == 0) ++removed;
    }
  }
  close(dfd);
  return removed;
}

}  // namespace zc
