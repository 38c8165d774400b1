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

std::unique_ptr<Transport> CreateTcpTransport(TransportHost* host, const std::string& job_key);

}  // namespace zc
