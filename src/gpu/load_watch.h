// NewestObjectWatch: "has the dynamic loader loaded anything since I last
// looked?" in two loads, for a question asked on every small call.
//
// Why: a collective on user memory asks whether libcuda is in the process
// (cuda_driver.h, LoadedDriver()): no device pointer exists before it is.
// The only public way to list the loaded objects, dl_iterate_phdr, takes
// the loader's lock: about 28 ns on this machine even when its callback
// stops at the first object, a tenth of an 8-byte allreduce.
//
// How: glibc appends every object it loads to the end of the namespace's
// list (struct link_map, <link.h>). A watch holds the list's last object
// open (dlopen RTLD_NOLOAD: a reference, so dlclose cannot free its
// link_map) and reads its l_next: null means nothing was loaded after it.
// A load that raced with taking the hold is caught by the loader's load
// counter (dl_phdr_info::dlpi_adds), read again once the hold is taken.
//
// One watch per thread (cuda_driver.cpp keeps it thread_local): a thread
// only ever reads the link_map it holds itself, so no thread drops a
// reference another is reading. What users see: the object that was the
// newest when a thread last asked stays loaded after the program's dlclose
// of it, until something newer is loaded and the thread asks again, or the
// thread exits (objects loaded at start-up are never unloaded anyway).
#pragma once

#include <link.h>

#include <cstddef>

namespace zc::gpu {

// The loader's load counter from one object's info inside a
// dl_iterate_phdr callback (the same in every object's); false when this C
// library's info is too old to carry it.
inline bool LoaderAddsIn(const struct dl_phdr_info* info, size_t size, unsigned long long* adds) {
  if (size < offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) return false;
  *adds = info->dlpi_adds;
  return true;
}

// Loads counted by the dynamic loader so far (dlpi_adds), or 0 when this
// C library does not count them.
unsigned long long LoaderAdds();

class NewestObjectWatch {
 public:
  NewestObjectWatch() = default;
  ~NewestObjectWatch() { Release(); }
  NewestObjectWatch(const NewestObjectWatch&) = delete;
  NewestObjectWatch& operator=(const NewestObjectWatch&) = delete;

  // True while the held object is still the newest: nothing was loaded in
  // this namespace since Hold(). False when nothing is held.
  bool NothingLoadedSince() const {
    return map_ != nullptr && __atomic_load_n(&map_->l_next, __ATOMIC_ACQUIRE) == nullptr;
  }
  // After a scan of the list that ended at newest_name (its dlpi_name)
  // with `adds` loads counted: holds that object. Holds nothing when it
  // cannot: no name (the program itself), the object went away, or
  // something was loaded since the scan. Returns whether it holds one.
  bool Hold(const char* newest_name, unsigned long long adds);
  // Whether the last Hold() failed (the caller then scans as before).
  bool hold_failed() const { return hold_failed_; }
  void Release();

 private:
  void* handle_ = nullptr;
  struct link_map* map_ = nullptr;
  bool hold_failed_ = false;
};

}  // namespace zc::gpu
