#include "bootstrap/store_server.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bootstrap/store_protocol.h"
#include "common/auth.h"
#include "common/deadline.h"
#include "common/log.h"
#include "common/rate_limit.h"
#include "common/socket.h"

namespace zc {

using store::Header;


struct StoreServer::Impl {
  struct Client {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    std::string src;  // the peer's address without the port
    std::unique_ptr<net::AuthHandshake> auth;  // null once authenticated
    Clock::time_point auth_deadline;
    std::vector<uint8_t> in;  // the message being read
    size_t in_have = 0;
    bool have_header = false;
    Header hdr;
    // A request too large to receive now: its remaining bytes are read and
    // dropped, then refused with this message (the stream stays in step).
    size_t discard = 0;
    std::string discard_why;
    std::string out;  // bytes not yet sent
    size_t out_off = 0;
    uint64_t waiter = 0;  // a pending GET/WAIT blocks further requests
    bool dead = false;
  };
  struct Waiter {
    uint64_t client = 0;
    uint32_t req_id = 0;
    uint32_t op = 0;
    std::vector<std::string> keys;   // distinct keys
    std::unordered_set<std::string> missing;
    Clock::time_point deadline;
    double timeout_s = 0;
  };

  Options opt;
  int listen_fd = -1;
  int wake_fd = -1;
  int port = 0;
  std::string address;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> nclients{0};
  std::atomic<uint64_t> nwaiters{0};  // waiters.size(), for other threads
  std::atomic<uint64_t> nauthed{0};
  std::atomic<uint64_t> buffered{0};  // capacity of every Client::in
  std::atomic<uint64_t> peak_buffered{0};
  std::atomic<bool> stopped{false};
  size_t live = 0;          // connections not closed
  size_t data_bytes = 0;    // keys + values stored
  // Pending handshakes, oldest first (ids grow with time), in all and by
  // source address: the ones dropped when strangers crowd the server.
  std::set<uint64_t> pending;
  std::unordered_map<std::string, std::set<uint64_t>> pending_by_src;
  WarnLimiter refusal_log{5, 10};

  std::map<uint64_t, std::unique_ptr<Client>> clients;
  uint64_t next_client = 1, next_waiter = 1;
  Clock::time_point accept_paused_until{};
  std::unordered_map<std::string, std::string> data;
  std::map<uint64_t, Waiter> waiters;
  std::set<std::pair<Clock::time_point, uint64_t>> waiter_deadlines;
  std::unordered_map<std::string, std::vector<uint64_t>> key_waiters;

