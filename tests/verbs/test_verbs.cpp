// The verbs transport, unchanged, on the strict verbs emulation: 2-4 "ranks"
// as threads of one process, each with a small fake TransportHost.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/config.h"
#include "p2p/verbs/verbs_transport.h"
#include "verbs_emulation.h"

namespace zc {
namespace {

// The Device's address exchange ("zc.connect"), through a shared in-process table.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::map<int, std::string>> table;
};

class FakeHost : public TransportHost {
 public:
  FakeHost(int rank, int size, Config cfg, Exchange* ex) : rank_(rank), size_(size), cfg_(cfg), ex_(ex) {
    lost_.resize(size);
  }
  ~FakeHost() override {
    for (auto& r : regions_)
      if (t_) t_->Unexpose(r.get());
  }
  TransportSetup setup() const {
    TransportSetup s;
    s.rank = rank_;
    s.size = size_;
    s.config = cfg_;
    return s;
  }
  Status AllGather(const std::string& key, const std::string& mine, std::vector<std::string>* all) {
    std::unique_lock<std::mutex> l(ex_->mu);
    std::string k = key + "." + std::to_string(seq_++);
    ex_->table[k][rank_] = mine;
    ex_->cv.notify_all();
    if (!ex_->cv.wait_for(l, std::chrono::seconds(20), [&] { return static_cast<int>(ex_->table[k].size()) == size_; }))
      return Error(ZC_ERR_TIMEOUT, "allgather %s", k.c_str());
    all->clear();
    for (auto& [r, v] : ex_->table[k]) all->push_back(v);
    return Status::Ok();
  }
  void OnPeerLost(int peer, const Status& why) override {
    std::lock_guard<std::mutex> l(mu_);
    if (lost_[peer].ok()) lost_[peer] = Status(ZC_ERR_PEER_LOST, why.message());
    ++lost_calls_;
  }
  std::shared_mutex& region_use() override { return region_use_; }
  MemRegion* FindLocalRegion(uint64_t id) override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& r : regions_)
      if (r->id() == id) return r.get();
    return nullptr;
  }
  Status HoldLocalRegion(const void* ptr, size_t bytes, RegionHold* out) override {
    MemRegion* r = nullptr;
    ZC_RETURN_IF_ERROR(LocalRegionFor(ptr, bytes, &r));
    *out = RegionHold(nullptr, r, 0);
    return Status::Ok();
  }
  Status LocalRegionFor(const void* ptr, size_t bytes, MemRegion** out) {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& r : regions_)
        if (r->contains(ptr, bytes)) return *out = r.get(), Status::Ok();
    }
    return Expose(const_cast<void*>(ptr), bytes, out);
  }
  Status Health(int peer) const override {
    std::lock_guard<std::mutex> l(mu_);
    if (aborted_) return Error(ZC_ERR_ABORTED, "aborted");
    return peer >= 0 && peer < size_ ? lost_[peer] : Status::Ok();
  }

  Status Expose(void* p, size_t n, MemRegion** out) {
    uint64_t id;
    {
      std::lock_guard<std::mutex> l(mu_);
      id = next_id_++;
    }
    auto r = std::make_unique<MemRegion>(p, n, id);
    r->mutable_remote().transport = TransportKind::kVerbs;
    ZC_RETURN_IF_ERROR(t_->Expose(r.get()));
    std::lock_guard<std::mutex> l(mu_);
    *out = r.get();
    regions_.push_back(std::move(r));
    return Status::Ok();
  }
  int lost_calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return lost_calls_;
  }
  Transport* t_ = nullptr;
  bool aborted_ = false;

 private:
  int rank_, size_;
  Config cfg_;
  Exchange* ex_;
  int seq_ = 0;
  mutable std::mutex mu_;
  std::vector<Status> lost_;
  int lost_calls_ = 0;
  std::vector<std::unique_ptr<MemRegion>> regions_;
  uint64_t next_id_ = 1;
  std::shared_mutex region_use_;
};

Config TestConfig(int qps, int cqs, const char* mode = "imm") {
  Config c;
  c.qps_per_peer = qps;
  c.num_cqs = cqs;
  c.verbs_flag_mode = mode;
  c.timeout_s = 20;
  return c;
}

