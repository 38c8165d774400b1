// Unit tests of zcrun's parts: option parsing, host lists and placement,
// remote command quoting, line forwarding, job resources.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "binding.h"
#include "hosts.h"
#include "job_resources.h"
#include "options.h"
#include "output.h"
#include "remote_command.h"
#include "spawn.h"
#include "supervisor.h"

namespace zc::launcher {
namespace {

Status Parse(std::vector<const char*> args, Options* o) {
  args.insert(args.begin(), "zcrun");
  return ParseOptions(static_cast<int>(args.size()), args.data(), o);
}

TEST(Options, FullCommandLine) {
  Options o;
  ASSERT_TRUE(Parse({"-np", "6", "-H", "a:2,b", "-H", "c", "--hostfile=hf",
                     "--rsh", "ip netns exec {host}", "--bind-to", "numa",
                     "--report-bindings", "--timeout", "2.5", "-x", "A=1",
                     "-x", "B", "--no-tag-output", "--oversubscribe", "prog",
                     "-np", "--x", "last"},
                    &o).ok());
  EXPECT_EQ(o.np, 6);
  EXPECT_EQ(o.host_lists, (std::vector<std::string>{"a:2,b", "c"}));
  EXPECT_EQ(o.hostfile, "hf");
  EXPECT_EQ(o.rsh, "ip netns exec {host}");
  EXPECT_EQ(o.bind, BindPolicy::kNuma);
  EXPECT_TRUE(o.report_bindings);
  EXPECT_DOUBLE_EQ(o.timeout_s, 2.5);
  EXPECT_EQ(o.exports, (std::vector<std::string>{"A=1", "B"}));
  EXPECT_FALSE(o.tag_output);
  EXPECT_TRUE(o.oversubscribe);
  // Everything from the program on belongs to the program.
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-np", "--x", "last"}));
}

TEST(Options, BindToShare) {
  Options o;
  ASSERT_TRUE(Parse({"--bind-to", "share", "p"}, &o).ok());
  EXPECT_EQ(o.bind, BindPolicy::kShare);
  EXPECT_STREQ(BindPolicyName(o.bind), "share");
}

// The CPUs this process may use, one set per core (as the binder groups them).
std::vector<int> AllowedCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  EXPECT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

// share (and the default when the ranks fit): every local rank gets a
// disjoint group of side-by-side cores, the groups cover every core, and
// their sizes differ by at most one; one core each when ranks == cores.
TEST(Binding, ShareGivesEachRankItsShareOfTheCores) {
  std::unique_ptr<Binder> per_core;
  ASSERT_TRUE(Binder::Create(BindPolicy::kCore, 1, &per_core).ok());
  const int cores = per_core->units();
  ASSERT_GT(cores, 0);
  const std::vector<int> cpus = AllowedCpus();
  for (BindPolicy policy : {BindPolicy::kShare, BindPolicy::kDefault}) {
    for (int ranks = 1; ranks <= cores; ++ranks) {
      std::unique_ptr<Binder> b;
      ASSERT_TRUE(Binder::Create(policy, ranks, &b).ok()) << ranks;
      EXPECT_EQ(b->policy(), BindPolicy::kShare) << ranks;
      EXPECT_TRUE(b->note().empty()) << b->note();
      cpu_set_t seen;
      CPU_ZERO(&seen);
      int least = cores, most = 0, next_core = 0;
      for (int r = 0; r < ranks; ++r) {
        const BindTarget& t = b->TargetFor(r);
        ASSERT_TRUE(t.bound);
        EXPECT_EQ(t.index, next_core) << "rank " << r << " of " << ranks << ": cores are not side by side";
        next_core += t.count;
        least = std::min(least, t.count);
        most = std::max(most, t.count);
        cpu_set_t both;
        CPU_AND(&both, &seen, &t.mask);
        EXPECT_EQ(CPU_COUNT(&both), 0) << "rank " << r << " of " << ranks << " shares a CPU";
        CPU_OR(&seen, &seen, &t.mask);
        const std::string d = b->Describe(r);
        if (t.count == 1) EXPECT_NE(d.find("bound to core "), std::string::npos) << d;
        else EXPECT_NE(d.find("bound to cores "), std::string::npos) << d;
      }
      EXPECT_EQ(next_core, cores) << ranks << " ranks";
      EXPECT_LE(most - least, 1) << ranks << " ranks";
      EXPECT_EQ(CPU_COUNT(&seen), static_cast<int>(cpus.size())) << ranks << " ranks leave CPUs unused";
      if (ranks == cores) EXPECT_EQ(most, 1);
    }
  }
  // More ranks than cores: the default leaves them unbound; share wraps
  // around one core each and says so.
  std::unique_ptr<Binder> over;
  ASSERT_TRUE(Binder::Create(BindPolicy::kDefault, cores + 1, &over).ok());
  EXPECT_EQ(over->policy(), BindPolicy::kNone);
  EXPECT_EQ(over->Describe(0), "not bound");
  ASSERT_TRUE(Binder::Create(BindPolicy::kShare, cores + 1, &over).ok());
  EXPECT_NE(over->note().find("several ranks share one"), std::string::npos);
  EXPECT_EQ(over->TargetFor(cores).index, 0);
}

TEST(Options, DefaultsAndDoubleDash) {
  Options o;
  ASSERT_TRUE(Parse({"-n", "3", "--", "-weird-prog", "x"}, &o).ok());
  EXPECT_EQ(o.np, 3);
  EXPECT_TRUE(o.tag_output);
  EXPECT_EQ(o.bind, BindPolicy::kDefault);
  EXPECT_EQ(o.rsh, "ssh -o BatchMode=yes {host}");
  EXPECT_EQ(o.command, (std::vector<std::string>{"-weird-prog", "x"}));
  ASSERT_TRUE(Parse({"--help"}, &o).ok());
  EXPECT_TRUE(o.help);
}

TEST(Options, Errors) {
  struct Case {
    std::vector<const char*> args;
    const char* message;
  };
  std::vector<Case> cases = {
      {{"-np", "-3", "p"}, "bad -np '-3'"},
      {{"-np", "4x", "p"}, "bad -np '4x'"},
      {{"-np", "99999999999", "p"}, "bad -np"},
      {{"--timeout", "0", "p"}, "bad --timeout '0'"},
      {{"--timeout", "abc", "p"}, "bad --timeout 'abc'"},
      {{"-x", "1BAD=2", "p"}, "bad -x '1BAD=2'"},
      {{"-x", "=v", "p"}, "bad -x '=v'"},
      {{"--rsh", "  ", "p"}, "--rsh template is empty"},
      {{"--bind-to", "board", "p"}, "bad --bind-to 'board'"},
      {{"--bind-to", "cores", "p"}, "expected share, core, numa or none"},
      {{"-np", "2"}, "no program given"},
      {{"--hostfile", "a", "--hostfile", "b", "p"}, "--hostfile given twice"},
      {{"--frobnicate", "p"}, "unknown option '--frobnicate'"},
      {{"-H"}, "option -H needs a value"},
      {{"--min-np", "0", "p"}, "bad --min-np '0'"},
      {{"--max-np", "x", "p"}, "bad --max-np 'x'"},
      {{"--min-np", "3", "--max-np", "2", "p"}, "--min-np 3 is above --max-np 2"},
      {{"-np", "2", "--min-np", "3", "p"}, "--min-np 3 is above -np 2"},
      {{"--host-discovery-script", "", "p"}, "--host-discovery-script is empty"},
  };
  for (const Case& c : cases) {
    Options o;
    Status st = Parse(c.args, &o);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << c.message;
    EXPECT_NE(st.message().find(c.message), std::string::npos)
        << "got: " << st.message();
  }
}

TEST(Options, ElasticUsesHorovodsNames) {
  Options o;
  ASSERT_TRUE(Parse({"-np", "4", "p"}, &o).ok());
  EXPECT_FALSE(o.elastic);
  ASSERT_TRUE(Parse({"-np", "4", "--min-np", "2", "--max-np=6", "p"}, &o).ok());
  EXPECT_TRUE(o.elastic);
  EXPECT_EQ(o.min_np, 2);
  EXPECT_EQ(o.max_np, 6);
  ASSERT_TRUE(Parse({"-np", "2", "--host-discovery-script", "./hosts.sh", "p"}, &o).ok());
  EXPECT_TRUE(o.elastic);
  EXPECT_EQ(o.host_discovery_script, "./hosts.sh");
  ASSERT_TRUE(Parse({"--elastic", "-np", "2", "p"}, &o).ok());
  EXPECT_TRUE(o.elastic);
  EXPECT_EQ(o.min_np, 0);  // then -np
}

TEST(Hosts, ListSyntax) {
  std::vector<HostSlots> h;
  ASSERT_TRUE(ParseHostList("node1:4, node-2 ,10.0.0.3:2,ns_a", &h).ok());
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].name, "node1");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].name, "node-2");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].name, "10.0.0.3");
  EXPECT_EQ(h[2].slots, 2);
  EXPECT_EQ(h[3].name, "ns_a");

  for (const char* bad : {"", "a,", ",a", "a:", "a:0", "a:-1", "a:2x", ":3",
                          "a b", "a$(x)", "a:1:2"}) {
    std::vector<HostSlots> out;
    Status st = ParseHostList(bad, &out);
    EXPECT_FALSE(st.ok()) << "'" << bad << "' accepted";
    EXPECT_TRUE(out.empty()) << "partial result kept for '" << bad << "'";
  }
}

