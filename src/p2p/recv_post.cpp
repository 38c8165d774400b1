// Receiver-posted transfers: PostBook, RecvPost and DirectSend; see
// recv_post.h.
#include "p2p/recv_post.h"

#include <cstring>

#include "common/log.h"
#include "common/wakeup.h"
#include "p2p/device.h"
#include "p2p/send_recv.h"

namespace zc {

using namespace p2p_wire;

namespace {

// A token names word `index` at value `value`: never 0, and never the same
// twice (values only grow).
constexpr int kTokenShift = 40;
uint64_t TokenOf(uint32_t index, uint64_t value) {
  return (uint64_t{index} + 1) << kTokenShift | (value & ((uint64_t{1} << kTokenShift) - 1));
}

}  // namespace

bool DirectWanted(Device* dev, int peer, size_t bytes) {
  return bytes >= kTcpDirectMin && dev->transport_to(peer) == TransportKind::kTcp && dev->config().tcp_recv_post;
}

// ---- PostBook ----

PostBook::~PostBook() {
  if (region_) IgnoreError(regions_->Free(region_->data()), "the post flags at teardown");
}

bool PostBook::Take(Word* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!made_) {
    // Once: a failure leaves every receive unposted, as before this protocol.
    made_ = true;
    Status st = regions_->Allocate(kWords * kStride, &region_);
    if (!st.ok()) {
      ZC_INFO(kP2p, "p2p: no memory for posted receives (%s): receives are not posted",
              st.message().c_str());
      region_ = nullptr;
      return false;
    }
    memset(region_->data(), 0, kWords * kStride);
    gen_.assign(kWords, 0);
    for (uint32_t i = kWords; i-- > 0;) free_.push_back(i);
  }
  if (!region_ || free_.empty()) return false;
  const uint32_t i = free_.back();
  free_.pop_back();
  out->index = i;
  out->value = ++gen_[i];
  out->token = TokenOf(i, out->value);
  return true;
}

void PostBook::Give(const Word& w) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(w.index);
}

void PostBook::Retire(const Word& w) {
  retired_.fetch_add(1, std::memory_order_relaxed);
  ZC_INFO(kP2p, "p2p: flag word %u retired (a write may still come into it)", w.index);
}

std::atomic<uint64_t>* PostBook::flag(const Word& w) const {
  return FlagAt(region_, uint64_t{w.index} * kStride);
}

bool AcceptMeta(void* ctx, const ControlPlane::Piece& first) {
  (void)first;
  const auto* a = static_cast<const Arrival*>(ctx);
  // The meta's slot flag was read (acquire) after the payload's flag was
  // stored, when the payload came first: it is seen here.
  return !a->post || !a->post->Landed();
}

bool PostLanded(void* ctx) {
  const auto* a = static_cast<const Arrival*>(ctx);
  return a->post && a->post->Landed();
}

// ---- RecvPost ----

bool RecvPost::Make(Device* dev, int peer, uint32_t context, int tag, void* buf, size_t bytes) {
  LocalRegions& regions = dev->regions();
  MemRegion* region = nullptr;
  RegionHold hold;
  if (regions.IsPoolMemory(buf, bytes)) {
    // The allocation, not its chunk: see LocalRegions::AllocationHolding.
    region = regions.AllocationHolding(buf, bytes);
  } else if (regions.Hold(buf, bytes, &hold).ok() && hold.get() && hold.get()->cached) {
    region = hold.get();  // (not a chunk of the pool beyond Contains' ranges)
  }
  if (!region || !dev->posts().Take(&word_)) return false;
  dev_ = dev;
  peer_ = peer;
  context_ = context;
  tag_ = tag;
  buf_ = buf;
  bytes_ = bytes;
  region_ = region;
  hold_ = std::move(hold);
  return true;
}

void RecvPost::Arm(uint64_t seen) {
  if (!made()) return;
  if (!armed_) {
    entry_.peer = peer_;
    entry_.key = MetaTag(context_, tag_);
    entry_.dst = static_cast<char*>(buf_);
    entry_.bytes = bytes_;
    entry_.token = word_.token;
    entry_.flag = dev_->posts().flag(word_);
    entry_.value = word_.value;
    armed_ = true;
  }
  dev_->offers().Arm(&entry_, seen);
}

