// shm transport: peers on the same host. Pool memory lives in segments that
// every local peer maps on first use, so a one-sided write is a memcpy into
// the peer's mapping followed by a release store of the flag. User memory
// outside segments is reached with cross-memory attach (process_vm_readv /
// writev); where CMA is refused (containers, ptrace policy) or switched off
// (ZC_SHM_CMA=off) those calls return ZC_ERR_UNSUPPORTED and the layer above
// stages through pool memory instead.
#pragma once

#include <memory>

#include "p2p/transport.h"

namespace zc {

// The registry's factory (shm_entry.cpp); never fails.
Status CreateShmTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out);

}  // namespace zc
