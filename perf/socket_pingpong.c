/* socket_pingpong — the plain loopback socket transfer that zcomm's tcp
 * point-to-point latency is held against (no zcomm: C and the socket API).
 *
 *   socket_pingpong [-b 8] [-e 4M] [-n 1000] [--min-iters 5] [-w 10]
 *                   [--reps 3] [--congestion reno|system] [--json FILE]
 *
 * Two processes (fork) on one TCP connection over 127.0.0.1 ping-pong SIZE
 * bytes each way: one-way latency = round trip / 2, as osu_latency and
 * zc_p2p -t latency count it. Each side sends a message with one send loop
 * (blocking, the whole buffer) and receives it with one receive loop into a
 * buffer of its own, so each byte is copied once out of the sender's buffer
 * and once into the receiver's, the least a socket transfer costs.
 *
 * The socket gets the options zcomm gives its tcp data sockets (p2p/tcp
 * SocketTuner): TCP_NODELAY, and reno congestion control on loopback (its
 * ZC_TCP_CONGESTION=auto; --congestion system keeps the system's default).
 * Socket buffer sizes are the kernel's, as zcomm leaves them.
 *
 * Sizes double from -b to -e. The iteration schedule is zc_p2p's (fewer
 * iterations above 64 KiB, in proportion); each timed loop runs --reps
 * times: the value is their median, min and max show the swing. The first
 * exchange of each size is checked byte by byte (#wrong). --json writes
 * {"results": [{"size", "latency_us", "bw_GBps", ...}]} (bw: size /
 * one-way latency). Exit status: 0 ok, 1 a failure or a wrong byte, 2 a
 * usage error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bench_util.h"

#define PROG "socket_pingpong"
#define MAX_REPS 100
#define MAX_SIZES 64

typedef struct {
  size_t min_size, max_size;
  int iters, min_iters, warmup, reps;
  int reno; /* 1: TCP_CONGESTION reno, as zcomm on loopback */
  const char* json;
} opts;

static void usage(FILE* f) {
  fprintf(f,
"usage: " PROG " [flags]\n"
"Ping-pong over a loopback TCP socket between two processes: the plain\n"
"socket transfer that zc_p2p -t latency on tcp is compared with.\n"
"\n"
"  -b, --min-size SIZE  smallest message (default 8); 4K, 1M: binary suffixes\n"
"  -e, --max-size SIZE  largest message (default 4M); doubled row to row\n"
"  -n, --iters N        ping-pongs per repetition (default 1000; above 64 KiB\n"
"                       fewer, in proportion, as zc_p2p)\n"
"      --min-iters N    fewest iterations at large sizes (default 5)\n"
"  -w, --warmup N       untimed ping-pongs before each size (default 10; at\n"
"                       most 2 above 64 KiB)\n"
"      --reps R         repetitions of each timed loop (default 3): median,\n"
"                       min and max\n"
"      --congestion C   reno (default: what zcomm uses on loopback) or system\n"
"      --json FILE      also write the rows to FILE as JSON\n"
"  -h, --help           this text\n");
}

static void parse_args(int argc, char** argv, opts* o) {
  memset(o, 0, sizeof *o);
  o->min_size = 8, o->max_size = 4 * BU_MiB;
  o->iters = 1000, o->min_iters = 5, o->warmup = 10, o->reps = 3, o->reno = 1;
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s, l) (!strcmp(a, s) || !strcmp(a, l))
    if (IS("-h", "--help")) {
      usage(stdout);
      exit(0);
    } else if (IS("-b", "--min-size")) {
      o->min_size = bu_arg_size(PROG, a, v), i++;
    } else if (IS("-e", "--max-size")) {
      o->max_size = bu_arg_size(PROG, a, v), i++;
    } else if (IS("-n", "--iters")) {
      o->iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (!strcmp(a, "--min-iters")) {
      o->min_iters = (int)bu_arg_int(PROG, a, v, 1, 100000000), i++;
    } else if (IS("-w", "--warmup")) {
      o->warmup = (int)bu_arg_int(PROG, a, v, 0, 100000000), i++;
    } else if (!strcmp(a, "--reps")) {
      o->reps = (int)bu_arg_int(PROG, a, v, 1, MAX_REPS), i++;
    } else if (!strcmp(a, "--congestion")) {
      static const char* const choices[] = {"reno", "system"};
      o->reno = bu_choice_arg(PROG, a, v, choices, 2) == 0;
      i++;
    } else if (!strcmp(a, "--json")) {
      o->json = bu_arg_str(PROG, a, v), i++;
    } else {
      bu_usage_error(PROG, "unknown flag %s", a);
    }
#undef IS
  }
  if (o->min_size < 1) bu_usage_error(PROG, "bad value for -b: 0 (at least 1 byte)");
  if (o->min_size > o->max_size)
    bu_usage_error(PROG, "-b %zu is larger than -e %zu: no size to run", o->min_size,
                   o->max_size);
}

static void die(const char* what) {
  fprintf(stderr, PROG " (pid %d): %s: %s\n", (int)getpid(), what, strerror(errno));
  exit(1);
}

static void tune(int fd, const opts* o) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
  /* As zcomm: reno where it is offered, else the system's default stays. */
  if (o->reno) (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
}

static void send_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) die("send");
    p += k, n -= (size_t)k;
  }
}