  void Run();
  void AcceptNew();
  void OnReadable(Client* c);
  bool ReadMessage(Client* c, size_t need);  // false: wait for more bytes
  bool GrowInput(Client* c, size_t need);    // false: over a limit
  bool Discard(Client* c);                   // true: the request is refused
  void ReleaseInput(Client* c, bool all);
  void DropPending(Client* c);
  void MakeRoomFor(const std::string& src);  // drops an old handshake if full
  void LogSuppressed(bool force);
  void HandleAuth(Client* c);
  void HandleRequest(Client* c);  // parses, then one of:
  void HandleSet(Client* c, const store::StoreRequest& req);
  void HandleAdd(Client* c, const store::StoreRequest& req);
  void HandleGetOrWait(Client* c, store::StoreRequest* req);  // answers now, or parks a Waiter
  void Flush(Client* c);
  void Respond(Client* c, uint32_t req_id, zc_status st, uint64_t arg,
               const std::string& value);
  void RespondError(Client* c, uint32_t req_id, const Status& st) {
    Respond(c, req_id, st.code(), 0, st.message());
  }
  void Close(Client* c, const char* why);
  void Refuse(Client* c, const std::string& why);
  void Notify(const std::string& key);
  void FinishWaiter(uint64_t wid, bool timed_out);
  void RemoveWaiter(uint64_t wid);
  void ExpireTimers();
  int NextTimeoutMs();
  void CloseAll();
};

void StoreServer::Impl::LogSuppressed(bool force) {
  uint64_t n = refusal_log.TakeSuppressed(force);
  if (n)
    ZC_WARN(kBootstrap, "store server: %llu more connection(s) refused in the last %.3g s "
            "(not logged one by one; %llu refused in all)", static_cast<unsigned long long>(n),
            refusal_log.interval_s(), static_cast<unsigned long long>(refused.load()));
}

void StoreServer::Impl::DropPending(Client* c) {
  if (!pending.erase(c->id)) return;
  auto it = pending_by_src.find(c->src);
  if (it == pending_by_src.end()) return;
  it->second.erase(c->id);
  if (it->second.empty()) pending_by_src.erase(it);
}

// Input buffers grow with the bytes that arrive (doubling, from 64 KiB), not
// with what a header claims: a client that announces 64 MiB and sends
// nothing costs 64 KiB.
bool StoreServer::Impl::GrowInput(Client* c, size_t need) {
  size_t old_cap = c->in.capacity();
  size_t want = std::min(need, std::max(c->in_have + (size_t{64} << 10), 2 * c->in.size()));
  if (want > old_cap) {
    uint64_t total = buffered.load(std::memory_order_relaxed) - old_cap + want;
    if (total > opt.max_request_bytes_in_flight) {
      std::string why = Format("request of %zu bytes refused: the store is receiving %llu bytes "
                               "of requests (limit %zu)", need,
                               static_cast<unsigned long long>(buffered.load()),
                               opt.max_request_bytes_in_flight);
      if (c->auth || !c->have_header) {
        Close(c, why.c_str());
      } else {
        ZC_WARN(kBootstrap, "store server: %s: %s", c->peer.c_str(), why.c_str());
        c->discard = need - c->in_have;
        c->discard_why = why;
        c->in_have = 0;
        ReleaseInput(c, true);
      }
      return false;
    }
    c->in.reserve(want);
  }
  c->in.resize(want);
  uint64_t now = buffered.load(std::memory_order_relaxed) - old_cap + c->in.capacity();
  buffered.store(now, std::memory_order_relaxed);
  if (now > peak_buffered.load(std::memory_order_relaxed))
    peak_buffered.store(now, std::memory_order_relaxed);
  return true;
}

bool StoreServer::Impl::Discard(Client* c) {
  uint8_t scratch[16384];
  while (c->discard) {
    ssize_t n = recv(c->fd, scratch, std::min(c->discard, sizeof(scratch)), MSG_DONTWAIT);
    if (n > 0) {
      c->discard -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    Close(c, "connection closed in the middle of a refused request");
    return false;
  }
  c->have_header = false;
  RespondError(c, c->hdr.id, Error(ZC_ERR_NO_MEMORY, "%s", c->discard_why.c_str()));
  c->discard_why.clear();
  return true;
}

void StoreServer::Impl::ReleaseInput(Client* c, bool all) {
  // Do not keep a large buffer around for a client that sent one value.
  if (!all && c->in.capacity() <= (1u << 20)) return;
  buffered.fetch_sub(c->in.capacity(), std::memory_order_relaxed);
  std::vector<uint8_t>().swap(c->in);
}

void StoreServer::Impl::MakeRoomFor(const std::string& src) {
  auto mine = pending_by_src.find(src);
  uint64_t victim = 0;
  std::string why;
  if (mine != pending_by_src.end() &&
      mine->second.size() >= opt.max_unauthenticated_per_source) {
    victim = *mine->second.begin();
    why = Format("dropped: %zu handshakes pending from %s (limit %zu), this is the oldest",
                 mine->second.size(), src.c_str(), opt.max_unauthenticated_per_source);
  } else if (!pending.empty() &&
             (pending.size() >= opt.max_unauthenticated || live >= opt.max_clients)) {
    victim = *pending.begin();
    why = Format("dropped: %zu handshakes pending and %zu connections (limits %zu and %zu), "
                 "this is the oldest handshake", pending.size(), live,
                 opt.max_unauthenticated, opt.max_clients);
  }
  if (!victim) return;
  auto it = clients.find(victim);
  if (it != clients.end()) Refuse(it->second.get(), why);
}

void StoreServer::Impl::Run() {
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;
  while (!stop.load(std::memory_order_acquire)) {
    pfds.clear();
    ids.clear();
    pfds.push_back({wake_fd, POLLIN, 0});
    bool accepting = Clock::now() >= accept_paused_until;
    pfds.push_back({listen_fd, static_cast<short>(accepting ? POLLIN : 0), 0});
    for (auto& [id, c] : clients) {
      short ev = 0;
      if (c->out_off < c->out.size()) ev = POLLOUT;
      else if (c->waiter) ev = POLLRDHUP;  // only to notice a vanished client
      else ev = POLLIN;
      pfds.push_back({c->fd, ev, 0});
      ids.push_back(id);
    }
    int r = poll(pfds.data(), pfds.size(), NextTimeoutMs());
    if (r < 0 && errno != EINTR) {
      ZC_WARN(kBootstrap, "store server: poll: %s", strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (r > 0) {
      if (pfds[0].revents) {
        uint64_t v;
        while (read(wake_fd, &v, sizeof(v)) > 0) {}
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        short re = pfds[i + 2].revents;
        if (!re) continue;
        auto it = clients.find(ids[i]);
        if (it == clients.end()) continue;  // closed during this round
        Client* c = it->second.get();
        if (re & POLLNVAL) { Close(c, "fd became invalid"); continue; }
        if (re & POLLOUT) Flush(c);
        if (c->dead) continue;
        if (!c->auth && (c->waiter || c->out_off < c->out.size())) {
          // A request is outstanding: only a hang-up matters now (a failed
          // send is noticed by Flush).
          if (re & (POLLRDHUP | POLLHUP | POLLERR)) Close(c, nullptr);
          continue;
        }
        if (re & (POLLIN | POLLERR | POLLHUP | POLLRDHUP)) OnReadable(c);
      }
      if (pfds[1].revents & POLLIN) AcceptNew();
    }
    ExpireTimers();
    LogSuppressed(false);
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->second->dead) it = clients.erase(it); else ++it;
    }
    nclients.store(live, std::memory_order_relaxed);
    nauthed.store(live - pending.size(), std::memory_order_relaxed);
  }
  LogSuppressed(true);
  CloseAll();
}

int StoreServer::Impl::NextTimeoutMs() {
  auto now = Clock::now();
  auto next = now + std::chrono::seconds(1);  // safety net
  if (!waiter_deadlines.empty())
    next = std::min(next, waiter_deadlines.begin()->first);
  for (auto& [id, c] : clients)
    if (c->auth) next = std::min(next, c->auth_deadline);
  if (accept_paused_until > now) next = std::min(next, accept_paused_until);
  if (refusal_log.HasPending()) next = std::min(next, refusal_log.window_end());
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now)
                .count();
  return ms <= 0 ? 0 : static_cast<int>(ms) + 1;
}

void StoreServer::Impl::AcceptNew() {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if ((err == EMFILE || err == ENFILE) && !pending.empty()) {
        // Out of descriptors while strangers hold some: free the oldest
        // pending handshake rather than leave the newcomer in the backlog.
        auto it = clients.find(*pending.begin());
        if (it != clients.end())
          Refuse(it->second.get(), Format("dropped: out of file descriptors (%s), this is "
                                          "the oldest pending handshake", strerror(err)));
        continue;
      }
      // Out of descriptors: stop accepting for a moment instead of spinning
      // on a listen socket that stays readable.
      ZC_WARN(kBootstrap, "store server: accept: %s; pausing accepts 100 ms",
              strerror(err));
      accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    auto c = std::make_unique<Client>();
    c->id = next_client++;
    c->fd = fd;
    c->peer = net::PeerAddress(fd);
    c->src = c->peer.substr(0, c->peer.rfind(':'));
    MakeRoomFor(c->src);
    if (live >= opt.max_clients) {
      // Every connection is authenticated: only now is a newcomer refused.
      refused.fetch_add(1);
      LogSuppressed(false);
      if (refusal_log.Admit())
        ZC_WARN(kBootstrap, "store server: refusing %s: already %zu authenticated clients "
                "(limit %zu)", c->peer.c_str(), live, opt.max_clients);
      close(fd);
      continue;
    }
    net::SetNoDelay(fd);
    c->auth = std::make_unique<net::AuthHandshake>(net::AuthRole::kServer,
                                                   opt.job_key);
    c->auth_deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(opt.auth_timeout_s));
    c->out = c->auth->Start();
    Client* raw = c.get();
    pending.insert(raw->id);
    pending_by_src[raw->src].insert(raw->id);
    ++live;
    clients.emplace(c->id, std::move(c));
    ZC_TRACE(kBootstrap, "store server: connection from %s", raw->peer.c_str());
    Flush(raw);
  }
}

