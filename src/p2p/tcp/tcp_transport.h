// tcp transport: peers without shared memory or RDMA. One-sided write and
// read are emulated without user-space copies: the initiator writev()s a
// header and the payload straight from the source buffer; the receiver's
// progress thread (one of ZC_NUM_CQS) reads the payload straight into the
// target region, then release-stores the flag. ZC_SOCKETS_PER_PEER sockets
// per peer; every socket proves knowledge of the job key before use.
#pragma once

#include <memory>

#include "p2p/transport.h"

namespace zc {

// The registry's factory (tcp_entry.cpp); never fails. setup.job_key
// authenticates every socket.
Status CreateTcpTransport(TransportHost* host, const TransportSetup& setup, std::unique_ptr<Transport>* out);

}  // namespace zc