bool RecvPost::Disarm() {
  if (armed_) {
    offer_landed_ = dev_->offers().Disarm(&entry_);
    armed_ = false;
  }
  return offer_landed_;
}

void RecvPost::Superseded() {
  stale_ = true;
  // An offer cannot have landed: it would have come before the message
  // taken, on the same connection, and that message would have been left
  // to the next receive (AcceptMeta).
  Disarm();
  if (made()) dev_->offers().NoteOrdinary(peer_, MetaTag(context_, tag_));
}

std::string RecvPost::Message(uint64_t seen) const {
  const PostBook& book = dev_->posts();
  Post p{seen, bytes_, word_.token, region_->offset_of(buf_), uint64_t{word_.index} * PostBook::kStride,
         word_.value};
  std::string msg(reinterpret_cast<const char*>(&p), sizeof(p));
  msg += region_->remote().Serialize();
  msg += book.region()->remote().Serialize();
  return msg;
}

bool RecvPost::Landed() const {
  return made() && dev_->posts().flag(word_)->load(std::memory_order_acquire) >= word_.value;
}

void RecvPost::End() {
  if (!made()) return;
  Disarm();  // no offer lands after this (one being read is waited for)
  PostBook& book = dev_->posts();
  if (!sent_ || stale_ || Landed()) {
    if (Landed()) book.NoteLanded();
    book.Give(word_);
    hold_.reset();
  } else {
    if (!withdrawn_) Withdraw();
    book.Retire(word_);
    // No late write into user memory that may be freed next: the
    // registration goes (waiting out a write in progress, LocalRegions).
    if (hold_.get()) {
      hold_.reset();
      dev_->regions().Deregister(buf_, bytes_);
    }
  }
  word_ = PostBook::Word();
}

void RecvPost::Withdraw() {
  withdrawn_ = true;
  Post p{};
  p.token = word_.token;
  IgnoreError(dev_->control()->Send2(peer_, PostTag(context_, tag_), &p, sizeof(p), nullptr, 0,
                                     Deadline(std::chrono::duration<double>(kWithdrawGrace).count())),
              "withdrawing a post (the peer may be gone; then no write comes)");
}

bool RecvPost::WithdrawAndWait() {
  if (Disarm()) return true;  // an offer landed, perhaps as the deadline passed
  if (!made() || !sent_) return false;
  Withdraw();
  const Deadline grace(std::chrono::duration<double>(kWithdrawGrace).count());
  IgnoreError(dev_->health().WaitFlag(dev_->posts().flag(word_), word_.value, peer_, grace,
                                      "a payload on its way into a withdrawn post"),
              "the receive's own deadline has passed: its error stands");
  return Landed();
}

// ---- DirectSend ----

bool DirectSend::FindPost(Device* dev, int peer, uint32_t context, int tag, size_t bytes, Status* st) {
  std::string msg;
  while (dev->control()->TryRecvNext(peer, PostTag(context, tag), &msg, st)) Take(dev, msg);
  if (have_ && post_.bytes != bytes) have_ = false;
  return have_;
}

void DirectSend::Take(Device* dev, const std::string& msg) {
  Post p;
  if (msg.size() < sizeof(p)) {
    ZC_WARN(kP2p, "p2p: short post (%zu bytes)", msg.size());
    return;
  }
  memcpy(&p, msg.data(), sizeof(p));
  // Its receive took an offer: no write may go into it (a withdrawal of it
  // may still follow, and finds nothing).
  if (dev->offers().TakeConsumed(p.token)) return;
  if (msg.size() == sizeof(p)) {  // a withdrawal
    if (have_ && post_.token == p.token) have_ = false;
    return;
  }
  const size_t d = (msg.size() - sizeof(p)) / 2;
  RemoteRegion data, flag;
  if (msg.size() != sizeof(p) + 2 * d || !RemoteRegion::Parse(msg.substr(sizeof(p), d), &data).ok() ||
      !RemoteRegion::Parse(msg.substr(sizeof(p) + d), &flag).ok()) {
    ZC_WARN(kP2p, "p2p: malformed post (%zu bytes)", msg.size());
    return;
  }
  // The latest post of the tag: an earlier one's receive has ended.
  post_ = p;
  data_ = data;
  flag_ = flag;
  have_ = true;
}

