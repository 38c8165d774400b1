// Config parsing: bad values are rejected with a message naming the variable,
// and every variable is documented in docs/environment.md.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/config.h"
#include "zc_build_config.h"

namespace {

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

zc::Status Load(zc::Config* c) { return zc::Config::FromEnv(c); }

TEST(Config, DefaultsWhenUnset) {
  zc::Config c;
  ASSERT_TRUE(Load(&c).ok());
  EXPECT_EQ(c.transport, "auto");
  EXPECT_DOUBLE_EQ(c.timeout_s, 300.0);
  EXPECT_EQ(c.algo, "auto");
  EXPECT_FALSE(c.trace_precise_clock);
  EXPECT_EQ(c.tcp_poll_us, 200);
}

struct BadCase {
  const char* name;
  const char* value;
};

TEST(Config, BadValuesNameTheVariable) {
  const BadCase cases[] = {
      {"ZC_TIMEOUT", "-1"},          {"ZC_TIMEOUT", "abc"},
      {"ZC_TIMEOUT", "5s"},          {"ZC_DEBUG", "LOUD"},
      {"ZC_DEBUG_SUBSYS", "nosuch"}, {"ZC_TRANSPORT", "udp"},
      {"ZC_SOCKETS_PER_PEER", "0"},  {"ZC_SOCKETS_PER_PEER", "17"},
      {"ZC_NUM_CQS", "x"},           {"ZC_QPS_PER_PEER", "-3"},
      {"ZC_POOL_CHUNK", "12"},       {"ZC_POOL_CHUNK", "1T"},
      {"ZC_SHM_CMA", "maybe"},       {"ZC_VERBS_FLAG", "fast"},
      {"ZC_ALGO", "ring;hd"},        {"ZC_CHUNK", "1"},
      {"ZC_RANK", "-1"},             {"ZC_SIZE", "0"},
      {"ZC_IB_PORT", "300"},         {"ZC_TCP_CONGESTION", "reno;x"},
      {"ZC_TCP_CONGESTION", "a_name_far_too_long"},
      {"ZC_TRACE_CLOCK", "exact"},   {"ZC_TRACE_CLOCK", "Precise "},
      {"ZC_TCP_POLL_US", "-1"},      {"ZC_TCP_POLL_US", "100001"},
      {"ZC_TCP_POLL_US", "5ms"},
  };
  for (const auto& bc : cases) {
    EnvGuard g(bc.name, bc.value);
    zc::Config c;
    zc::Status st = Load(&c);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << bc.name << "=" << bc.value;
    EXPECT_NE(st.message().find(bc.name), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(bc.value), std::string::npos) << st.message();
  }
}

// Set but empty: refused, listing the valid values (not silently "auto").
TEST(Config, EmptyTransportRefused) {
  EnvGuard g("ZC_TRANSPORT", "");
  zc::Config c;
  zc::Status st = Load(&c);
  EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("ZC_TRANSPORT=\"\""), std::string::npos) << st.message();
  for (const char* valid : {"auto", "shm", "tcp", "verbs"})
    EXPECT_NE(st.message().find(valid), std::string::npos) << st.message();
}

TEST(Config, RankMustBeBelowSize) {
  EnvGuard a("ZC_RANK", "3"), b("ZC_SIZE", "3");
  zc::Config c;
  EXPECT_EQ(Load(&c).code(), ZC_ERR_INVALID_ARG);
}

TEST(Config, GoodValuesParse) {
  EnvGuard a("ZC_TIMEOUT", "2.5"), b("ZC_POOL_CHUNK", "128M"), d("ZC_DEBUG", "trace"),
      e("ZC_TRANSPORT", "TCP"), f("ZC_DEBUG_SUBSYS", "^p2p,tcp"), g("ZC_CHUNK", "256k"),
      h("ZC_TCP_CONGESTION", "cubic"), i("ZC_TRACE_CLOCK", "precise"), j("ZC_TCP_POLL_US", "0");
  zc::Config c;
  ASSERT_TRUE(Load(&c).ok());
  EXPECT_EQ(c.tcp_poll_us, 0);
  EXPECT_TRUE(c.trace_precise_clock);
  EXPECT_DOUBLE_EQ(c.timeout_s, 2.5);
  EXPECT_EQ(c.pool_chunk_bytes, 128u << 20);
  EXPECT_EQ(c.debug, zc::log::Level::kTrace);
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.chunk_bytes, 256u << 10);
  EXPECT_EQ(c.tcp_congestion, "cubic");
  EXPECT_EQ(c.debug_subsys & zc::log::kP2p, 0u);
  EXPECT_NE(c.debug_subsys & zc::log::kColl, 0u);
}