struct Cluster {
  Exchange ex;
  std::vector<std::unique_ptr<FakeHost>> hosts;
  std::vector<std::unique_ptr<Transport>> ts;

  Cluster(int n, const Config& cfg) {
    for (int r = 0; r < n; ++r) {
      Config c = cfg;
      c.rank = r;
      c.size = n;
      hosts.push_back(std::make_unique<FakeHost>(r, n, c, &ex));
    }
    ts.resize(n);
  }
  Status Start() {
    for (size_t r = 0; r < hosts.size(); ++r) {
      ZC_RETURN_IF_ERROR(CreateVerbsTransportWith(hosts[r].get(), hosts[r]->setup(), emu::Api(), &ts[r]));
      hosts[r]->t_ = ts[r].get();
    }
    std::vector<Status> st(hosts.size());
    std::vector<std::thread> th;
    for (size_t r = 0; r < hosts.size(); ++r)
      th.emplace_back([&, r] {
        std::vector<int> peers;
        for (size_t p = 0; p < hosts.size(); ++p)
          if (p != r) peers.push_back(static_cast<int>(p));
        // Listen, exchange, connect: what Device::ConnectTransports does.
        LinkPlan plan;
        plan.peers = peers;
        std::string mine;
        std::vector<std::string> all;
        st[r] = ts[r]->Listen(plan, &mine);
        if (st[r].ok()) st[r] = hosts[r]->AllGather("zc.verbs", mine, &all);
        if (st[r].ok()) st[r] = ts[r]->Connect(all);
      });
    for (auto& t : th) t.join();
    for (auto& s : st) ZC_RETURN_IF_ERROR(s);
    return Status::Ok();
  }
  Connection* conn(int from, int to, int i = 0) { return ts[from]->connection(to, i); }
  ~Cluster() {
    for (auto& t : ts)
      if (t) t->Shutdown();
    hosts.clear();  // unexposes
    ts.clear();
  }
};

// Buffers with guard bytes and a region registered through Expose.
struct Buf {
  std::vector<uint8_t> mem;
  MemRegion* region = nullptr;
  Buf(FakeHost* h, size_t n) : mem(n + 64, 0) { EXPECT_TRUE(h->Expose(mem.data(), mem.size(), &region).ok()); }
  uint8_t* data() { return mem.data(); }
  std::atomic<uint64_t>* word(size_t off) { return reinterpret_cast<std::atomic<uint64_t>*>(mem.data() + off); }
};

uint8_t Pattern(int rank, int index, size_t i) { return static_cast<uint8_t>(rank * 31 + index * 7 + i * 13 + (i >> 8)); }

bool WaitWord(std::atomic<uint64_t>* w, uint64_t v, double s = 20) {
  Deadline dl(s);
  Backoff b;
  while (w->load(std::memory_order_acquire) < v) {
    if (dl.expired()) return false;
    b.Pause();
  }
  return true;
}

void ExpectClean(bool overrun_expected = false) {
  emu::Stats s = emu::GetStats();
  EXPECT_EQ(s.qps, 0);
  EXPECT_EQ(s.mrs, 0);
  EXPECT_EQ(s.cqs, 0);
  EXPECT_EQ(s.pds, 0);
  EXPECT_EQ(s.cm_ids, 0);
  EXPECT_EQ(s.event_channels, 0);
  EXPECT_EQ(s.comp_channels, 0);
  EXPECT_EQ(s.contexts, 0);
  EXPECT_EQ(s.post_send_enomem, 0u) << "the transport overran a send queue";
  EXPECT_EQ(s.cq_overruns, overrun_expected ? 1u : 0u);
  for (auto& v : s.violations) ADD_FAILURE() << "emulation violation: " << v;
}

emu::DeviceSpec Dev(const char* name = "mlx5_0", const char* ip = "10.77.0.1") {
  emu::DeviceSpec d;
  d.name = name;
  d.ip = ip;
  return d;
}

