// C ABI extensions for memory: the allocation-site hook (zc_site_alloc &
// co., see p2p/alloc_sites.h) and dropping cached registrations.
#include <zcomm/zcomm.h>

#include "api/checks.h"
#include "api/comm.h"
#include "common/status.h"


namespace {
zc_status Check(const zc_comm* comm, const char* op) {
  if (comm) return ZC_OK;
  return zc::api::Fail(
      zc::Status(ZC_ERR_INVALID_ARG, std::string(op) + ": invalid argument: comm is NULL"));
}
zc_status Result(const zc_comm* comm, const char* op, const zc::Status& st) {
  if (st.ok()) return ZC_OK;
  return zc::api::Fail(st.with_context(zc::Format("rank %d: %s", comm->rank, op)));
}
}  // namespace

zc_status zc_site_alloc(zc_comm* comm, uint64_t site, size_t bytes, void** ptr) {
  if (zc_status s = Check(comm, "zc_site_alloc")) return s;
  if (!ptr) return Result(comm, "zc_site_alloc", zc::Status(ZC_ERR_INVALID_ARG, "invalid argument: ptr is NULL"));
  *ptr = nullptr;
  if (bytes == 0) return ZC_OK;
  return Result(comm, "zc_site_alloc", comm->device->alloc_sites().Alloc(comm->device.get(), site, bytes, ptr));
}

zc_status zc_site_free(zc_comm* comm, void* ptr) {
  if (zc_status s = Check(comm, "zc_site_free")) return s;
  if (!ptr) return ZC_OK;
  return Result(comm, "zc_site_free", comm->device->alloc_sites().Free(comm->device.get(), ptr));
}

zc_status zc_site_pooled(const zc_comm* comm, uint64_t site, int* pooled) {
  if (zc_status s = Check(comm, "zc_site_pooled")) return s;
  if (!pooled) return Result(comm, "zc_site_pooled", zc::Status(ZC_ERR_INVALID_ARG, "invalid argument: pooled is NULL"));
  *pooled = comm->device->alloc_sites().marked(site) ? 1 : 0;
  return ZC_OK;
}

zc_status zc_mem_is_pool(const zc_comm* comm, const void* ptr, int* is_pool) {
  if (zc_status s = Check(comm, "zc_mem_is_pool")) return s;
  if (!is_pool) return Result(comm, "zc_mem_is_pool", zc::Status(ZC_ERR_INVALID_ARG, "invalid argument: is_pool is NULL"));
  *is_pool = ptr && comm->device->FindAllocation(ptr) != nullptr ? 1 : 0;
  return ZC_OK;
}

zc_status zc_mem_deregister(zc_comm* comm, const void* ptr, size_t bytes) {
  if (zc_status s = Check(comm, "zc_mem_deregister")) return s;
  if (!ptr) return ZC_OK;
  comm->device->Deregister(ptr, bytes);
  return ZC_OK;
}
