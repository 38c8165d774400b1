// Device discovery for the verbs transport: which RDMA device and port to
// use (ZC_IB_DEVICE / ZC_IB_PORT, else the first device whose port is
// ACTIVE), and which local IPv4 address rdma_cm maps to that device (rdma_cm
// resolves routes and RoCE GIDs from IP addresses, so a device without an IP
// address -- no IPoIB interface, no RoCE netdev -- is not usable here).
#pragma once

#include <netinet/in.h>

#include <string>

#include "common/config.h"
#include "common/status.h"
#include "p2p/verbs/verbs_api.h"

namespace zc::verbs {

struct DeviceChoice {
  std::string name;  // e.g. "mlx5_0"
  int port = 1;
  ibv_port_attr port_attr{};
  ibv_device_attr device_attr{};
};

// ZC_ERR_UNSUPPORTED with the reason ("no RDMA device found", "mlx5_0 port 1
// is DOWN", "ZC_IB_DEVICE=mlx5_3: no such device (have mlx5_0, mlx5_1)").
Status ChooseDevice(const VerbsApi* api, const Config& cfg, DeviceChoice* out);

// The first local IPv4 address that rdma_cm binds to `device`.
// ZC_ERR_UNSUPPORTED when there is none.
Status FindDeviceAddress(const VerbsApi* api, const std::string& device, sockaddr_in* out);

std::string AddrString(const sockaddr_in& a);  // "10.0.0.1:4791"
const char* PortStateName(ibv_port_state s);

}  // namespace zc::verbs
