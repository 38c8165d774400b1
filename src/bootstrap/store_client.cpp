#include "bootstrap/store_client.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "bootstrap/store_protocol.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/socket.h"

namespace zc {

Status StoreClient::Connect(const std::string& address,
                            const std::string& job_key, const Deadline& dl,
                            std::unique_ptr<StoreClient>* out) {
  std::string host;
  int port = 0;
  ZC_RETURN_IF_ERROR(net::ParseHostPort(address, &host, &port)
                         .with_context("store client"));
  // A busy store (or one shedding a crowd of idle strangers) may close a
  // connection before its handshake completes: try again, with a short
  // deadline per handshake, until kMaxAttempts or dl. A wrong key is final.
  Status last;
  int sleep_ms = 20;
  for (int attempt = 1; attempt <= kMaxConnectAttempts; ++attempt) {
    int fd = -1;
    ZC_RETURN_IF_ERROR(net::Connect(host, port, dl, &fd)
                           .with_context("store client: connect to store"));
    net::ScopedFd guard(fd);
    net::SetNoDelay(fd);
    Deadline attempt_dl(std::min(dl.remaining_s(), kHandshakeSeconds));
    Status st = net::AuthClient(fd, job_key, attempt_dl);
    if (st.ok()) {
      std::unique_ptr<StoreClient> c(new StoreClient());
      c->fd_ = guard.release();
      c->address_ = address;
      *out = std::move(c);
      if (attempt > 1)
        ZC_INFO(kBootstrap, "store at %s: authenticated at attempt %d", address.c_str(),
                attempt);
      return Status::Ok();
    }
    bool retryable = st.code() == ZC_ERR_PEER_LOST ||
                     (st.code() == ZC_ERR_TIMEOUT && !dl.expired());
    const char* what = st.code() == ZC_ERR_TIMEOUT
                           ? "did not complete the handshake in time"
                           : "closed the connection before authentication";
    last = Error(st.code(), "store client: store at %s %s (server busy?): attempt %d of %d: %s",
                 address.c_str(), what, attempt, kMaxConnectAttempts, st.message().c_str());
    if (!retryable) return st.with_context("store client: store at " + address);
    if (dl.expired() || attempt == kMaxConnectAttempts) break;
    ZC_INFO(kBootstrap, "%s; retrying", last.message().c_str());
    int ms = std::min(sleep_ms, dl.remaining_ms());
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    sleep_ms = std::min(sleep_ms * 2, 1000);
  }
  return last;
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) close(fd_);
}

int StoreClient::DupConnection() {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_ >= 0 ? fcntl(fd_, F_DUPFD_CLOEXEC, 0) : -1;
}

void StoreClient::set_op_timeout(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seconds > 0) op_timeout_s_ = seconds;
}

Status StoreClient::CheckKey(const std::string& key, const char* what) const {
  if (key.empty())
    return Error(ZC_ERR_INVALID_ARG, "store %s: empty key", what);
  if (key.size() > store::kMaxKeyBytes)
    return Error(ZC_ERR_INVALID_ARG, "store %s: key of %zu bytes (limit %u)",
                 what, key.size(), store::kMaxKeyBytes);
  return Status::Ok();
}

