#include "job_resources.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zc::launcher {

Status GenerateJobKey(std::string* key) {
  unsigned char raw[32];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SystemError(errno, "job key: cannot open /dev/urandom");
  size_t got = 0;
  while (got < sizeof(raw)) {
    ssize_t r = read(fd, raw + got, sizeof(raw) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      close(fd);
      return SystemError(err, "job key: cannot read /dev/urandom");
    }
    got += static_cast<size_t>(r);
  }
  close(fd);
  static const char kHex[] = "0123456789abcdef";
  std::string k;
  for (unsigned char c : raw) {
    k += kHex[c >> 4];
    k += kHex[c & 15];
  }
  *key = k;
  return Status::Ok();
}

std::string ShmSegmentPrefix(const std::string& job_key) {
  return "zc-" + job_key.substr(0, 16) + "-";
}

int RemoveJobShmSegments(const std::string& job_key, const std::string& dir,
                         std::string* first_error) {
  if (job_key.size() < 16) return 0;  // never match a short, broad prefix
  std::string prefix = ShmSegmentPrefix(job_key);
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (first_error && errno != ENOENT)
      *first_error = Format("cannot list %s: %s", dir.c_str(), strerror(errno));
    return 0;
  }
  int removed = 0;
  while (struct dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
      ++removed;
    } else if (errno != ENOENT && first_error && first_error->empty()) {
      *first_error = Format("cannot remove %s/%s: %s", dir.c_str(), e->d_name,
                            strerror(errno));
    }
  }
  closedir(d);
  return removed;
}

}  // namespace zc::launcher
