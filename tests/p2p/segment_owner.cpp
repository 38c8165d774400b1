// Owns one shared-memory segment until its stdin closes, for
// test_segment_owner.cpp. Usage: segment_owner TAG [PID]
// With PID (it must be pid 1 of a fresh pid namespace), the segment is made
// by a child forked to get PID, a number that exists nowhere outside the
// namespace: the name then carries a pid that means nothing to an observer
// outside, which is the case stale-segment cleanup must get right.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "p2p/segment.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  long want = argc > 2 ? atol(argv[2]) : 0;
  if (want > 1) {
    FILE* f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (!f || fprintf(f, "%ld", want - 1) < 0 || fclose(f) != 0) {
      perror("segment_owner: ns_last_pid");
      return 3;
    }
    pid_t child = fork();
    if (child < 0) return 4;
    if (child > 0) {
      int st = 0;
      waitpid(child, &st, 0);
      return WIFEXITED(st) ? WEXITSTATUS(st) : 5;
    }
  }
  std::string name = std::string("zc-") + argv[1] + "-0-" + std::to_string(getpid()) + "-0";
  std::unique_ptr<zc::Segment> seg;
  zc::Status st = zc::Segment::Create(name, 4096, &seg);
  if (!st.ok()) {
    fprintf(stderr, "segment_owner: %s\n", st.message().c_str());
    return 6;
  }
  printf("owner %s pid %d\n", name.c_str(), static_cast<int>(getpid()));
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}
