// OfferBoard (src/p2p/offer_board.h): which armed receive an offer from a
// peer lands in, and when none does. No processes: entries as RecvPost
// fills them, offers as the tcp transport presents them.
#include "p2p/offer_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace {

using zc::OfferBoard;
using zc::OfferMatch;
using zc::OfferTarget;

// A receive of `bytes` from peer under key, with its own buffer and flag.
struct Receive {
  Receive(int peer, uint64_t key, size_t bytes, uint64_t token) : buf(bytes) {
    e.peer = peer;
    e.key = key;
    e.dst = buf.data();
    e.bytes = bytes;
    e.token = token;
    e.flag = &flag;
    e.value = 7;
  }
  std::vector<char> buf;
  std::atomic<uint64_t> flag{0};
  OfferBoard::Entry e;
};

TEST(OfferBoard, ArmedReceiveTakesItsOfferAndLands) {
  OfferBoard board;
  Receive r(1, 0x40, 300, 99);
  OfferTarget t;
  EXPECT_EQ(board.Match(1, 0x40, 5, 300, &t), OfferMatch::kLater);  // not armed yet
  board.Arm(&r.e, 5);
  EXPECT_EQ(board.Match(2, 0x40, 5, 300, &t), OfferMatch::kLater);  // another peer
  EXPECT_EQ(board.Match(1, 0x41, 5, 300, &t), OfferMatch::kLater);  // another tag
  ASSERT_EQ(board.Match(1, 0x40, 5, 300, &t), OfferMatch::kTake);
  EXPECT_EQ(t.dst, r.buf.data());
  EXPECT_EQ(t.token, 99u);
  // Taken: a second offer of the key waits for the next receive.
  OfferTarget t2;
  EXPECT_EQ(board.Match(1, 0x40, 5, 300, &t2), OfferMatch::kLater);
  EXPECT_EQ(r.flag.load(), 0u);
  board.Ended(t, true);
  EXPECT_EQ(r.flag.load(), 7u);  // the receive's post flag: Landed()
  EXPECT_EQ(board.landed(), 1u);
  EXPECT_TRUE(board.OfferedLast(1, 0x40));
  EXPECT_FALSE(board.OfferedLast(2, 0x40));
  EXPECT_TRUE(board.Disarm(&r.e));
  board.NoteOrdinary(1, 0x40);
  EXPECT_FALSE(board.OfferedLast(1, 0x40));
}

// An offer sent after a message of the tag that the receive's look did
// not see belongs to a later receive; the receive takes that message.
TEST(OfferBoard, OfferBehindAnUnseenMessageWaits) {
  OfferBoard board;
  Receive r(1, 0x40, 64, 3);
  board.Arm(&r.e, 10);
  OfferTarget t;
  EXPECT_EQ(board.Match(1, 0x40, 11, 64, &t), OfferMatch::kLater);
  EXPECT_EQ(board.Match(1, 0x40, 10, 64, &t), OfferMatch::kTake);  // exactly up to the look
  board.Ended(t, true);
  // A later look moves the position on.
  Receive r2(1, 0x40, 64, 4);
  board.Arm(&r2.e, 10);
  EXPECT_EQ(board.Match(1, 0x40, 20, 64, &t), OfferMatch::kLater);
  board.Arm(&r2.e, 20);
  EXPECT_EQ(board.Match(1, 0x40, 20, 64, &t), OfferMatch::kTake);
  board.Ended(t, false);  // the payload could not be read
  EXPECT_EQ(r2.flag.load(), 0u);
  EXPECT_FALSE(board.Disarm(&r2.e));
}

TEST(OfferBoard, AnotherSizeIsRefusedAndTheReceiveStaysArmed) {
  OfferBoard board;
  Receive r(1, 0x40, 64, 3);
  board.Arm(&r.e, 0);
  OfferTarget t;
  EXPECT_EQ(board.Match(1, 0x40, 0, 65, &t), OfferMatch::kRefuse);
  EXPECT_EQ(board.Match(1, 0x40, 0, 64, &t), OfferMatch::kTake);
  board.Ended(t, true);
}

