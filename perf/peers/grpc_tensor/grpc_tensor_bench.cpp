// grpc_tensor_bench — the paper's RPC baseline: a tensor of S bytes travels
// as protobuf `bytes` in a gRPC unary call over TCP on loopback (as
// TensorFlow's gRPC transport does); the server answers with a tiny Ack.
//
//   grpc_tensor_bench [--min-size 1K] [--max-size 1G] [--iters 200]
//                     [--bw-iters 20] [--min-iters 3] [--window 64]
//                     [--json FILE]                   (forks its own server)
//   grpc_tensor_bench --role server [--port P]        (prints "PORT <p>")
//   grpc_tensor_bench --role client --target HOST:PORT [options above]
//
// latency_us: time of one call (S bytes out, Ack back), sequential calls.
//   This is the one-way time of S plus a tiny reply, not a round trip of S,
//   so it is comparable to the one-way latency of zc_p2p / mpi_pingpong.
// bw_GBps: a window of up to 64 concurrent async calls (at most 256 MiB in
//   flight), S x window / time (GB = 1e9 B).
// gRPC's 4 MiB default message limit is lifted on both sides. The server
// checks the received size and samples the payload (#wrong counts mismatches).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/bench_util.h"
#include "tensor.grpc.pb.h"

namespace {

uint32_t Sample(const std::string& d) {
  uint32_t c = 0;
  if (d.empty()) return 0;
  const size_t step = d.size() / 61 + 1;
  for (size_t i = 0; i < d.size(); i += step) c = c * 31 + (uint8_t)d[i];
  c = c * 31 + (uint8_t)d[d.size() - 1];
  return c;
}

class TensorServiceImpl final : public zcperf::TensorService::Service {
  grpc::Status Send(grpc::ServerContext*, const zcperf::Tensor* req,
                    zcperf::Ack* ack) override {
    ack->set_seq(req->seq());
    ack->set_bytes(req->data().size());
    ack->set_checksum(Sample(req->data()));
    return grpc::Status::OK;
  }
};

int g_lookahead = 0;  // --http2-lookahead: 0 keeps gRPC's defaults

int RunServer(int port, int ready_fd) {
  TensorServiceImpl service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::InsecureServerCredentials(), &selected);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  if (g_lookahead > 0)
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                               g_lookahead);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected == 0) {
    fprintf(stderr, "error: gRPC server could not listen on port %d\n", port);
    if (ready_fd >= 0) {
      int zero = 0;
      (void)!write(ready_fd, &zero, sizeof zero);
    }
    return 1;
  }
  if (ready_fd >= 0) {
    (void)!write(ready_fd, &selected, sizeof selected);
    close(ready_fd);
  } else {
    printf("PORT %d\n", selected);
    fflush(stdout);
  }
  server->Wait();
  return 0;
}

struct Opts {
  size_t min_size = BU_KiB, max_size = BU_GiB;
  int iters = 200, bw_iters = 20, min_iters = 3, window = 64, warmup = 5;
  const char* json = nullptr;
};

