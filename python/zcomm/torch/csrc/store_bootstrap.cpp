#include "store_bootstrap.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <string>
#include <vector>

#include "types.hpp"

namespace zcomm_torch {

namespace {
constexpr const char* kIdKey = "zcomm_unique_id";
}

zc_comm* CommFromStore(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  const CallPrefix prefix = Prefix(rank, size, "init");
  zc_unique_id id;
  if (rank == 0) {
    zc_status st = zc_get_unique_id(&id);
    TORCH_CHECK(st == ZC_OK, prefix, "zc_get_unique_id failed: ", zc_status_string(st), ": ",
                zc_last_error(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(kIdKey, std::vector<uint8_t>(p, p + sizeof id));
  } else {
    std::vector<uint8_t> bytes = store->get(kIdKey);  // waits, bounded by the store's timeout
    TORCH_CHECK(bytes.size() == sizeof id, prefix, "the store's unique id has ", bytes.size(),
                " bytes, expected ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  zc_comm* comm = nullptr;
  zc_status st = zc_comm_init_rank(&comm, size, &id, rank);
  TORCH_CHECK(st == ZC_OK, prefix, "zc_comm_init_rank failed: ", zc_status_string(st), ": ",
              zc_last_error(nullptr));
  return comm;
}

}  // namespace zcomm_torch
