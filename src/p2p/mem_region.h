// MemRegion and RemoteRegion (the paper's Table 1): memory that peers write
// and read one-sidedly, and the small serializable descriptor a peer needs to
// do so. A descriptor is sent once (at setup) and used for every transfer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace zc {

enum class TransportKind : uint8_t { kNone = 0, kShm = 1, kTcp = 2, kVerbs = 3 };
constexpr size_t kTransportKinds = 4;
const char* TransportName(TransportKind k);

// What a peer needs to address my memory. Plain data; Serialize() gives a
// fixed-size byte string that Parse() reads back (bounds-checked).
struct RemoteRegion {
  static constexpr size_t kNameLen = 48;

  TransportKind transport = TransportKind::kNone;
  int32_t owner = -1;      // rank that owns the memory
  int32_t owner_pid = 0;   // shm: for cross-memory attach and liveness
  uint64_t id = 0;         // owner-local region id (tcp: looked up on arrival)
  uint64_t addr = 0;       // owner's virtual address of byte 0
  uint64_t size = 0;       // bytes
  uint32_t access_key = 0; // the backend's key for remote access (verbs: the rkey)
  uint64_t seg_offset = 0; // shm: offset of byte 0 inside the segment
  char seg_name[kNameLen] = {};  // shm: segment name; "" = user memory (CMA)

  bool valid() const { return transport != TransportKind::kNone && size > 0; }
  // true when [off, off+len) lies inside the region (overflow-safe).
  bool Contains(uint64_t off, uint64_t len) const {
    return off <= size && len <= size - off;
  }
  std::string Serialize() const;
  static Status Parse(const std::string& bytes, RemoteRegion* out);
  std::string ToString() const;  // for error messages
};

// Memory peers can reach: a pool chunk (or part of one) living in a shared
// segment, or user memory exposed through the registration cache. One region
// serves every transport: each transport's Expose() fills its part of the
// descriptor (shm: segment name and offset, or pid + address for CMA; tcp:
// the id its progress thread looks up; verbs: address and access key), and
// may keep private state in the region's backend handle.
class MemRegion {
 public:
  virtual ~MemRegion() = default;
  MemRegion(void* data, size_t size, uint64_t id) : data_(data), size_(size) {
    remote_.id = id;
    remote_.addr = reinterpret_cast<uintptr_t>(data);
    remote_.size = size;
  }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  uint64_t id() const { return remote_.id; }
  // The descriptor to send to peers that will access this region.
  const RemoteRegion& remote() const { return remote_; }
  RemoteRegion& mutable_remote() { return remote_; }
  // Byte offset of p inside this region; p must lie inside.
  size_t offset_of(const void* p) const {
    return static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(data_));
  }
  bool contains(const void* p, size_t len) const {
    auto b = reinterpret_cast<uintptr_t>(data_), q = reinterpret_cast<uintptr_t>(p);
    return q >= b && q - b <= size_ && len <= size_ - (q - b);
  }
  // Backend-private state, opaque to the core (verbs keeps its memory
  // registration here): one handle per transport kind, set by the backend's
  // Expose and cleared by its Unexpose.
  void* backend(TransportKind k) const { return backend_[static_cast<size_t>(k)]; }
  void set_backend(TransportKind k, void* handle) { backend_[static_cast<size_t>(k)] = handle; }
  // A slice shares its chunk's registrations (the chunk's Expose covers it).
  void ShareBackends(const MemRegion& chunk) { backend_ = chunk.backend_; }
  // The region this one is a slice of (pool sub-allocations), or null.
  MemRegion* parent = nullptr;
  // Owned by the registration cache (user memory), not the pool.
  bool cached = false;

 private:
  void* data_;
  size_t size_;
  RemoteRegion remote_;
  std::array<void*, kTransportKinds> backend_{};
};

}  // namespace zc
