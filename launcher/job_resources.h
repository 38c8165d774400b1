// What a job owns besides its processes: the secret job key, and the
// shared-memory segments its ranks create (/dev/shm/zc-<key prefix>-*),
// which zcrun removes at exit so that a rank that dies leaves nothing.
#pragma once

#include <string>

#include "common/status.h"

namespace zc::launcher {

// 32 random bytes from /dev/urandom as 64 hex characters.
Status GenerateJobKey(std::string* key);

// "zc-" + the first 16 hex characters of the key + "-": the name prefix the
// shm transport gives the job's segments.
std::string ShmSegmentPrefix(const std::string& job_key);

// Unlinks every entry of `dir` whose name starts with the job's prefix.
// Returns how many were removed; *first_error keeps the first failure.
int RemoveJobShmSegments(const std::string& job_key,
                         const std::string& dir = "/dev/shm",
                         std::string* first_error = nullptr);

}  // namespace zc::launcher
