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
    // A connection must authenticate by then. Short: a rank's handshake
    // takes about three round trips, and a client that is dropped retries.
    double auth_timeout_s = 2;
    // Connections (authenticated or not). When full, a new connection
    // replaces the oldest unauthenticated one; it is refused only when every
    // connection is authenticated.
    size_t max_clients = 8192;
    // Handshakes pending at once, in all and from one source address. Beyond
    // either limit the oldest pending handshake (of that address) is dropped
    // for the new one: idle strangers cannot starve the job's ranks, which
    // authenticate within milliseconds of connecting.
    size_t max_unauthenticated = 1024;
    size_t max_unauthenticated_per_source = 128;
    // Bytes of requests being received, per connection and in all: a header
    // may claim up to 64 MiB, but buffers grow only as bytes arrive, and a
    // request that would pass either limit closes its connection.
    size_t max_request_bytes_in_flight = 256u << 20;
    // Bytes of keys and values stored; a SET beyond it fails (ZC_ERR_NO_MEMORY).
    size_t max_data_bytes = size_t{4} << 30;
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
  uint64_t num_authenticated() const;    // of which authenticated
  // Bytes allocated for requests being received (all connections), and the
  // most ever allocated at once: what a client's header claims does not
  // count until the bytes arrive.
  uint64_t buffered_bytes() const;
  uint64_t peak_buffered_bytes() const;

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
