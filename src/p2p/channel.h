// Channel: the user-facing handle of one connection to one peer. It
// serializes calls on its Connection and checks ranges and health before
// every transfer, so transports see only well-formed requests.
#pragma once

#include <mutex>

#include "p2p/transport.h"

namespace zc {

class PeerHealth;

class Channel {
 public:
  // health: asked before every transfer (a lost peer or an abort fails it).
  Channel(const PeerHealth* health, Connection* conn, int peer, TransportKind kind)
      : health_(health), conn_(conn), peer_(peer), kind_(kind) {}

  int peer() const { return peer_; }
  TransportKind kind() const { return kind_; }

  // One-sided write of [src, src+bytes) into dst at dst_off, then the flag.
  Status Write(const void* src, size_t bytes, const RemoteRegion& dst, uint64_t dst_off,
               const FlagWrite* flag, const Deadline& deadline);
  // Write of the concatenated pieces into dst at dst_off, then the flag
  // (Connection::WriteGather); n >= 1.
  Status WriteGather(const SrcPiece* src, int n, const RemoteRegion& dst, uint64_t dst_off,
                     const FlagWrite* flag, const Deadline& deadline);
  // Connection::WriteBatch; every write has its flag.
  Status WriteBatch(const GatherWrite* w, int n, const RemoteRegion& dst, const Deadline& deadline);
  // Flag-only write (credits, acknowledgements).
  Status WriteFlag(const FlagWrite& flag, const Deadline& deadline) {
    return Write(nullptr, 0, *flag.region, 0, &flag, deadline);
  }
  // A message for the peer to match to one of its receives; its verdict
  // comes back into two words of our own region (Connection::WriteOffer).
  Status WriteOffer(const void* src, size_t bytes, uint64_t key, uint64_t prev, const FlagWrite& verdict,
                    const Deadline& deadline);
  // Connection::WriteFlagLazy.
  Status WriteFlagLazy(const FlagWrite& flag, const Deadline& deadline);
  // Load/store address of dst in this process, or nullptr (Connection::DirectAddress).
  char* DirectAddress(const RemoteRegion& dst) { return conn_->DirectAddress(dst); }
  // One-sided read of [src_off, src_off+bytes) of src into dst.
  Status Read(void* dst, size_t bytes, const RemoteRegion& src, uint64_t src_off,
              const Deadline& deadline);

 private:
  const PeerHealth* health_;
  Connection* conn_;
  int peer_;
  TransportKind kind_;
  std::mutex mu_;
};

}  // namespace zc