// ------------------------------------------------------------------ viability
TEST(VerbsViable, NoDeviceVerbs) {
  emu::Reset({});
  std::string why;
  EXPECT_FALSE(VerbsViable(emu::Api(), TestConfig(1, 1), &why));
  EXPECT_NE(why.find("no RDMA device found"), std::string::npos) << why;
  FakeHost h(0, 2, TestConfig(1, 1), nullptr);
  std::unique_ptr<Transport> t;
  Status st = CreateVerbsTransportWith(&h, h.setup(), emu::Api(), &t);
  EXPECT_EQ(st.code(), ZC_ERR_UNSUPPORTED) << st.message();
  ExpectClean();
}

TEST(VerbsViable, PortDownVerbs) {
  auto d = Dev();
  d.state = IBV_PORT_DOWN;
  emu::Reset({d});
  std::string why;
  EXPECT_FALSE(VerbsViable(emu::Api(), TestConfig(1, 1), &why));
  EXPECT_NE(why.find("mlx5_0 port 1 is DOWN"), std::string::npos) << why;
  Config c = TestConfig(1, 1);
  c.ib_port = 2;
  d.state = IBV_PORT_ACTIVE;
  emu::Reset({d});
  EXPECT_FALSE(VerbsViable(emu::Api(), c, &why));
  EXPECT_NE(why.find("ZC_IB_PORT=2"), std::string::npos) << why;
  c = TestConfig(1, 1);
  c.ib_device = "mlx5_9";
  EXPECT_FALSE(VerbsViable(emu::Api(), c, &why));
  EXPECT_NE(why.find("ZC_IB_DEVICE=mlx5_9"), std::string::npos) << why;
  c.ib_device = "mlx5_0";
  EXPECT_TRUE(VerbsViable(emu::Api(), c, &why)) << why;
  ExpectClean();
}

TEST(VerbsViable, SkipsDownDeviceAndPicksActiveVerbs) {
  auto a = Dev("mlx5_0", "10.77.0.1"), b = Dev("mlx5_1", "10.77.1.1");
  a.state = IBV_PORT_INIT;
  emu::Reset({a, b});
  std::string why;
  EXPECT_TRUE(VerbsViable(emu::Api(), TestConfig(1, 1), &why)) << why;
  ExpectClean();
}

TEST(VerbsViable, RealLibraryOnThisMachineVerbs) {
  std::string why;
  bool ok = VerbsViable(nullptr, TestConfig(1, 1), &why);
  if (ok) GTEST_SKIP() << "this machine has a usable RDMA device";
  EXPECT_FALSE(why.empty());
  printf("real verbs not viable here: %s\n", why.c_str());
}

// ------------------------------------------------------------------ writes
void RunWriteSizes(const char* mode, bool trailing_flag) {
  emu::Reset({Dev()});
  {
    Cluster c(3, TestConfig(2, 2, mode));
    ASSERT_TRUE(c.Start().ok());
    const std::vector<size_t> sizes = {0, 1, 7, 4095, 4096, 4097, (1u << 20) + 3};
    const size_t slot = (1u << 20) + 64;
    // Each rank owns one receive slot per sender: payload at an odd offset, flag after.
    std::vector<std::vector<std::unique_ptr<Buf>>> dst(3);
    std::vector<std::vector<std::unique_ptr<Buf>>> src(3);
    for (int r = 0; r < 3; ++r)
      for (int p = 0; p < 3; ++p) {
        dst[r].push_back(std::make_unique<Buf>(c.hosts[r].get(), slot + 64));
        src[r].push_back(std::make_unique<Buf>(c.hosts[r].get(), slot + 64));
      }
    std::vector<std::thread> th;
    std::atomic<int> errors{0};
    for (int r = 0; r < 3; ++r)
      th.emplace_back([&, r] {
        for (int p = 0; p < 3; ++p) {
          if (p == r) continue;
          Buf& d = *dst[p][r];
          Buf& s = *src[r][p];
          for (size_t k = 0; k < sizes.size(); ++k) {
            size_t n = sizes[k];
            size_t off = 3 + k;               // unaligned destination
            uint8_t* sp = s.data() + 5 + k;   // unaligned source
            for (size_t i = 0; i < n; ++i) sp[i] = Pattern(r, static_cast<int>(k), i);
            // Flag: right behind the payload (8-aligned) or at the slot's tail.
            size_t flag_off = trailing_flag ? ((off + n + 7) & ~size_t{7}) : slot;
            size_t pay_off = trailing_flag ? flag_off - n : off;
            FlagWrite f{&d.region->remote(), flag_off, k + 1};
            Status st = c.conn(r, p, static_cast<int>(k) % 2)->Write(sp, n, d.region->remote(), pay_off, &f, Deadline(20));
            if (!st.ok()) {
              ADD_FAILURE() << st.message();
              ++errors;
              return;
            }
            // Receiver side check (done by the writer thread; the data is in p's memory).
            if (!WaitWord(d.word(flag_off), k + 1)) {
              ADD_FAILURE() << "flag " << k + 1 << " never arrived at rank " << p << " from " << r
                            << " (flag word holds " << d.word(flag_off)->load() << ")";
              ++errors;
              return;
            }
            for (size_t i = 0; i < n; ++i)
              if (d.data()[pay_off + i] != Pattern(r, static_cast<int>(k), i)) {
                ADD_FAILURE() << "rank " << r << "->" << p << " size " << n << " byte " << i;
                ++errors;
                return;
              }
          }
        }
      });
    for (auto& t : th) t.join();
    EXPECT_EQ(errors.load(), 0);
    for (auto& h : c.hosts) EXPECT_EQ(h->lost_calls(), 0);
  }
  ExpectClean();
}

