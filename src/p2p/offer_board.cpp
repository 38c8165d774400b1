// OfferBoard: see offer_board.h.
#include "p2p/offer_board.h"

#include <algorithm>
#include <thread>

#include "common/log.h"

namespace zc {

void OfferBoard::Arm(Entry* e, uint64_t seen) {
  std::lock_guard<std::mutex> lock(mu_);
  e->seen = seen;
  if (e->state.load(std::memory_order_relaxed) != kIdle) return;  // armed already (or done)
  e->state.store(kArmed, std::memory_order_relaxed);
  armed_.push_back(e);
}

bool OfferBoard::Disarm(Entry* e) {
  std::unique_lock<std::mutex> lock(mu_);
  // A payload on its way into the buffer: bounded by the reader's deadline
  // (ZC_TIMEOUT) or the peer's loss.
  while (e->state.load(std::memory_order_acquire) == kTaken) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  armed_.erase(std::remove(armed_.begin(), armed_.end(), e), armed_.end());
  const bool landed = e->state.load(std::memory_order_relaxed) == kLanded;
  if (e->state.load(std::memory_order_relaxed) == kArmed) e->state.store(kIdle, std::memory_order_relaxed);
  return landed;
}

OfferMatch OfferBoard::Match(int peer, uint64_t key, uint64_t prev, uint64_t bytes, OfferTarget* out) {
  std::lock_guard<std::mutex> lock(mu_);
  // The oldest armed receive of (peer, key): only the next in line arms.
  auto it = std::find_if(armed_.begin(), armed_.end(), [&](Entry* e) { return e->peer == peer && e->key == key; });
  if (it == armed_.end()) return OfferMatch::kLater;
  Entry* e = *it;
  // Its message came straight into its post (the sender's write set the
  // flag before this offer was read, on the same connection): the offer is
  // for a later receive.
  if (e->flag->load(std::memory_order_acquire) >= e->value) {
    armed_.erase(it);
    e->state.store(kIdle, std::memory_order_relaxed);
    return OfferMatch::kLater;
  }
  // A message of the tag went out after the receive's look: the receive
  // takes that one, and the offer is for a later receive.
  if (prev > e->seen) return OfferMatch::kLater;
  if (bytes != e->bytes) return OfferMatch::kRefuse;  // the receive reports the mismatch
  armed_.erase(it);
  e->state.store(kTaken, std::memory_order_relaxed);
  out->dst = e->dst;
  out->token = e->token;
  out->cookie = e;
  return OfferMatch::kTake;
}

void OfferBoard::Ended(const OfferTarget& target, bool landed) {
  auto* e = static_cast<Entry*>(target.cookie);
  std::lock_guard<std::mutex> lock(mu_);
  if (landed) {
    // The receive waits on its post's flag (RecvPost::Landed).
    e->flag->store(e->value, std::memory_order_release);
    if (offered_.size() >= kMaxOffered) offered_.clear();
    offered_.insert({e->peer, e->key});
    landed_.fetch_add(1, std::memory_order_relaxed);
  }
  e->state.store(landed ? kLanded : kFailed, std::memory_order_release);
}

void OfferBoard::NoteRefused(int peer, uint64_t key) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  ZC_TRACE(kP2p, "p2p: an offer from peer %d (key %#llx) was refused: no receive took it in time, or its size "
           "differs; it comes the ordinary way", peer, static_cast<unsigned long long>(key));
}

bool OfferBoard::OfferedLast(int peer, uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return offered_.count({peer, key}) != 0;
}

size_t OfferBoard::offered_keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offered_.size();
}

void OfferBoard::NoteOrdinary(int peer, uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  offered_.erase({peer, key});
}

void OfferBoard::Consumed(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  consumed_.push_back(token);
  if (consumed_.size() > kMaxConsumed) consumed_.pop_front();
}

bool OfferBoard::TakeConsumed(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(consumed_.begin(), consumed_.end(), token);
  if (it == consumed_.end()) return false;
  consumed_.erase(it);
  return true;
}

}  // namespace zc
