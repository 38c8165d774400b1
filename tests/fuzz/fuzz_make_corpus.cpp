// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/):
//   fuzz_make_corpus OUT_DIR
// Store, rendezvous and unique-id seeds are real traffic: a store server and
// two ranks joining a rendezvous through a recording loopback proxy, then
// every store operation; the proxy keeps each connection's bytes in both
// directions. The other seeds come from the library's own serializers (the
// structs and functions the senders use), so they are what a peer sends.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/store_client.h"
#include "bootstrap/store_protocol.h"
#include "bootstrap/store_server.h"
#include "bootstrap/unique_id.h"
#include "collectives/signature.h"
#include "common/auth.h"
#include "common/socket.h"
#include "p2p/mem_region.h"
#include "p2p/p2p_protocol.h"
#include "p2p/peer_info.h"
#include "p2p/tcp/tcp_wire.h"
#include "ps/protocol.h"

using namespace zc;

namespace {

std::string g_out;

void Put(const std::string& target, const std::string& name, const std::string& bytes) {
  std::string dir = g_out + "/" + target;
  mkdir(g_out.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

template <typename T>
std::string Raw(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

void Check(const Status& st, const char* what) {
  if (!st.ok()) {
    fprintf(stderr, "fuzz_make_corpus: %s: %s\n", what, st.message().c_str());
    exit(1);
  }
}

// ---- a recording proxy in front of the store -------------------------------
struct Conn {
  std::string up, down;  // client -> server, server -> client
};

class Proxy {
 public:
  Proxy(int server_port) : server_port_(server_port) {
    Check(net::Listen("127.0.0.1", 0, &listen_fd_, &port_), "proxy listen");
    thread_ = std::thread([this] { Loop(); });
  }
  ~Proxy() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  std::vector<Conn> Take() {
    stop_ = true;
    thread_.join();
    thread_ = std::thread([] {});
    return conns_;
  }

 private:
  void Loop() {
    struct Pair {
      int c, s;
      size_t idx;
      bool open = true;
    };
    std::vector<Pair> pairs;
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (auto& p : pairs)
        if (p.open) {
          fds.push_back({p.c, POLLIN, 0});
          fds.push_back({p.s, POLLIN, 0});
        }
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int c = accept(listen_fd_, nullptr, nullptr), s = -1;
        Check(net::Connect("127.0.0.1", server_port_, Deadline(5), &s), "proxy connect");
        conns_.push_back({});
        pairs.push_back({c, s, conns_.size() - 1});
      }
      size_t k = 1;
      for (auto& p : pairs) {
        if (!p.open) continue;
        const short rc = fds[k++].revents, rs = fds[k++].revents;
        char buf[65536];
        for (int dir = 0; dir < 2 && p.open; ++dir) {
          if (!((dir == 0 ? rc : rs) & (POLLIN | POLLHUP | POLLERR))) continue;
          int from = dir == 0 ? p.c : p.s, to = dir == 0 ? p.s : p.c;
          ssize_t n = recv(from, buf, sizeof(buf), 0);
          if (n <= 0) {
            close(p.c);
            close(p.s);
            p.open = false;
            break;
          }
          (dir == 0 ? conns_[p.idx].up : conns_[p.idx].down).append(buf, static_cast<size_t>(n));
          Check(net::SendAll(to, buf, static_cast<size_t>(n), Deadline(5)), "proxy send");
        }
      }
    }
    for (auto& p : pairs)
      if (p.open) {
        close(p.c);
        close(p.s);
      }
  }

  int server_port_, listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<Conn> conns_;
};

// Splits a recorded stream (after the 73 handshake bytes) into messages.
std::vector<std::string> Messages(const std::string& stream) {
  const size_t auth = net::AuthHandshake::kHelloBytes + net::AuthHandshake::kProofBytes +
                      net::AuthHandshake::kVerdictBytes;
  std::vector<std::string> out;
  size_t pos = auth;
  while (pos + store::kHeaderBytes <= stream.size()) {
    store::Header h = store::DecodeHeader(reinterpret_cast<const uint8_t*>(stream.data()) + pos);
    size_t n = store::kHeaderBytes + h.key_len + h.value_len;
    if (pos + n > stream.size()) break;
    out.push_back(stream.substr(pos, n));
    pos += n;
  }
  return out;
}

void StoreSeeds() {
  const std::string key(64, 'a');
  std::unique_ptr<StoreServer> server;
  Check(StoreServer::Start("127.0.0.1", 0, key, &server), "store server");
  std::vector<Conn> conns;
  {
    Proxy proxy(server->port());
    std::string addr = "127.0.0.1:" + std::to_string(proxy.port());
    // Two ranks join a rendezvous, as zc_comm_init_rank does.
    UniqueId id;
    id.host = "127.0.0.1";
    id.port = proxy.port();
    id.job_key = key;
    std::vector<std::unique_ptr<StoreClient>> c(2);
    for (auto& x : c) Check(StoreClient::Connect(addr, key, Deadline(5), &x), "store connect");
    Status st1;
    std::thread r1([&] { st1 = JoinRendezvous(c[1].get(), id, 2, 1, false, 10); });
    Check(JoinRendezvous(c[0].get(), id, 2, 0, true, 10), "rendezvous rank 0");
    r1.join();
    Check(st1, "rendezvous rank 1");
    // Every operation, answered and refused.
    std::string v;
    bool exists = false;
    int64_t n = 0;
    Check(c[0]->Set("k", "value"), "set");
    Check(c[0]->Get("k", &v, 1), "get");
    Check(c[0]->Add("counter", 5, &n), "add");
    Check(c[0]->Add("counter", -7, &n), "add");
    Check(c[0]->Check("k", &exists), "check");
    Check(c[0]->Check("absent", &exists), "check");
    Check(c[0]->Wait({"k", "counter", "k"}, 1), "wait");
    (void)c[0]->Get("absent", &v, 0.01);              // timeout, with its message
    (void)c[0]->Wait({"k", "absent"}, 0.01);           // timeout, naming the key
    (void)c[0]->Add("k", 1, &n);                       // not a counter
    Check(c[0]->Set("bin\x01\xff", std::string("\0\1\2", 3)), "set binary");
    c.clear();
    // Let the proxy see both hang-ups.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    conns = proxy.Take();
  }
  server->Stop();
  int i = 0, j = 0;
  for (const auto& conn : conns) {
    Put("store_request", "stream-" + std::to_string(i), conn.up.substr(73));
    Put("store_reply", "stream-" + std::to_string(i), conn.down.substr(73));
    ++i;
    for (const auto& m : Messages(conn.up)) {
      Put("store_request", "msg-" + std::to_string(j), m);
      // The values ranks wrote: claims and the verdict (rendezvous parsers).
      store::Header h = store::DecodeHeader(reinterpret_cast<const uint8_t*>(m.data()));
      std::string k = m.substr(store::kHeaderBytes, h.key_len);
      if (h.op_or_status == store::kSet && k.rfind("join/", 0) == 0)
        Put("unique_id", "rendezvous-" + std::to_string(j),
            std::string("\0\x80", 2) + m.substr(store::kHeaderBytes + h.key_len));
      ++j;
    }
    int r = 0;
    for (const auto& m : Messages(conn.down)) Put("store_reply", "msg-" + std::to_string(r++), m);
  }
  // The auth handshake both sides of a real store connection sent (hello
  // with a random challenge, then a proof that fails against the fuzz
  // target's fixed challenge: the refusal path).
  if (!conns.empty()) {
    Put("auth", "store-client-traffic", std::string(1, '\0') + conns[0].up.substr(0, 73));
    Put("auth", "store-server-traffic", std::string(1, '\1') + conns[0].down.substr(0, 73));
  }
}

// ---- auth: a full handshake between two state machines --------------------
void AuthSeeds() {
  const uint8_t sn[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                          17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
  const uint8_t cn[32] = {32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                          16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  for (std::string key : {std::string("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
                          std::string("another key")}) {
    net::AuthHandshake s(net::AuthRole::kServer, key, sn), c(net::AuthRole::kClient, key, cn);
    std::string to_s = c.Start(), to_c = s.Start();
    std::string got_s, got_c;  // what each side received, in order
    for (int round = 0; round < 4 && (s.want() || c.want()); ++round) {
      std::string next_s, next_c;
      if (s.want() && to_s.size() >= s.want()) {
        got_s += to_s.substr(0, s.want());
        IgnoreError(s.OnMessage(reinterpret_cast<const uint8_t*>(to_s.data()), s.want(), &next_c),
                    "corpus: a failed step still records the bytes seen so far");
      }
      if (c.want() && to_c.size() >= c.want()) {
        got_c += to_c.substr(0, c.want());
        IgnoreError(c.OnMessage(reinterpret_cast<const uint8_t*>(to_c.data()), c.want(), &next_s),
                    "corpus: a failed step still records the bytes seen so far");
      }
      to_s = next_s;
      to_c = next_c;
    }
    std::string tag = key.size() == 64 ? "" : "-wrong-key";
    Put("auth", "server" + tag, std::string(1, '\0') + got_s);
    Put("auth", "client" + tag, std::string(1, '\1') + got_c);
  }
}

// ---- descriptors, as MemRegions expose them --------------------------------
std::vector<std::string> Descriptors() {
  std::vector<std::string> out;
  static char mem[256];
  MemRegion shm(mem, sizeof(mem), 7);
  shm.mutable_remote().transport = TransportKind::kShm;
  shm.mutable_remote().owner = 1;
  shm.mutable_remote().owner_pid = 4242;
  shm.mutable_remote().seg_offset = 4096;
  snprintf(shm.mutable_remote().seg_name, RemoteRegion::kNameLen, "/zc-0123456789abcdef-1-0");
  out.push_back(shm.remote().Serialize());
  MemRegion tcp(mem, 64, 9);
  tcp.mutable_remote().transport = TransportKind::kTcp;
  tcp.mutable_remote().owner = 0;
  out.push_back(tcp.remote().Serialize());
  MemRegion verbs(mem, 128, 11);
  verbs.mutable_remote().transport = TransportKind::kVerbs;
  verbs.mutable_remote().owner = 3;
  verbs.mutable_remote().access_key = 0x1234;
  out.push_back(verbs.remote().Serialize());
  return out;
}

void RegionSeeds() {
  int i = 0;
  for (const auto& d : Descriptors()) {
    uint64_t off = 16, len = 32;
    Put("mem_region", "desc-" + std::to_string(i++), Raw(off) + Raw(len) + d);
  }
}

// ---- p2p: send/recv meta and acks, as send_recv.cpp builds them ------------
void P2pSeeds() {
  using namespace p2p_wire;
  std::string payload(24, 'x');
  Meta eager{payload.size(), kEager, 3, 0};
  Put("p2p_meta", "eager", std::string{0, static_cast<char>(payload.size())} + Raw(eager) + payload);
  Meta empty{0, kEager, 0, 0};
  Put("p2p_meta", "eager-empty", std::string{0, 0} + Raw(empty));
  auto descs = Descriptors();
  Meta rdv{100, kRendezvous, 5, 16};
  Put("p2p_meta", "rendezvous", std::string{0, 100} + Raw(rdv) + descs[0]);
  Put("p2p_meta", "rendezvous-tcp", std::string{0, 100} + Raw(rdv) + descs[1]);
  for (uint32_t code : {kAckOk, kAckMismatch, kAckNeedStaged, kAckFailed}) {
    Ack a{code, 5, 100};
    Put("p2p_meta", "ack-" + std::to_string(code), std::string{1, 100} + Raw(a));
  }
  Ack head{kAckRestaged, 5, 100};
  Meta staged{100, kRendezvous, 5, 0};
  Put("p2p_meta", "restaged", std::string{1, 100} + Raw(head) + Raw(staged) + descs[0]);
}

// ---- collectives: slot headers as OpCtx::Send packs them -------------------
void CollSeeds() {
  using namespace coll;
  int i = 0;
  for (int k = 1; k < kNumKinds; ++k) {
    Signature s;
    s.kind = static_cast<Kind>(k);
    s.dtype = ZC_FLOAT32;
    s.op = ZC_SUM;
    s.algo = Algo::kRing;
    s.root = (s.kind == Kind::kBroadcast || s.kind == Kind::kGather || s.kind == Kind::kScatter ||
              s.kind == Kind::kReduce) ? 1 : -1;
    s.count = 100 + k;
    s.seq = 7;
    const uint64_t tag = MessageTag(2, 3);
    const bool block = s.kind == Kind::kAllgatherv || s.kind == Kind::kAlltoallv;
    const int owner = 2;
    const uint64_t elems = 50, bytes = 200;
    uint64_t aux[7] = {};
    s.Pack(aux, tag, /*sender=*/1);
    aux[5] = static_cast<uint64_t>(owner);
    aux[6] = elems;
    // Our call: the bytes of the target's layout (fuzz_coll_check.cpp).
    std::string in = std::string{static_cast<char>(k), static_cast<char>(ZC_FLOAT32),
                                 static_cast<char>(ZC_SUM), static_cast<char>(Algo::kRing)} +
                     Raw<int32_t>(s.root) + Raw(s.count) + Raw(s.seq) + Raw<int32_t>(0) +
                     Raw<int32_t>(1) + Raw(tag) + Raw(bytes) + std::string(1, block ? 1 : 0) +
                     Raw<int32_t>(owner) + Raw(elems);
    for (uint64_t w : aux) in += Raw(w);
    in += Raw(bytes);
    Put("coll_check", "match-" + std::to_string(i++), in);
    // The same message against a rank that called with another count.
    std::string other = in;
    uint64_t count2 = s.count + 1;
    memcpy(&other[8], &count2, 8);
    Put("coll_check", "mismatch-" + std::to_string(i++), other);
  }
  // Allreduces of the 16-bit integer and bool dtypes, and a signature whose
  // dtype is one past the last (refused as corrupt).
  for (int d : {static_cast<int>(ZC_INT16), static_cast<int>(ZC_UINT16), static_cast<int>(ZC_BOOL),
                kNumDtypes}) {
    Signature s;
    s.kind = Kind::kAllreduce;
    s.dtype = static_cast<zc_dtype>(d);
    s.op = ZC_BOR;
    s.algo = Algo::kHd;
    s.root = -1;
    s.count = 77;
    s.seq = 9;
    const uint64_t tag = MessageTag(1, 0), bytes = 77;
    uint64_t aux[7] = {};
    s.Pack(aux, tag, /*sender=*/0);
    const int mine = d < kNumDtypes ? d : static_cast<int>(ZC_BOOL);
    std::string in = std::string{static_cast<char>(Kind::kAllreduce), static_cast<char>(mine),
                                 static_cast<char>(ZC_BOR), static_cast<char>(Algo::kHd)} +
                     Raw<int32_t>(s.root) + Raw(s.count) + Raw(s.seq) + Raw<int32_t>(1) +
                     Raw<int32_t>(0) + Raw(tag) + Raw(bytes) + std::string(1, 0) + Raw<int32_t>(0) +
                     Raw<uint64_t>(0);
    for (uint64_t w : aux) in += Raw(w);
    in += Raw(bytes);
    Put("coll_check", std::string("dtype-") + (d < kNumDtypes ? DtypeName(s.dtype) : "past-last"), in);
  }
}

// ---- parameter server: declarations and answers, as worker/server send -----
void PsSeeds() {
  using namespace ps;
  auto descs = Descriptors();
  DeclareHead h{0, 42, 1000, static_cast<uint32_t>(ZC_FLOAT32), 1};
  Put("ps_protocol", "declare", std::string(1, 0) + Pack(h) + descs[0] + descs[0]);
  Put("ps_protocol", "declare-no-chunks", std::string(1, 0) + Pack(h));
  for (int d : {static_cast<int>(ZC_INT16), static_cast<int>(ZC_UINT16), static_cast<int>(ZC_BOOL),
                kNumDtypes}) {
    DeclareHead hd{1, 43, 999, static_cast<uint32_t>(d), 0};
    Put("ps_protocol",
        std::string("declare-") + (d < kNumDtypes ? DtypeName(static_cast<zc_dtype>(d)) : "dtype-past-last"),
        std::string(1, 0) + Pack(hd) + descs[0] + descs[0]);
  }
  AckHead ok{ZC_OK, 0};
  Put("ps_protocol", "answer-ok", std::string(1, 1) + Pack(ok) + descs[0] + descs[0]);
  std::string text = "workers disagree on declaration #0";
  AckHead bad{ZC_ERR_MISMATCH, static_cast<uint32_t>(text.size())};
  Put("ps_protocol", "answer-mismatch", std::string(1, 1) + Pack(bad) + text);
}

// ---- tcp transport: hello and messages, as TcpConnection sends them --------
void TcpSeeds() {
  using namespace tcp_wire;
  auto hdr = [](uint16_t type) {
    MsgHeader h{};
    h.magic = kMagic;
    h.type = type;
    return h;
  };
  const char shape = 1 | (1 << 3);  // 2 ranks, 2 sockets per peer
  uint32_t hello[2] = {1, 1};
  std::string s = std::string(1, shape) + Raw(hello);
  MsgHeader w = hdr(kWrite);
  w.region_id = 1;
  w.offset = 8;
  w.bytes = 16;
  w.flag_region_id = 2;
  w.flag_offset = 0;
  w.flag_value = 5;
  std::string msgs = Raw(w) + std::string(16, 'p');
  MsgHeader flag_only = hdr(kWrite);
  flag_only.flag_region_id = 1;
  flag_only.flag_offset = 56;
  flag_only.flag_value = 1;
  msgs += Raw(flag_only);
  MsgHeader rr = hdr(kReadReq);
  rr.region_id = 1;
  rr.offset = 0;
  rr.bytes = 64;
  rr.token = 9;
  msgs += Raw(rr);
  MsgHeader resp = hdr(kReadResp);
  resp.token = 1;
  resp.bytes = 16;
  msgs += Raw(resp) + std::string(16, 'r');
  Put("tcp_wire", "session", s + msgs + Raw(hdr(kBye)));
  MsgHeader refused = hdr(kReadResp);
  refused.token = 1;
  refused.status = ZC_ERR_INVALID_ARG;
  Put("tcp_wire", "read-refused", s + Raw(refused));
  Put("tcp_wire", "hello-only", s);
}

void PeerInfoSeeds() {
  PeerInfo r;
  r.host = "node-3";
  r.pid = 12345;
  r.reach = {{"shm", true, "node-3", ""},
             {"tcp", true, "node-3", ""},
             {"verbs", false, "", "zcomm was built without verbs support (libibverbs, librdmacm)"}};
  Put("peer_info", "no-verbs", r.Serialize());
  r.reach[2] = {"verbs", true, "", ""};
  r.key = std::string(64, 'f');
  Put("peer_info", "rank0-key", r.Serialize());
  r.host = "host|with|bars";
  r.host.push_back('\0');
  r.reach = {{"shm", false, "", "not probed"}, {"tcp", true, r.host, ""}};
  Put("peer_info", "host-with-bars-and-nul", r.Serialize());
  PeerAddresses a;
  a.entries = {{"tcp", "127.0.0.1:40123"}, {"verbs", "10.77.0.1:4791|00000000deadbeef"}};
  Put("peer_info", "addresses", a.Serialize());
  a.entries = {{"shm", ""}};
  Put("peer_info", "addresses-shm", a.Serialize());
}

void UniqueIdSeeds() {
  UniqueId id;
  id.host = "10.1.2.3";
  id.port = 29500;
  id.job_key = std::string(64, 'c');
  id.nonce = 0x0123456789abcdefull;
  id.created = 1700000000;
  char b[kUniqueIdBytes];
  id.Encode(b);
  Put("unique_id", "id", std::string{0, 0} + std::string(b, sizeof(b)));
  Put("unique_id", "id-checksummed", std::string{1, 0} + std::string(b, sizeof(b)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_corpus OUT_DIR (tests/fuzz/corpus)\n");
    return 2;
  }
  g_out = argv[1];
  StoreSeeds();
  AuthSeeds();
  RegionSeeds();
  P2pSeeds();
  CollSeeds();
  PsSeeds();
  TcpSeeds();
  PeerInfoSeeds();
  UniqueIdSeeds();
  return 0;
}
