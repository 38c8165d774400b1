// ZC_SOCKET_IFNAME's grammar (NCCL_SOCKET_IFNAME's) and the choice of an
// interface, over made-up interface lists: every form of the grammar, the
// automatic order, and the error that names the interfaces there are.
// tests/launcher/interface_selection.sh checks the same on real interfaces
// in a network namespace.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/interfaces.h"

namespace zc::net {
namespace {

InterfaceSpec Parsed(const std::string& text) {
  InterfaceSpec s;
  Status st = InterfaceSpec::Parse(text, &s);
  EXPECT_TRUE(st.ok()) << text << ": " << st.message();
  return s;
}

using Names = std::vector<std::string>;

TEST(InterfaceSpec, PrefixList) {
  InterfaceSpec s = Parsed("eth,ib");
  EXPECT_FALSE(s.exclude());
  EXPECT_FALSE(s.exact());
  EXPECT_EQ(s.names(), (Names{"eth", "ib"}));
  EXPECT_TRUE(s.Matches("eth0"));
  EXPECT_TRUE(s.Matches("eth10"));
  EXPECT_TRUE(s.Matches("eth"));
  EXPECT_TRUE(s.Matches("ib0"));
  EXPECT_FALSE(s.Matches("veth0"));  // a prefix, not a substring
  EXPECT_FALSE(s.Matches("et"));
  EXPECT_FALSE(s.Matches("ETH0"));   // names are case-sensitive
  EXPECT_FALSE(s.Matches("lo"));
}

TEST(InterfaceSpec, OneCharacterPrefix) {
  // NCCL ignores values of one character; here "e" is the prefix it says.
  InterfaceSpec s = Parsed("e");
  EXPECT_TRUE(s.Matches("eth0"));
  EXPECT_FALSE(s.Matches("lo"));
}

TEST(InterfaceSpec, Exclude) {
  InterfaceSpec s = Parsed("^docker,lo");
  EXPECT_TRUE(s.exclude());
  EXPECT_FALSE(s.exact());
  EXPECT_EQ(s.names(), (Names{"docker", "lo"}));
  EXPECT_FALSE(s.Matches("docker0"));
  EXPECT_FALSE(s.Matches("lo"));
  EXPECT_FALSE(s.Matches("loop7"));
  EXPECT_TRUE(s.Matches("eth0"));
  EXPECT_TRUE(s.Matches("ib0"));
}

TEST(InterfaceSpec, Exact) {
  InterfaceSpec s = Parsed("=eth0,eth1");
  EXPECT_FALSE(s.exclude());
  EXPECT_TRUE(s.exact());
  EXPECT_EQ(s.names(), (Names{"eth0", "eth1"}));
  EXPECT_TRUE(s.Matches("eth0"));
  EXPECT_TRUE(s.Matches("eth1"));
  EXPECT_FALSE(s.Matches("eth10"));
  EXPECT_FALSE(s.Matches("eth"));
  EXPECT_FALSE(s.Matches("eth2"));
}

TEST(InterfaceSpec, ExcludeExact) {
  InterfaceSpec s = Parsed("^=docker0,lo");
  EXPECT_TRUE(s.exclude());
  EXPECT_TRUE(s.exact());
  EXPECT_FALSE(s.Matches("docker0"));
  EXPECT_FALSE(s.Matches("lo"));
  EXPECT_TRUE(s.Matches("docker1"));
  EXPECT_TRUE(s.Matches("docker01"));
  EXPECT_TRUE(s.Matches("eth0"));
}

TEST(InterfaceSpec, CaretAfterEqualsIsPartOfTheName) {
  // ^ comes first ("^=name"); "=^eth" asks for the exact name "^eth".
  InterfaceSpec s = Parsed("=^eth");
  EXPECT_FALSE(s.exclude());
  EXPECT_TRUE(s.exact());
  EXPECT_EQ(s.names(), (Names{"^eth"}));
  EXPECT_FALSE(s.Matches("eth0"));
}

TEST(InterfaceSpec, EmptyItemsAreSkipped) {
  EXPECT_EQ(Parsed(",eth,,ib,").names(), (Names{"eth", "ib"}));
  EXPECT_EQ(Parsed("^,lo").names(), (Names{"lo"}));
}

TEST(InterfaceSpec, PortSuffixIsIgnoredAsInNccl) {
  InterfaceSpec s = Parsed("=eth0:1,ib0:2");
  EXPECT_EQ(s.names(), (Names{"eth0", "ib0"}));
  EXPECT_TRUE(s.Matches("eth0"));
  EXPECT_FALSE(s.Matches("eth0:1"));
}

TEST(InterfaceSpec, NoNamesIsAnError) {
  for (const char* text : {"", "^", "=", "^=", ",", "^,,", ":1", "=:2,"}) {
    InterfaceSpec s;
    Status st = InterfaceSpec::Parse(text, &s);
    EXPECT_EQ(st.code(), ZC_ERR_INVALID_ARG) << "'" << text << "'";
    EXPECT_NE(st.message().find("names no interface"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::string("'") + text + "'"), std::string::npos)
        << st.message();
  }
}

TEST(InterfaceSpec, Describe) {
  EXPECT_EQ(Parsed("eth").Describe(), "starting with eth");
  EXPECT_EQ(Parsed("eth,ib,en").Describe(), "starting with eth, ib or en");
  EXPECT_EQ(Parsed("^docker,lo").Describe(), "starting with none of docker, lo");
  EXPECT_EQ(Parsed("=eth0,eth1").Describe(), "equal to eth0 or eth1");
  EXPECT_EQ(Parsed("^=docker0").Describe(), "equal to none of docker0");
}

// lo, docker0, eth0 (up), eth1 (down), ib0 (no IPv4), ib1, wg0 (no IPv4).
std::vector<NetInterface> Machine() {
  return {{"lo", "127.0.0.1", true, true},
          {"docker0", "172.17.0.1", true, false},
          {"eth0", "10.0.0.2", true, false},
          {"eth1", "10.1.0.2", false, false},
          {"ib0", "", true, false},
          {"ib1", "192.168.0.2", true, false},
          {"wg0", "", true, false}};
}

std::string Chosen(const std::string& spec, const std::vector<NetInterface>& ifs) {
  NetInterface i;
  Status st = ChooseInterface(spec, ifs, &i);
  if (!st.ok()) return "error: " + st.message();
  return i.name + " " + i.ipv4;
}

TEST(ChooseInterface, PrefixTakesTheFirstUsableInTheSystemsOrder) {
  EXPECT_EQ(Chosen("eth", Machine()), "eth0 10.0.0.2");
  // The list's order, not the value's: eth0 comes before ib1.
  EXPECT_EQ(Chosen("ib,eth", Machine()), "eth0 10.0.0.2");
  // ib0 has no IPv4 address, so ib1.
  EXPECT_EQ(Chosen("ib", Machine()), "ib1 192.168.0.2");
  EXPECT_EQ(Chosen("l", Machine()), "lo 127.0.0.1");
}

TEST(ChooseInterface, Exclude) {
  EXPECT_EQ(Chosen("^lo", Machine()), "docker0 172.17.0.1");
  EXPECT_EQ(Chosen("^lo,docker", Machine()), "eth0 10.0.0.2");
  EXPECT_EQ(Chosen("^lo,docker,eth", Machine()), "ib1 192.168.0.2");
}

TEST(ChooseInterface, Exact) {
  EXPECT_EQ(Chosen("=eth0", Machine()), "eth0 10.0.0.2");
  EXPECT_EQ(Chosen("=ib1,eth0", Machine()), "eth0 10.0.0.2");
  EXPECT_EQ(Chosen("^=lo,docker0", Machine()), "eth0 10.0.0.2");
  EXPECT_EQ(Chosen("^=lo,docker0,eth0", Machine()), "ib1 192.168.0.2");
}

TEST(ChooseInterface, DownOrAddresslessInterfacesAreNotChosen) {
  std::string e = Chosen("=eth1", Machine());
  EXPECT_EQ(e.rfind("error: ", 0), 0u) << e;
  EXPECT_NE(e.find("eth1 10.1.0.2 (down)"), std::string::npos) << e;
  e = Chosen("wg", Machine());
  EXPECT_NE(e.find("wg0 (no IPv4 address)"), std::string::npos) << e;
}

TEST(ChooseInterface, NoMatchNamesTheValueAndEveryInterface) {
  for (const char* spec : {"nosuch", "=eth", "^lo,docker,eth,ib"}) {
    NetInterface i;
    Status st = ChooseInterface(spec, Machine(), &i);
    ASSERT_EQ(st.code(), ZC_ERR_INVALID_ARG) << spec;
    const std::string& m = st.message();
    EXPECT_NE(m.find(std::string("ZC_SOCKET_IFNAME='") + spec + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("interfaces here: lo 127.0.0.1, docker0 172.17.0.1, eth0 10.0.0.2, "
                     "eth1 10.1.0.2 (down), ib0 (no IPv4 address), ib1 192.168.0.2, "
                     "wg0 (no IPv4 address)"),
              std::string::npos) << m;
  }
  NetInterface i;
  Status st = ChooseInterface("=eth", Machine(), &i);
  EXPECT_NE(st.message().find("a name equal to eth "), std::string::npos) << st.message();
}

TEST(ChooseInterface, NoNamesIsAnError) {
  NetInterface i;
  EXPECT_EQ(ChooseInterface("^", Machine(), &i).code(), ZC_ERR_INVALID_ARG);
  EXPECT_EQ(ChooseInterface("=", Machine(), &i).code(), ZC_ERR_INVALID_ARG);
}

TEST(ChooseInterface, AutomaticOrderIsNccls) {
  // "ib" first.
  EXPECT_EQ(Chosen("", Machine()), "ib1 192.168.0.2");
  // Then anything but docker, lo and virbr, in the system's order.
  std::vector<NetInterface> ifs = {{"lo", "127.0.0.1", true, true},
                                   {"virbr0", "192.168.122.1", true, false},
                                   {"docker0", "172.17.0.1", true, false},
                                   {"ens3", "10.0.0.5", true, false},
                                   {"eth0", "10.0.0.6", true, false}};
  EXPECT_EQ(Chosen("", ifs), "ens3 10.0.0.5");
  ifs.erase(ifs.begin() + 3, ifs.end());
  EXPECT_EQ(Chosen("", ifs), "docker0 172.17.0.1");  // then docker
  ifs.pop_back();
  EXPECT_EQ(Chosen("", ifs), "lo 127.0.0.1");        // then lo
  ifs.erase(ifs.begin());
  EXPECT_EQ(Chosen("", ifs), "virbr0 192.168.122.1");  // then virbr
  ifs[0].up = false;
  std::string e = Chosen("", ifs);
  EXPECT_NE(e.find("ZC_SOCKET_IFNAME unset"), std::string::npos) << e;
  EXPECT_NE(e.find("virbr0 192.168.122.1 (down)"), std::string::npos) << e;
  EXPECT_NE(Chosen("", {}).find("interfaces here: none"), std::string::npos);
}

TEST(ListInterfaces, ThisMachine) {
  std::vector<NetInterface> ifs;
  ASSERT_TRUE(ListInterfaces(&ifs).ok());
  ASSERT_FALSE(ifs.empty());
  Names seen;
  for (const auto& i : ifs) {
    EXPECT_FALSE(i.name.empty());
    for (const auto& n : seen) EXPECT_NE(n, i.name) << "listed twice";
    seen.push_back(i.name);
    if (i.name == "lo" && i.up) {
      EXPECT_TRUE(i.loopback);
      EXPECT_EQ(i.ipv4, "127.0.0.1");
    }
  }
}

}  // namespace
}  // namespace zc::net
