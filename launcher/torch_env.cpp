#include "torch_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace zc::launcher {

namespace {

// A port nobody listens on now: bind port 0, read the port, close. The
// socket is closed before rank 0's TCPStore binds it (torch's own launcher
// does the same).
Status FreePort(const std::string& ip, int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status(ZC_ERR_SYSTEM, Format("socket: %s", strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Status st(ZC_ERR_SYSTEM, Format("cannot find a free port for MASTER_PORT on %s: %s",
                                    ip.c_str(), strerror(errno)));
    close(fd);
    return st;
  }
  close(fd);
  *port = ntohs(a.sin_port);
  return Status::Ok();
}

}  // namespace

Status ChooseTorchMaster(const Placement& placement, const std::string& local_ip,
                         TorchMaster* out) {
  const Node& node0 = placement.nodes[static_cast<size_t>(placement.ranks.at(0).node)];
  std::string addr = placement.all_local() ? "127.0.0.1" : node0.local ? local_ip : node0.host;
  if (const char* v = getenv("MASTER_ADDR"); v && *v) addr = v;
  out->addr = addr;
  if (const char* v = getenv("MASTER_PORT"); v && *v) {
    out->port = v;
    return Status::Ok();
  }
  int port = 0;
  ZC_RETURN_IF_ERROR(FreePort(node0.local ? addr : "0.0.0.0", &port));
  out->port = std::to_string(port);
  return Status::Ok();
}

void AddTorchEnv(const TorchMaster& master, const RankPlace& place, int size, EnvList* env) {
  env->emplace_back("RANK", std::to_string(place.rank));
  env->emplace_back("WORLD_SIZE", std::to_string(size));
  env->emplace_back("LOCAL_RANK", std::to_string(place.local_rank));
  env->emplace_back("LOCAL_WORLD_SIZE", std::to_string(place.local_size));
  env->emplace_back("MASTER_ADDR", master.addr);
  env->emplace_back("MASTER_PORT", master.port);
}

}  // namespace zc::launcher