TEST(VerbsWrite, SizesWithImmFlagsVerbs) { RunWriteSizes("imm", false); }
TEST(VerbsWrite, SizesOrderedTrailingFlagVerbs) { RunWriteSizes("ordered", true); }
TEST(VerbsWrite, SizesOrderedFallsBackToImmVerbs) { RunWriteSizes("ordered", false); }

TEST(VerbsWrite, LargeWritesSplitAtMaxMessageVerbs) {
  auto d = Dev();
  d.max_msg_sz = 64 << 10;
  d.max_inline = 0;  // no inline: every flag goes through the staging buffer
  emu::Reset({d});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    size_t n = (1u << 20) + 3;
    Buf s(c.hosts[0].get(), n), r(c.hosts[1].get(), n + 16), back(c.hosts[0].get(), n);
    for (size_t i = 0; i < n; ++i) s.data()[i] = Pattern(0, 9, i);
    FlagWrite f{&r.region->remote(), n + 8 - (n % 8) , 1};
    ASSERT_TRUE(c.conn(0, 1)->Write(s.data(), n, r.region->remote(), 0, &f, Deadline(20)).ok());
    ASSERT_TRUE(WaitWord(r.word(f.offset), 1));
    EXPECT_EQ(memcmp(s.data(), r.data(), n), 0);
    ASSERT_TRUE(c.conn(0, 1)->Read(back.data(), n, r.region->remote(), 0, Deadline(20)).ok());
    EXPECT_EQ(memcmp(s.data(), back.data(), n), 0);
    EXPECT_GE(emu::GetStats().writes, 17u);
  }
  ExpectClean();
}

