// NewestObjectWatch (gpu/load_watch.h) and LoadedDriver()'s use of it: a
// repeated "is libcuda loaded?" is answered without the loader's lock, and
// still sees a library loaded after the last answer, on any thread.
//
// The objects loaded here come from tests/gpu/loaded_objects (paths in
// ZC_TEST_WATCH_A, ZC_TEST_WATCH_B and ZC_TEST_FAKE_LIBCUDA, set by meson).
// The stand-in libcuda is loaded by the last test: once a driver is
// published, LoadedDriver() no longer looks at the loaded objects.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gpu/cuda_driver.h"
#include "gpu/load_watch.h"

namespace zc::gpu {
namespace {

std::string PathFrom(const char* var) {
  const char* v = std::getenv(var);
  return v != nullptr ? v : "";
}

// The list's newest object and the loader's count, as a caller scans them.
struct Newest {
  std::string name;
  unsigned long long adds = 0;
};

int Last(struct dl_phdr_info* info, size_t, void* data) {
  auto* n = static_cast<Newest*>(data);
  n->name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  n->adds = info->dlpi_adds;
  return 0;
}

Newest ScanNewest() {
  Newest n;
  dl_iterate_phdr(&Last, &n);
  return n;
}

bool IsLoaded(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

class LoadWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = PathFrom("ZC_TEST_WATCH_A");
    b_ = PathFrom("ZC_TEST_WATCH_B");
    cuda_ = PathFrom("ZC_TEST_FAKE_LIBCUDA");
    ASSERT_FALSE(a_.empty() || b_.empty() || cuda_.empty())
        << "run through meson: ZC_TEST_WATCH_A, ZC_TEST_WATCH_B and ZC_TEST_FAKE_LIBCUDA name the objects";
    ASSERT_FALSE(IsLoaded(a_)) << "a test left " << a_ << " loaded";
  }
  void* Open(const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << path << ": " << dlerror();
    return h;
  }
  std::string a_, b_, cuda_;
};

TEST_F(LoadWatch, SeesALoadAfterTheHold) {
  NewestObjectWatch watch;
  EXPECT_FALSE(watch.NothingLoadedSince()) << "nothing held: no answer";
  const Newest before = ScanNewest();
  ASSERT_TRUE(watch.Hold(before.name.c_str(), before.adds)) << before.name;
  EXPECT_TRUE(watch.NothingLoadedSince());
  EXPECT_TRUE(watch.NothingLoadedSince()) << "asking twice changes nothing";
  void* a = Open(a_);
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(watch.NothingLoadedSince()) << "a load after the hold must show";
  watch.Release();
  dlclose(a);
  EXPECT_FALSE(IsLoaded(a_));
}

TEST_F(LoadWatch, RefusesAHoldWhenSomethingWasLoadedSinceTheScan) {
  const Newest scan = ScanNewest();
  void* a = Open(a_);
  ASSERT_NE(a, nullptr);
  NewestObjectWatch watch;
  EXPECT_FALSE(watch.Hold(scan.name.c_str(), scan.adds)) << "the scan no longer ends at " << scan.name;
  EXPECT_TRUE(watch.hold_failed());
  EXPECT_FALSE(watch.NothingLoadedSince());
  dlclose(a);
}

TEST_F(LoadWatch, HoldsNothingWithoutAName) {
  NewestObjectWatch watch;
  const Newest scan = ScanNewest();
  EXPECT_FALSE(watch.Hold("", scan.adds));
  EXPECT_FALSE(watch.Hold("/nonexistent/libzc_not_there.so", scan.adds));
  EXPECT_TRUE(watch.hold_failed());
  EXPECT_FALSE(watch.NothingLoadedSince());
}

TEST_F(LoadWatch, HeldObjectIsUnloadedWhenTheHoldEnds) {
  void* a = Open(a_);
  ASSERT_NE(a, nullptr);
  const Newest scan = ScanNewest();
  ASSERT_NE(scan.name.find("zc_watch_a"), std::string::npos) << scan.name;
  NewestObjectWatch watch;
  ASSERT_TRUE(watch.Hold(scan.name.c_str(), scan.adds));
  dlclose(a);
  EXPECT_TRUE(IsLoaded(a_)) << "the hold keeps its link_map valid";
  watch.Release();
  EXPECT_FALSE(IsLoaded(a_)) << "released: the program's dlclose takes effect";
}

TEST_F(LoadWatch, LoadedDriverDropsAThreadsHoldAtExitAndOnANewerObject) {
  if (LoadedDriver() != nullptr) GTEST_SKIP() << "a CUDA driver is already loaded in this process";
  void* a = Open(a_);
  ASSERT_NE(a, nullptr);
  std::thread([] { EXPECT_EQ(LoadedDriver(), nullptr); }).join();
  dlclose(a);
  EXPECT_FALSE(IsLoaded(a_)) << "the thread's hold ends with the thread";

  a = Open(a_);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(LoadedDriver(), nullptr);  // this thread now holds a
  dlclose(a);
  EXPECT_TRUE(IsLoaded(a_));
  void* b = Open(b_);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(LoadedDriver(), nullptr);  // sees b, holds it instead
  EXPECT_FALSE(IsLoaded(a_)) << "the hold moved to the newer object";
  dlclose(b);
}

// Last: publishes the stand-in driver for the rest of the process.
TEST_F(LoadWatch, LoadedDriverSeesLibcudaLoadedAfterARepeatedNo) {
  if (LoadedDriver() != nullptr) GTEST_SKIP() << "a CUDA driver is already loaded in this process";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(LoadedDriver(), nullptr);  // the held answer
  const DriverTable* other_thread = nullptr;
  std::thread([&] { other_thread = LoadedDriver(); }).join();
  EXPECT_EQ(other_thread, nullptr);

  void* cuda = Open(cuda_);  // as a framework's lazy CUDA start-up would
  ASSERT_NE(cuda, nullptr);
  const DriverTable* drv = LoadedDriver();
  ASSERT_NE(drv, nullptr) << "libcuda was loaded after the last answer: it must be seen";
  EXPECT_TRUE(drv->loaded);
  EXPECT_EQ(drv->version, 4242) << "the stand-in's table";
  std::thread([&] { other_thread = LoadedDriver(); }).join();
  EXPECT_EQ(other_thread, drv);
}

}  // namespace
}  // namespace zc::gpu