bool StoreServer::Impl::ReadMessage(Client* c, size_t need) {
  while (c->in_have < need) {
    if (c->in.size() < need && c->in.size() - c->in_have == 0 && !GrowInput(c, need))
      return false;
    size_t room = std::min(need, c->in.size()) - c->in_have;
    ssize_t n = recv(c->fd, c->in.data() + c->in_have, room, MSG_DONTWAIT);
    if (n > 0) {
      c->in_have += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    const char* why = n == 0 ? "connection closed" : strerror(errno);
    if (c->auth) {
      Refuse(c, Format("connection closed during the handshake (%s, after "
                       "%zu of %zu bytes)", why, c->in_have, need));
    } else if (c->in_have > 0) {
      Close(c, "connection closed in the middle of a request");
    } else {
      Close(c, nullptr);  // an ordinary disconnect
    }
    return false;
  }
  return true;
}

void StoreServer::Impl::OnReadable(Client* c) {
  // Bounded work per wakeup so one busy client cannot starve the others.
  for (int round = 0; round < 32 && !c->dead; ++round) {
    if (c->auth) {
      if (!ReadMessage(c, c->auth->want())) return;
      HandleAuth(c);
      continue;
    }
    // One request at a time per client: the next is read after the answer.
    if (c->waiter || c->out_off < c->out.size()) return;
    if (c->discard) {
      if (!Discard(c)) return;
      continue;
    }
    if (!c->have_header) {
      if (!ReadMessage(c, store::kHeaderBytes)) return;
      c->hdr = store::DecodeHeader(c->in.data());
      std::string bad = store::CheckRequestHeader(c->hdr);
      if (!bad.empty()) {
        Close(c, bad.c_str());
        return;
      }
      c->have_header = true;
    }
    size_t need = store::kHeaderBytes + c->hdr.key_len + c->hdr.value_len;
    if (!ReadMessage(c, need)) {
      if (c->discard && !c->dead) continue;  // too large to receive now
      return;
    }
    HandleRequest(c);
    c->have_header = false;
    c->in_have = 0;
    if (!c->dead) ReleaseInput(c, false);
  }
}

void StoreServer::Impl::HandleAuth(Client* c) {
  std::string reply;
  size_t n = c->auth->want();
  Status st = c->auth->OnMessage(c->in.data(), n, &reply);
  c->in_have = 0;
  if (!reply.empty()) {
    c->out += reply;
    Flush(c);
    if (c->dead) return;
  }
  if (!st.ok()) {
    Refuse(c, st.message());
    return;
  }
  if (c->auth->done()) {
    c->auth.reset();
    DropPending(c);
    ZC_TRACE(kBootstrap, "store server: %s authenticated", c->peer.c_str());
  }
}

void StoreServer::Impl::HandleRequest(Client* c) {
  const Header& h = c->hdr;
  store::StoreRequest req;
  std::string why;
  switch (store::ParseStoreRequest(h, c->in.data() + store::kHeaderBytes, &req, &why)) {
    case store::RequestVerdict::kOk: break;
    case store::RequestVerdict::kRefuse:
      RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG, "%s", why.c_str()));
      return;
    case store::RequestVerdict::kClose:
      Close(c, why.c_str());
      return;
  }
  switch (req.op) {
    case store::kSet: return HandleSet(c, req);
    case store::kCheck: return Respond(c, h.id, ZC_OK, data.count(req.key) ? 1 : 0, {});
    case store::kAdd: return HandleAdd(c, req);
    case store::kGet:
    case store::kWait: return HandleGetOrWait(c, &req);
  }
}