TEST(VerbsWrite, ManyWritersOnSeveralQpsAndCqThreadsVerbs) {
  emu::Reset({Dev()});
  {
    const int n = 4, qps = 4, per = 200;
    Cluster c(n, TestConfig(qps, 3));
    ASSERT_TRUE(c.Start().ok());
    // dst[r]: one 4 KiB lane + flag per (sender, qp).
    const size_t lane = 4096 + 64;
    std::vector<std::unique_ptr<Buf>> dst;
    for (int r = 0; r < n; ++r) dst.push_back(std::make_unique<Buf>(c.hosts[r].get(), lane * n * qps));
    std::vector<std::thread> th;
    std::atomic<int> errors{0};
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (int q = 0; q < qps; ++q) {
          if (p == r) continue;
          th.emplace_back([&, r, p, q] {
            std::vector<uint8_t> src(4096);
            size_t base = (static_cast<size_t>(r) * qps + q) * lane;
            for (int k = 1; k <= per; ++k) {
              size_t len = 1 + (k * 37 + q) % 4096;
              for (size_t i = 0; i < len; ++i) src[i] = Pattern(r, k + q, i);
              FlagWrite f{&dst[p]->region->remote(), base + 4096 + 8, static_cast<uint64_t>(k)};
              Status st = c.conn(r, p, q)->Write(src.data(), len, dst[p]->region->remote(), base, &f, Deadline(20));
              if (!st.ok()) {
                ADD_FAILURE() << st.message();
                ++errors;
                return;
              }
              // Wait until the receiver saw it before reusing the lane (a credit).
              if (!WaitWord(dst[p]->word(base + 4096 + 8), k)) {
                ++errors;
                return;
              }
              if (memcmp(dst[p]->data() + base, src.data(), len) != 0) {
                ADD_FAILURE() << r << "->" << p << " qp " << q << " write " << k;
                ++errors;
                return;
              }
            }
          });
        }
    for (auto& t : th) t.join();
    EXPECT_EQ(errors.load(), 0);
  }
  ExpectClean();
}

TEST(VerbsWrite, TenThousandFlagsInARowVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    Buf d(c.hosts[1].get(), 64), s(c.hosts[0].get(), 64);
    // Flag-only writes, never waiting for the receiver: queues must not overrun.
    for (uint64_t k = 1; k <= 10000; ++k) {
      FlagWrite f{&d.region->remote(), 8, k};
      Status st = c.conn(0, 1)->Write(nullptr, 0, d.region->remote(), 0, &f, Deadline(20));
      ASSERT_TRUE(st.ok()) << "flag " << k << ": " << st.message();
    }
    ASSERT_TRUE(WaitWord(d.word(8), 10000));
    // And small payloads with flags.
    for (uint64_t k = 1; k <= 2000; ++k) {
      memcpy(s.data(), &k, 8);
      FlagWrite f{&d.region->remote(), 16, k};
      ASSERT_TRUE(c.conn(0, 1)->Write(s.data(), 8, d.region->remote(), 0, &f, Deadline(20)).ok());
    }
    ASSERT_TRUE(WaitWord(d.word(16), 2000));
    uint64_t v;
    memcpy(&v, d.data(), 8);
    EXPECT_EQ(v, 2000u);
    emu::Stats st = emu::GetStats();
    EXPECT_EQ(st.post_send_enomem, 0u);
    EXPECT_LE(st.max_sq_occupied, 256u);
    EXPECT_GE(st.imms, 12000u);
  }
  ExpectClean();
}

// ------------------------------------------------------------------ reads
TEST(VerbsRead, DynamicPlacementReadVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(2, 2));
    ASSERT_TRUE(c.Start().ok());
    // Rank 0 (sender) has a tensor; rank 1 (receiver) has a meta slot.
    const size_t n = 300001;
    Buf tensor(c.hosts[0].get(), n), ack(c.hosts[0].get(), 64);
    for (size_t i = 0; i < n; ++i) tensor.data()[i] = Pattern(0, 1, i);
    struct Meta {
      uint64_t bytes;
      char desc[256];
      uint64_t flag;
    };
    Buf meta(c.hosts[1].get(), sizeof(Meta));
    std::string d = tensor.region->remote().Serialize();
    Meta m{};
    m.bytes = n;
    ASSERT_LE(d.size(), sizeof(m.desc));
    memcpy(m.desc, d.data(), d.size());
    FlagWrite f{&meta.region->remote(), offsetof(Meta, flag), 1};
    ASSERT_TRUE(c.conn(0, 1)->Write(&m, offsetof(Meta, flag), meta.region->remote(), 0, &f, Deadline(20)).ok());
    // Receiver: waits for the meta, allocates, reads with a one-sided read, acks.
    ASSERT_TRUE(WaitWord(meta.word(offsetof(Meta, flag)), 1));
    Meta got;
    memcpy(&got, meta.data(), sizeof(got));
    RemoteRegion src;
    ASSERT_TRUE(RemoteRegion::Parse(std::string(got.desc, d.size()), &src).ok());
    std::vector<uint8_t> dst(got.bytes + 1);  // user memory: registered on demand
    ASSERT_TRUE(c.conn(1, 0, 1)->Read(dst.data() + 1, got.bytes, src, 0, Deadline(20)).ok());
    EXPECT_EQ(memcmp(dst.data() + 1, tensor.data(), n), 0);
    FlagWrite a{&ack.region->remote(), 0, 1};
    ASSERT_TRUE(c.conn(1, 0, 1)->Write(nullptr, 0, ack.region->remote(), 0, &a, Deadline(20)).ok());
    ASSERT_TRUE(WaitWord(ack.word(0), 1));
    // A partial read at an offset.
    std::vector<uint8_t> part(1000);
    ASSERT_TRUE(c.conn(1, 0)->Read(part.data(), 1000, src, 12345, Deadline(20)).ok());
    EXPECT_EQ(memcmp(part.data(), tensor.data() + 12345, 1000), 0);
    EXPECT_GE(emu::GetStats().reads, 2u);
  }
  ExpectClean();
}