TEST(Hosts, HostfileSyntax) {
  std::vector<HostSlots> h;
  ASSERT_TRUE(ParseHostfileText("# cluster\n\n  alpha slots=3\nbeta:2 # two\n"
                                "gamma\r\ndelta slots=1 max_slots=8\n",
                                "hf", &h).ok());
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].name, "alpha");
  EXPECT_EQ(h[0].slots, 3);
  EXPECT_EQ(h[1].name, "beta");
  EXPECT_EQ(h[1].slots, 2);
  EXPECT_EQ(h[2].name, "gamma");
  EXPECT_EQ(h[2].slots, 1);
  EXPECT_EQ(h[3].slots, 1);

  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"a slots=2\nb slots=0\n", "hf:2"},
           {"a\nb cores=2\n", "hf:2: unexpected 'cores=2'"},
           {"a:2 slots=3\n", "hf:1: slots given twice"},
           {"# only a comment\n", "hf: no hosts"},
           {"a\n\n\nb!c\n", "hf:4"}}) {
    std::vector<HostSlots> out;
    Status st = ParseHostfileText(c.text, "hf", &out);
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
  }
}

TEST(Hosts, LocalNames) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost("127.1.2.3"));
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  EXPECT_TRUE(IsLocalHost(name));
  EXPECT_FALSE(IsLocalHost("fakehost"));
  EXPECT_FALSE(IsLocalHost("10.255.254.253"));
}