// Values match without regard to case and are kept in their documented
// spelling: the code that reads them compares with "on", "off", "ordered".
TEST(Config, ChoicesIgnoreCaseAndAreStoredCanonically) {
  {
    EnvGuard a("ZC_TCP_RECV_POST", "OFF"), b("ZC_SHM_CMA", "Off"), d("ZC_VERBS_FLAG", "ORDERED"),
        e("ZC_GPU_IPC", "AUTO"), f("ZC_TRACE_CLOCK", "Precise"), g("ZC_TRANSPORT", "Shm");
    zc::Config c;
    ASSERT_TRUE(Load(&c).ok());
    EXPECT_FALSE(c.tcp_recv_post);
    EXPECT_EQ(c.shm_cma, "off");
    EXPECT_EQ(c.verbs_flag_mode, "ordered");
    EXPECT_EQ(c.gpu_ipc, "auto");
    EXPECT_TRUE(c.trace_precise_clock);
    EXPECT_EQ(c.transport, "shm");
  }
  {
    EnvGuard a("ZC_TCP_RECV_POST", "off");
    zc::Config c;
    ASSERT_TRUE(Load(&c).ok());
    EXPECT_FALSE(c.tcp_recv_post);
  }
  EnvGuard a("ZC_TCP_RECV_POST", "ON"), b("ZC_SHM_CMA", "ON");
  zc::Config c;
  ASSERT_TRUE(Load(&c).ok());
  EXPECT_TRUE(c.tcp_recv_post) << "ON is on";
  EXPECT_EQ(c.shm_cma, "on");
}

// The unknown item is named and the valid names are listed.
TEST(Config, UnknownSubsystemListsTheValidOnes) {
  for (const char* bad : {"nosuch", "p2p,nosuch", "^tcp,nosuch", "p2p,", "^"}) {
    EnvGuard g("ZC_DEBUG_SUBSYS", bad);
    zc::Config c;
    zc::Status st = Load(&c);
    ASSERT_EQ(st.code(), ZC_ERR_INVALID_ARG) << bad;
    EXPECT_NE(st.message().find("ZC_DEBUG_SUBSYS"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(zc::log::SubsysNames()), std::string::npos) << st.message();
    if (strstr(bad, "nosuch")) {
      EXPECT_NE(st.message().find("\"nosuch\" is not one"), std::string::npos) << st.message();
    }
  }
  EXPECT_EQ(zc::log::SubsysNames(),
            "common, bootstrap, p2p, shm, tcp, verbs, coll, ps, engine, gpu, launcher");
  for (const char* good : {"all", "All", "coll", "P2P,tcp", "^engine"}) {
    EnvGuard g("ZC_DEBUG_SUBSYS", good);
    zc::Config c;
    EXPECT_TRUE(Load(&c).ok()) << good;
  }
}

// ZC_POOL_MAX below ZC_POOL_CHUNK could only fail later (zc_init takes its
// workspace from the first chunk): rejected at start, giving the minimum.
TEST(Config, PoolMaxBelowChunkGivesTheMinimum) {
  {
    EnvGuard g("ZC_POOL_MAX", "16M");
    zc::Config c;
    zc::Status st = Load(&c);
    ASSERT_EQ(st.code(), ZC_ERR_INVALID_ARG);
    EXPECT_NE(st.message().find("ZC_POOL_MAX=\"16M\""), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("at least ZC_POOL_CHUNK (67108864 bytes"), std::string::npos)
        << st.message();
  }
  {
    EnvGuard g("ZC_POOL_MAX", "16M"), h("ZC_POOL_CHUNK", "4M");
    zc::Config c;
    ASSERT_TRUE(Load(&c).ok());
    EXPECT_EQ(c.pool_max_bytes, 16u << 20);
  }
  for (const char* ok : {"0", "64M", "1G"}) {
    EnvGuard g("ZC_POOL_MAX", ok);
    zc::Config c;
    EXPECT_TRUE(Load(&c).ok()) << ok;
  }
}

TEST(Log, VersionBanner) {
  std::string b = zc::log::VersionBanner();
  EXPECT_EQ(b.rfind(std::string("zcomm ") + ZC_VERSION + " (cuda ", 0), 0u) << b;
  for (const char* part : {"cuda ", ", verbs ", ", pmix ", ", hwloc "})
    EXPECT_NE(b.find(part), std::string::npos) << b;
  EXPECT_EQ(b.back(), ')') << b;
}

TEST(Config, ParseBytes) {
  size_t v;
  EXPECT_TRUE(zc::ParseBytes("4096", &v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(zc::ParseBytes("1GiB", &v));
  EXPECT_EQ(v, 1ull << 30);
  EXPECT_FALSE(zc::ParseBytes("-5", &v));
  EXPECT_FALSE(zc::ParseBytes("", &v));
  EXPECT_FALSE(zc::ParseBytes("5Q", &v));
  EXPECT_FALSE(zc::ParseBytes("99999999999999999999", &v));
}

TEST(Config, EveryVariableIsDocumented) {
  const char* dir = getenv("ZC_DOCS_DIR");
  ASSERT_NE(dir, nullptr);
  std::ifstream in(std::string(dir) + "/environment.md");
  ASSERT_TRUE(in.good()) << "docs/environment.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  for (const auto& v : zc::ConfigVars())
    EXPECT_NE(ss.str().find(std::string("`") + v.name + "`"), std::string::npos)
        << v.name << " is not documented in docs/environment.md";
}

}  // namespace
