// A main() for the fuzz targets where libFuzzer is not available (the gcc
// build): replays every file of the seed corpus, then runs a fixed,
// seeded sequence of mutations of those seeds through the target. No
// coverage feedback: it is a quick regression check that the suite runs on
// every build; the coverage-guided long runs are scripts/fuzz.sh (clang).
//
//   fuzz_<target> [--runs N] [--seed S] [--max-len L] [--max-seconds T] PATH...
// PATH: a corpus folder or single inputs (a reproducer). On a crash the
// input is written to fuzz-crash-<pid> in the working folder first, so it can be replayed.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The input being run, for the crash handler (process-wide: it is a program).
const uint8_t* g_cur = nullptr;
size_t g_cur_size = 0;
char g_crash_path[4096];  // made before any input runs

void OnCrash(int sig) {
  const char* path = g_crash_path;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t off = 0;
    while (off < g_cur_size) {
      ssize_t n = write(fd, g_cur + off, g_cur_size - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fd);
    static const char kMsg[] = "fuzz: crashing input written to ";
    ssize_t ignored = write(2, kMsg, sizeof(kMsg) - 1);
    ignored = write(2, path, strlen(path));
    ignored = write(2, "\n", 1);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void Run(const std::vector<uint8_t>& in) {
  g_cur = in.data();
  g_cur_size = in.size();
  LLVMFuzzerTestOneInput(in.data(), in.size());
}

bool ReadFile(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

void Collect(const std::string& path, std::vector<std::vector<uint8_t>>* corpus) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    std::vector<uint8_t> data;
    if (!ReadFile(path, &data)) {
      fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
      exit(2);
    }
    corpus->push_back(std::move(data));
    return;
  }
  DIR* d = opendir(path.c_str());
  std::vector<std::string> names;
  while (dirent* e = d ? readdir(d) : nullptr)
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  if (d) closedir(d);
  std::sort(names.begin(), names.end());  // same order everywhere
  for (const auto& n : names) Collect(path + "/" + n, corpus);
}

// xorshift64*: small, seeded, the same sequence on every machine.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  size_t Below(size_t n) { return n ? static_cast<size_t>(Next() % n) : 0; }
};

// Values that sit on the edges of size and range checks.
const uint64_t kInteresting[] = {0, 1, 2, 7, 8, 16, 24, 40, 63, 64, 127, 128, 255, 256,
                                 4096, 65535, 65536, 0x7fffffff, 0x80000000, 0xffffffff,
                                 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                 0xfffffffffffffff8ull, 0xffffffffffffffffull};

void Mutate(Rng& rng, const std::vector<std::vector<uint8_t>>& corpus, size_t max_len,
            std::vector<uint8_t>* x) {
  int steps = 1 + static_cast<int>(rng.Below(4));
  for (int i = 0; i < steps; ++i) {
    switch (rng.Below(8)) {
      case 0:  // flip a bit
        if (!x->empty()) (*x)[rng.Below(x->size())] ^= static_cast<uint8_t>(1u << rng.Below(8));
        break;
      case 1:  // a random byte
        if (!x->empty()) (*x)[rng.Below(x->size())] = static_cast<uint8_t>(rng.Next());
        break;
      case 2: {  // an interesting 1, 2, 4 or 8-byte value, little-endian
        size_t w = size_t{1} << rng.Below(4);
        if (x->size() < w) break;
        size_t at = rng.Below(x->size() - w + 1);
        uint64_t v = kInteresting[rng.Below(std::size(kInteresting))];
        if (rng.Below(4) == 0) v = -v;
        memcpy(x->data() + at, &v, w);
        break;
      }
      case 3: {  // insert random bytes
        size_t n = 1 + rng.Below(16), at = rng.Below(x->size() + 1);
        std::vector<uint8_t> ins(n);
        for (auto& b : ins) b = static_cast<uint8_t>(rng.Next());
        x->insert(x->begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4: {  // erase a range
        if (x->empty()) break;
        size_t at = rng.Below(x->size()), n = 1 + rng.Below(std::min<size_t>(x->size() - at, 32));
        x->erase(x->begin() + static_cast<ptrdiff_t>(at), x->begin() + static_cast<ptrdiff_t>(at + n));
        break;
      }
      case 5:  // truncate
        x->resize(rng.Below(x->size() + 1));
        break;
      case 6: {  // splice in part of another seed
        const auto& o = corpus[rng.Below(corpus.size())];
        if (o.empty()) break;
        size_t from = rng.Below(o.size()), n = 1 + rng.Below(o.size() - from);
        size_t at = rng.Below(x->size() + 1);
        x->insert(x->begin() + static_cast<ptrdiff_t>(at), o.begin() + static_cast<ptrdiff_t>(from),
                  o.begin() + static_cast<ptrdiff_t>(from + n));
        break;
      }
      default: {  // duplicate a range (repeated messages)
        if (x->empty()) break;
        size_t at = rng.Below(x->size()), n = 1 + rng.Below(x->size() - at);
        std::vector<uint8_t> dup(x->begin() + static_cast<ptrdiff_t>(at),
                                 x->begin() + static_cast<ptrdiff_t>(at + n));
        x->insert(x->end(), dup.begin(), dup.end());
        break;
      }
    }
  }
  if (x->size() > max_len) x->resize(max_len);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 30000, seed = 1;
  size_t max_len = 4096;
  double max_seconds = 4.0;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) {
      if (i + 1 >= argc) {
        fprintf(stderr, "fuzz: %s needs a value\n", name);
        exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--runs") runs = strtoull(value("--runs").c_str(), nullptr, 10);
    else if (a == "--seed") seed = strtoull(value("--seed").c_str(), nullptr, 10);
    else if (a == "--max-len") max_len = strtoull(value("--max-len").c_str(), nullptr, 10);
    else if (a == "--max-seconds") max_seconds = strtod(value("--max-seconds").c_str(), nullptr);
    else paths.push_back(a);
  }
  char cwd[2048];
  snprintf(g_crash_path, sizeof(g_crash_path), "%s/fuzz-crash-%d",
           getcwd(cwd, sizeof(cwd)) ? cwd : ".", static_cast<int>(getpid()));
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) signal(sig, OnCrash);
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& p : paths) Collect(p, &corpus);
  if (corpus.empty()) corpus.push_back({});
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& in : corpus) Run(in);
  Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
  uint64_t done = 0;
  std::vector<uint8_t> x;
  for (; done < runs; ++done) {
    // Check the clock every 256 inputs: a slow machine stops early, not late.
    if ((done & 255) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > max_seconds)
      break;
    x = corpus[rng.Below(corpus.size())];
    Mutate(rng, corpus, max_len, &x);
    Run(x);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("fuzz: %zu corpus inputs replayed, %llu of %llu mutations run in %.2f s (seed %llu)%s\n",
         corpus.size(), static_cast<unsigned long long>(done), static_cast<unsigned long long>(runs), s,
         static_cast<unsigned long long>(seed), done < runs ? " (time limit reached)" : "");
  return 0;
}
