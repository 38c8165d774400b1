#include "bootstrap/unique_id.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "bootstrap/store_client.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/socket.h"

namespace zc {

namespace rendezvous {

bool ParseClaim(const std::string& s, Claim* c) {
  char host[256] = {0};
  if (sscanf(s.c_str(), "%d %d %ld %255s", &c->rank, &c->nranks, &c->pid, host) != 4) return false;
  c->host = host;
  return true;
}

Status ParseVerdict(const std::string& v, int* nranks) {
  if (sscanf(v.c_str(), "ok %d", nranks) == 1) return Status::Ok();
  int code = 0, used = 0;
  if (sscanf(v.c_str(), "%d %n", &code, &used) < 1 || code <= 0)
    return Error(ZC_ERR_INTERNAL, "malformed rendezvous verdict");
  return StatusFromPeer(code, v.substr(static_cast<size_t>(used)));
}

}  // namespace rendezvous

namespace {

using rendezvous::Claim;
using rendezvous::ParseClaim;
using rendezvous::ParseVerdict;

constexpr char kMagic[4] = {'Z', 'C', 'I', 'D'};
constexpr uint8_t kVersion = 1;
constexpr size_t kChecked = 120;  // bytes covered by the checksum

void PutBe(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint64_t GetBe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// The ids this process made, served until a communicator takes them. The
// one piece of process-wide state of the communicator API: an id exists
// before any communicator does.
struct ServedId {
  pid_t pid;  // the process whose thread serves it
  std::unique_ptr<StoreServer> server;
};
std::mutex g_served_mu;
std::map<uint64_t, ServedId>& Served() {
  static auto* served = new std::map<uint64_t, ServedId>();
  return *served;
}


std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) s += Format(" and %zu more", ranks.size() - 16);
  return s;
}


std::string VerdictOf(const Status& st, int nranks) {
  return st.ok() ? Format("ok %d", nranks) : Format("%d %s", static_cast<int>(st.code()), st.message().c_str());
}

// Who has claimed which rank so far (arrivals 1..n), and who is missing.
Status MissingRanks(StoreClient* store, int nranks, std::vector<int>* missing, int64_t* arrived) {
  ZC_RETURN_IF_ERROR(store->Add("join/arrivals", 0, arrived));
  std::set<int> seen;
  for (int64_t k = 1; k <= *arrived; ++k) {
    std::string v;
    Claim c;
    if (store->Get(Format("join/arrival/%lld", static_cast<long long>(k)), &v, 0).ok() &&
        ParseClaim(v, &c))
      seen.insert(c.rank);
  }
  for (int r = 0; r < nranks; ++r)
    if (!seen.count(r)) missing->push_back(r);
  return Status::Ok();
}

// The id's owner reads the claims in arrival order and decides.
Status Coordinate(StoreClient* store, int nranks, const Claim& owner, double timeout_s) {
  Deadline dl(timeout_s);
  std::map<int, Claim> by_rank;
  for (int64_t k = 1; static_cast<int>(by_rank.size()) < nranks; ++k) {
    std::string v;
    Status st = store->Get(Format("join/arrival/%lld", static_cast<long long>(k)), &v,
                           std::max(0.0, dl.remaining_s()));
    if (st.code() == ZC_ERR_TIMEOUT) {
      std::vector<int> missing;
      for (int r = 0; r < nranks; ++r)
        if (!by_rank.count(r)) missing.push_back(r);
      return Error(ZC_ERR_TIMEOUT,
                   "%zu of %d ranks arrived within ZC_TIMEOUT (%.3g s); missing rank%s: %s",
                   by_rank.size(), nranks, timeout_s, missing.size() == 1 ? "" : "s",
                   RankList(missing).c_str());
    }
    ZC_RETURN_IF_ERROR(st);
    Claim c;
    if (!ParseClaim(v, &c)) return Error(ZC_ERR_INTERNAL, "malformed claim \"%s\"", v.c_str());
    if (c.nranks != nranks)
      return Error(ZC_ERR_MISMATCH,
                   "ranks disagree on nranks: rank %d (%s) passed nranks=%d, rank %d (%s, the "
                   "id's owner) passed nranks=%d",
                   c.rank, c.Who().c_str(), c.nranks, owner.rank, owner.Who().c_str(), nranks);
    auto [it, fresh] = by_rank.emplace(c.rank, c);
    if (!fresh)
      return Error(ZC_ERR_INVALID_ARG, "rank %d was claimed by two processes: %s and %s", c.rank,
                   it->second.Who().c_str(), c.Who().c_str());
  }
  return Status::Ok();
}

}  // namespace