// ------------------------------------------------------------------ errors
struct FaultCase {
  emu::Fault fault;
  zc_status code;
  const char* text;
  bool peer_lost;
};

TEST(VerbsErrors, InjectedFaultsSurfaceVerbs) {
  const FaultCase cases[] = {
      {emu::Fault::kRetryExceeded, ZC_ERR_PEER_LOST, "transport retry counter exceeded", true},
      {emu::Fault::kRemoteAccess, ZC_ERR_SYSTEM, "remote access error", false},
      {emu::Fault::kQpError, ZC_ERR_PEER_LOST, "Flushed", true},
      {emu::Fault::kCqOverrun, ZC_ERR_SYSTEM, "completion queue", true},
  };
  for (const auto& fc : cases) {
    SCOPED_TRACE(fc.text);
    emu::Reset({Dev()});
    {
      Cluster c(2, TestConfig(2, 2));
      ASSERT_TRUE(c.Start().ok());
      Buf d(c.hosts[1].get(), 8192), s(c.hosts[0].get(), 8192);
      FlagWrite f{&d.region->remote(), 4096, 1};
      ASSERT_TRUE(c.conn(0, 1, 1)->Write(s.data(), 4096, d.region->remote(), 0, &f, Deadline(20)).ok());
      emu::InjectOnNextSend(fc.fault);
      f.value = 2;
      Status st = c.conn(0, 1, 1)->Write(s.data(), 4096, d.region->remote(), 0, &f, Deadline(20));
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), fc.code) << st.message();
      EXPECT_NE(st.message().find(fc.text), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("peer 1"), std::string::npos) << st.message();
      uint32_t qpn = emu::LastFaultQp();
      EXPECT_EQ(qpn, VerbsQpNumber(c.conn(0, 1, 1)));
      EXPECT_NE(st.message().find("QP " + std::to_string(qpn)), std::string::npos) << st.message();
      // The connection stays failed; the host heard of fatal ones.
      Status again = c.conn(0, 1, 1)->Write(s.data(), 16, d.region->remote(), 0, nullptr, Deadline(5));
      EXPECT_FALSE(again.ok());
      EXPECT_EQ(c.hosts[0]->lost_calls() > 0, fc.peer_lost) << st.message();
    }
    ExpectClean(fc.fault == emu::Fault::kCqOverrun);
  }
}