TEST(Placement, DefaultIsThisHost) {
  Placement p;
  ASSERT_TRUE(PlaceRanks({}, 5, false, &p).ok());
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_TRUE(p.all_local());
  ASSERT_EQ(p.ranks.size(), 5u);
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(p.ranks[r].rank, r);
    EXPECT_EQ(p.ranks[r].local_rank, r);
    EXPECT_EQ(p.ranks[r].local_size, 5);
  }
  EXPECT_FALSE(PlaceRanks({}, 0, false, &p).ok());
}

TEST(Placement, FillsHostsInOrderAndMergesDuplicates) {
  Placement p;
  std::vector<HostSlots> hosts = {{"a", 2}, {"b", 3}, {"a", 1}, {"c", 2}};
  ASSERT_TRUE(PlaceRanks(hosts, 5, false, &p).ok());
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[0].host, "a");
  EXPECT_EQ(p.nodes[0].slots, 3);
  // a gets 3 (its merged slots), b the remaining 2, c none.
  std::vector<int> node = {0, 0, 0, 1, 1};
  std::vector<int> local = {0, 1, 2, 0, 1};
  std::vector<int> lsize = {3, 3, 3, 2, 2};
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(p.ranks[r].node, node[r]) << r;
    EXPECT_EQ(p.ranks[r].local_rank, local[r]) << r;
    EXPECT_EQ(p.ranks[r].local_size, lsize[r]) << r;
  }
  EXPECT_EQ(p.nodes[2].nranks, 0);
  EXPECT_FALSE(p.all_local());
  // np 0: as many ranks as slots.
  ASSERT_TRUE(PlaceRanks(hosts, 0, false, &p).ok());
  EXPECT_EQ(p.ranks.size(), 8u);
}

