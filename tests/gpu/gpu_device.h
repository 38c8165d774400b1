// What every device test needs first: a reason to skip when there is no CUDA
// device (printed as "SKIPPED: no CUDA device (...)" so CI logs show it), and
// the driver loaded with device 0's context current. Works in builds without
// CUDA too: the driver is dlopen'ed at run time.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gpu/cuda_driver.h"
#include "zc_build_config.h"

namespace zc::gpu::testing {

// "" when this process sees a CUDA device, else why not. need_cuda_build:
// the test also needs zcomm's own CUDA code (kernels, staging).
inline std::string NoDeviceReason(bool need_cuda_build) {
  if (need_cuda_build && !ZC_HAVE_CUDA) return "zcomm built without CUDA";
  std::string why;
  if (DeviceCount(&why) == 0) return why.empty() ? "no device" : why;
  return "";
}

// The same answer from a forked child, for tests that fork ranks later: the
// parent must not initialise CUDA before fork().
inline std::string NoDeviceReasonForked(bool need_cuda_build) {
  if (need_cuda_build && !ZC_HAVE_CUDA) return "zcomm built without CUDA";
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string why = NoDeviceReason(false);
    if (!why.empty() && write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(why.empty() ? 0 : 77);
  }
  close(fds[1]);
  std::string why;
  char buf[256];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0) why.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return why.empty() ? "device probe failed" : why;
}

// Loads the driver and makes device 0's primary context current.
inline Status OpenDevice0(const DriverTable** drv) {
  Status st = LoadDriver(drv);
  if (st.ok()) st = EnsureContext(*drv, 0);
  return st;
}

}  // namespace zc::gpu::testing

// Skips the current test when reason_expr is not empty.
#define ZC_SKIP_WITHOUT_DEVICE(reason_expr)                             \
  do {                                                                  \
    const std::string zc_why_ = (reason_expr);                          \
    if (!zc_why_.empty()) {                                             \
      std::printf("SKIPPED: no CUDA device (%s)\n", zc_why_.c_str());   \
      GTEST_SKIP() << "no CUDA device (" << zc_why_ << ")";             \
    }                                                                   \
  } while (0)