void UniqueId::Encode(char out[kUniqueIdBytes]) const {
  uint8_t* p = reinterpret_cast<uint8_t*>(out);
  memset(p, 0, kUniqueIdBytes);
  memcpy(p, kMagic, 4);
  p[4] = kVersion;
  p[5] = 4;
  PutBe(p + 6, static_cast<uint64_t>(port), 2);
  inet_pton(AF_INET, host.c_str(), p + 8);
  for (size_t i = 0; i < 32 && 2 * i + 1 < job_key.size(); ++i)
    p[24 + i] = static_cast<uint8_t>(std::stoi(job_key.substr(2 * i, 2), nullptr, 16));
  PutBe(p + 56, nonce, 8);
  PutBe(p + 64, static_cast<uint64_t>(created), 8);
  Digest256 sum = Sha256::Hash(p, kChecked);
  memcpy(p + kChecked, sum.data(), kUniqueIdBytes - kChecked);
}

Status UniqueId::Decode(const char in[kUniqueIdBytes], UniqueId* out) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(in);
  if (memcmp(p, kMagic, 4) != 0)
    return Error(ZC_ERR_INVALID_ARG,
                 "not a zcomm unique id (bad magic): pass the bytes zc_get_unique_id wrote, "
                 "unchanged");
  if (p[4] != kVersion)
    return Error(ZC_ERR_INVALID_ARG, "unique id of format version %d; this zcomm reads version %d",
                 p[4], kVersion);
  Digest256 sum = Sha256::Hash(p, kChecked);
  if (memcmp(sum.data(), p + kChecked, kUniqueIdBytes - kChecked) != 0)
    return Error(ZC_ERR_INVALID_ARG, "corrupted unique id (checksum mismatch): the id was changed "
                 "on its way; nothing was connected");
  if (p[5] != 4) return Error(ZC_ERR_INVALID_ARG, "unique id: unknown address family %d", p[5]);
  UniqueId id;
  char ip[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, p + 8, ip, sizeof(ip));
  id.host = ip;
  id.port = static_cast<int>(GetBe(p + 6, 2));
  id.job_key = ToHex(p + 24, 32);
  id.nonce = GetBe(p + 56, 8);
  id.created = static_cast<int64_t>(GetBe(p + 64, 8));
  if (id.port <= 0) return Error(ZC_ERR_INVALID_ARG, "unique id: port 0");
  *out = std::move(id);
  return Status::Ok();
}

Status ServeUniqueId(const Config& config, UniqueId* id) {
  UniqueId made;
  uint8_t key[32];
  ZC_RETURN_IF_ERROR(net::RandomBytes(key, sizeof(key)).with_context("zc_get_unique_id: job key"));
  made.job_key = ToHex(key, sizeof(key));
  ZC_RETURN_IF_ERROR(net::RandomBytes(&made.nonce, sizeof(made.nonce)));
  made.created = static_cast<int64_t>(time(nullptr));
  std::string ifname;
  ZC_RETURN_IF_ERROR(net::PickInterfaceAddress(config.socket_ifname, &made.host, &ifname)
                         .with_context("zc_get_unique_id: ZC_SOCKET_IFNAME"));
  StoreServer::Options opt;
  opt.bind_host = made.host;
  opt.job_key = made.job_key;
  std::unique_ptr<StoreServer> server;
  ZC_RETURN_IF_ERROR(StoreServer::Start(opt, &server).with_context("zc_get_unique_id: rendezvous"));
  made.port = server->port();
  ZC_INFO(kBootstrap, "unique id: rendezvous served at %s (%s)", made.address().c_str(),
          ifname.c_str());
  {
    std::lock_guard<std::mutex> lock(g_served_mu);
    Served()[made.nonce] = ServedId{getpid(), std::move(server)};
  }
  *id = std::move(made);
  return Status::Ok();
}