TEST(Placement, Oversubscription) {
  Placement p;
  Status st = PlaceRanks({{"a", 1}, {"b", 1}}, 3, false, &p);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("only 2 slots (a:1, b:1)"), std::string::npos)
      << st.message();
  ASSERT_TRUE(PlaceRanks({{"a", 1}, {"b", 1}}, 5, true, &p).ok());
  EXPECT_EQ(p.nodes[0].nranks, 3);
  EXPECT_EQ(p.nodes[1].nranks, 2);
  // Extra ranks go to this machine when it is in the list.
  ASSERT_TRUE(PlaceRanks({{"a", 1}, {"localhost", 1}}, 4, false, &p).ok());
  EXPECT_EQ(p.nodes[0].nranks, 1);
  EXPECT_EQ(p.nodes[1].nranks, 3);
  EXPECT_EQ(p.local_rank_count(), 3);
  // Aliases of this machine are one node.
  ASSERT_TRUE(PlaceRanks({{"localhost", 1}, {"127.0.0.1", 2}}, 3, false, &p).ok());
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.ranks[2].local_rank, 2);
  EXPECT_EQ(p.ranks[2].local_size, 3);
}

TEST(RemoteCommand, Quoting) {
  EXPECT_EQ(ShellQuote("plain-word_1.0/x:y=z"), "plain-word_1.0/x:y=z");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
  EXPECT_EQ(ShellJoin({"env", "A=x y", "prog"}), "env 'A=x y' prog");
}

TEST(RemoteCommand, TemplateExpansion) {
  std::vector<std::string> w;
  ASSERT_TRUE(ExpandRshTemplate("ip netns exec {host}", "ns1", &w).ok());
  EXPECT_EQ(w, (std::vector<std::string>{"ip", "netns", "exec", "ns1"}));
  ASSERT_TRUE(ExpandRshTemplate("ssh -o 'ProxyCommand=a b' x{host}.{host}", "n", &w).ok());
  EXPECT_EQ(w, (std::vector<std::string>{"ssh", "-o", "ProxyCommand=a b", "xn.n"}));
  EXPECT_FALSE(ExpandRshTemplate("ssh 'unterminated", "n", &w).ok());
  EXPECT_FALSE(ExpandRshTemplate("   ", "n", &w).ok());
  EXPECT_TRUE(TemplateUsesRemoteShell({"/usr/bin/ssh", "h"}));
  EXPECT_TRUE(TemplateUsesRemoteShell({"rsh", "h"}));
  EXPECT_FALSE(TemplateUsesRemoteShell({"ip", "netns", "exec", "h"}));
  EXPECT_FALSE(TemplateUsesRemoteShell({"env", "X=h"}));
}

TEST(RemoteCommand, Argv) {
  EnvList env = {{"ZC_RANK", "3"}, {"V", "a b"}};
  // Without a secret variable: through ssh, the rank is a child of the
  // remote shell (which then reports its signal); locally exec'd as is.
  std::vector<std::string> argv;
  ASSERT_TRUE(BuildRemoteArgv("ssh -o BatchMode=yes {host}", "n7", env,
                              {"./prog", "x y"}, &argv).ok());
  EXPECT_EQ(argv, (std::vector<std::string>{
                      "ssh", "-o", "BatchMode=yes", "n7",
                      "sh -c 'env ZC_RANK=3 '\\''V=a b'\\'' ./prog '\\''x y'\\''; exit $?'"}));
  ASSERT_TRUE(BuildRemoteArgv("ip netns exec {host}", "ns2", env, {"./prog", "x y"},
                              &argv).ok());
  EXPECT_EQ(argv, (std::vector<std::string>{"ip", "netns", "exec", "ns2", "env",
                                            "ZC_RANK=3", "V=a b", "./prog", "x y"}));
}

