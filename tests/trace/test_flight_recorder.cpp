// The flight recorder's ring (common/flight_recorder.h): fields and states,
// wrap-around, records overwritten while their call runs, readers racing
// writers (run under TSan by scripts/sanitize.sh), and the JSON dump.
#include "common/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace zc::trace {
namespace {

Identity TestIdentity() {
  Identity id;
  id.job = "abcd1234";
  id.context = 3;
  id.rank = 1;
  id.size = 4;
  id.world_rank = 5;
  id.transport = "shm";
  return id;
}

OpInfo Allreduce(uint64_t seq, uint64_t count) {
  OpInfo i;
  i.op = "allreduce";
  i.algo = "ring";
  i.transport = "shm";
  i.dtype = ZC_FLOAT32;
  i.redop = ZC_SUM;
  i.count = count;
  i.seq = seq;
  return i;
}

TEST(FlightRecorder, OffRecordsNothing) {
  FlightRecorder r(0, TestIdentity(), "");
  EXPECT_FALSE(r.enabled());
  EXPECT_EQ(r.Begin(Allreduce(1, 8)), 0u);
  r.End(0, Status::Ok());
  EXPECT_TRUE(r.Snapshot().empty());
  EXPECT_NE(r.ToJson("request").find("\"entries\":[]"), std::string::npos);
}

TEST(FlightRecorder, RecordsFieldsAndStates) {
  FlightRecorder r(16, TestIdentity(), "");
  SetThreadLabel("layer1.weight");
  uint64_t a = r.Begin(Allreduce(7, 100));
  SetThreadLabel(nullptr);
  OpInfo s;
  s.op = "irecv";
  s.peer = 2;
  s.tag = 9;
  s.count = 33;
  uint64_t b = r.Begin(s, State::kPosted);
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].id, a);
  EXPECT_STREQ(snap[0].info.op, "allreduce");
  EXPECT_STREQ(snap[0].info.algo, "ring");
  EXPECT_EQ(snap[0].info.seq, 7u);
  EXPECT_EQ(snap[0].info.count, 100u);
  EXPECT_EQ(snap[0].bytes, 400u);
  EXPECT_EQ(snap[0].info.dtype, ZC_FLOAT32);
  EXPECT_EQ(snap[0].info.redop, ZC_SUM);
  EXPECT_EQ(snap[0].info.root, -1);
  EXPECT_EQ(snap[0].state, State::kStarted);
  EXPECT_STREQ(snap[0].label, "layer1.weight");
  EXPECT_GT(snap[0].t_started_ns, 0);
  EXPECT_EQ(snap[0].t_done_ns, 0);
  EXPECT_EQ(snap[1].state, State::kPosted);
  EXPECT_EQ(snap[1].t_started_ns, 0);
  EXPECT_EQ(snap[1].info.peer, 2);
  EXPECT_EQ(snap[1].info.tag, 9);
  EXPECT_EQ(snap[1].info.dtype, -1);
  EXPECT_EQ(snap[1].bytes, 33u);
  EXPECT_STREQ(snap[1].label, "");

  r.End(a, Status::Ok());
  r.End(b, Error(ZC_ERR_TIMEOUT, "rank 1: irecv from 2: no message after 5 s"));
  snap = r.Snapshot();
  EXPECT_EQ(snap[0].state, State::kCompleted);
  EXPECT_GE(snap[0].t_done_ns, snap[0].t_started_ns);
  EXPECT_EQ(snap[1].state, State::kFailed);
  EXPECT_EQ(snap[1].status, ZC_ERR_TIMEOUT);
  // A posted request runs when it is waited for: its start is its end.
  EXPECT_EQ(snap[1].t_started_ns, snap[1].t_done_ns);
  EXPECT_GE(snap[1].t_done_ns, snap[1].t_posted_ns);
  EXPECT_GT(snap[1].t_posted_ns, 0);
  std::string json = r.ToJson("timeout");
  EXPECT_NE(json.find("\"failure\":{\"id\":2,\"status\":\"ZC_ERR_TIMEOUT\",\"message\":\"rank 1: irecv from 2: "
                      "no message after 5 s\"}"),
            std::string::npos)
      << json;
}

