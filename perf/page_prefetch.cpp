// page_prefetch: what prefetching the pages a stream reaches next buys the
// copies and reductions of zcomm's shared-memory paths on this machine.
//
//   page_prefetch [--bytes 64M] [--reps 15] [--inputs 2]
//
// Buffers are shared memory (memfd, 4 KiB pages), as zcomm's pool and
// slots are, touched before timing. Two kernels, each with its pages
// prefetched (as zcomm runs them) and without, alternated rep by rep:
//   copy    zc::StreamCopy of the buffer in 512 KiB pieces (a push into
//           parameter-server slots, a pull out of a results region)
//   reduce  `--inputs` inputs summed (float32) in 16 KiB chunks into a
//           buffer in L1, then written around the caches into as many
//           outputs (the zero-copy allreduce's owner loop), the next
//           chunk's pages prefetched or not
// Prints min / median / max milliseconds per pass over the buffer and the
// ratio of the medians (ahead / none). One thread: the memory traffic of
// one rank.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/reduce_kernels.h"
#include "common/config.h"
#include "common/page_prefetch.h"
#include "common/stream_copy.h"

namespace {

char* SharedBuffer(size_t bytes, int fill) {
  int fd = memfd_create("page_prefetch", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    perror("memfd");
    exit(1);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memset(p, fill, bytes);
  return static_cast<char*>(p);
}

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void Copy(char* dst, const char* src, size_t bytes, bool ahead) {
  constexpr size_t kPiece = 512 * 1024;
  for (size_t off = 0; off < bytes; off += kPiece)
    zc::StreamCopyAhead(dst + off, src + off, std::min(kPiece, bytes - off),
                        ahead ? zc::kPrefetchAheadBytes : 0);
  zc::StreamFence();
}

void Reduce(const std::vector<char*>& in, const std::vector<char*>& out, size_t bytes, bool ahead) {
  constexpr size_t kChunk = 16 * 1024;
  alignas(64) static char acc[kChunk];
  std::vector<const void*> srcs(in.size());
  for (size_t off = 0; off < bytes; off += kChunk) {
    const size_t len = std::min(kChunk, bytes - off);
    if (ahead && off + len < bytes) {
      const size_t next = std::min(kChunk, bytes - off - len);
      for (char* p : in) zc::PrefetchPages(p + off + len, next);
      for (char* p : out) zc::PrefetchPagesForWrite(p + off + len, next);
    }
    for (size_t i = 0; i < in.size(); ++i) srcs[i] = in[i] + off;
    zc::ReduceN(ZC_FLOAT32, ZC_SUM, acc, srcs.data(), static_cast<int>(in.size()), len / 4);
    for (char* p : out) zc::StreamCopy(p + off, acc, len);
  }
  zc::StreamFence();
}

struct Stats {
  double min, median, max;
};
Stats Summarize(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 64u << 20;
  int reps = 15, inputs = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--bytes" && i + 1 < argc && zc::ParseBytes(argv[i + 1], &bytes)) ++i;
    else if (a == "--reps" && i + 1 < argc) reps = atoi(argv[++i]);
    else if (a == "--inputs" && i + 1 < argc) inputs = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: page_prefetch [--bytes 64M] [--reps 15] [--inputs 2]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  bytes &= ~size_t{4095};
  if (bytes == 0 || reps < 1 || inputs < 1 || inputs > 8) {
    fprintf(stderr, "page_prefetch: --bytes >= 4K, --reps >= 1, --inputs 1..8\n");
    return 2;
  }
  char* src = SharedBuffer(bytes, 1);
  char* dst = SharedBuffer(bytes, 0);
  std::vector<char*> in, out;
  for (int i = 0; i < inputs; ++i) {
    in.push_back(SharedBuffer(bytes, i + 1));
    out.push_back(SharedBuffer(bytes, 0));
  }
  std::vector<double> t[4];  // copy none, copy ahead, reduce none, reduce ahead
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 4; ++k) {
      const bool ahead = (k + r) % 2 == 1;  // alternate which goes first
      const int slot = (k / 2) * 2 + (ahead ? 1 : 0);
      auto t0 = std::chrono::steady_clock::now();
      if (k < 2) Copy(dst, src, bytes, ahead);
      else Reduce(in, out, bytes, ahead);
      t[slot].push_back(Ms(t0));
    }
  printf("# page_prefetch: %zu bytes of 4 KiB-page shared memory, %d reps, %d inputs; ms per pass\n",
         bytes, reps, inputs);
  printf("%-8s %-6s %9s %9s %9s\n", "kernel", "pages", "min", "median", "max");
  const char* kernel[2] = {"copy", "reduce"};
  for (int k = 0; k < 2; ++k) {
    Stats none = Summarize(t[2 * k]), ahead = Summarize(t[2 * k + 1]);
    printf("%-8s %-6s %9.2f %9.2f %9.2f\n", kernel[k], "none", none.min, none.median, none.max);
    printf("%-8s %-6s %9.2f %9.2f %9.2f   ahead / none %.2f\n", kernel[k], "ahead", ahead.min, ahead.median,
           ahead.max, ahead.median / none.median);
  }
  return 0;
}