TEST(RemoteCommand, JobKeyTravelsOnStandardInputNotTheCommandLine) {
  EnvList env = {{"ZC_RANK", "3"}, {"ZC_JOB_KEY", "secretkey0123"}, {"V", "a b"}};
  std::vector<std::string> argv;
  ASSERT_TRUE(BuildRemoteArgv("ssh {host}", "n7", env, {"./prog"}, &argv).ok());
  EXPECT_EQ(argv, (std::vector<std::string>{
                      "ssh", "n7",
                      "sh -c 'IFS= read -r ZC_JOB_KEY && export ZC_JOB_KEY && env ZC_RANK=3 "
                      "'\\''V=a b'\\'' ./prog; exit $?'"}));
  ASSERT_TRUE(BuildRemoteArgv("ip netns exec {host}", "ns2", env, {"./prog"}, &argv).ok());
  EXPECT_EQ(argv, (std::vector<std::string>{
                      "ip", "netns", "exec", "ns2", "sh", "-c",
                      "IFS= read -r ZC_JOB_KEY && export ZC_JOB_KEY && exec env ZC_RANK=3 'V=a b' ./prog"}));
  for (const std::string& w : argv) EXPECT_EQ(w.find("secretkey0123"), std::string::npos) << w;
  EXPECT_EQ(SecretInput(env), "secretkey0123\n");
  EXPECT_EQ(SecretInput({{"V", "x"}}), "");
}

TEST(RemoteCommand, RemoteShellExitCodes) {
  int sig = -1;
  EXPECT_EQ(RemoteShellFailure(137, &sig), "");
  EXPECT_EQ(sig, 9);
  EXPECT_EQ(RemoteShellFailure(129, &sig), "");
  EXPECT_EQ(sig, 1);
  EXPECT_NE(RemoteShellFailure(255, &sig).find("ssh's own failure"), std::string::npos);
  EXPECT_EQ(sig, 0);
  for (int code : {1, 4, 127, 128, 193, 254}) {
    EXPECT_EQ(RemoteShellFailure(code, &sig), "") << code;
    EXPECT_EQ(sig, 0) << code;
  }
}

// Reads everything currently in a pipe.
std::string Slurp(int fd) {
  std::string s;
  char buf[4096];
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  ssize_t r;
  while ((r = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(r));
  return s;
}

TEST(Output, WholeLinesWithPrefix) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  LineForwarder f(p[1], "[12] ", true);
  f.Feed("he", 2);
  EXPECT_EQ(Slurp(p[0]), "");  // nothing until the line is complete
  f.Feed("llo\nwor", 7);
  EXPECT_EQ(Slurp(p[0]), "[12] hello\n");
  f.Feed("ld\n\nlast", 8);
  EXPECT_EQ(Slurp(p[0]), "[12] world\n[12] \n");
  f.Flush();
  EXPECT_EQ(Slurp(p[0]), "[12] last\n");
  f.Flush();
  EXPECT_EQ(Slurp(p[0]), "");
  EXPECT_EQ(f.lines_written(), 4u);
  close(p[0]);
  close(p[1]);
}

TEST(Output, UntaggedKeepsBytes) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  LineForwarder f(p[1], "[0] ", false);
  f.Feed("a\nb", 3);
  f.Flush();
  EXPECT_EQ(Slurp(p[0]), "a\nb");
  close(p[0]);
  close(p[1]);
}