void StoreServer::Impl::HandleSet(Client* c, const store::StoreRequest& req) {
  const Header& h = c->hdr;
  const std::string& key = req.key;
  auto it = data.find(key);
  size_t old = it == data.end() ? 0 : key.size() + it->second.size();
  size_t next = data_bytes - old + key.size() + h.value_len;
  if (next > opt.max_data_bytes && next > data_bytes) {
    RespondError(c, h.id, Error(ZC_ERR_NO_MEMORY, "set %s: the store would hold %zu bytes "
                                "of keys and values (limit %zu)",
                                store::QuoteKey(key).c_str(), next, opt.max_data_bytes));
    return;
  }
  data[key].assign(reinterpret_cast<const char*>(req.value), h.value_len);
  data_bytes = next;
  Respond(c, h.id, ZC_OK, 0, {});
  Notify(key);
}

void StoreServer::Impl::HandleAdd(Client* c, const store::StoreRequest& req) {
  const Header& h = c->hdr;
  const std::string& key = req.key;
  int64_t cur = 0;
  auto it = data.find(key);
  if (it != data.end() && !store::ParseCounter(it->second, &cur)) {
    RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG, "add %s: the key holds a value that is not a decimal integer",
                                store::QuoteKey(key).c_str()));
    return;
  }
  int64_t delta = static_cast<int64_t>(h.arg), next;
  if (__builtin_add_overflow(cur, delta, &next)) {
    RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG, "add %s: %lld + %lld overflows", store::QuoteKey(key).c_str(),
                                static_cast<long long>(cur), static_cast<long long>(delta)));
    return;
  }
  std::string text = std::to_string(next);
  data_bytes += text.size() + (it == data.end() ? key.size() : 0);
  data_bytes -= it == data.end() ? 0 : it->second.size();
  data[key] = std::move(text);
  Respond(c, h.id, ZC_OK, static_cast<uint64_t>(next), {});
  Notify(key);
}

