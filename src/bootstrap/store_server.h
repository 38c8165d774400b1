// StoreServer: the job's TCP key-value store (served by zcrun, or by a test).
// One thread runs a poll loop over every connection: handshakes, requests and
// waiting GETs all progress without a thread per client, so a silent or
// hostile connection never delays the others. Protocol: store_protocol.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace zc {

class StoreServer {
 public:
  struct Options {
    std::string bind_host;       // "" = all IPv4 interfaces
    int port = 0;                // 0 = ephemeral
    std::string job_key;         // every client must prove it knows this
    // Host clients should use in address(); "" = the bind host, or for a
    // wildcard bind the address chosen by ZC_SOCKET_IFNAME (see socket.h).
    std::string advertise_host;
    double auth_timeout_s = 30;  // a connection must authenticate by then
    size_t max_clients = 8192;   // connections beyond this are refused
  };

  static Status Start(const std::string& bind_host, int port,
                      const std::string& job_key,
                      std::unique_ptr<StoreServer>* out);
  static Status Start(const Options& options, std::unique_ptr<StoreServer>* out);

  int port() const;
  std::string address() const;  // "host:port" clients should use
  uint64_t refused_connections() const;  // failed or timed-out handshakes
  uint64_t num_clients() const;          // connections open now
  // GET/WAIT requests waiting for keys now (tests wait on it to act while a
  // request is pending rather than after a guessed delay).
  uint64_t num_waiters() const;

  // Closes every connection (pending waits end with EOF at the clients).
  // Idempotent. Not to be called in a forked child: the thread is not there.
  void Stop();
  ~StoreServer();

  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  struct Impl;

 private:
  StoreServer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zc