int RunClient(const std::string& target, const Opts& o) {
  bu_report rep;
  bu_report_init(&rep, o.json, "p2p", "grpc", "protobuf-bytes/tcp(lo)", 2);
  rep.is_p2p = 1;
  snprintf(rep.extra, sizeof rep.extra,
           "\"transport\": \"tcp(lo)\", \"latency\": \"time of one unary call "
           "(S bytes + tiny reply)\", \"window\": %d",
           o.window);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (g_lookahead > 0)
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, g_lookahead);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(20))) {
    bu_report_fail(&rep, "gRPC client could not connect to %s", target.c_str());
    return 1;
  }
  auto stub = zcperf::TensorService::NewStub(channel);
  printf("# grpc_tensor_bench: unary call, tensor as protobuf bytes, "
         "target %s\n", target.c_str());
  printf("# latency = time of one call (S bytes out + tiny Ack back); bw = up "
         "to %d concurrent calls, GB/s = 1e9 B/s\n", o.window);
  bu_print_p2p_header(stdout);

  zcperf::Tensor req;
  for (size_t sz = o.min_size; sz <= o.max_size; sz *= 2) {
    bu_row row;
    memset(&row, 0, sizeof row);
    row.size = row.count = sz;
    std::string* data = req.mutable_data();
    data->resize(sz);
    bu_fill_bytes(&(*data)[0], sz, 0);
    const uint32_t want = Sample(*data);
    long long wrong = 0;
    uint64_t seq = 0;
    auto call = [&](void) -> bool {
      grpc::ClientContext ctx;
      zcperf::Ack ack;
      req.set_seq(++seq);
      grpc::Status s = stub->Send(&ctx, req, &ack);
      if (!s.ok()) {
        bu_report_fail(&rep, "gRPC call of %zu bytes failed: %s (code %d)", sz,
                       s.error_message().c_str(), (int)s.error_code());
        return false;
      }
      if (ack.bytes() != sz || ack.checksum() != want || ack.seq() != seq)
        wrong++;
      return true;
    };
    const int n = bu_iters_for(sz, o.iters, o.min_iters, BU_P2P_KNEE);
    const int w = sz <= 64 * BU_KiB ? o.warmup : 1;
    row.iters = n;
    double t0 = 0;
    for (int it = -w; it < n; it++) {
      if (it == 0) t0 = bu_now_us();
      if (!call()) return 1;
    }
    row.time_us = (bu_now_us() - t0) / n;

    // Bandwidth: a window of concurrent async calls.
    int win = o.window;
    if (sz > 4 * BU_MiB) {
      size_t cap = (256 * BU_MiB) / sz;
      if (cap < 1) cap = 1;
      if ((size_t)win > cap) win = (int)cap;
    }
    const int nb = bu_iters_for(sz * (size_t)win, o.bw_iters, 2, BU_BW_KNEE);
    grpc::CompletionQueue cq;
    for (int it = -1; it < nb; it++) {
      if (it == 0) t0 = bu_now_us();
      std::vector<std::unique_ptr<grpc::ClientContext>> ctxs(win);
      std::vector<zcperf::Ack> acks(win);
      std::vector<grpc::Status> sts(win);
      std::vector<std::unique_ptr<grpc::ClientAsyncResponseReader<zcperf::Ack>>>
          calls(win);
      for (int k = 0; k < win; k++) {
        ctxs[k].reset(new grpc::ClientContext);
        calls[k] = stub->AsyncSend(ctxs[k].get(), req, &cq);
        calls[k]->Finish(&acks[k], &sts[k], (void*)(intptr_t)(k + 1));
      }
      for (int k = 0; k < win; k++) {
        void* tagp = nullptr;
        bool ok = false;
        if (!cq.Next(&tagp, &ok) || !ok) {
          bu_report_fail(&rep, "gRPC async call of %zu bytes: completion "
                               "queue failed", sz);
          return 1;
        }
        const int idx = (int)(intptr_t)tagp - 1;
        if (!sts[idx].ok()) {
          bu_report_fail(&rep, "gRPC async call of %zu bytes failed: %s", sz,
                         sts[idx].error_message().c_str());
          return 1;
        }
        if (acks[idx].bytes() != sz || acks[idx].checksum() != want) wrong++;
      }
    }
    row.bw = (double)sz * win * nb / ((bu_now_us() - t0) * 1e3);
    cq.Shutdown();
    void* tagp;
    bool ok;
    while (cq.Next(&tagp, &ok)) {
    }
    row.wrong = wrong;
    bu_print_p2p_row(stdout, &row);
    bu_report_add(&rep, &row);
    if (sz > o.max_size / 2) break;
  }
  bu_report_write(&rep, 1);
  return 0;
}

void Usage() {
  fprintf(stderr,
          "usage: grpc_tensor_bench [--role both|server|client] [--port P] "
          "[--target HOST:PORT]\n"
          "       [--min-size B] [--max-size B] [--iters N] [--bw-iters N] "
          "[--min-iters N] [--window N] [--warmup N] [--json FILE]\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string role = "both", target;
  int port = 0;
  Opts o;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(a, "--role") && v) { role = v; i++; }
    else if (!strcmp(a, "--port")) { port = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--target") && v) { target = v; i++; }
    else if (!strcmp(a, "--min-size")) { o.min_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--max-size")) { o.max_size = bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "--iters")) { o.iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--bw-iters")) { o.bw_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--min-iters")) { o.min_iters = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--window")) { o.window = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--warmup")) { o.warmup = (int)bu_int_arg(a, v); i++; }
    else if (!strcmp(a, "--json") && v) { o.json = v; i++; }
    else if (!strcmp(a, "--http2-lookahead")) { g_lookahead = (int)bu_size_arg(a, v); i++; }
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { Usage(); return 0; }
    else { Usage(); return 2; }
  }
  if (o.min_size < 1) o.min_size = 1;
  if (o.window < 1) o.window = 1;
  if (o.iters < 1) o.iters = 1;
  if (o.min_iters < 1) o.min_iters = 1;
  if (role == "server") return RunServer(port, -1);
  if (role == "client") {
    if (target.empty()) { Usage(); return 2; }
    return RunClient(target, o);
  }
  // both: fork the server before gRPC is initialized in this process.
  int fds[2];
  if (pipe(fds) != 0) { perror("pipe"); return 1; }
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 1; }
  if (pid == 0) {
    close(fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the client
    _exit(RunServer(port, fds[1]));
  }
  close(fds[1]);
  int selected = 0;
  if (read(fds[0], &selected, sizeof selected) != (ssize_t)sizeof selected ||
      selected == 0) {
    fprintf(stderr, "error: the gRPC server did not start\n");
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    bu_report rep;
    bu_report_init(&rep, o.json, "p2p", "grpc", "protobuf-bytes/tcp(lo)", 2);
    bu_report_fail(&rep, "the gRPC server did not start");
    return 1;
  }
  close(fds[0]);
  int rc = RunClient("127.0.0.1:" + std::to_string(selected), o);
  kill(pid, SIGTERM);
  int st = 0;
  waitpid(pid, &st, 0);
  return rc;
}
