// Mutual challenge-response proving that both ends of a connection know the
// job key (ZC_JOB_KEY), without sending the key.
//
// Wire (each side sends the same shapes, all fixed-size):
//   hello   40 bytes: magic "ZCAU", version u16 LE, role u8, 0, nonce[32]
//   proof   32 bytes: HMAC-SHA256(key, my_role || their_nonce || my_nonce)
//   verdict  1 byte : 1 = your proof was right, 0 = refused
// Both sides send hello at once, so a handshake is about three round trips.
// The role byte in the MAC stops a proof from being reflected back. The magic
// makes a stranger sending garbage fail at the first message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.h"
#include "common/sha256.h"
#include "common/status.h"

namespace zc::net {

enum class AuthRole : uint8_t { kServer = 1, kClient = 2 };

// The protocol as a state machine over whole messages, so that a poll-based
// server can run many handshakes without a thread per connection.
class AuthHandshake {
 public:
  static constexpr size_t kHelloBytes = 40;
  static constexpr size_t kProofBytes = 32;
  static constexpr size_t kVerdictBytes = 1;
  static constexpr uint16_t kVersion = 1;

  AuthHandshake(AuthRole role, const std::string& key);
  // With a given challenge instead of a random one: for tests and the fuzz
  // targets, which replay recorded handshakes (never for real connections).
  AuthHandshake(AuthRole role, const std::string& key, const uint8_t nonce[32]);

  // The hello to send first.
  std::string Start();
  // Size of the next message expected from the peer; 0 once done or failed.
  size_t want() const;
  // Consumes exactly want() bytes. *reply gets bytes to send (possibly a
  // refusal to send before closing, even when an error is returned).
  Status OnMessage(const uint8_t* data, size_t len, std::string* reply);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kHello, kProof, kVerdict, kDone, kFailed };
  Digest256 Proof(AuthRole role, const uint8_t* their_nonce,
                  const uint8_t* my_nonce) const;

  AuthRole role_;
  std::string key_;
  uint8_t nonce_[32];
  uint8_t peer_nonce_[32];
  State state_ = State::kHello;
};

// Blocking handshakes on a connected socket. Failure: ZC_ERR_SYSTEM
// "authentication failed: ..." (ZC_ERR_TIMEOUT if dl passes); the server side
// also logs a warning naming the peer address. Garbage or truncated input is
// an error, never a crash, and nothing waits past dl.
Status AuthServer(int fd, const std::string& key, const Deadline& dl);
Status AuthClient(int fd, const std::string& key, const Deadline& dl);

// Fills buf with len bytes from the kernel's CSPRNG (getrandom).
Status RandomBytes(void* buf, size_t len);

}  // namespace zc::net

namespace zc {
using net::AuthClient;
using net::AuthServer;
}  // namespace zc