TEST(FlightRecorder, LabelIsTruncatedAndEscaped) {
  FlightRecorder r(4, TestIdentity(), "");
  std::string long_label(100, 'x');
  long_label[0] = '"';
  long_label[1] = '\\';
  SetThreadLabel(long_label.c_str());
  r.Begin(Allreduce(1, 1));
  SetThreadLabel("");
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(strlen(snap[0].label), 47u);
  std::string json = r.ToJson("request");
  EXPECT_NE(json.find("\"label\":\"\\\"\\\\xxx"), std::string::npos) << json;
}

TEST(FlightRecorder, WrapsAroundKeepingTheNewest) {
  FlightRecorder r(5, TestIdentity(), "");
  std::vector<uint64_t> ids;
  for (uint64_t i = 1; i <= 12; ++i) ids.push_back(r.Begin(Allreduce(i, i)));
  // Records 1..7 were overwritten: ending one of them must not touch the
  // newer record now in its slot (12 sits where 2 and 7 were).
  r.End(ids[1], Error(ZC_ERR_ABORTED, "late"));
  r.End(ids[6], Status::Ok());
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 5u);
  for (size_t k = 0; k < snap.size(); ++k) {
    EXPECT_EQ(snap[k].id, 8 + k);
    EXPECT_EQ(snap[k].info.seq, 8 + k);
    EXPECT_EQ(snap[k].state, State::kStarted);
  }
  r.End(ids[11], Status::Ok());
  EXPECT_EQ(r.Snapshot().back().state, State::kCompleted);
}

TEST(FlightRecorder, UnlabelledRecordKeepsNoLabelOfTheSlotsLastRecord) {
  FlightRecorder r(2, TestIdentity(), "");
  SetThreadLabel("old");
  r.Begin(Allreduce(1, 1));
  r.Begin(Allreduce(2, 1));
  SetThreadLabel(nullptr);
  r.Begin(Allreduce(3, 1));  // in record 1's slot
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_STREQ(snap[0].label, "old");
  EXPECT_STREQ(snap[1].label, "");
  EXPECT_EQ(snap[1].id, 3u);
}

// A record stores only the words its call has: the slot's previous record
// must not show through the ones it leaves out.
TEST(FlightRecorder, LeftOutWordsKeepNothingOfTheSlotsLastRecord) {
  FlightRecorder r(2, TestIdentity(), "");
  r.Begin(Allreduce(41, 1));
  r.Begin(Allreduce(42, 1));
  OpInfo s;
  s.op = "send";
  s.peer = 3;
  s.tag = 5;
  s.count = 8;
  r.Begin(s);  // in record 1's slot: no seq, algorithm or transport
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[1].id, 3u);
  EXPECT_STREQ(snap[1].info.op, "send");
  EXPECT_EQ(snap[1].info.seq, 0u);
  EXPECT_EQ(snap[1].info.algo, nullptr);
  EXPECT_EQ(snap[1].info.transport, nullptr);  // no peer table
  EXPECT_EQ(snap[1].info.dtype, -1);
  EXPECT_EQ(snap[1].info.redop, -1);
  EXPECT_EQ(snap[1].t_done_ns, 0);
}

