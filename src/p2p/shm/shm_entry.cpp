// The shm backend's registry entry: reaches the ranks of this host.
#include "p2p/shm/shm_transport.h"
#include "p2p/transport_registry.h"

namespace zc {
namespace {

// Always viable: a /dev/shm that refuses segments fails the pool's
// allocation with the segment's own error (segment.cpp).
bool ShmViable(const Config&, std::string*) { return true; }
// The bootstrap's host id: ranks with the same id share /dev/shm and pids.
std::string ShmDomain(const DomainContext& ctx) { return ctx.host_id; }
bool ShmCanReach(const std::string& mine, const std::string& peer) { return mine == peer; }

}  // namespace

extern const TransportEntry kShmTransportEntry;
const TransportEntry kShmTransportEntry = {
    TransportKind::kShm, "shm", /*priority=*/0, ShmViable, ShmDomain, ShmCanReach,
    /*not_viable=*/"has no usable shared memory", /*unreachable=*/"are on different hosts",
    /*label=*/"shared memory", CreateShmTransport};

}  // namespace zc
