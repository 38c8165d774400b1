// verbs transport: RDMA over libibverbs, connections set up with librdmacm.
//
// - RC queue pairs, ZC_QPS_PER_PEER per peer, assigned round-robin to
//   ZC_NUM_CQS completion queues, each polled by one thread that spins
//   briefly and then blocks on the CQ's completion channel.
// - Write: RDMA_WRITE of the payload (inline when small), then the flag:
//   ZC_VERBS_FLAG=imm (default) sends a 32-byte RDMA_WRITE_WITH_IMM into the
//   peer's per-connection landing ring; its receive completion makes the
//   peer's CQ thread release-store the flag. ZC_VERBS_FLAG=ordered writes the
//   flag in the same RDMA_WRITE right behind the payload (NICs that place
//   data in ascending order) when the flag word follows the payload, else imm.
// - Read: RDMA_READ. Selective signalling; bounded outstanding requests.
// See docs/verbs.md.
#pragma once

#include <memory>
#include <string>

#include "common/config.h"
#include "p2p/transport.h"
#include "p2p/verbs/verbs_api.h"

namespace zc {

// The registry's factory (verbs_entry.cpp): the verbs transport on the real
// libibverbs. ZC_ERR_UNSUPPORTED with the reason ("no RDMA device found",
// "mlx5_0 port 1 is DOWN") when not viable.
Status CreateVerbsTransport(TransportHost* host, const TransportSetup& setup,
                            std::unique_ptr<Transport>* out);
// The same on another implementation of the API (tests: the emulation);
// api == nullptr means RealVerbsApi().
Status CreateVerbsTransportWith(TransportHost* host, const TransportSetup& setup, const VerbsApi* api,
                                std::unique_ptr<Transport>* out);

// Probe only (no connections): is a device usable? `reason` says why not.
bool VerbsViable(const VerbsApi* api, const Config& cfg, std::string* reason);

// GPUDirect RDMA: registers device memory [dev_ptr, dev_ptr+bytes) with the
// NIC and fills region's verbs handle and remote().access_key/addr.
// dmabuf_fd >= 0: ibv_reg_dmabuf_mr on that dma-buf (exported for exactly
// this range, offset 0); else ibv_reg_mr (needs nvidia-peermem). Flags stay
// in host memory. Undo with transport->Unexpose(region).
Status VerbsRegisterDeviceMemory(Transport* transport, void* dev_ptr, size_t bytes,
                                 int dmabuf_fd, MemRegion* region);

// For tests and diagnostics: the lkey of region's registration (0 when it
// has none).
uint32_t VerbsLocalKey(const MemRegion& region);

// For tests and diagnostics: the QP number behind a verbs connection (0 when
// `conn` is not a connected verbs connection).
uint32_t VerbsQpNumber(Connection* conn);

}  // namespace zc