static void recv_all(int fd, char* p, size_t n) {
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) die("recv");
    if (k == 0) {
      fprintf(stderr, PROG " (pid %d): the peer closed the connection\n", (int)getpid());
      exit(1);
    }
    p += k, n -= (size_t)k;
  }
}

/* One ping-pong loop of n round trips after `warm` untimed ones; the
 * initiator (parent) returns the timed loop's microseconds. */
static double pingpong(int fd, int initiator, char* sbuf, char* rbuf, size_t sz, int n, int warm) {
  double t0 = 0;
  for (int it = -warm; it < n; it++) {
    if (it == 0) t0 = bu_now_us();
    if (initiator) {
      send_all(fd, sbuf, sz);
      recv_all(fd, rbuf, sz);
    } else {
      recv_all(fd, rbuf, sz);
      send_all(fd, sbuf, sz);
    }
  }
  return bu_now_us() - t0;
}

/* The connected pair: the parent listens on 127.0.0.1, the child dials. */
static int connect_pair(const opts* o, pid_t* child) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(ls, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, (struct sockaddr*)&addr, &len) != 0)
    die("listen on 127.0.0.1");
  *child = fork();
  if (*child < 0) die("fork");
  int fd;
  if (*child == 0) {
    close(ls);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) die("connect");
  } else {
    fd = accept(ls, NULL, NULL);
    if (fd < 0) die("accept");
    close(ls);
  }
  tune(fd, o);
  return fd;
}

int main(int argc, char** argv) {
  opts o;
  parse_args(argc, argv, &o);
  size_t sizes[MAX_SIZES];
  int nsizes = 0;
  for (size_t sz = o.min_size; nsizes < MAX_SIZES; sz *= 2) {
    sizes[nsizes++] = sz;
    if (sz > o.max_size / 2) break;
  }
  char* sbuf = malloc(o.max_size);
  char* rbuf = malloc(o.max_size);
  if (!sbuf || !rbuf) die("malloc");
  memset(sbuf, 0, o.max_size), memset(rbuf, 0, o.max_size);

  pid_t child;
  const int fd = connect_pair(&o, &child);
  const int initiator = child != 0;
  bu_report rep;
  bu_report_init(&rep, initiator ? o.json : NULL, "p2p", "socket", o.reno ? "tcp/reno" : "tcp/system", 2);
  rep.is_p2p = 1;
  snprintf(rep.extra, sizeof rep.extra,
           "\"transport\": \"loopback tcp\", \"congestion\": \"%s\", \"reps\": %d, "
           "\"timing\": \"median over reps; one-way latency = round trip / 2\"",
           o.reno ? "reno" : "system", o.reps);
  if (initiator) {
    printf("# " PROG ": loopback tcp, TCP_NODELAY, congestion %s, reps=%d\n",
           o.reno ? "reno" : "system", o.reps);
    printf("%-10s%18s%12s%12s%12s%8s\n", "# Size", "Latency (us)", "Min (us)", "Max (us)",
           "Iterations", "#wrong");
  }
  bu_row rows[MAX_SIZES];
  long long wrong_total = 0;
  for (int s = 0; s < nsizes; s++) {
    const size_t sz = sizes[s];
    /* One checked exchange: each side fills its buffer, the other checks. */
    bu_fill_bytes(sbuf, sz, initiator ? 0 : 1);
    pingpong(fd, initiator, sbuf, rbuf, sz, 1, 0);
    long long wrong = (long long)bu_check_bytes(rbuf, sz, initiator ? 1 : 0);
    wrong_total += wrong;
    const int iters = bu_iters_for(sz, o.iters, o.min_iters, BU_P2P_KNEE);
    const int warm = sz <= 64 * BU_KiB ? o.warmup : (o.warmup < 2 ? o.warmup : 2);
    double v[MAX_REPS], mn, med, mx;
    for (int r = 0; r < o.reps; r++)
      v[r] = pingpong(fd, initiator, sbuf, rbuf, sz, iters, r == 0 ? warm : 0) / (2.0 * iters);
    if (!initiator) continue;
    bu_min_med_max(v, o.reps, &mn, &med, &mx);
    bu_row* w = &rows[s];
    memset(w, 0, sizeof *w);
    w->size = w->count = sz;
    w->iters = iters;
    w->time_us = med;
    w->bw = (double)sz / med * 1e-3; /* B/us -> GB/s */
    w->wrong = wrong;
    bu_extra_num(w->extra, sizeof w->extra, "latency_min_us", mn);
    bu_extra_num(w->extra, sizeof w->extra, "latency_max_us", mx);
    printf("%-10zu%18.2f%12.2f%12.2f%12d%8lld\n", sz, med, mn, mx, iters, wrong);
    fflush(stdout);
    rep.rows = rows;
    rep.nrows = rep.cap = (size_t)s + 1;
    bu_report_write(&rep, 0);
  }
  close(fd);
  if (!initiator) return wrong_total ? 1 : 0;
  int status = 0;
  if (waitpid(child, &status, 0) < 0) die("waitpid");
  const int child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (wrong_total || !child_ok) {
    bu_report_fail(&rep, PROG ": %lld wrong bytes here, the other process %s", wrong_total,
                   child_ok ? "ok" : "failed");
    rep.rows = NULL;
    return 1;
  }
  bu_report_write(&rep, 1);
  rep.rows = NULL; /* on the stack */
  return 0;
}