TEST(Output, OverlongLineIsCut) {
  // A memory file, not a pipe: a pipe could not hold a 1 MiB line unread.
  int fd = memfd_create("zcrun-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  LineForwarder f(fd, "[1] ", true);
  std::string big(LineForwarder::kMaxLine + 10, 'x');
  big[17] = 'y';
  f.Feed(big.data(), big.size());
  f.Flush();
  std::string out(static_cast<size_t>(lseek(fd, 0, SEEK_END)), '\0');
  ASSERT_EQ(pread(fd, out.data(), out.size(), 0), (ssize_t)out.size());
  std::string expect = "[1] " + big.substr(0, LineForwarder::kMaxLine) + "\n[1] " +
                       std::string(10, 'x') + "\n";
  EXPECT_EQ(out.size(), expect.size());
  EXPECT_TRUE(out == expect);
  EXPECT_EQ(f.lines_written(), 2u);
  close(fd);
}

TEST(Output, ReadFromReportsEof) {
  int src[2], dst[2];
  ASSERT_EQ(pipe(src), 0);
  ASSERT_EQ(pipe(dst), 0);
  fcntl(src[0], F_SETFL, O_NONBLOCK);
  LineForwarder f(dst[1], "[3] ", true);
  ASSERT_EQ(write(src[1], "one\ntw", 6), 6);
  EXPECT_TRUE(f.ReadFrom(src[0]));  // data, no EOF yet
  close(src[1]);
  EXPECT_FALSE(f.ReadFrom(src[0]));
  f.Flush();
  EXPECT_EQ(Slurp(dst[0]), "[3] one\n[3] tw\n");
  close(src[0]);
  close(dst[0]);
  close(dst[1]);
}

TEST(JobResources, KeyIsRandomHex) {
  std::string a, b;
  ASSERT_TRUE(GenerateJobKey(&a).ok());
  ASSERT_TRUE(GenerateJobKey(&b).ok());
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_EQ(ShmSegmentPrefix(a), "zc-" + a.substr(0, 16) + "-");
}

TEST(JobResources, RemovesOnlyThisJobsSegments) {
  char dir[] = "/tmp/zcrun-shm-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string key = "0123456789abcdef" + std::string(48, 'e');
  std::string other = "fedcba9876543210" + std::string(48, 'e');
  std::vector<std::string> mine = {"zc-0123456789abcdef-p2p-0", "zc-0123456789abcdef-x"};
  std::vector<std::string> keep = {"zc-fedcba9876543210-p2p-0", "zc-0123456789abcde-x",
                                   "unrelated", "zc-0123456789abcdefg"};
  for (const auto& n : mine) close(open((std::string(dir) + "/" + n).c_str(), O_CREAT | O_WRONLY, 0600));
  for (const auto& n : keep) close(open((std::string(dir) + "/" + n).c_str(), O_CREAT | O_WRONLY, 0600));
  std::string err;
  EXPECT_EQ(RemoveJobShmSegments(key, dir, &err), 2);
  EXPECT_EQ(err, "");
  struct stat st;
  for (const auto& n : mine) EXPECT_NE(stat((std::string(dir) + "/" + n).c_str(), &st), 0) << n;
  for (const auto& n : keep) {
    EXPECT_EQ(stat((std::string(dir) + "/" + n).c_str(), &st), 0) << n;
    unlink((std::string(dir) + "/" + n).c_str());
  }
  // A key too short to make a specific prefix removes nothing.
  EXPECT_EQ(RemoveJobShmSegments("", dir, &err), 0);
  (void)other;
  rmdir(dir);
}

TEST(Spawn, FindProgram) {
  std::string path;
  ASSERT_TRUE(FindProgram("sh", &path).ok());
  EXPECT_EQ(access(path.c_str(), X_OK), 0);
  EXPECT_TRUE(FindProgram("/bin/sh", &path).ok());
  Status st = FindProgram("zcrun-no-such-program", &path);
  EXPECT_NE(st.message().find("'zcrun-no-such-program' not found in PATH"), std::string::npos);
  st = FindProgram("/etc/hostname-not-there", &path);
  EXPECT_FALSE(st.ok());
  st = FindProgram("/tmp", &path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Is a directory"), std::string::npos) << st.message();
}

TEST(Spawn, MergeEnvironmentReplaces) {
  setenv("ZCT_MERGE", "old", 1);
  auto env = MergeEnvironment({{"ZCT_MERGE", "new"}, {"ZCT_ADDED", "1"}});
  int merge = 0, added = 0;
  for (const auto& e : env) {
    if (e.rfind("ZCT_MERGE=", 0) == 0) {
      ++merge;
      EXPECT_EQ(e, "ZCT_MERGE=new");
    }
    if (e == "ZCT_ADDED=1") ++added;
  }
  EXPECT_EQ(merge, 1);
  EXPECT_EQ(added, 1);
}

TEST(Supervisor, SignalNames) {
  EXPECT_EQ(SignalDescription(SIGKILL), "SIGKILL (9)");
  EXPECT_EQ(SignalDescription(SIGSEGV), "SIGSEGV (11)");
  EXPECT_EQ(SignalDescription(SIGTERM), "SIGTERM (15)");
}

}  // namespace
}  // namespace zc::launcher
