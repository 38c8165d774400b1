#include "gpu/load_watch.h"

#include <dlfcn.h>

namespace zc::gpu {
namespace {

int FirstObjectAdds(struct dl_phdr_info* info, size_t size, void* data) {
  LoaderAddsIn(info, size, static_cast<unsigned long long*>(data));
  return 1;  // the counter is the same in every object's info: stop
}

}  // namespace

unsigned long long LoaderAdds() {
  unsigned long long adds = 0;
  dl_iterate_phdr(&FirstObjectAdds, &adds);
  return adds;
}

bool NewestObjectWatch::Hold(const char* newest_name, unsigned long long adds) {
  Release();
  hold_failed_ = true;
  // The program itself has no name; it is never the newest object anyway.
  if (newest_name == nullptr || newest_name[0] == '\0' || adds == 0) return false;
  // By the loaded object's own name: found in the list, no file search.
  void* handle = dlopen(newest_name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  struct link_map* map = nullptr;
  // Anything loaded between the scan and the hold may sit before the held
  // object (had the scan's newest gone and come back): the counter says.
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || LoaderAdds() != adds) {
    dlclose(handle);
    return false;
  }
  handle_ = handle;
  map_ = map;
  hold_failed_ = false;
  return true;
}

void NewestObjectWatch::Release() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
  map_ = nullptr;
}

}  // namespace zc::gpu
