#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "common/socket.h"

namespace zc::net {
namespace {

constexpr uint8_t kMagic[4] = {'Z', 'C', 'A', 'U'};

const char* RoleName(AuthRole r) {
  return r == AuthRole::kServer ? "server" : "client";
}

Status AuthFailed(const std::string& why) {
  return Error(ZC_ERR_SYSTEM, "authentication failed: %s", why.c_str());
}

}  // namespace

Status RandomBytes(void* buf, size_t len) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError(errno, "getrandom(%zu bytes)", len);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

AuthHandshake::AuthHandshake(AuthRole role, const std::string& key)
    : role_(role), key_(key) {
  memset(peer_nonce_, 0, sizeof(peer_nonce_));
  if (!RandomBytes(nonce_, sizeof(nonce_)).ok()) {
    // getrandom cannot fail on Linux >= 3.17 with a 32-byte request; if it
    // does, a handshake that always fails is the safe outcome.
    memset(nonce_, 0, sizeof(nonce_));
    state_ = State::kFailed;
  }
}

AuthHandshake::AuthHandshake(AuthRole role, const std::string& key, const uint8_t nonce[32])
    : role_(role), key_(key) {
  memset(peer_nonce_, 0, sizeof(peer_nonce_));
  memcpy(nonce_, nonce, sizeof(nonce_));
}

std::string AuthHandshake::Start() {
  std::string h(kHelloBytes, '\0');
  memcpy(h.data(), kMagic, 4);
  h[4] = static_cast<char>(kVersion & 0xff);
  h[5] = static_cast<char>(kVersion >> 8);
  h[6] = static_cast<char>(role_);
  memcpy(h.data() + 8, nonce_, 32);
  return h;
}

size_t AuthHandshake::want() const {
  switch (state_) {
    case State::kHello: return kHelloBytes;
    case State::kProof: return kProofBytes;
    case State::kVerdict: return kVerdictBytes;
    default: return 0;
  }
}

Digest256 AuthHandshake::Proof(AuthRole role, const uint8_t* their_nonce,
                               const uint8_t* my_nonce) const {
  HmacSha256 mac(key_.data(), key_.size());
  uint8_t r = static_cast<uint8_t>(role);
  mac.Update(&r, 1);
  mac.Update(their_nonce, 32);
  mac.Update(my_nonce, 32);
  return mac.Final();
}

Status AuthHandshake::OnMessage(const uint8_t* data, size_t len,
                                std::string* reply) {
  reply->clear();
  if (state_ == State::kFailed)
    return AuthFailed("local random number generator failed");
  if (len != want() || len == 0) {
    state_ = State::kFailed;
    return AuthFailed("internal: unexpected message size");
  }
  AuthRole peer_role =
      role_ == AuthRole::kServer ? AuthRole::kClient : AuthRole::kServer;
  switch (state_) {
    case State::kHello: {
      if (memcmp(data, kMagic, 4) != 0) {
        state_ = State::kFailed;
        return AuthFailed(Format("peer is not a zcomm %s (bad magic %s)",
                                 RoleName(peer_role),
                                 ToHex(data, 4).c_str()));
      }
      uint16_t version = static_cast<uint16_t>(data[4] | (data[5] << 8));
      if (version != kVersion) {
        state_ = State::kFailed;
        return AuthFailed(Format("peer speaks protocol version %u, we speak %u",
                                 version, kVersion));
      }
      if (data[6] != static_cast<uint8_t>(peer_role)) {
        state_ = State::kFailed;
        return AuthFailed(Format("peer claims role %u, expected a %s",
                                 data[6], RoleName(peer_role)));
      }
      memcpy(peer_nonce_, data + 8, 32);
      if (memcmp(peer_nonce_, nonce_, 32) == 0) {
        // Our own hello echoed back: someone reflecting our traffic.
        state_ = State::kFailed;
        return AuthFailed("peer echoed our challenge");
      }
      Digest256 p = Proof(role_, peer_nonce_, nonce_);
      reply->assign(reinterpret_cast<const char*>(p.data()), p.size());
      state_ = State::kProof;
      return Status::Ok();
    }
    case State::kProof: {
      Digest256 expect = Proof(peer_role, nonce_, peer_nonce_);
      bool good = ConstantTimeEqual(expect.data(), data, expect.size());
      reply->assign(1, good ? '\1' : '\0');
      if (!good) {
        state_ = State::kFailed;
        return AuthFailed("peer's proof is wrong (different ZC_JOB_KEY)");
      }
      state_ = State::kVerdict;
      return Status::Ok();
    }
    case State::kVerdict:
      if (data[0] != 1) {
        state_ = State::kFailed;
        return AuthFailed("peer refused our proof (different ZC_JOB_KEY)");
      }
      state_ = State::kDone;
      return Status::Ok();
    default:
      state_ = State::kFailed;
      return AuthFailed("internal: handshake already finished");
  }
}

namespace {

Status RunHandshake(int fd, AuthRole role, const std::string& key,
                    const Deadline& dl) {
  AuthHandshake hs(role, key);
  std::string out = hs.Start();
  Status st = SendAll(fd, out.data(), out.size(), dl);
  uint8_t buf[AuthHandshake::kHelloBytes];
  bool refused = false;  // the handshake's content failed, not the connection
  while (st.ok() && !hs.done()) {
    size_t n = hs.want();
    st = RecvAll(fd, buf, n, dl);
    if (!st.ok()) break;
    st = hs.OnMessage(buf, n, &out);
    refused = !st.ok();
    if (!out.empty()) {
      // A refusal is sent best effort so the peer learns why we close.
      Status s2 = SendAll(fd, out.data(), out.size(), dl);
      if (st.ok()) st = s2;
    }
  }
  if (st.ok()) return st;
  if (role == AuthRole::kClient && !refused && st.code() == ZC_ERR_PEER_LOST) {
    // The server hung up before judging our proof: busy or shedding load,
    // not a key mismatch (which comes as a verdict). Callers may retry.
    return Error(ZC_ERR_PEER_LOST, "the server closed the connection before authentication "
                 "completed (server busy?): %s", st.message().c_str());
  }
  if (st.code() == ZC_ERR_TIMEOUT)
    return Error(ZC_ERR_TIMEOUT, "authentication failed: %s",
                 st.message().c_str());
  if (st.message().rfind("authentication failed", 0) == 0) return st;
  return AuthFailed(st.message());
}

}  // namespace

Status AuthServer(int fd, const std::string& key, const Deadline& dl) {
  // Taken first: once the peer has hung up, getpeername no longer works.
  std::string peer = PeerAddress(fd);
  Status st = RunHandshake(fd, AuthRole::kServer, key, dl);
  if (!st.ok())
    ZC_WARN(kBootstrap, "refused connection from %s: %s", peer.c_str(),
            st.message().c_str());
  return st;
}

Status AuthClient(int fd, const std::string& key, const Deadline& dl) {
  std::string peer = PeerAddress(fd);
  Status st = RunHandshake(fd, AuthRole::kClient, key, dl);
  if (!st.ok()) return st.with_context("to " + peer);
  return st;
}

}  // namespace zc::net