// The receive's message came straight into its post (the sender's write
// set the flag): the next offer is not its.
TEST(OfferBoard, ReceiveFilledThroughItsPostTakesNoOffer) {
  OfferBoard board;
  Receive r(1, 0x40, 64, 3);
  board.Arm(&r.e, 0);
  r.flag.store(7);
  OfferTarget t;
  EXPECT_EQ(board.Match(1, 0x40, 0, 64, &t), OfferMatch::kLater);
  EXPECT_FALSE(board.Disarm(&r.e));
  // Disarmed: gone from the board.
  r.flag.store(0);
  EXPECT_EQ(board.Match(1, 0x40, 0, 64, &t), OfferMatch::kLater);
}

// The oldest armed receive of a (peer, key) takes the offer; a disarmed
// one takes none.
TEST(OfferBoard, OldestArmedFirstDisarmedNever) {
  OfferBoard board;
  Receive a(1, 0x40, 64, 1), b(1, 0x40, 64, 2);
  board.Arm(&a.e, 0);
  board.Arm(&b.e, 0);
  EXPECT_FALSE(board.Disarm(&a.e));
  OfferTarget t;
  ASSERT_EQ(board.Match(1, 0x40, 0, 64, &t), OfferMatch::kTake);
  EXPECT_EQ(t.token, 2u);
  board.Ended(t, true);
  EXPECT_TRUE(board.Disarm(&b.e));
}

// Disarm waits while the payload is being read into the buffer.
TEST(OfferBoard, DisarmWaitsForAPayloadBeingRead) {
  OfferBoard board;
  Receive r(1, 0x40, 64, 3);
  board.Arm(&r.e, 0);
  OfferTarget t;
  ASSERT_EQ(board.Match(1, 0x40, 0, 64, &t), OfferMatch::kTake);
  std::atomic<bool> disarmed{false}, result{false};
  std::thread receiver([&] {
    result = board.Disarm(&r.e);
    disarmed = true;
  });
  // The receiver cannot get past Disarm before the payload is in: the
  // reader finishes only once it has seen the receiver waiting there.
  while (r.e.state.load() != OfferBoard::kTaken) std::this_thread::yield();
  for (int i = 0; i < 1000 && !disarmed.load(); ++i) std::this_thread::yield();
  EXPECT_FALSE(disarmed.load());
  board.Ended(t, true);
  receiver.join();
  EXPECT_TRUE(disarmed.load());
  EXPECT_TRUE(result.load());
}

// A program that uses a new tag for every message: the board remembers a
// bounded number of (peer, tag)s whose last message came as an offer.
TEST(OfferBoard, OfferedKeysStayBounded) {
  OfferBoard board;
  for (uint64_t key = 1; key <= 5000; ++key) {
    Receive r(1, key, 8, key);
    board.Arm(&r.e, 0);
    OfferTarget t;
    ASSERT_EQ(board.Match(1, key, 0, 8, &t), OfferMatch::kTake);
    board.Ended(t, true);
    ASSERT_TRUE(board.Disarm(&r.e));
    ASSERT_TRUE(board.OfferedLast(1, key));
  }
  EXPECT_LE(board.offered_keys(), 1024u);
  EXPECT_EQ(board.landed(), 5000u);
}

TEST(OfferBoard, ConsumedPostsAreForgottenOnceSeenOrWhenOld) {
  OfferBoard board;
  board.Consumed(11);
  board.Consumed(12);
  EXPECT_TRUE(board.TakeConsumed(12));
  EXPECT_FALSE(board.TakeConsumed(12));
  EXPECT_FALSE(board.TakeConsumed(13));
  for (uint64_t k = 100; k < 100 + 1000; ++k) board.Consumed(k);
  EXPECT_FALSE(board.TakeConsumed(11));  // pushed out by newer ones
  EXPECT_TRUE(board.TakeConsumed(1099));
  board.NoteRefused(1, 0x40);
  EXPECT_EQ(board.refused(), 1u);
}

}  // namespace
