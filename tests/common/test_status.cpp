// Status: the origin's number rides beside the message (errno, CUresult,
// ibv_wc_status) and survives added context; messages are unchanged.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "common/status.h"

namespace {

using zc::ErrorOrigin;
using zc::Status;

TEST(Status, SystemErrorKeepsErrno) {
  Status st = zc::SystemError(ECONNREFUSED, "rank %d: connect to peer %d", 0, 1);
  EXPECT_EQ(st.code(), ZC_ERR_SYSTEM);
  EXPECT_EQ(st.origin(), ErrorOrigin::kErrno);
  EXPECT_EQ(st.origin_code(), ECONNREFUSED);
  EXPECT_EQ(st.message(), std::string("rank 0: connect to peer 1: ") + strerror(ECONNREFUSED));
}

TEST(Status, ContextKeepsTheOrigin) {
  Status st = zc::SystemError(EPIPE, "send").with_context("rank 2: allreduce #41");
  EXPECT_EQ(st.origin(), ErrorOrigin::kErrno);
  EXPECT_EQ(st.origin_code(), EPIPE);
  EXPECT_EQ(st.message(), std::string("rank 2: allreduce #41: send: ") + strerror(EPIPE));
}

TEST(Status, PlainErrorsHaveNoOrigin) {
  Status st = zc::Error(ZC_ERR_TIMEOUT, "peer %d: no flag after %ds", 3, 5);
  EXPECT_EQ(st.origin(), ErrorOrigin::kNone);
  EXPECT_EQ(st.origin_code(), 0);
  EXPECT_EQ(st.message(), "peer 3: no flag after 5s");
  EXPECT_EQ(Status::Ok().origin(), ErrorOrigin::kNone);
}

TEST(Status, ExplicitOriginsForCudaAndVerbs) {
  Status cu(ZC_ERR_SYSTEM, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY", ErrorOrigin::kCuda, 2);
  EXPECT_EQ(cu.origin(), ErrorOrigin::kCuda);
  EXPECT_EQ(cu.origin_code(), 2);
  Status wc = Status(ZC_ERR_PEER_LOST, "verbs: read failed").with_origin(ErrorOrigin::kVerbs, 12);
  EXPECT_EQ(wc.origin(), ErrorOrigin::kVerbs);
  EXPECT_EQ(wc.origin_code(), 12);
  EXPECT_EQ(wc.message(), "verbs: read failed");
  EXPECT_STREQ(zc::ErrorOriginName(ErrorOrigin::kCuda), "CUresult");
  EXPECT_STREQ(zc::ErrorOriginName(ErrorOrigin::kErrno), "errno");
}

TEST(Status, PeerCodesStillMapToInternal) {
  Status st = zc::StatusFromPeer(999, "store reply");
  EXPECT_EQ(st.code(), ZC_ERR_INTERNAL);
  EXPECT_EQ(st.origin(), ErrorOrigin::kNone);
}

TEST(Status, IgnoreErrorAcceptsAnyStatus) {
  zc::IgnoreError(zc::Error(ZC_ERR_SYSTEM, "x"), "test: best effort");
  zc::IgnoreError(Status::Ok(), "test: nothing to ignore");
  SUCCEED();
}

// A success holds nothing (one pointer); a failure's copies, moves and
// assignments keep code, message and origin apart from the original.
TEST(Status, SuccessIsOnePointer) {
  EXPECT_EQ(sizeof(Status), sizeof(void*));
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), ZC_OK);
  EXPECT_EQ(ok.message(), "");
  EXPECT_TRUE(ok.with_context("rank 0: send").ok());
  EXPECT_EQ(ok.with_context("rank 0: send").message(), "");
}

TEST(Status, CopiesAreIndependent) {
  Status a = zc::SystemError(ETIMEDOUT, "connect");
  Status b = a;
  a = a.with_context("rank 1");
  EXPECT_EQ(b.message(), std::string("connect: ") + strerror(ETIMEDOUT));
  EXPECT_EQ(a.message(), std::string("rank 1: connect: ") + strerror(ETIMEDOUT));
  EXPECT_EQ(b.origin_code(), ETIMEDOUT);
  b = Status::Ok();
  EXPECT_TRUE(b.ok());
  EXPECT_FALSE(a.ok());
  b = a;
  EXPECT_EQ(b.code(), ZC_ERR_SYSTEM);
  EXPECT_EQ(b.origin(), ErrorOrigin::kErrno);
}

TEST(Status, MovesAndSelfAssignment) {
  Status a = zc::Error(ZC_ERR_MISMATCH, "recv of %d bytes", 7);
  Status& same = a;
  a = same;
  EXPECT_EQ(a.message(), "recv of 7 bytes");
  a = std::move(same);
  EXPECT_EQ(a.code(), ZC_ERR_MISMATCH);
  Status b = std::move(a);
  EXPECT_EQ(b.message(), "recv of 7 bytes");
  EXPECT_TRUE(a.ok());  // NOLINT(bugprone-use-after-move): a moved-from status is a success
  Status c;
  c = std::move(b);
  EXPECT_EQ(c.code(), ZC_ERR_MISMATCH);
  static_assert(std::is_nothrow_move_constructible<Status>::value, "moves never throw");
}

// A message given with ZC_OK is kept (some peers report text with success).
TEST(Status, OkWithMessageKeepsIt) {
  Status st(ZC_OK, "note");
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.message(), "note");
  Status copy = st;
  EXPECT_EQ(copy.message(), "note");
}

}  // namespace
