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
#include "common/socket.h"

namespace zc {

using store::Header;


struct StoreServer::Impl {
  struct Client {
    uint64_t id = 0;
    int fd = -1;
    std::string peer;
    std::unique_ptr<net::AuthHandshake> auth;  // null once authenticated
    Clock::time_point auth_deadline;
    std::vector<uint8_t> in;  // the message being read
    size_t in_have = 0;
    bool have_header = false;
    Header hdr;
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
  std::atomic<bool> stopped{false};

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
  void HandleAuth(Client* c);
  void HandleRequest(Client* c);
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
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->second->dead) it = clients.erase(it); else ++it;
    }
    nclients.store(clients.size(), std::memory_order_relaxed);
  }
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
    if (clients.size() >= opt.max_clients) {
      ZC_WARN(kBootstrap, "store server: refusing %s: already %zu clients",
              c->peer.c_str(), clients.size());
      refused.fetch_add(1);
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
    c->in.resize(c->auth->want());
    Client* raw = c.get();
    clients.emplace(c->id, std::move(c));
    ZC_TRACE(kBootstrap, "store server: connection from %s", raw->peer.c_str());
    Flush(raw);
  }
}

bool StoreServer::Impl::ReadMessage(Client* c, size_t need) {
  if (c->in.size() < need) c->in.resize(need);
  while (c->in_have < need) {
    ssize_t n = recv(c->fd, c->in.data() + c->in_have, need - c->in_have,
                     MSG_DONTWAIT);
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
    if (!ReadMessage(c, need)) return;
    HandleRequest(c);
    c->have_header = false;
    c->in_have = 0;
    // Do not keep a 64 MiB buffer around for a client that sent one value.
    if (c->in.capacity() > (1u << 20)) std::vector<uint8_t>().swap(c->in);
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
    ZC_TRACE(kBootstrap, "store server: %s authenticated", c->peer.c_str());
  }
}

void StoreServer::Impl::HandleRequest(Client* c) {
  const Header& h = c->hdr;
  store::Request req;
  std::string why;
  switch (store::ParseRequest(h, c->in.data() + store::kHeaderBytes, &req, &why)) {
    case store::RequestVerdict::kOk: break;
    case store::RequestVerdict::kRefuse:
      RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG, "%s", why.c_str()));
      return;
    case store::RequestVerdict::kClose:
      Close(c, why.c_str());
      return;
  }
  const std::string& key = req.key;
  const uint8_t* vp = req.value;
  uint32_t op = req.op;
  switch (op) {
    case store::kSet:
      data[key].assign(reinterpret_cast<const char*>(vp), h.value_len);
      Respond(c, h.id, ZC_OK, 0, {});
      Notify(key);
      return;
    case store::kCheck:
      Respond(c, h.id, ZC_OK, data.count(key) ? 1 : 0, {});
      return;
    case store::kAdd: {
      int64_t cur = 0;
      auto it = data.find(key);
      if (it != data.end() && !store::ParseCounter(it->second, &cur)) {
        RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG,
                                    "add %s: the key holds a value that is "
                                    "not a decimal integer",
                                    store::QuoteKey(key).c_str()));
        return;
      }
      int64_t delta = static_cast<int64_t>(h.arg), next;
      if (__builtin_add_overflow(cur, delta, &next)) {
        RespondError(c, h.id, Error(ZC_ERR_INVALID_ARG,
                                    "add %s: %lld + %lld overflows",
                                    store::QuoteKey(key).c_str(),
                                    static_cast<long long>(cur),
                                    static_cast<long long>(delta)));
        return;
      }
      data[key] = std::to_string(next);
      Respond(c, h.id, ZC_OK, static_cast<uint64_t>(next), {});
      Notify(key);
      return;
    }
    case store::kGet:
    case store::kWait: {
      Waiter w;
      if (op == store::kGet) {
        auto it = data.find(key);
        if (it != data.end()) {
          Respond(c, h.id, ZC_OK, 0, it->second);
          return;
        }
        w.keys.push_back(key);
      } else {
        std::unordered_set<std::string> seen;
        for (auto& k : req.keys)
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
      w.op = op;
      uint64_t wid = next_waiter++;
      for (const auto& k : w.missing) key_waiters[k].push_back(wid);
      waiter_deadlines.insert({w.deadline, wid});
      waiters.emplace(wid, std::move(w));
      c->waiter = wid;
      if (ms == 0) FinishWaiter(wid, true);
      return;
    }
  }
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
  close(c->fd);
  c->fd = -1;
  c->dead = true;
}

void StoreServer::Impl::CloseAll() {
  for (auto& [id, c] : clients)
    if (!c->dead) close(c->fd);
  clients.clear();
  waiters.clear();
  waiter_deadlines.clear();
  key_waiters.clear();
  nclients.store(0);
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