// A record's end is one word that the next record of its slot does not
// clear: a reader must take it only for the record that wrote it.
TEST(FlightRecorder, TheSlotsLastEndIsNotTakenForTheNextRecord) {
  FlightRecorder r(2, TestIdentity(), "");
  const uint64_t a = r.Begin(Allreduce(1, 1));
  r.End(a, zc::Status::Ok());
  const uint64_t b = r.Begin(Allreduce(2, 1));
  r.End(b, zc::Error(ZC_ERR_TIMEOUT, "late"));
  OpInfo bcast = Allreduce(3, 1);
  bcast.op = "broadcast";
  bcast.root = 1;
  const uint64_t c = r.Begin(bcast);             // in a's slot
  const uint64_t d = r.Begin(Allreduce(4, 1));  // in b's slot: no root, peer or tag
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].id, c);
  EXPECT_EQ(snap[0].state, State::kStarted);
  EXPECT_EQ(snap[0].t_done_ns, 0);
  EXPECT_EQ(snap[0].info.root, 1);
  EXPECT_EQ(snap[1].id, d);
  EXPECT_EQ(snap[1].state, State::kStarted);
  EXPECT_EQ(snap[1].status, ZC_OK);
  EXPECT_EQ(snap[1].t_done_ns, 0);
  EXPECT_EQ(snap[1].info.root, -1);
  EXPECT_EQ(snap[1].info.peer, -1);
  EXPECT_EQ(snap[1].info.tag, -1);
  r.End(c, zc::Error(ZC_ERR_PEER_LOST, "gone"));
  r.End(d, zc::Status::Ok());
  snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].state, State::kFailed);
  EXPECT_EQ(snap[0].status, ZC_ERR_PEER_LOST);
  EXPECT_GE(snap[0].t_done_ns, snap[0].t_started_ns);
  EXPECT_EQ(snap[1].state, State::kCompleted);
  EXPECT_EQ(snap[1].status, ZC_OK);
  EXPECT_GT(snap[1].t_done_ns, 0);
}

// Many laps round the ring: every ended record reads ended, the one still
// running reads running, whatever lap its slot is in.
TEST(FlightRecorder, EndsAreTheirRecordsOnEveryLap) {
  FlightRecorder r(4, TestIdentity(), "");
  for (uint64_t i = 1; i <= 4 * 40; ++i) {
    const uint64_t id = r.Begin(Allreduce(i, 1));
    if (i % 5 != 0) r.End(id, zc::Status::Ok());
    auto snap = r.Snapshot();
    ASSERT_FALSE(snap.empty());
    for (const Entry& e : snap) {
      const bool ended = e.id % 5 != 0;
      ASSERT_EQ(e.state, ended ? State::kCompleted : State::kStarted) << "record " << e.id << " after " << i;
      ASSERT_EQ(e.t_done_ns != 0, ended) << "record " << e.id;
    }
  }
}

// A collective's record keeps no transport: it is the communicator's.
TEST(FlightRecorder, ACollectiveReportsTheCommunicatorsTransport) {
  Identity id = TestIdentity();
  id.transport = "mixed";
  FlightRecorder r(4, id, "");
  r.BeginCollective("allgather", "ring", 7, 3, FlightRecorder::CollectiveShape(ZC_INT32, -1, -1));
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_STREQ(snap[0].info.transport, "mixed");
  const std::string json = r.ToJson("request");
  const std::string field = "\"transport\":\"mixed\"";
  const size_t first = json.find(field);
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(json.find(field, first + 1), std::string::npos) << "the communicator's and the record's: " << json;
}

TEST(FlightRecorder, ARecordWithAPeerAndNoTransportReportsThePeers) {
  FlightRecorder r(8, TestIdentity(), "");
  r.SetPeerTransports({"shm", "tcp", "shm"});
  OpInfo s;
  s.op = "recv";
  s.count = 8;
  for (int peer : {1, 0, -1, ZC_ANY_SOURCE, 3}) {
    s.peer = peer;
    r.Begin(s);
  }
  s.peer = 1;
  s.transport = "verbs";  // given: kept
  r.Begin(s);
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 6u);
  EXPECT_STREQ(snap[0].info.transport, "tcp");
  EXPECT_STREQ(snap[1].info.transport, "shm");
  EXPECT_EQ(snap[2].info.transport, nullptr);
  EXPECT_EQ(snap[3].info.transport, nullptr);
  EXPECT_EQ(snap[4].info.transport, nullptr);  // not a rank of the table
  EXPECT_STREQ(snap[5].info.transport, "verbs");
}

