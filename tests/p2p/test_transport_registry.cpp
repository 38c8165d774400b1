// The transport registry and the setup records (p2p/transport_registry.h,
// p2p/peer_info.h), without processes: the choice per pair of ranks that
// Device::ChooseTransports makes from every rank's PeerInfo, the errors of a
// forced ZC_TRANSPORT, and the records' parsing of garbage.
#include <gtest/gtest.h>

#include "p2p/peer_info.h"
#include "p2p/transport_registry.h"

namespace zc {
namespace {

// What a rank on `host` publishes under ZC_TRANSPORT=auto when verbs is (or
// is not) viable there.
PeerInfo Info(const std::string& host, bool verbs, const std::string& why = "no RDMA device found") {
  PeerInfo p;
  p.host = host;
  p.pid = 100;
  p.reach = {{"shm", true, host, ""}, {"tcp", true, host, ""}, {"verbs", verbs, "", verbs ? "" : why}};
  return p;
}

const char* Name(const TransportPlan& plan, int peer) {
  return plan.per_peer[peer] ? plan.per_peer[peer]->name : "none";
}

std::string Used(const TransportPlan& plan) {
  std::string s;
  for (const TransportEntry* e : plan.used) s += std::string(s.empty() ? "" : "+") + e->name;
  return s;
}

TEST(TransportRegistry, TableHasEveryBackendOnce) {
  ASSERT_EQ(TransportTable().size(), 3u);
  for (const char* name : {"shm", "tcp", "verbs"}) {
    const TransportEntry* e = FindTransport(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(FindTransport(e->kind), e);
    EXPECT_STREQ(TransportName(e->kind), name);
  }
  EXPECT_EQ(FindTransport("ib"), nullptr);
}

// The ladder the registry replaced: same host -> shm, else verbs when both
// ranks found it viable, else tcp.
TEST(TransportRegistry, AutoPicksShmThenVerbsThenTcp) {
  std::vector<PeerInfo> all = {Info("a", true), Info("a", true), Info("b", true), Info("c", false)};
  TransportPlan plan;
  ASSERT_TRUE(PlanTransports("auto", 0, all, &plan).ok());
  EXPECT_EQ(plan.per_peer[0], nullptr);
  EXPECT_STREQ(Name(plan, 1), "shm");
  EXPECT_STREQ(Name(plan, 2), "verbs");
  EXPECT_STREQ(Name(plan, 3), "tcp");
  EXPECT_EQ(plan.same_host, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(Used(plan), "shm+tcp+verbs");  // kind order, the order they connect in
  // Rank 2 (host b) has no shm peer, but creates what the job uses.
  ASSERT_TRUE(PlanTransports("auto", 2, all, &plan).ok());
  EXPECT_STREQ(Name(plan, 0), "verbs");
  EXPECT_STREQ(Name(plan, 3), "tcp");
  EXPECT_EQ(Used(plan), "shm+tcp+verbs");
}

TEST(TransportRegistry, OneHostUsesShmOnly) {
  std::vector<PeerInfo> all = {Info("a", false), Info("a", false), Info("a", false)};
  TransportPlan plan;
  ASSERT_TRUE(PlanTransports("auto", 1, all, &plan).ok());
  EXPECT_STREQ(Name(plan, 0), "shm");
  EXPECT_STREQ(Name(plan, 2), "shm");
  EXPECT_EQ(Used(plan), "shm");
}

TEST(TransportRegistry, ForcedTcpEverywhere) {
  std::vector<PeerInfo> all = {Info("a", true), Info("a", true), Info("b", true)};
  TransportPlan plan;
  ASSERT_TRUE(PlanTransports("tcp", 0, all, &plan).ok());
  EXPECT_STREQ(Name(plan, 1), "tcp");
  EXPECT_STREQ(Name(plan, 2), "tcp");
  EXPECT_EQ(Used(plan), "tcp");
}

TEST(TransportRegistry, ForcedShmAcrossHostsFailsOnEveryRank) {
  std::vector<PeerInfo> all = {Info("a", true), Info("a", true), Info("b", true)};
  for (int rank = 0; rank < 3; ++rank) {
    TransportPlan plan;
    Status st = PlanTransports("shm", rank, all, &plan);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
    EXPECT_EQ(st.message(), "ZC_TRANSPORT=shm but ranks 0 and 2 are on different hosts");
  }
}

TEST(TransportRegistry, ForcedVerbsNamesTheRankAndItsReason) {
  std::vector<PeerInfo> all = {Info("a", true), Info("b", false, "mlx5_0 port 1 is DOWN"), Info("c", true)};
  TransportPlan plan;
  Status st = PlanTransports("verbs", 2, all, &plan);
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED);
  EXPECT_EQ(st.message(), "ZC_TRANSPORT=verbs but rank 1 has no usable RDMA device: mlx5_0 port 1 is DOWN");
  all[1] = Info("b", false, "");
  st = PlanTransports("verbs", 0, all, &plan);
  EXPECT_EQ(st.message(), "ZC_TRANSPORT=verbs but rank 1 has no usable RDMA device: no reason given");
  all[1] = Info("b", true);
  ASSERT_TRUE(PlanTransports("verbs", 0, all, &plan).ok());
  EXPECT_STREQ(Name(plan, 1), "verbs");
  EXPECT_EQ(Used(plan), "verbs");
}

// A rank that did not probe an entry (or a record without it) is not viable
// for it: auto falls through to the next entry.
TEST(TransportRegistry, MissingEntryIsNotViable) {
  std::vector<PeerInfo> all = {Info("a", true), Info("b", true)};
  all[1].reach.pop_back();  // no verbs entry
  TransportPlan plan;
  ASSERT_TRUE(PlanTransports("auto", 0, all, &plan).ok());
  EXPECT_STREQ(Name(plan, 1), "tcp");
}

TEST(TransportRegistry, ProbesOnlyWhatMayBeUsed) {
  Config c;
  c.transport = "tcp";
  DomainContext ctx;
  ctx.config = &c;
  ctx.host_id = "host-7";
  auto reach = ProbeTransports(c, ctx);
  ASSERT_EQ(reach.size(), 3u);
  EXPECT_EQ(reach[0].transport, "shm");
  EXPECT_FALSE(reach[0].viable);
  EXPECT_EQ(reach[0].why, "not probed");
  EXPECT_TRUE(reach[1].viable);
  EXPECT_EQ(reach[1].domain, "host-7");
  EXPECT_EQ(reach[2].why, "not probed");
  c.transport = "shm";
  reach = ProbeTransports(c, ctx);
  EXPECT_TRUE(reach[0].viable);
  EXPECT_EQ(reach[0].domain, "host-7");
}

TEST(PeerInfo, RoundTripsAnyBytes) {
  PeerInfo p = Info(std::string("h|o\0st", 6), false, "why|with|bars");
  p.key = std::string(64, 'f');
  p.pid = 4242;
  PeerInfo q;
  ASSERT_TRUE(PeerInfo::Parse(p.Serialize(), &q).ok());
  EXPECT_EQ(q.host, p.host);
  EXPECT_EQ(q.pid, 4242);
  EXPECT_EQ(q.key, p.key);
  ASSERT_EQ(q.reach.size(), 3u);
  EXPECT_EQ(q.Find("verbs")->why, "why|with|bars");
  EXPECT_FALSE(q.Find("verbs")->viable);
  EXPECT_EQ(q.Find("shm")->domain, p.host);
  EXPECT_EQ(q.Find("ib"), nullptr);
}

TEST(PeerInfo, GarbageIsRefusedWithTheReason) {
  PeerInfo q;
  auto message = [&](const std::string& bytes) {
    Status st = PeerInfo::Parse(bytes, &q);
    EXPECT_EQ(st.code(), ZC_ERR_INTERNAL);
    return st.message();
  };
  // The old text record, as a rank of an older build would publish it.
  EXPECT_NE(message("node-3|12345|0||why").find("magic"), std::string::npos);
  std::string good = Info("a", true).Serialize();
  EXPECT_NE(message(good.substr(0, good.size() - 3)).find("field why"), std::string::npos);
  EXPECT_NE(message(good + "x").find("1 trailing bytes"), std::string::npos);
  std::string huge = good;
  huge[5] = '\xff';  // the host field now claims 255 bytes
  EXPECT_NE(message(huge).find("field host claims"), std::string::npos);
  std::string version = good;
  version[4] = 9;
  EXPECT_NE(message(version).find("version 9"), std::string::npos);
  EXPECT_FALSE(PeerInfo::Parse("", &q).ok());
  PeerAddresses a;
  a.entries = {{"tcp", "127.0.0.1:5"}};
  PeerAddresses b;
  ASSERT_TRUE(PeerAddresses::Parse(a.Serialize(), &b).ok());
  EXPECT_EQ(b.Find("tcp"), "127.0.0.1:5");
  EXPECT_EQ(b.Find("verbs"), "");
  EXPECT_FALSE(PeerAddresses::Parse(good, &b).ok());  // a PeerInfo is not an address record
}

}  // namespace
}  // namespace zc