std::unique_ptr<StoreServer> TakeServed(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(g_served_mu);
  auto it = Served().find(nonce);
  if (it == Served().end()) return nullptr;
  ServedId served = std::move(it->second);
  Served().erase(it);
  if (served.pid != getpid()) {
    // A child forked after the id was made: the copy of the server has no
    // thread here (the parent serves it), and must not be stopped here.
    (void)served.server.release();
    return nullptr;
  }
  return std::move(served.server);
}

Status JoinRendezvous(StoreClient* store, const UniqueId& /*id: store is its store*/, int nranks, int rank,
                      bool coordinator, double timeout_s) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) snprintf(host, sizeof(host), "unknown");
  for (char* h = host; *h; ++h)
    if (*h == ' ') *h = '_';
  Claim me{rank, nranks, static_cast<long>(getpid()), host};
  int64_t arrival = 0;
  ZC_RETURN_IF_ERROR(store->Add("join/arrivals", 1, &arrival));
  ZC_RETURN_IF_ERROR(store->Set(Format("join/arrival/%lld", static_cast<long long>(arrival)),
                                Format("%d %d %ld %s", rank, nranks, me.pid, host)));
  if (coordinator) {
    Status verdict = Coordinate(store, nranks, me, timeout_s);
    ZC_RETURN_IF_ERROR(store->Set("join/verdict", VerdictOf(verdict, nranks)));
    if (!verdict.ok()) {
      // The store goes away with this process's failed call: let every rank
      // that has arrived read why (each counts itself in "join/read"), and
      // give late ones a moment, rather than a refused connection.
      Deadline linger(3.0);
      while (!linger.expired()) {
        int64_t arrived = 0;
        if (!store->Add("join/arrivals", 0, &arrived).ok()) break;
        std::string ignored;
        if (arrived > 1 &&
            !store->Get(Format("join/read/%lld", static_cast<long long>(arrived - 1)), &ignored,
                        std::max(0.0, linger.remaining_s()))
                 .ok())
          break;
        int64_t now = 0;
        if (!store->Add("join/arrivals", 0, &now).ok()) break;
        if (now != arrived) continue;     // more came meanwhile: let them read too
        // Everyone expected has read why; after a timeout nobody else is coming.
        if (arrived >= nranks || verdict.code() == ZC_ERR_TIMEOUT) break;
        // Ranks still starting: wait (within the linger) for the next one.
        IgnoreError(store->Get(Format("join/arrival/%lld", static_cast<long long>(arrived + 1)),
                               &ignored, std::max(0.0, linger.remaining_s())),
                    "linger for late ranks: a timeout or a failure just ends it");
      }
    }
    return verdict;
  }
  // The owner decides within timeout_s of its own arrival; allow it that
  // and a margin, then name who is missing ourselves.
  std::string v;
  Status st = store->Get("join/verdict", &v, timeout_s + 5);
  if (st.code() == ZC_ERR_TIMEOUT) {
    std::vector<int> missing;
    int64_t arrived = 0;
    if (MissingRanks(store, nranks, &missing, &arrived).ok())
      return Error(ZC_ERR_TIMEOUT,
                   "%lld of %d ranks arrived within ZC_TIMEOUT (%.3g s); missing rank%s: %s%s",
                   static_cast<long long>(arrived), nranks, timeout_s,
                   missing.size() == 1 ? "" : "s", RankList(missing).c_str(),
                   missing.empty() ? " (none: the rank that made the id never joined)" : "");
  }
  ZC_RETURN_IF_ERROR(st);
  int64_t readers = 0;
  if (store->Add("join/read", 1, &readers).ok())
    IgnoreError(store->Set(Format("join/read/%lld", static_cast<long long>(readers)), ""),
                "read receipt: only shortens the coordinator's linger");
  int job_nranks = 0;
  ZC_RETURN_IF_ERROR(ParseVerdict(v, &job_nranks));
  if (job_nranks != nranks)
    return Error(ZC_ERR_MISMATCH, "this process passed nranks=%d, but the job was formed with "
                 "nranks=%d (%s)", nranks, job_nranks, me.Who().c_str());
  // A process that came after every rank had been claimed.
  if (arrival > nranks)
    return Error(ZC_ERR_INVALID_ARG,
                 "rank %d was already claimed: all %d ranks of the job had arrived before this "
                 "process (%s)", rank, nranks, me.Who().c_str());
  return Status::Ok();
}

}  // namespace zc
