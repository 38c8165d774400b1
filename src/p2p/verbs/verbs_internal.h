// Internal classes of the verbs transport, shared by its .cpp files:
//   verbs_transport.cpp  VerbsTransport: creation, Expose/Unexpose, shutdown
//   verbs_connect.cpp    connection setup through rdma_cm (+ the CM monitor)
//   verbs_qp.cpp         VerbsConnection: posting, flow control, waiting
//   verbs_cq.cpp         CQ polling threads and completion handling
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "p2p/transport.h"
#include "p2p/verbs/verbs_api.h"
#include "p2p/verbs/verbs_device.h"

namespace zc::verbs {

// One entry of a connection's landing ring (imm flag mode): the sender
// RDMA_WRITE_WITH_IMMs it into slot `imm` of the receiver's ring; the
// receiver's CQ thread checks that [addr, addr+8) lies in one of its memory
// regions with key `rkey` and remote-write access, then release-stores value.
struct LandingEntry {
  uint64_t addr;   // receiver's virtual address of the flag word
  uint64_t value;  // the flag value
  uint32_t rkey;   // the rkey the sender addressed the flag's region with
  uint32_t magic;  // kLandingMagic: catches stray writes into the ring
  uint64_t reserved;
};
static_assert(sizeof(LandingEntry) == 32, "landing entry is 32 bytes");
constexpr uint32_t kLandingMagic = 0x5a43464c;  // "ZCFL"
constexpr uint32_t kImmBye = 0xffffffffu;        // zero-length WITH_IMM: peer shuts down

// What a connection request / accept carries (rdma_cm private data).
struct ConnInfo {
  uint32_t magic;      // kConnMagic
  int32_t rank;        // sender's rank
  uint32_t index;      // connection index 0..qps_per_peer-1
  uint32_t slots;      // sender's landing ring slots
  uint64_t landing_addr;
  uint32_t landing_rkey;
  uint32_t version;
  uint64_t token;      // the acceptor's token from the AllGather (proves job membership)
};
static_assert(sizeof(ConnInfo) == 40, "fits rdma_connect's 56 bytes of private data");
constexpr uint32_t kConnMagic = 0x5a435642;  // "ZCVB"
constexpr uint32_t kConnVersion = 1;

// wr_id layout: [63:48] global connection index, [47:44] kind, [43:0] sequence.
enum WrKind : uint64_t { kWrWrite = 1, kWrFlag = 2, kWrRead = 3, kWrRecv = 4, kWrBye = 5 };
inline uint64_t MakeWrId(uint32_t conn, WrKind kind, uint64_t seq) {
  return (static_cast<uint64_t>(conn) << 48) | (static_cast<uint64_t>(kind) << 44) |
         (seq & ((uint64_t{1} << 44) - 1));
}
inline uint32_t WrConn(uint64_t id) { return static_cast<uint32_t>(id >> 48); }
inline WrKind WrKindOf(uint64_t id) { return static_cast<WrKind>((id >> 44) & 15); }
inline uint64_t WrSeq(uint64_t id) { return id & ((uint64_t{1} << 44) - 1); }

const char* WrKindName(WrKind k);

class VerbsTransport;

// One RC queue pair to one peer: the paper's channel.
class VerbsConnection : public Connection {
 public:
  VerbsConnection(VerbsTransport* t, int peer, int index, uint32_t global, int cq)
      : t_(t), peer_(peer), index_(index), global_(global), cq_(cq) {}
  int peer() const override { return peer_; }
  Status Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
               const FlagWrite* flag, const Deadline& deadline) override;
  Status Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
              const Deadline& deadline) override;

  // ---- used by the CQ threads ----
  void OnSendCompletion(uint64_t seq);
  // First error wins; later calls are ignored. Wakes every waiter.
  void Fail(const Status& st);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status error() const;

  // Zero-length WRITE_WITH_IMM(kImmBye), waited for briefly (shutdown).
  void SayBye();
  std::string Describe() const;  // "peer 3 QP 1234 (connection 1)"

  VerbsTransport* t_;
  const int peer_, index_;
  const uint32_t global_;  // index in VerbsTransport::conns_
  const int cq_;           // CQ (thread) serving this QP

  // Set up by connection setup (verbs_connect.cpp).
  rdma_cm_id* id = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t qp_num = 0;
  bool established = false;
  bool active = false;         // we sent the connection request
  uint32_t sq_depth = 0;       // send queue depth (max outstanding WRs)
  uint32_t rq_depth = 0;       // receives posted (for WRITE_WITH_IMM)
  uint32_t max_inline = 0;     // actual max_inline_data
  uint32_t signal_every = 1;   // selective signalling period
  uint32_t max_send_sge = 1;   // actual max_send_sge
  LandingEntry* landing = nullptr;  // my ring: slots = 2 * rq_depth
  uint32_t slots = 0;
  LandingEntry* stage = nullptr;    // sq_depth entries: non-inline flag sources
  uint64_t peer_landing = 0;   // the peer's ring
  uint32_t peer_rkey = 0;
  uint32_t peer_slots = 0;
  std::atomic<bool> bye{false};  // the peer said it shuts down

 private:
  // Posts one send WR (waits for a free send-queue slot). Caller holds post_mu_.
  Status PostOne(ibv_send_wr* wr, WrKind kind, bool last, const Deadline& dl, uint64_t* seq);
  Status WaitSeq(uint64_t seq, const Deadline& dl, const char* what);
  Status CheckUsable();
  Status WriteImmFlag(const FlagWrite& f, const Deadline& dl, uint64_t* seq);
  bool ordered_flags_trailing(const FlagWrite* flag, const RemoteRegion& dst, uint64_t dst_off,
                              size_t bytes) const;

  std::mutex post_mu_;        // posting order (Channel + PeerHealth::Abort's direct writes)
  uint64_t posted_ = 0;       // sequence of the last posted send WR
  uint32_t unsignaled_ = 0;   // unsignaled WRs since the last signaled one
  uint64_t imm_count_ = 0;    // landing slots used so far
  std::atomic<uint64_t> completed_{0};  // every WR with seq <= this has completed
  mutable std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::atomic<bool> failed_{false};
  Status error_;
};

