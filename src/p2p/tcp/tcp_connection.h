// TcpConnection: the Connection (p2p/transport.h) that a Channel writes and
// reads through, one per socket. Private to src/p2p/tcp.
//
// Write is one kWrite message: the header and the payload, straight from
// the source buffer, in one system call (gathered and batched writes too);
// the peer's progress thread places the payload, then stores the flag.
// Read is a kReadReq, then a wait until the kReadResp's bytes are in the
// destination: whichever thread takes the response off the socket (a
// progress thread, or this one while it drives) finds the read among the
// PendingReads by its token and places the bytes there.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/wakeup.h"
#include "p2p/tcp/tcp_socket.h"
#include "p2p/transport.h"

namespace zc::tcp {

// One one-sided read waiting for its response.
struct PendingRead {
  void* dst;
  uint64_t bytes;
  std::atomic<int> state{0};  // 0 waiting, 1 done, 2 failed
  Status status;
};

// The reads in flight, by the token their request carries (any thread).
class PendingReads {
 public:
  uint64_t Add(std::shared_ptr<PendingRead> p) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t t = ++next_token_;
    pending_[t] = p;
    return t;
  }
  void Remove(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(token);
  }
  // The read waiting for `token`, or nullptr when its reader gave up.
  std::shared_ptr<PendingRead> Find(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(token);
    return it != pending_.end() ? it->second : nullptr;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<PendingRead>> pending_;
  uint64_t next_token_ = 0;
};

class TcpConnection : public Connection {
 public:
  // read_driver: who sleeps for a read's wait (Progress::read_driver).
  TcpConnection(Socket* s, PendingReads* reads, WaitDriver* read_driver)
      : s_(s), reads_(reads), read_driver_(read_driver) {}
  int peer() const override { return s_->peer; }
  Status Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
               const FlagWrite* flag, const Deadline& deadline) override;
  Status Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
              const Deadline& deadline) override;
  Status WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst, uint64_t dst_off,
                     const FlagWrite* flag, const Deadline& deadline) override;
  Status WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst, const Deadline& deadline) override;
  Status WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline) override;
  Status WriteOffer(const void* src, size_t bytes, uint64_t key, uint64_t prev, const FlagWrite& verdict,
                    const Deadline& deadline) override;

 private:
  Socket* s_;
  PendingReads* reads_;
  WaitDriver* read_driver_;
};

}  // namespace zc::tcp
