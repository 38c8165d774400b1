// StoreClient: one authenticated connection to a StoreServer. Thread-safe:
// one mutex serializes requests, so a Get waiting for a key holds the
// connection; threads that wait concurrently should use their own clients.
// After a transport failure or a missed deadline the connection is closed and
// every later call returns the first error (the stream may be out of step).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace zc {

class StoreClient {
 public:
  // Connects to "host:port" (retrying until dl while the server is not up
  // yet) and proves knowledge of job_key. A handshake the server cuts short
  // (busy, or shedding idle strangers) is retried, kMaxConnectAttempts times
  // at most, each within kHandshakeSeconds; a wrong key is not retried.
  static constexpr int kMaxConnectAttempts = 10;
  static constexpr double kHandshakeSeconds = 5;
  static Status Connect(const std::string& address, const std::string& job_key,
                        const Deadline& dl, std::unique_ptr<StoreClient>* out);
  ~StoreClient();

  // Keys: 1..4096 bytes, values up to 64 MiB; both binary-safe.
  Status Set(const std::string& key, const std::string& value);
  // Waits up to timeout_s (0 = do not wait) until key exists.
  Status Get(const std::string& key, std::string* value, double timeout_s);
  // Waits up to timeout_s until every key exists.
  Status Wait(const std::vector<std::string>& keys, double timeout_s);
  // Atomically adds delta to the decimal counter at key (absent = 0).
  Status Add(const std::string& key, int64_t delta, int64_t* new_value);
  Status Check(const std::string& key, bool* exists);

  // Deadline of requests that do not wait for keys (default 300 s), and the
  // grace allowed beyond a waiting request's own timeout.
  void set_op_timeout(double seconds);
  // A duplicate of the connection's socket (-1 once broken), for watching
  // it close; the caller closes it.
  int DupConnection();
  const std::string& address() const { return address_; }

  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

 private:
  StoreClient() = default;
  struct Reply {
    uint32_t status = 0;
    uint64_t arg = 0;
    std::string value;
  };
  // Sends one request and reads its reply. wait_s >= 0: a waiting request.
  Status Call(uint32_t op, const std::string& key, const std::string& value,
              uint64_t arg, double wait_s, const char* what, Reply* reply);
  Status CheckKey(const std::string& key, const char* what) const;

  std::mutex mu_;
  int fd_ = -1;
  std::string address_;
  uint32_t next_id_ = 1;
  double op_timeout_s_ = 300;
  Status broken_;  // first transport failure; the connection is closed
};

}  // namespace zc
