// Logging, controlled by ZC_DEBUG (WARN|INFO|TRACE; default WARN) and
// ZC_DEBUG_SUBSYS (comma list such as "p2p,coll"; "^p2p" excludes; default
// all). Lines look like "zcomm[rank 1] INFO p2p: ..." and go to stderr.
#pragma once

#include <cstdarg>
#include <string>

namespace zc::log {

enum class Level { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

// Subsystems, one per source folder.
enum Subsys : unsigned {
  kCommon = 1u << 0,
  kBootstrap = 1u << 1,
  kP2p = 1u << 2,
  kShm = 1u << 3,
  kTcp = 1u << 4,
  kVerbs = 1u << 5,
  kColl = 1u << 6,
  kPs = 1u << 7,
  kEngine = 1u << 8,
  kGpu = 1u << 9,
  kLauncher = 1u << 10,
  kAll = 0xffffffffu,
};

// Re-reads ZC_DEBUG and ZC_DEBUG_SUBSYS. Called by config loading; safe to
// call again (tests).
void Configure(Level level, unsigned subsys_mask);
void SetRank(int rank);
bool Enabled(Level level, Subsys subsys);
void Write(Level level, Subsys subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char* SubsysName(Subsys s);
// Parses "p2p,coll" / "^tcp" into a mask; returns false on an unknown name.
bool ParseSubsysList(const char* text, unsigned* mask);
// "common, bootstrap, ..., launcher": the names ParseSubsysList accepts.
std::string SubsysNames();

// "zcomm 0.1.0 (cuda no, verbs yes, pmix yes, hwloc yes)": what this build
// is, for the first lines of a log and bug reports.
std::string VersionBanner();

}  // namespace zc::log

#define ZC_LOG(level, subsys, ...)                                        \
  do {                                                                    \
    if (::zc::log::Enabled(::zc::log::Level::level, ::zc::log::subsys))   \
      ::zc::log::Write(::zc::log::Level::level, ::zc::log::subsys,        \
                       __VA_ARGS__);                                      \
  } while (0)
#define ZC_WARN(subsys, ...) ZC_LOG(kWarn, subsys, __VA_ARGS__)
#define ZC_INFO(subsys, ...) ZC_LOG(kInfo, subsys, __VA_ARGS__)
#define ZC_TRACE(subsys, ...) ZC_LOG(kTrace, subsys, __VA_ARGS__)
