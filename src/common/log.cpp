#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/status.h"
#include "zc_build_config.h"

namespace zc::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kWarn)};
std::atomic<unsigned> g_mask{kAll};
std::atomic<int> g_rank{-1};

struct Name {
  const char* name;
  Subsys bit;
};
constexpr Name kNames[] = {
    {"common", kCommon}, {"bootstrap", kBootstrap}, {"p2p", kP2p},
    {"shm", kShm},       {"tcp", kTcp},             {"verbs", kVerbs},
    {"coll", kColl},     {"ps", kPs},               {"engine", kEngine},
    {"gpu", kGpu},       {"launcher", kLauncher},
};

const char* LevelName(Level l) {
  switch (l) {
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void Configure(Level level, unsigned subsys_mask) {
  g_level.store(static_cast<int>(level));
  g_mask.store(subsys_mask);
}

void SetRank(int rank) { g_rank.store(rank); }

bool Enabled(Level level, Subsys subsys) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed) &&
         (g_mask.load(std::memory_order_relaxed) & subsys) != 0;
}

const char* SubsysName(Subsys s) {
  for (const auto& n : kNames)
    if (n.bit == s) return n.name;
  return "?";
}

bool ParseSubsysList(const char* text, unsigned* mask) {
  std::string s(text ? text : "");
  if (s.empty() || strcasecmp(s.c_str(), "all") == 0) {
    *mask = kAll;
    return true;
  }
  bool exclude = false;
  if (s[0] == '^') {
    exclude = true;
    s = s.substr(1);
  }
  unsigned bits = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    bool found = false;
    for (const auto& n : kNames)
      if (strcasecmp(item.c_str(), n.name) == 0) {
        bits |= n.bit;
        found = true;
      }
    if (!found) return false;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  *mask = exclude ? (kAll & ~bits) : bits;
  return true;
}

std::string SubsysNames() {
  std::string s;
  for (const auto& n : kNames) s += std::string(s.empty() ? "" : ", ") + n.name;
  return s;
}

std::string VersionBanner() {
  auto yn = [](int on) { return on ? "yes" : "no"; };
  return Format("zcomm %s (cuda %s, verbs %s, pmix %s, hwloc %s)", ZC_VERSION, yn(ZC_HAVE_CUDA),
                yn(ZC_HAVE_VERBS), yn(ZC_HAVE_PMIX), yn(ZC_HAVE_HWLOC));
}

void Write(Level level, Subsys subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string body = VFormat(fmt, ap);
  va_end(ap);
  int rank = g_rank.load();
  std::string line =
      rank >= 0 ? Format("zcomm[rank %d] %s %s: %s\n", rank, LevelName(level),
                         SubsysName(subsys), body.c_str())
                : Format("zcomm %s %s: %s\n", LevelName(level),
                         SubsysName(subsys), body.c_str());
  // One write call per line so lines from threads never interleave.
  fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace zc::log