void StoreServer::Impl::HandleGetOrWait(Client* c, store::StoreRequest* req) {
  const Header& h = c->hdr;
  Waiter w;
  if (req->op == store::kGet) {
    auto it = data.find(req->key);
    if (it != data.end()) {
      Respond(c, h.id, ZC_OK, 0, it->second);
      return;
    }
    w.keys.push_back(req->key);
  } else {
    std::unordered_set<std::string> seen;
    for (auto& k : req->keys)
      if (seen.insert(k).second) w.keys.push_back(std::move(k));
  }
  for (const auto& k : w.keys)
    if (!data.count(k)) w.missing.insert(k);
  if (w.missing.empty()) {
    Respond(c, h.id, ZC_OK, 0, {});
    return;
  }
  // Timeouts are u64 ms on the wire; clamp absurd values to ~30 days.
  uint64_t ms = std::min<uint64_t>(h.arg, 30ull * 24 * 3600 * 1000);
  w.timeout_s = ms / 1000.0;
  w.deadline = Clock::now() + std::chrono::milliseconds(ms);
  w.client = c->id;
  w.req_id = h.id;
  w.op = req->op;
  uint64_t wid = next_waiter++;
  for (const auto& k : w.missing) key_waiters[k].push_back(wid);
  waiter_deadlines.insert({w.deadline, wid});
  waiters.emplace(wid, std::move(w));
  nwaiters.store(waiters.size());
  c->waiter = wid;
  if (ms == 0) FinishWaiter(wid, true);
}