// The send/recv and collective entry points record what Begin records
// for the same call.
TEST(FlightRecorder, BeginPeerAndBeginCollectiveRecordWhatBeginDoes) {
  FlightRecorder a(8, TestIdentity(), ""), b(8, TestIdentity(), "");
  OpInfo coll = Allreduce(9, 61);
  coll.root = 2;
  a.Begin(coll);
  b.BeginCollective("allreduce", "ring", 9, 61, FlightRecorder::CollectiveShape(ZC_FLOAT32, ZC_SUM, 2));  // the communicator's transport: "shm"
  OpInfo p2p;
  p2p.op = "irecv";
  p2p.count = 13;
  p2p.peer = ZC_ANY_SOURCE;
  p2p.tag = -3;
  a.Begin(p2p, State::kPosted);
  b.BeginPeer("irecv", 13, ZC_ANY_SOURCE, -3, State::kPosted);
  auto x = a.Snapshot(), y = b.Snapshot();
  ASSERT_EQ(x.size(), 2u);
  ASSERT_EQ(y.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_STREQ(x[i].info.op, y[i].info.op);
    EXPECT_EQ(x[i].info.algo == nullptr, y[i].info.algo == nullptr);
    if (x[i].info.algo) {
      EXPECT_STREQ(x[i].info.algo, y[i].info.algo);
    }
    EXPECT_EQ(x[i].info.transport == nullptr, y[i].info.transport == nullptr);
    if (x[i].info.transport) {
      EXPECT_STREQ(x[i].info.transport, y[i].info.transport);
    }
    EXPECT_EQ(x[i].info.seq, y[i].info.seq);
    EXPECT_EQ(x[i].info.count, y[i].info.count);
    EXPECT_EQ(x[i].bytes, y[i].bytes);
    EXPECT_EQ(x[i].info.dtype, y[i].info.dtype);
    EXPECT_EQ(x[i].info.redop, y[i].info.redop);
    EXPECT_EQ(x[i].info.root, y[i].info.root);
    EXPECT_EQ(x[i].info.peer, y[i].info.peer);
    EXPECT_EQ(x[i].info.tag, y[i].info.tag);
    EXPECT_EQ(x[i].state, y[i].state);
  }
  EXPECT_EQ(y[0].info.root, 2);
  EXPECT_EQ(y[1].info.peer, ZC_ANY_SOURCE);
  EXPECT_EQ(y[1].state, State::kPosted);
}

// A send that went out at once is recorded after the fact: completed,
// started when the caller read Start() (before the call), with the label.
TEST(FlightRecorder, DonePeerRecordsACallThatIsOver) {
  for (Clock clock : {Clock::kCoarse, Clock::kPrecise}) {
    FlightRecorder r(8, TestIdentity(), "", clock);
    const uint64_t start = r.Start();
    if (clock == Clock::kPrecise) EXPECT_NE(start, 0u);
    // The call "takes" 3 ms.
    const int64_t until = NowNs() + 3000000;
    while (NowNs() < until) {
    }
    SetThreadLabel("grad.7");
    const uint64_t id = r.DonePeer("send", 24, 2, 11, start);
    SetThreadLabel(nullptr);
    r.DonePeer("send", 8, 1, 3, 0);  // no start: started when it ended
    auto snap = r.Snapshot();
    ASSERT_EQ(snap.size(), 2u) << ClockName(clock);
    const Entry& e = snap[0];
    EXPECT_EQ(e.id, id);
    EXPECT_STREQ(e.info.op, "send");
    EXPECT_EQ(e.bytes, 24u);
    EXPECT_EQ(e.info.peer, 2);
    EXPECT_EQ(e.info.tag, 11);
    EXPECT_EQ(e.state, State::kCompleted);
    EXPECT_EQ(e.status, ZC_OK);
    EXPECT_STREQ(e.label, "grad.7");
    EXPECT_GT(e.t_started_ns, 0);
    // Started before the wait, ended after it. The coarse clock moves only
    // when its thread gets a core, which a loaded machine may not give it.
    if (clock == Clock::kPrecise) EXPECT_GE(e.t_done_ns - e.t_started_ns, 3000000);
    else EXPECT_LE(e.t_started_ns, e.t_done_ns);
    EXPECT_EQ(snap[1].state, State::kCompleted);
    EXPECT_EQ(snap[1].t_started_ns, snap[1].t_done_ns);
    EXPECT_STREQ(snap[1].label, "");
  }
  FlightRecorder off(0, TestIdentity(), "");
  EXPECT_EQ(off.Start(), 0u);
  EXPECT_EQ(off.DonePeer("send", 8, 1, 3, 0), 0u);
  EXPECT_TRUE(off.Snapshot().empty());
}

