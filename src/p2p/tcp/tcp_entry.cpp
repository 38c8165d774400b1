// The tcp backend's registry entry: reaches every rank, last in priority.
#include "p2p/tcp/tcp_transport.h"
#include "p2p/transport_registry.h"

namespace zc {
namespace {

bool TcpViable(const Config&, std::string*) { return true; }
// The host id: not needed to reach (any rank reaches any other), but a rank
// whose tcp peers all share its host id listens on loopback only.
std::string TcpDomain(const DomainContext& ctx) { return ctx.host_id; }
bool TcpCanReach(const std::string&, const std::string&) { return true; }

}  // namespace

extern const TransportEntry kTcpTransportEntry;
const TransportEntry kTcpTransportEntry = {
    TransportKind::kTcp, "tcp", /*priority=*/2, TcpViable, TcpDomain, TcpCanReach,
    /*not_viable=*/"has no usable sockets", /*unreachable=*/"cannot reach each other over tcp",
    /*label=*/"tcp", CreateTcpTransport};

}  // namespace zc