TEST(VerbsErrors, OutOfRangeAndWrongKeyRejectedVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    Buf d(c.hosts[1].get(), 4096), s(c.hosts[0].get(), 8192);
    // Caught before posting: the range lies outside the descriptor.
    Status st = c.conn(0, 1)->Write(s.data(), 100, d.region->remote(), d.region->size() - 50, nullptr, Deadline(5));
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << st.message();
    std::vector<uint8_t> tmp(100);
    st = c.conn(0, 1)->Read(tmp.data(), 100, d.region->remote(), d.region->size(), Deadline(5));
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << st.message();
    // A forged descriptor (bigger than the registration): the NIC refuses.
    RemoteRegion forged = d.region->remote();
    forged.size += 1 << 20;
    st = c.conn(0, 1)->Write(s.data(), 8000, forged, 0, nullptr, Deadline(5));
    EXPECT_EQ(st.code(), ZC_ERR_SYSTEM) << st.message();
    EXPECT_NE(st.message().find("remote access error"), std::string::npos) << st.message();
    // The completion's status rides beside the message.
    EXPECT_EQ(st.origin(), ErrorOrigin::kVerbs) << st.message();
    EXPECT_EQ(st.origin_code(), static_cast<int>(IBV_WC_REM_ACCESS_ERR)) << st.message();
    EXPECT_NE(st.message().find("peer 1"), std::string::npos) << st.message();
  }
  ExpectClean();
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    Buf d(c.hosts[1].get(), 4096), s(c.hosts[0].get(), 4096);
    RemoteRegion wrong = d.region->remote();
    wrong.access_key ^= 0x100;
    std::vector<uint8_t> tmp(4096);
    Status st = c.conn(0, 1)->Read(tmp.data(), 4096, wrong, 0, Deadline(5));
    EXPECT_EQ(st.code(), ZC_ERR_SYSTEM) << st.message();
    EXPECT_NE(st.message().find("remote access error"), std::string::npos) << st.message();
  }
  ExpectClean();
}

TEST(VerbsErrors, PeerShutdownIsNotALossVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(2, 1));
    ASSERT_TRUE(c.Start().ok());
    Buf d(c.hosts[1].get(), 64), s(c.hosts[0].get(), 64);
    FlagWrite f{&d.region->remote(), 0, 1};
    ASSERT_TRUE(c.conn(0, 1)->Write(nullptr, 0, d.region->remote(), 0, &f, Deadline(5)).ok());
    c.ts[1]->Shutdown();
    // Writes to a peer that left fail; the peer is not reported lost.
    Status st;
    Deadline dl(10);
    do {
      st = c.conn(0, 1)->Write(s.data(), 8, d.region->remote(), 0, nullptr, Deadline(5));
    } while (st.ok() && !dl.expired());
    EXPECT_EQ(st.code(), ZC_ERR_PEER_LOST) << st.message();
    EXPECT_EQ(c.hosts[0]->lost_calls(), 0) << st.message();
  }
  ExpectClean();
}

TEST(VerbsErrors, HealthFailsWaitsVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    Buf d(c.hosts[1].get(), 64);
    c.hosts[0]->aborted_ = true;
    FlagWrite f{&d.region->remote(), 0, 1};
    EXPECT_EQ(c.conn(0, 1)->Write(nullptr, 0, d.region->remote(), 0, &f, Deadline(5)).code(), ZC_ERR_ABORTED);
    c.hosts[0]->aborted_ = false;
  }
  ExpectClean();
}

TEST(VerbsSetup, StrangerIsRejectedVerbs) {
  emu::Reset({Dev()});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    // The listen address of rank 1, as published in the exchange.
    std::string rec;
    for (auto& [k, v] : c.ex.table)
      if (k.rfind("zc.verbs", 0) == 0) rec = v[1];
    ASSERT_FALSE(rec.empty());
    std::string ip = rec.substr(0, rec.find(':'));
    int port = atoi(rec.c_str() + rec.find(':') + 1);
    const VerbsApi* api = emu::Api();
    rdma_event_channel* ch = api->create_event_channel();
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(api->create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, ip.c_str(), &dst.sin_addr);
    ASSERT_EQ(api->resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 1000), 0);
    auto next = [&](rdma_cm_event_type want) {
      pollfd p{ch->fd, POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, 5000), 1);
      rdma_cm_event* ev = nullptr;
      EXPECT_EQ(api->get_cm_event(ch, &ev), 0);
      EXPECT_EQ(ev->event, want) << api->event_str(ev->event);
      api->ack_cm_event(ev);
    };
    next(RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(api->resolve_route(id, 1000), 0);
    next(RDMA_CM_EVENT_ROUTE_RESOLVED);
    ibv_pd* pd = api->alloc_pd(id->verbs);
    ibv_cq* cq = api->create_cq(id->verbs, 16, nullptr, nullptr, 0);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ASSERT_EQ(api->create_qp(id, pd, &a), 0);
    char junk[40] = "let me in";
    rdma_conn_param p{};
    p.private_data = junk;
    p.private_data_len = sizeof(junk);
    ASSERT_EQ(api->connect(id, &p), 0);
    next(RDMA_CM_EVENT_REJECTED);
    api->destroy_qp(id);
    api->destroy_id(id);
    api->destroy_cq(cq);
    api->dealloc_pd(pd);
    api->destroy_event_channel(ch);
    // The job goes on.
    Buf d(c.hosts[1].get(), 64);
    FlagWrite f{&d.region->remote(), 0, 7};
    ASSERT_TRUE(c.conn(0, 1)->Write(nullptr, 0, d.region->remote(), 0, &f, Deadline(5)).ok());
    EXPECT_TRUE(WaitWord(d.word(0), 7));
  }
  ExpectClean();
}

