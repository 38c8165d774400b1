// The verbs backend's registry entry: viable where an RDMA device with an
// ACTIVE port and an IP address for rdma_cm is found (verbs_device.cpp).
#include "p2p/transport_registry.h"
#include "p2p/verbs/verbs_transport.h"

namespace zc {
namespace {

bool VerbsEntryViable(const Config& config, std::string* why) { return VerbsViable(nullptr, config, why); }
// One fabric is assumed, as rdma_cm resolves peers by IP address: every
// viable rank reaches every other, so the descriptor carries nothing.
std::string VerbsDomain(const DomainContext&) { return std::string(); }
bool VerbsCanReach(const std::string&, const std::string&) { return true; }

}  // namespace

extern const TransportEntry kVerbsTransportEntry;
const TransportEntry kVerbsTransportEntry = {
    TransportKind::kVerbs, "verbs", /*priority=*/1, VerbsEntryViable, VerbsDomain, VerbsCanReach,
    /*not_viable=*/"has no usable RDMA device", /*unreachable=*/"cannot reach each other over RDMA",
    /*label=*/"RDMA verbs", CreateVerbsTransport};

}  // namespace zc