// One completion queue with its channel and polling thread.
struct CompletionQueue {
  int index = 0;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  int depth = 0;
  std::thread thread;
  unsigned unacked_events = 0;
};

// The verbs backend's handle in a MemRegion: its memory registration
// (null when the region is not registered with the NIC).
inline ibv_mr* RegionMr(const MemRegion& r) { return static_cast<ibv_mr*>(r.backend(TransportKind::kVerbs)); }

class VerbsTransport : public Transport {
 public:
  VerbsTransport(TransportHost* host, const TransportSetup& setup, const VerbsApi* api)
      : host_(host), setup_(setup), api_(api) {}
  ~VerbsTransport() override;

  Status Init();  // discovery, listen, PD
  TransportKind kind() const override { return TransportKind::kVerbs; }
  Status Expose(MemRegion* region) override;
  void Unexpose(MemRegion* region) override;
  Status Listen(const LinkPlan& plan, std::string* address) override;
  Status Connect(const std::vector<std::string>& addresses) override;
  int connections_per_peer() const override { return qps_per_peer_; }
  Connection* connection(int peer, int index) override;
  void Shutdown() override;

  Status RegisterDeviceMemory(void* dev_ptr, size_t bytes, int dmabuf_fd, MemRegion* region);

  // ---- shared with the connection and CQ code ----
  TransportHost* host() const { return host_; }
  const VerbsApi* api() const { return api_; }
  const DeviceChoice& device() const { return dev_; }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  bool ordered_flags() const { return ordered_flags_; }
  uint64_t max_msg() const { return max_msg_; }
  uint32_t landing_lkey() const { return landing_mr_ ? landing_mr_->lkey : 0; }
  // Release-stores a flag that arrived through the landing ring; false when
  // the address is not inside one of my remotely writable regions.
  bool StoreFlag(const LandingEntry& e);
  Status PostRecv(VerbsConnection* c, uint64_t n);
  // Fatal failure of a connection: fail it and tell the host (unless the
  // peer said goodbye or we are shutting down).
  void ConnectionLost(VerbsConnection* c, const Status& st, bool fatal);

 private:
  friend class VerbsConnection;
  Status CreateCqs(int qps);
  Status SetUpLanding(size_t conns);
  Status CreateQp(VerbsConnection* c, rdma_cm_id* id);
  Status HandleSetupEvent(rdma_cm_event* ev, const std::vector<int>& peers,
                          const std::vector<std::string>& addrs, int* done);
  Status StartActive(VerbsConnection* c, const sockaddr_in& dst);
  void CqLoop(CompletionQueue* q);
  void HandleCompletion(CompletionQueue* q, const ibv_wc& wc);
  void CmLoop();
  std::string Where() const;  // "rank 0 verbs mlx5_0:1"

  TransportHost* host_;
  const TransportSetup setup_;
  std::vector<int> peers_;  // from Listen
  const VerbsApi* api_;
  DeviceChoice dev_;
  sockaddr_in addr_{};            // my listen address
  uint64_t token_ = 0;            // proves job membership to my listener
  std::vector<uint64_t> peer_tokens_;  // every rank's token (from the AllGather)
  int qps_per_peer_ = 1;
  int num_cqs_ = 1;
  bool ordered_flags_ = false;
  uint64_t max_msg_ = 1u << 30;

  rdma_event_channel* cm_channel_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  ibv_context* ctx_ = nullptr;    // listen_id_->verbs: every id shares it
  ibv_pd* pd_ = nullptr;
  std::vector<std::unique_ptr<CompletionQueue>> cqs_;
  ibv_mr* landing_mr_ = nullptr;
  void* landing_mem_ = nullptr;
  size_t landing_bytes_ = 0;

  std::vector<int> peer_pos_;     // rank -> position in the peers list, -1 if none
  std::vector<std::unique_ptr<VerbsConnection>> conns_;  // [pos * qps_per_peer + i]
  std::vector<rdma_cm_id*> stray_ids_;  // ids not owned by a connection (setup failures)

  std::mutex mr_mu_;
  std::unordered_map<uint32_t, ibv_mr*> mr_by_rkey_;  // every MR I registered

  std::atomic<bool> stopping_{false};
  std::atomic<bool> cq_stop_{false};
  std::thread cm_thread_;
  std::atomic<bool> cm_stop_{false};
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace zc::verbs