TEST(FlightRecorder, KeepsNegativeTagsAndRanks) {
  FlightRecorder r(4, TestIdentity(), "");
  OpInfo s;
  s.op = "recv";
  s.peer = ZC_ANY_SOURCE;
  s.tag = -7;
  s.count = 1;
  r.End(r.Begin(s), Error(ZC_ERR_PEER_LOST, "gone"));
  auto snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].info.peer, ZC_ANY_SOURCE);
  EXPECT_EQ(snap[0].info.tag, -7);
  EXPECT_EQ(snap[0].info.root, -1);
  EXPECT_EQ(snap[0].status, ZC_ERR_PEER_LOST);
  EXPECT_EQ(snap[0].state, State::kFailed);
}

// Every field of record i is a function of i, so a reader can tell a
// consistent copy from a torn one.
OpInfo Patterned(uint64_t i) {
  OpInfo o = Allreduce(i, i * 3);
  o.dtype = static_cast<int>(i % 13);
  o.tag = static_cast<int>(i % 1000);
  o.root = static_cast<int>(i % 7);
  if (i % 2) o.algo = nullptr;  // optional words: stored only when present
  if (i % 4 == 1) o.transport = nullptr;
  return o;
}

void ExpectConsistent(const std::vector<Entry>& snap) {
  for (const Entry& e : snap) {
    ASSERT_EQ(e.info.seq, e.id);
    ASSERT_EQ(e.info.count, e.id * 3);
    ASSERT_EQ(e.info.dtype, static_cast<int>(e.id % 13));
    const bool labelled = e.id % 3 == 0;
    ASSERT_STREQ(e.label, labelled ? "label" : "");
    ASSERT_EQ(e.info.tag, static_cast<int>(e.id % 1000));
    ASSERT_EQ(e.info.root, static_cast<int>(e.id % 7));
    if (e.id % 2) {
      ASSERT_EQ(e.info.algo, nullptr);
    } else {
      ASSERT_STREQ(e.info.algo, "ring");
    }
    if (e.id % 4 == 1) {
      ASSERT_EQ(e.info.transport, nullptr);
    } else {
      ASSERT_STREQ(e.info.transport, "shm");
    }
    if (e.state == State::kCompleted) {
      ASSERT_GE(e.t_done_ns, e.t_started_ns);
    }
  }
}

