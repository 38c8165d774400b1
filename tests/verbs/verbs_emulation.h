// A strict in-process emulation of the VerbsApi table (tests only).
//
// Fake devices and ports (none, DOWN, ACTIVE), PDs, MRs with access flags and
// keys, CQs with a depth (overrun = error), QPs with the RESET/INIT/RTR/RTS/ERR
// state machine, connected in pairs through an emulated rdma_cm (listen,
// resolve, connect, accept, reject, disconnect events on pipe-backed event
// channels). A "NIC" thread executes posted work requests asynchronously:
// RDMA_WRITE / WRITE_WITH_IMM / READ are memcpys done only after checking the
// local lkeys and the remote range, rkey and access flags (else
// IBV_WC_LOC_PROT_ERR / IBV_WC_REM_ACCESS_ERR and the QPs go to ERR). Send
// queue depth is enforced (post beyond it -> ENOMEM, as real verbs), slots of
// unsignaled WRs are freed only by a later signaled completion, WRITE_WITH_IMM
// waits for a posted receive (RNR), completions carry the real opcodes, and
// every misuse (destroying objects still in use, unacked events, ...) is
// recorded as a violation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "p2p/verbs/verbs_api.h"

namespace zc::emu {

struct DeviceSpec {
  std::string name = "emu0";
  std::string ip = "10.77.0.1";
  ibv_port_state state = IBV_PORT_ACTIVE;
  int ports = 1;
  uint64_t max_msg_sz = 1u << 30;
  int max_qp_wr = 1024;
  int max_cqe = 65536;
  uint32_t max_inline = 256;
  size_t memlock_bytes = 0;  // 0: unlimited; beyond it ibv_reg_mr fails with ENOMEM
};

// Replaces the fabric's devices. Live objects from before are reported as
// violations (leaks) and dropped.
void Reset(const std::vector<DeviceSpec>& devices);
const VerbsApi* Api();

enum class Fault {
  kRetryExceeded,  // next send WR: IBV_WC_RETRY_EXC_ERR, QP to ERR
  kRemoteAccess,   // next send WR: IBV_WC_REM_ACCESS_ERR, both QPs to ERR
  kQpError,        // next send WR: its QP goes to ERR (WRs flushed)
  kCqOverrun,      // next send completion: its CQ overruns
};
// Arms a one-shot fault hitting the next send WR the NIC executes.
void InjectOnNextSend(Fault f);
// QP number the last injected fault hit (0 if none yet).
uint32_t LastFaultQp();

struct Stats {
  int contexts = 0, pds = 0, mrs = 0, cqs = 0, comp_channels = 0, qps = 0, cm_ids = 0,
      event_channels = 0;
  uint64_t writes = 0, reads = 0, imms = 0, rnr_waits = 0, cq_overruns = 0;
  uint64_t max_sq_occupied = 0;     // highest send-queue occupancy seen on any QP
  uint64_t post_send_enomem = 0;    // posts refused because the send queue was full
  std::vector<std::string> violations;
};
Stats GetStats();

}  // namespace zc::emu
