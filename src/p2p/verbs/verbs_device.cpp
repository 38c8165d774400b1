#include "p2p/verbs/verbs_device.h"

#include <arpa/inet.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "p2p/verbs/verbs_transport.h"

namespace zc::verbs {

const char* PortStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "UNKNOWN";
}

std::string AddrString(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return Format("%s:%u", ip, static_cast<unsigned>(ntohs(a.sin_port)));
}

namespace {

// Opens `dev`, queries device and port; returns "" when usable, else why not.
std::string ProbeDevice(const VerbsApi* api, ibv_device* dev, int port, DeviceChoice* out) {
  const char* name = api->get_device_name(dev);
  ibv_context* ctx = api->open_device(dev);
  if (!ctx) return Format("%s: cannot open device: %s", name, strerror(errno));
  std::string why;
  ibv_device_attr dattr{};
  ibv_port_attr pattr{};
  int rc = api->query_device(ctx, &dattr);
  if (rc) {
    why = Format("%s: query_device failed: %s", name, strerror(rc > 0 ? rc : errno));
  } else if (port < 1 || port > dattr.phys_port_cnt) {
    why = Format("%s has %u port(s); ZC_IB_PORT=%d does not exist", name,
                 static_cast<unsigned>(dattr.phys_port_cnt), port);
  } else if ((rc = api->query_port(ctx, static_cast<uint8_t>(port), &pattr)) != 0) {
    why = Format("%s port %d: query_port failed: %s", name, port, strerror(rc > 0 ? rc : errno));
  } else if (pattr.state != IBV_PORT_ACTIVE) {
    why = Format("%s port %d is %s", name, port, PortStateName(pattr.state));
  } else {
    out->name = name;
    out->port = port;
    out->port_attr = pattr;
    out->device_attr = dattr;
  }
  api->close_device(ctx);
  return why;
}

}  // namespace

Status ChooseDevice(const VerbsApi* api, const Config& cfg, DeviceChoice* out) {
  int n = 0;
  ibv_device** list = api->get_device_list(&n);
  if (!list || n <= 0) {
    int err = errno;
    if (list) api->free_device_list(list);
    if (!list && err == ENOSYS)
      return Error(ZC_ERR_UNSUPPORTED, "no RDMA device found (kernel has no RDMA support)");
    return Error(ZC_ERR_UNSUPPORTED, "no RDMA device found");
  }
  std::string reasons, names;
  bool found = false, named = !cfg.ib_device.empty();
  for (int i = 0; i < n && !found; ++i) {
    const char* name = api->get_device_name(list[i]);
    names += std::string(names.empty() ? "" : ", ") + name;
    if (named && cfg.ib_device != name) continue;
    std::string why = ProbeDevice(api, list[i], cfg.ib_port, out);
    if (why.empty()) found = true;
    else reasons += std::string(reasons.empty() ? "" : "; ") + why;
  }
  api->free_device_list(list);
  if (found) return Status::Ok();
  if (named && reasons.empty())
    return Error(ZC_ERR_UNSUPPORTED, "ZC_IB_DEVICE=%s: no such RDMA device (have %s)",
                 cfg.ib_device.c_str(), names.c_str());
  return Error(ZC_ERR_UNSUPPORTED, "%s", reasons.c_str());
}

Status FindDeviceAddress(const VerbsApi* api, const std::string& device, sockaddr_in* out) {
  ifaddrs* ifs = nullptr;
  if (api->get_ifaddrs(&ifs) != 0)
    return SystemError(errno, "verbs: cannot list local addresses (getifaddrs)");
  rdma_event_channel* ch = api->create_event_channel();
  if (!ch) {
    api->free_ifaddrs(ifs);
    return SystemError(errno, "verbs: rdma_create_event_channel");
  }
  // Loopback last: rdma_cm maps 127.0.0.1 to some device on soft-RoCE setups,
  // but a peer on another host cannot reach it.
  std::vector<sockaddr_in> candidates, loopback;
  for (ifaddrs* p = ifs; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !(p->ifa_flags & IFF_UP)) continue;
    sockaddr_in a;
    memcpy(&a, p->ifa_addr, sizeof(a));
    a.sin_port = 0;
    ((p->ifa_flags & IFF_LOOPBACK) ? loopback : candidates).push_back(a);
  }
  api->free_ifaddrs(ifs);
  candidates.insert(candidates.end(), loopback.begin(), loopback.end());
  bool found = false;
  std::string seen;
  for (auto& a : candidates) {
    rdma_cm_id* id = nullptr;
    if (api->create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) continue;
    if (api->bind_addr(id, reinterpret_cast<sockaddr*>(&a)) == 0 && id->verbs) {
      const char* name = api->get_device_name(id->verbs->device);
      if (name && device == name) {
        *out = a;
        found = true;
      } else if (name) {
        seen += Format("%s%s->%s", seen.empty() ? "" : ", ", AddrString(a).c_str(), name);
      }
    }
    api->destroy_id(id);
    if (found) break;
  }
  api->destroy_event_channel(ch);
  if (found) return Status::Ok();
  return Error(ZC_ERR_UNSUPPORTED,
               "%s has no IPv4 address usable by rdma_cm (configure IPoIB or the RoCE "
               "interface%s%s)",
               device.c_str(), seen.empty() ? "" : "; other devices: ", seen.c_str());
}

}  // namespace zc::verbs

namespace zc {

bool VerbsViable(const VerbsApi* api, const Config& cfg, std::string* reason) {
  if (!api) api = RealVerbsApi();
  verbs::DeviceChoice dev;
  Status st = verbs::ChooseDevice(api, cfg, &dev);
  if (st.ok()) {
    sockaddr_in addr{};
    st = verbs::FindDeviceAddress(api, dev.name, &addr);
  }
  if (!st.ok()) {
    if (reason) *reason = st.message();
    return false;
  }
  if (reason) reason->clear();
  return true;
}

}  // namespace zc