// ------------------------------------------------------------------ memory
TEST(VerbsMemory, RegistrationSlicesAndMemlockVerbs) {
  auto dev = Dev();
  dev.memlock_bytes = 1 << 20;
  emu::Reset({dev});
  {
    Cluster c(2, TestConfig(1, 1));
    ASSERT_TRUE(c.Start().ok());
    Transport* t = c.ts[0].get();
    std::vector<uint8_t> chunk(256 << 10);
    MemRegion parent(chunk.data(), chunk.size(), 100);
    ASSERT_TRUE(t->Expose(&parent).ok());
    EXPECT_NE(parent.remote().access_key, 0u);
    EXPECT_EQ(parent.remote().addr, reinterpret_cast<uintptr_t>(chunk.data()));
    MemRegion slice(chunk.data() + 4096, 8192, 101);
    slice.parent = &parent;
    ASSERT_TRUE(t->Expose(&slice).ok());
    EXPECT_EQ(slice.remote().access_key, parent.remote().access_key);
    EXPECT_EQ(VerbsLocalKey(slice), VerbsLocalKey(parent));
    EXPECT_EQ(slice.remote().addr, reinterpret_cast<uintptr_t>(chunk.data() + 4096));
    int mrs = emu::GetStats().mrs;
    t->Unexpose(&slice);
    EXPECT_EQ(emu::GetStats().mrs, mrs);  // the slice owns no registration
    // Beyond the locked-memory limit.
    std::vector<uint8_t> big(2 << 20);
    MemRegion huge(big.data(), big.size(), 102);
    Status st = t->Expose(&huge);
    EXPECT_EQ(st.code(), ZC_ERR_NO_MEMORY) << st.message();
    EXPECT_NE(st.message().find("ulimit -l"), std::string::npos) << st.message();
    t->Unexpose(&parent);
    EXPECT_EQ(emu::GetStats().mrs, mrs - 1);
    // GPUDirect hooks (the emulation treats the "device" pointer as host memory).
    std::vector<uint8_t> gpu(65536);
    MemRegion g1(gpu.data(), gpu.size(), 103), g2(gpu.data(), gpu.size(), 104);
    ASSERT_TRUE(VerbsRegisterDeviceMemory(t, gpu.data(), gpu.size(), 42, &g1).ok());
    ASSERT_TRUE(VerbsRegisterDeviceMemory(t, gpu.data(), gpu.size(), -1, &g2).ok());
    EXPECT_NE(g1.remote().access_key, g2.remote().access_key);
    // A peer writes into the "device memory" registration; the flag is in host memory.
    Buf flag(c.hosts[0].get(), 64), src(c.hosts[1].get(), 4096);
    memset(src.data(), 0xab, 4096);
    FlagWrite f{&flag.region->remote(), 0, 1};
    ASSERT_TRUE(c.conn(1, 0)->Write(src.data(), 4096, g1.remote(), 100, &f, Deadline(5)).ok());
    ASSERT_TRUE(WaitWord(flag.word(0), 1));
    EXPECT_EQ(gpu[100], 0xab);
    EXPECT_EQ(gpu[4195], 0xab);
    t->Unexpose(&g1);
    t->Unexpose(&g2);
  }
  ExpectClean();
}

}  // namespace
}  // namespace zc