bool DirectSend::PostLikely(Device* dev, int peer, uint32_t context, int tag, size_t bytes) {
  return bytes > EagerLimit(TransportKind::kTcp) || dev->control()->AnsweredLast(peer, MetaTag(context, tag));
}

bool DirectSend::AwaitPost(Device* dev, int peer, uint32_t context, int tag, size_t bytes, Status* st) {
  if (FindPost(dev, peer, context, tag, bytes, st) || !st->ok()) return have_;
  if (!PostLikely(dev, peer, context, tag, bytes)) return false;
  const Clock::time_point until = Clock::now() + kPostWait;
  WaitDriver* driver = dev->health().DriverFor(peer);
  for (;;) {
    // The epoch before the look: a post placed after it ends the sleep.
    const uint32_t epoch = Wakeup::Epoch();
    if (FindPost(dev, peer, context, tag, bytes, st) || !st->ok()) return have_;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    // Driving: the post comes on this peer's sockets, which no other
    // thread may be reading now (tcp_progress.h).
    if (driver) driver->Sleep(epoch, static_cast<int>(left), /*poll_first=*/true);
    else Wakeup::Sleep(epoch, static_cast<int>(left));
  }
}

bool DirectSend::OfferWanted(Device* dev, int peer, uint32_t context, int tag) {
  return dev->control()->OfferWanted(peer, MetaTag(context, tag));
}

Status DirectSend::Offer(Device* dev, int peer, uint32_t context, int tag, const void* buf, size_t bytes,
                         bool* taken) {
  *taken = false;
  PostBook& book = dev->posts();
  PostBook::Word w;
  if (!book.Take(&w)) return Status::Ok();
  // The verdict comes into this word (flag) and the next (the post's token).
  const FlagWrite verdict{&book.region()->remote(), uint64_t{w.index} * PostBook::kStride, w.value};
  const uint64_t key = MetaTag(context, tag);
  const Deadline dl = dev->NewDeadline();
  Status st = dev->control()->Offer(peer, key, [&](uint64_t prev) {
    return dev->channel(peer, 0).WriteOffer(buf, bytes, key, prev, verdict, dl);
  });
  if (st.ok()) st = dev->health().WaitFlag(book.flag(w), w.value, peer, dl, "the receiver's verdict on an offer");
  if (!st.ok()) {
    book.Retire(w);  // a verdict may still come into it
    return st;
  }
  uint64_t token = 0;  // written before the flag, which WaitFlag read with acquire
  memcpy(&token, reinterpret_cast<const char*>(book.flag(w)) + sizeof(uint64_t), sizeof(token));
  book.Give(w);
  dev->control()->NoteOffer(peer, key, token != 0);
  if (token) dev->offers().Consumed(token);
  *taken = token != 0;
  return Status::Ok();
}

Status DirectSend::Write(Device* dev, int peer, uint64_t tag, const void* buf, size_t bytes,
                         const Deadline& dl, bool* fresh) {
  Status st = dev->control()->Answer(peer, tag, post_.seen,
                                     [&] { return WritePayload(dev, peer, buf, bytes, dl); }, fresh);
  have_ = false;  // used, or stale
  return st;
}

Status DirectSend::TryWrite(Device* dev, int peer, uint64_t tag, const void* buf, size_t bytes,
                            const Deadline& dl, bool* ran, bool* fresh) {
  Status st = dev->control()->TryAnswer(peer, tag, post_.seen,
                                        [&] { return WritePayload(dev, peer, buf, bytes, dl); }, ran, fresh);
  if (*ran || !*fresh) have_ = false;
  return st;
}

Status DirectSend::WritePayload(Device* dev, int peer, const void* buf, size_t bytes, const Deadline& dl) {
  const FlagWrite flag{&flag_, post_.flag_offset, post_.flag_value};
  return dev->channel(peer, 0).Write(buf, bytes, data_, post_.data_offset, &flag, dl);
}

}  // namespace zc
