// C ABI extensions for memory: the allocation-site hook (zc_site_alloc &
// co., see p2p/alloc_sites.h) and dropping cached registrations.
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/comm.h"
#include "common/status.h"

namespace {
zc_status Result(const zc_comm* comm, const char* op, const zc::Status& st) {
  if (st.ok()) return ZC_OK;
  return zc::api::Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
}
}  // namespace

zc_status zc_site_alloc(zc_comm* comm, uint64_t site, size_t bytes, void** ptr) {
  ZC_CHECK_COMM(comm, "zc_site_alloc");
  if (!ptr) return zc::api::BadArg(comm, "zc_site_alloc", "ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0) return ZC_OK;
  return Result(comm, "zc_site_alloc", comm->device->regions().alloc_sites().Alloc(site, bytes, ptr));
}

zc_status zc_site_free(zc_comm* comm, void* ptr) {
  ZC_CHECK_COMM(comm, "zc_site_free");
  if (!ptr) return ZC_OK;
  return Result(comm, "zc_site_free", comm->device->regions().alloc_sites().Free(ptr));
}

zc_status zc_site_pooled(const zc_comm* comm, uint64_t site, int* pooled) {
  ZC_CHECK_COMM(comm, "zc_site_pooled");
  if (!pooled) return zc::api::BadArg(comm, "zc_site_pooled", "pooled is NULL");
  *pooled = comm->device->regions().alloc_sites().marked(site) ? 1 : 0;
  return ZC_OK;
}

zc_status zc_mem_is_pool(const zc_comm* comm, const void* ptr, int* is_pool) {
  ZC_CHECK_COMM(comm, "zc_mem_is_pool");
  if (!is_pool) return zc::api::BadArg(comm, "zc_mem_is_pool", "is_pool is NULL");
  *is_pool = ptr && comm->device->regions().FindAllocation(ptr) != nullptr ? 1 : 0;
  return ZC_OK;
}

zc_status zc_mem_deregister(zc_comm* comm, const void* ptr, size_t bytes) {
  ZC_CHECK_COMM(comm, "zc_mem_deregister");
  if (!ptr) return ZC_OK;
  if (bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(ptr))
    return zc::api::BadArg(comm, "zc_mem_deregister", "%p + %zu bytes runs past the end of the address space",
                  ptr, bytes);
  comm->device->regions().Deregister(ptr, bytes);
  return ZC_OK;
}