Status StoreClient::Call(uint32_t op, const std::string& key,
                         const std::string& value, uint64_t arg, double wait_s,
                         const char* what, Reply* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  // A waiting request gets its own timeout plus a grace period: the server
  // answers a timeout itself; our deadline only catches a dead server.
  double limit = wait_s >= 0 ? wait_s + std::min(op_timeout_s_, 30.0)
                             : op_timeout_s_;
  Deadline dl(limit);
  store::Header h;
  h.op_or_status = op;
  h.id = next_id_++;
  h.arg = arg;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = static_cast<uint32_t>(value.size());
  uint8_t hb[store::kHeaderBytes];
  store::EncodeHeader(h, hb);
  iovec iov[3] = {{hb, sizeof(hb)},
                  {const_cast<char*>(key.data()), key.size()},
                  {const_cast<char*>(value.data()), value.size()}};
  Status st = net::SendAllv(fd_, iov, 3, dl);
  uint8_t rb[store::kHeaderBytes];
  if (st.ok()) st = net::RecvAll(fd_, rb, sizeof(rb), dl);
  store::Header r;
  if (st.ok()) {
    r = store::DecodeHeader(rb);
    std::string bad =
        store::CheckReplyHeader(r, h.id, static_cast<uint32_t>(ZC_ERR_INTERNAL));
    if (!bad.empty()) st = Error(ZC_ERR_INTERNAL, "%s", bad.c_str());
  }
  if (st.ok()) {
    reply->value.resize(r.value_len);
    st = net::RecvAll(fd_, reply->value.data(), r.value_len, dl);
  }
  if (!st.ok()) {
    // The stream may now be out of step with the server: never reuse it.
    close(fd_);
    fd_ = -1;
    broken_ = st.with_context(Format("store %s at %s", what, address_.c_str()));
    ZC_WARN(kBootstrap, "%s", broken_.message().c_str());
    return broken_;
  }
  reply->status = r.op_or_status;
  reply->arg = r.arg;
  if (reply->status != ZC_OK)
    return Status(static_cast<zc_status>(reply->status),
                  Format("store at %s: %s", address_.c_str(),
                         reply->value.c_str()));
  return Status::Ok();
}

namespace {
uint64_t TimeoutMs(double s) {
  if (s <= 0) return 0;
  double ms = std::ceil(s * 1000.0);
  return ms > 1e12 ? static_cast<uint64_t>(1e12) : static_cast<uint64_t>(ms);
}
}  // namespace

Status StoreClient::Set(const std::string& key, const std::string& value) {
  ZC_RETURN_IF_ERROR(CheckKey(key, "set"));
  if (value.size() > store::kMaxValueBytes)
    return Error(ZC_ERR_INVALID_ARG, "store set %s: value of %zu bytes (limit "
                 "%u)", store::QuoteKey(key).c_str(), value.size(),
                 store::kMaxValueBytes);
  Reply r;
  return Call(store::kSet, key, value, 0, -1, "set", &r);
}

Status StoreClient::Get(const std::string& key, std::string* value,
                        double timeout_s) {
  ZC_RETURN_IF_ERROR(CheckKey(key, "get"));
  if (!(timeout_s >= 0))
    return Error(ZC_ERR_INVALID_ARG, "store get %s: negative timeout",
                 store::QuoteKey(key).c_str());
  Reply r;
  ZC_RETURN_IF_ERROR(Call(store::kGet, key, {}, TimeoutMs(timeout_s),
                          timeout_s, "get", &r));
  *value = std::move(r.value);
  return Status::Ok();
}

Status StoreClient::Wait(const std::vector<std::string>& keys,
                         double timeout_s) {
  if (keys.empty()) return Status::Ok();
  if (keys.size() > store::kMaxWaitKeys)
    return Error(ZC_ERR_INVALID_ARG, "store wait: %zu keys (limit %u)",
                 keys.size(), store::kMaxWaitKeys);
  for (const auto& k : keys) ZC_RETURN_IF_ERROR(CheckKey(k, "wait"));
  if (!(timeout_s >= 0))
    return Error(ZC_ERR_INVALID_ARG, "store wait: negative timeout");
  std::string list = store::EncodeKeyList(keys);
  if (list.size() > store::kMaxValueBytes)
    return Error(ZC_ERR_INVALID_ARG, "store wait: key list of %zu bytes",
                 list.size());
  Reply r;
  return Call(store::kWait, {}, list, TimeoutMs(timeout_s), timeout_s, "wait",
              &r);
}

Status StoreClient::Add(const std::string& key, int64_t delta,
                        int64_t* new_value) {
  ZC_RETURN_IF_ERROR(CheckKey(key, "add"));
  Reply r;
  ZC_RETURN_IF_ERROR(Call(store::kAdd, key, {}, static_cast<uint64_t>(delta),
                          -1, "add", &r));
  if (new_value) *new_value = static_cast<int64_t>(r.arg);
  return Status::Ok();
}

Status StoreClient::Check(const std::string& key, bool* exists) {
  ZC_RETURN_IF_ERROR(CheckKey(key, "check"));
  Reply r;
  ZC_RETURN_IF_ERROR(Call(store::kCheck, key, {}, 0, -1, "check", &r));
  *exists = r.arg != 0;
  return Status::Ok();
}

}  // namespace zc