void StoreServer::Impl::Notify(const std::string& key) {
  auto it = key_waiters.find(key);
  if (it == key_waiters.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  key_waiters.erase(it);
  for (uint64_t wid : ids) {
    auto w = waiters.find(wid);
    if (w == waiters.end()) continue;
    w->second.missing.erase(key);
    if (w->second.missing.empty()) FinishWaiter(wid, false);
  }
}

void StoreServer::Impl::FinishWaiter(uint64_t wid, bool timed_out) {
  auto wit = waiters.find(wid);
  if (wit == waiters.end()) return;
  Waiter w = std::move(wit->second);
  RemoveWaiter(wid);
  auto cit = clients.find(w.client);
  if (cit == clients.end() || cit->second->dead) return;
  Client* c = cit->second.get();
  c->waiter = 0;
  if (!timed_out) {
    if (w.op == store::kGet) Respond(c, w.req_id, ZC_OK, 0, data[w.keys[0]]);
    else Respond(c, w.req_id, ZC_OK, 0, {});
    return;
  }
  std::string msg;
  if (w.op == store::kGet) {
    msg = Format("get %s: timed out after %.3g s: the key was never set",
                 store::QuoteKey(w.keys[0]).c_str(), w.timeout_s);
  } else {
    std::string names;
    int shown = 0;
    for (const auto& k : w.keys) {
      if (!w.missing.count(k)) continue;
      if (shown++ == 8) { names += ", ..."; break; }
      if (!names.empty()) names += ", ";
      names += store::QuoteKey(k);
    }
    msg = Format("wait: timed out after %.3g s: %zu of %zu keys never set: %s",
                 w.timeout_s, w.missing.size(), w.keys.size(), names.c_str());
  }
  Respond(c, w.req_id, ZC_ERR_TIMEOUT, 0, msg);
}

void StoreServer::Impl::RemoveWaiter(uint64_t wid) {
  auto it = waiters.find(wid);
  if (it == waiters.end()) return;
  for (const auto& k : it->second.missing) {
    auto kw = key_waiters.find(k);
    if (kw == key_waiters.end()) continue;
    auto& v = kw->second;
    v.erase(std::remove(v.begin(), v.end(), wid), v.end());
    if (v.empty()) key_waiters.erase(kw);
  }
  waiter_deadlines.erase({it->second.deadline, wid});
  waiters.erase(it);
  nwaiters.store(waiters.size());
}

void StoreServer::Impl::ExpireTimers() {
  auto now = Clock::now();
  while (!waiter_deadlines.empty() && waiter_deadlines.begin()->first <= now)
    FinishWaiter(waiter_deadlines.begin()->second, true);
  for (auto& [id, c] : clients) {
    if (!c->dead && c->auth && c->auth_deadline <= now)
      Refuse(c.get(), Format("no handshake within %.3g s",
                             opt.auth_timeout_s));
  }
}

void StoreServer::Impl::Respond(Client* c, uint32_t req_id, zc_status st,
                                uint64_t arg, const std::string& value) {
  Header h;
  h.op_or_status = static_cast<uint32_t>(st);
  h.id = req_id;
  h.arg = arg;
  h.value_len = static_cast<uint32_t>(value.size());
  uint8_t hb[store::kHeaderBytes];
  store::EncodeHeader(h, hb);
  c->out.append(reinterpret_cast<const char*>(hb), sizeof(hb));
  c->out += value;
  Flush(c);
}

void StoreServer::Impl::Flush(Client* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = send(c->fd, c->out.data() + c->out_off,
                     c->out.size() - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (c->auth) Refuse(c, Format("send failed during the handshake: %s",
                                  strerror(errno)));
    else Close(c, nullptr);
    return;
  }
  c->out.clear();
  c->out_off = 0;
  if (c->out.capacity() > (1u << 20)) std::string().swap(c->out);
}

void StoreServer::Impl::Refuse(Client* c, const std::string& why) {
  if (c->dead) return;
  refused.fetch_add(1);
  LogSuppressed(false);
  if (refusal_log.Admit())
    ZC_WARN(kBootstrap, "store server: refused connection from %s: %s",
            c->peer.c_str(), why.c_str());
  Close(c, nullptr);
}

void StoreServer::Impl::Close(Client* c, const char* why) {
  if (c->dead) return;
  if (why)
    ZC_WARN(kBootstrap, "store server: closing connection from %s: %s",
            c->peer.c_str(), why);
  else
    ZC_TRACE(kBootstrap, "store server: %s disconnected", c->peer.c_str());
  if (c->waiter) RemoveWaiter(c->waiter);
  c->waiter = 0;
  DropPending(c);
  ReleaseInput(c, true);
  close(c->fd);
  c->fd = -1;
  c->dead = true;
  --live;
}

void StoreServer::Impl::CloseAll() {
  for (auto& [id, c] : clients)
    if (!c->dead) close(c->fd);
  clients.clear();
  pending.clear();
  pending_by_src.clear();
  live = 0;
  buffered.store(0);
  waiters.clear();
  waiter_deadlines.clear();
  key_waiters.clear();
  nclients.store(0);
  nwaiters.store(0);
}

Status StoreServer::Start(const std::string& bind_host, int port,
                          const std::string& job_key,
                          std::unique_ptr<StoreServer>* out) {
  Options o;
  o.bind_host = bind_host;
  o.port = port;
  o.job_key = job_key;
  return Start(o, out);
}

Status StoreServer::Start(const Options& options,
                          std::unique_ptr<StoreServer>* out) {
  if (options.auth_timeout_s <= 0)
    return Error(ZC_ERR_INVALID_ARG, "store server: auth_timeout_s must be > 0");
  std::unique_ptr<StoreServer> s(new StoreServer());
  s->impl_ = std::make_unique<Impl>();
  Impl* im = s->impl_.get();
  im->opt = options;
  ZC_RETURN_IF_ERROR(
      net::Listen(options.bind_host, options.port, &im->listen_fd, &im->port)
          .with_context("store server"));
  im->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (im->wake_fd < 0) {
    Status st = SystemError(errno, "store server: eventfd");
    close(im->listen_fd);
    return st;
  }
  std::string host = options.advertise_host;
  if (host.empty()) {
    const std::string& b = options.bind_host;
    if (b.empty() || b == "0.0.0.0" || b == "::") {
      const char* spec = getenv("ZC_SOCKET_IFNAME");
      std::string ip, ifname;
      Status st = net::PickInterfaceAddress(spec ? spec : "", &ip, &ifname);
      if (!st.ok()) {
        ZC_WARN(kBootstrap, "store server: %s; advertising 127.0.0.1",
                st.message().c_str());
        ip = "127.0.0.1";
      }
      host = ip;
    } else {
      host = b;
    }
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  im->address = Format("%s:%d", host.c_str(), im->port);
  im->thread = std::thread([im] { im->Run(); });
  ZC_INFO(kBootstrap, "store server listening on %s", im->address.c_str());
  *out = std::move(s);
  return Status::Ok();
}

int StoreServer::port() const { return impl_->port; }
std::string StoreServer::address() const { return impl_->address; }
uint64_t StoreServer::refused_connections() const {
  return impl_->refused.load();
}
uint64_t StoreServer::num_clients() const { return impl_->nclients.load(); }
uint64_t StoreServer::num_waiters() const { return impl_->nwaiters.load(); }
uint64_t StoreServer::num_authenticated() const { return impl_->nauthed.load(); }
uint64_t StoreServer::buffered_bytes() const { return impl_->buffered.load(); }
uint64_t StoreServer::peak_buffered_bytes() const { return impl_->peak_buffered.load(); }

void StoreServer::Stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->stop.store(true, std::memory_order_release);
  uint64_t one = 1;
  ssize_t n = write(impl_->wake_fd, &one, sizeof(one));
  (void)n;  // the poll loop also wakes every second
  if (impl_->thread.joinable()) impl_->thread.join();
  close(impl_->listen_fd);
  close(impl_->wake_fd);
}

StoreServer::~StoreServer() { Stop(); }

}  // namespace zc