TEST(FlightRecorder, ReadersNeverSeeTornRecords) {
  FlightRecorder r(64, TestIdentity(), "");
  std::atomic<bool> stop{false};
  const int kWriters = 2;
  std::vector<std::thread> writers;
  std::atomic<uint64_t> written{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&] {
      // Ids come from the recorder; the pattern needs the id first.
      while (!stop.load(std::memory_order_relaxed)) {
        uint64_t id = r.Begin(Patterned(0));
        (void)id;
        written.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // The writers above exercise the slots; this one checks the contents.
  FlightRecorder checked(64, TestIdentity(), "");
  std::thread writer([&] {
    for (uint64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      SetThreadLabel(i % 3 == 0 ? "label" : nullptr);
      uint64_t id = checked.Begin(Patterned(i));
      ASSERT_EQ(id, i);
      if (i % 2) checked.End(id, Status::Ok());
    }
  });
  size_t snaps = 0, torn_total = 0;
  while (snaps < 300 || written.load() < 1000) {
    size_t torn = 0;
    ExpectConsistent(checked.Snapshot(&torn));
    torn_total += torn;
    r.Snapshot();
    ++snaps;
  }
  stop = true;
  writer.join();
  for (auto& t : writers) t.join();
  EXPECT_LE(checked.Snapshot().size(), 64u);
  ExpectConsistent(checked.Snapshot());
  RecordProperty("torn_skipped", static_cast<int>(torn_total));
}

TEST(FlightRecorder, DumpsToAFileAndNamesBadPaths) {
  char tmpl[] = "/tmp/zc_fr_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  FlightRecorder r(8, TestIdentity(), dir);
  uint64_t id = r.Begin(Allreduce(1, 8));
  r.End(id, Status::Ok());
  std::string path = r.DumpToDir("request");
  ASSERT_EQ(path, dir + "/" + r.FileName());
  EXPECT_EQ(r.FileName().rfind("zctrace-abcd1234-c3-r1-p", 0), 0u) << r.FileName();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  EXPECT_EQ(text.rfind("{\"format\":\"zcomm-flight-recorder\",\"version\":1,\"reason\":\"request\"", 0), 0u) << text;
  EXPECT_NE(text.find("\"comm\":{\"context\":3,\"rank\":1,\"size\":4,\"world_rank\":5,\"transport\":\"shm\"}"),
            std::string::npos);
  EXPECT_NE(text.find("\"op\":\"allreduce\",\"dtype\":\"float32\",\"redop\":\"sum\",\"count\":8"),
            std::string::npos);
  // A failure dumps once; later failures leave the first dump alone.
  r.DumpOnFailure(Error(ZC_ERR_TIMEOUT, "first"));
  std::ifstream in2(path);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_NE(ss2.str().find("\"reason\":\"timeout\""), std::string::npos);
  Status bad = r.DumpTo(dir + "/no/such/folder/x.json", "request");
  EXPECT_EQ(bad.code(), ZC_ERR_SYSTEM);
  EXPECT_NE(bad.message().find("no/such/folder/x.json.tmp"), std::string::npos) << bad.message();
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// A failure's dump and a signal's can run at once on two threads: each
// must leave a whole file (one temporary file per thread, then a rename).
TEST(FlightRecorder, ConcurrentDumpsToOnePathEachLeaveAWholeFile) {
  char tmpl[] = "/tmp/zc_fr_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  FlightRecorder r(64, TestIdentity(), dir);
  for (uint64_t i = 1; i <= 64; ++i) r.End(r.Begin(Allreduce(i, i)), Status::Ok());
  const std::string path = dir + "/" + r.FileName();
  std::atomic<int> failures{0};
  std::vector<std::thread> dumpers;
  for (int t = 0; t < 3; ++t)
    dumpers.emplace_back([&] {
      for (int k = 0; k < 40; ++k)
        if (!r.DumpTo(path, "signal").ok()) ++failures;
    });
  for (auto& t : dumpers) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(text.rfind("{\"format\":\"zcomm-flight-recorder\"", 0), 0u);
  EXPECT_EQ(text.find("\"format\"", 2), std::string::npos) << "two dumps in one file";
  const size_t last = text.find_last_not_of(" \n");
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(text[last], '}') << "a cut dump";
  unlink(path.c_str());
  EXPECT_EQ(rmdir(dir.c_str()), 0) << "a temporary file was left in " << dir;
}

}  // namespace
}  // namespace zc::trace
