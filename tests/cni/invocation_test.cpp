// dpu-cni's validation of the environment, CNI_ARGS and the network config:
// each bad input gets the spec's code and a details text naming what to fix.
#include <catch2/catch.hpp>

#include <map>

#include "cni/invocation.h"
#include "cni/versions.h"

using namespace dpu::cni;

namespace {

struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](std::string_view k) -> std::optional<std::string> {
      auto it = vars.find(std::string(k));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

Env addEnv() {
  return Env{{{"CNI_COMMAND", "ADD"},
              {"CNI_CONTAINERID", "c0ffee"},
              {"CNI_NETNS", "/proc/self/ns/net"},
              {"CNI_IFNAME", "eth0"},
              {"CNI_PATH", "/opt/cni/bin"}}};
}

const char* kConf = R"({"cniVersion":"1.1.0","name":"dpunet","type":"dpu-cni"})";

uint32_t code(ErrorCode c) { return static_cast<uint32_t>(c); }

}  // namespace

TEST_CASE("a complete ADD is accepted with every field read") {
  Env env = addEnv();
  env.vars["CNI_ARGS"] = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0;K8S_POD_UID=u-1;"
                         "K8S_POD_INFRA_CONTAINER_ID=c0ffee;FOO=bar";
  std::string conf = R"({"cniVersion":"1.0.0","name":"dpunet","type":"dpu-cni","socket":"/tmp/s.sock","mtu":1400,
    "logFile":"/tmp/x.log","logLevel":"debug","timeout":3.5,"deviceID":"0000:03:00.4","otherPlugin":{"x":1},
    "runtimeConfig":{"mac":"0A:58:0A:00:00:05","deviceID":"03:00.2","portMappings":[],"ips":["10.244.1.7/24","fd00::7"]},
    "dns":{"nameservers":["10.96.0.10"]},"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"x"}]}})";
  Invocation inv;
  auto bad = parseInvocation(env.lookup(), conf, inv);
  REQUIRE_FALSE(bad);
  CHECK(inv.verb == Verb::kAdd);
  CHECK(inv.cni_version == "1.0.0");
  CHECK(inv.network_name == "dpunet");
  CHECK(inv.socket == "/tmp/s.sock");
  CHECK(inv.mtu == 1400);
  CHECK(inv.timeout_seconds == 3.5);
  CHECK(inv.log_level == "debug");
  CHECK(inv.device_id == "0000:03:00.2");  // runtimeConfig wins over the top level
  CHECK(inv.requested_mac == "0a:58:0a:00:00:05");
  CHECK(inv.requested_ips == std::vector<std::string>{"10.244.1.7", "fd00::7"});
  CHECK(inv.pod.pod_namespace == "ns1");
  CHECK(inv.pod.pod_name == "web-0");
  CHECK(inv.pod.pod_uid == "u-1");
  CHECK(inv.pod.infra_container_id == "c0ffee");
  REQUIRE(inv.prev_result);
  CHECK((*inv.prev_result)["interfaces"][0]["name"] == "x");
  REQUIRE(inv.dns);
}

TEST_CASE("defaults apply when optional fields are absent") {
  Env env = addEnv();
  Invocation inv;
  REQUIRE_FALSE(parseInvocation(env.lookup(), kConf, inv));
  CHECK(inv.socket == std::string(kDefaultSocket));
  CHECK(inv.mtu == 0);
  CHECK(inv.timeout_seconds == kDefaultTimeoutSeconds);
  CHECK(inv.device_id.empty());
  CHECK(inv.requested_mac.empty());
}

TEST_CASE("Multus' top-level deviceID and pciBusID choose the VF") {
  Env env = addEnv();
  Invocation inv;
  REQUIRE_FALSE(parseInvocation(env.lookup(),
                                R"({"cniVersion":"1.1.0","name":"n","type":"dpu-cni","pciBusID":"0000:3b:02.1"})", inv));
  CHECK(inv.device_id == "0000:3b:02.1");
  Invocation inv2;
  REQUIRE_FALSE(parseInvocation(
      env.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"dpu-cni","deviceID":"0000:3B:02.3","pciBusID":"0000:3b:02.1"})",
      inv2));
  CHECK(inv2.device_id == "0000:3b:02.3");
}

TEST_CASE("environment errors are code 4 and name the variable") {
  Invocation inv;
  SECTION("no CNI_COMMAND") {
    Env env;
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == code(ErrorCode::kInvalidEnvironment));
    CHECK_THAT(bad->msg, Catch::Contains("CNI_COMMAND"));
  }
  SECTION("unknown CNI_COMMAND") {
    Env env{{{"CNI_COMMAND", "FROB"}}};
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == 4);
  }
  SECTION("ADD without CNI_NETNS and CNI_IFNAME") {
    Env env = addEnv();
    env.vars.erase("CNI_NETNS");
    env.vars.erase("CNI_IFNAME");
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == 4);
    CHECK_THAT(bad->msg, Catch::Contains("CNI_NETNS,CNI_IFNAME"));
  }
  SECTION("DEL does not need CNI_NETNS") {
    Env env = addEnv();
    env.vars["CNI_COMMAND"] = "DEL";
    env.vars.erase("CNI_NETNS");
    CHECK_FALSE(parseInvocation(env.lookup(), kConf, inv));
  }
  SECTION("DEL with a netns that is gone is fine") {
    Env env = addEnv();
    env.vars["CNI_COMMAND"] = "DEL";
    env.vars["CNI_NETNS"] = "/run/netns/gone-for-good";
    CHECK_FALSE(parseInvocation(env.lookup(), kConf, inv));
  }
  SECTION("STATUS and GC need CNI_PATH only") {
    Env env{{{"CNI_COMMAND", "STATUS"}}};
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK_THAT(bad->msg, Catch::Contains("CNI_PATH"));
    env.vars["CNI_PATH"] = "/opt/cni/bin";
    CHECK_FALSE(parseInvocation(env.lookup(), kConf, inv));
  }
  SECTION("ADD into a netns that does not exist") {
    Env env = addEnv();
    env.vars["CNI_NETNS"] = "/run/netns/does-not-exist-" + std::to_string(::getpid());
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == 4);
    CHECK_THAT(bad->details, Catch::Contains("does not exist"));
  }
  SECTION("ADD into a file that is not a netns") {
    Env env = addEnv();
    env.vars["CNI_NETNS"] = "/proc/self/status";
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == 4);
    CHECK_THAT(bad->details, Catch::Contains("not a network namespace"));
  }
  SECTION("bad container id") {
    Env env = addEnv();
    env.vars["CNI_CONTAINERID"] = "-bad id";
    auto bad = parseInvocation(env.lookup(), kConf, inv);
    REQUIRE(bad);
    CHECK(bad->code == 4);
    CHECK_THAT(bad->details, Catch::Contains("CNI_CONTAINERID"));
  }
}

TEST_CASE("interface names follow the kernel's rules, code 4") {
  CHECK_FALSE(checkIfname("eth0"));
  CHECK_FALSE(checkIfname("abcdefghijklmno"));  // 15
  auto longer = checkIfname("abcdefghijklmnop");  // 16
  REQUIRE(longer);
  CHECK(longer->code == 4);
  CHECK_THAT(longer->details, Catch::Contains("at most 15"));
  CHECK(checkIfname("."));
  CHECK(checkIfname(".."));
  CHECK(checkIfname("a/b"));
  CHECK(checkIfname("a:b"));
  CHECK(checkIfname("a b"));
  CHECK(checkIfname(""));
}

TEST_CASE("CNI_ARGS: known keys, IgnoreUnknown anywhere, malformed pairs") {
  PodArgs pod;
  CHECK_FALSE(parseCniArgs("K8S_POD_NAMESPACE=a;K8S_POD_NAME=b", pod));
  CHECK(pod.pod_name == "b");
  CHECK_FALSE(parseCniArgs("", pod));
  CHECK_FALSE(parseCniArgs("K8S_POD_NAME=b;", pod));
  auto unknown = parseCniArgs("FOO=bar", pod);
  REQUIRE(unknown);
  CHECK(unknown->code == 4);
  CHECK_THAT(unknown->details, Catch::Contains("FOO") && Catch::Contains("IgnoreUnknown"));
  CHECK_FALSE(parseCniArgs("FOO=bar;IgnoreUnknown=1", pod));
  CHECK_FALSE(parseCniArgs("IgnoreUnknown=true;FOO=bar", pod));
  CHECK_FALSE(parseCniArgs("IgnoreUnknown=True;FOO=bar", pod));
  CHECK(parseCniArgs("IgnoreUnknown=0;FOO=bar", pod));
  CHECK(parseCniArgs("IgnoreUnknown=maybe", pod));
  CHECK(parseCniArgs("novalue", pod));
  CHECK(parseCniArgs("=x", pod));
}

TEST_CASE("version negotiation") {
  CHECK(isSupported("1.1.0"));
  CHECK(isSupported("1.0.0"));
  CHECK(isSupported("0.4.0"));
  CHECK_FALSE(isSupported("0.2.0"));
  CHECK_FALSE(isSupported("2.0.0"));
  CHECK(highestCommon({"0.4.0", "1.1.0", "1.0.0"}) == std::optional<std::string>("1.1.0"));
  CHECK(highestCommon({"0.4.0", "9.0.0"}) == std::optional<std::string>("0.4.0"));
  CHECK_FALSE(highestCommon({"0.1.0", "9.0.0"}));
  CHECK(allowsCheck("0.4.0"));
  CHECK_FALSE(allowsCheck("0.3.1"));
  CHECK(parseSpecVersion("1.0") == std::optional<SpecVersion>(SpecVersion{1, 0, 0}));
  CHECK_FALSE(parseSpecVersion("1.x.0"));
  CHECK_FALSE(parseSpecVersion("1.0.0.0"));

  Env env = addEnv();
  Invocation inv;
  SECTION("unknown cniVersion is code 1, echoed back") {
    auto bad = parseInvocation(env.lookup(), R"({"cniVersion":"9.9.9","name":"n","type":"t"})", inv);
    REQUIRE(bad);
    CHECK(bad->code == 1);
    CHECK(inv.cni_version == "9.9.9");
    CHECK_THAT(bad->details, Catch::Contains("1.1.0"));
  }
  SECTION("cniVersions alone: the highest we share") {
    REQUIRE_FALSE(parseInvocation(env.lookup(), R"({"cniVersions":["0.4.0","1.0.0","3.0.0"],"name":"n","type":"t"})", inv));
    CHECK(inv.cni_version == "1.0.0");
  }
  SECTION("no version at all is 0.1.0, code 1") {
    auto bad = parseInvocation(env.lookup(), R"({"name":"n","type":"t"})", inv);
    REQUIRE(bad);
    CHECK(bad->code == 1);
  }
  SECTION("cniVersion that is not a string is a decode failure") {
    auto bad = parseInvocation(env.lookup(), R"({"cniVersion":1,"name":"n","type":"t"})", inv);
    REQUIRE(bad);
    CHECK(bad->code == 6);
  }
  SECTION("CHECK needs 0.4.0 or later") {
    env.vars["CNI_COMMAND"] = "CHECK";
    auto bad = parseInvocation(env.lookup(), R"({"cniVersion":"0.3.1","name":"n","type":"t","prevResult":{}})", inv);
    REQUIRE(bad);
    CHECK(bad->code == 1);
  }
  SECTION("VERSION echoes the input version and ignores garbage") {
    Env v{{{"CNI_COMMAND", "VERSION"}}};
    REQUIRE_FALSE(parseInvocation(v.lookup(), R"({"cniVersion":"0.4.0"})", inv));
    CHECK(inv.cni_version == "0.4.0");
    Invocation inv2;
    REQUIRE_FALSE(parseInvocation(v.lookup(), "not json", inv2));
    CHECK(inv2.cni_version == std::string(kNewestVersion));
  }
}

TEST_CASE("network config errors: 6 for bad JSON, 7 for our fields, 2 for ipam") {
  Env env = addEnv();
  auto codeOf = [&](const std::string& conf) -> uint32_t {
    Invocation inv;
    auto bad = parseInvocation(env.lookup(), conf, inv);
    return bad ? bad->code : 0;
  };
  CHECK(codeOf("{not json") == 6);
  CHECK(codeOf("[1,2]") == 6);
  CHECK(codeOf("") == 6);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","type":"t"})") == 7);                        // no name
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"","type":"t"})") == 7);               // empty name
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"bad name","type":"t"})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n"})") == 7);                        // no type
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","mtu":"1500"})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","mtu":100000})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","socket":"relative.sock"})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","socket":5})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","logLevel":"loud"})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","timeout":0})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","deviceID":"eth3"})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":{"mac":"zz"}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":{"mac":"01:00:5e:00:00:01"}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":[]})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":{"ips":["10.0.0.300"]}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":{"ips":"10.0.0.3"}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","runtimeConfig":{"ips":["10.0.0.3","10.0.0.4"]}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","prevResult":{"interfaces":{}}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","dns":{"nameservers":"x"}})") == 7);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","ipam":{"type":"host-local"}})") == 2);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","ipam":{}})") == 0);
  CHECK(codeOf(R"({"cniVersion":"1.1.0","name":"n","type":"t","someoneElses":[1,2,3]})") == 0);
  Invocation inv;
  auto bad = parseInvocation(env.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t","mtu":"1500"})", inv);
  REQUIRE(bad);
  CHECK_THAT(bad->details, Catch::Contains("mtu"));
  auto ipam = parseInvocation(env.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t","ipam":{"type":"host-local"}})", inv);
  REQUIRE(ipam);
  CHECK_THAT(ipam->details, Catch::Contains("\"ipam\": {\"type\":\"host-local\"}"));
}

TEST_CASE("stdin is capped in size and nesting depth before it is parsed, code 6") {
  Env env = addEnv();
  const std::string head = R"({"cniVersion":"1.1.0","name":"n","type":"t","someoneElses":")";
  auto padded = [&](size_t total) { return head + std::string(total - head.size() - 2, 'x') + "\"}"; };
  Invocation inv;
  CHECK_FALSE(parseInvocation(env.lookup(), padded(kMaxConfigBytes), inv));
  auto big = parseInvocation(env.lookup(), padded(kMaxConfigBytes + 1), inv);
  REQUIRE(big);
  CHECK(big->code == 6);
  CHECK_THAT(big->details, Catch::Contains("at most 256 KiB"));

  // Nesting: the configuration object is level 1, another plugin's field may go to the cap.
  auto nested = [&](size_t levels) {
    return R"({"cniVersion":"1.1.0","name":"n","type":"t","someoneElses":)" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  CHECK_FALSE(parseInvocation(env.lookup(), nested(kMaxConfigDepth), inv));
  auto deep = parseInvocation(env.lookup(), nested(kMaxConfigDepth + 1), inv);
  REQUIRE(deep);
  CHECK(deep->code == 6);
  CHECK_THAT(deep->details, Catch::Contains("more than 64 levels deep (at byte 122)"));
  // Brackets inside strings, escaped quotes included, are text, not nesting.
  std::string texty = R"({"cniVersion":"1.1.0","name":"n","type":"t","someoneElses":"\"[)" + std::string(500, '[') + R"("})";
  CHECK_FALSE(parseInvocation(env.lookup(), texty, inv));
  // The input that used to be accepted: a megabyte of 500,000 nested arrays.
  std::string hostile = std::string(500000, '[') + std::string(500000, ']');
  auto refused = parseInvocation(env.lookup(), hostile, inv);
  REQUIRE(refused);
  CHECK(refused->code == 6);
  // Under the size cap, the depth still refuses it, at the first level too many.
  auto deep_small = parseInvocation(env.lookup(), std::string(100000, '[') + std::string(100000, ']'), inv);
  REQUIRE(deep_small);
  CHECK_THAT(deep_small->details, Catch::Contains("(at byte 64)"));
  // VERSION ignores what it cannot read, as libcni's skel does.
  Env version{{{"CNI_COMMAND", "VERSION"}}};
  CHECK_FALSE(parseInvocation(version.lookup(), hostile, inv));
  CHECK(inv.cni_version == kNewestVersion);
}

TEST_CASE("a refused configuration still names its log file and level, when they are valid") {
  Env env = addEnv();
  Invocation inv;
  REQUIRE(parseInvocation(env.lookup(),
                          R"({"cniVersion":"1.1.0","name":"n","type":"t","logFile":"/var/log/dpu-cni.log","logLevel":"debug","mtu":"big"})",
                          inv));
  CHECK(inv.log_file == "/var/log/dpu-cni.log");
  CHECK(inv.log_level == "debug");
  // Refused before the fields of ours are read (an unsupported version), or for the environment.
  Invocation early;
  REQUIRE(parseInvocation(env.lookup(), R"({"cniVersion":"9.9.9","name":"n","type":"t","logFile":"/l.log"})", early));
  CHECK(early.log_file == "/l.log");
  Env no_ifname = addEnv();
  no_ifname.vars.erase("CNI_IFNAME");
  Invocation env_refused;
  REQUIRE(parseInvocation(no_ifname.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t","logFile":"/l.log"})", env_refused));
  CHECK(env_refused.log_file == "/l.log");
  // Never a path that is itself invalid.
  Invocation relative;
  REQUIRE(parseInvocation(env.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t","logFile":"dpu.log","logLevel":"loud"})", relative));
  CHECK(relative.log_file.empty());
  CHECK(relative.log_level == "warn");
}

TEST_CASE("CHECK needs prevResult; GC needs the valid attachments") {
  Env env = addEnv();
  Invocation inv;
  env.vars["CNI_COMMAND"] = "CHECK";
  auto bad = parseInvocation(env.lookup(), kConf, inv);
  REQUIRE(bad);
  CHECK(bad->code == 7);
  CHECK_THAT(bad->details, Catch::Contains("prevResult"));

  Env gc{{{"CNI_COMMAND", "GC"}, {"CNI_PATH", "/opt/cni/bin"}}};
  auto missing = parseInvocation(gc.lookup(), kConf, inv);
  REQUIRE(missing);
  CHECK(missing->code == 7);
  Invocation ok;
  REQUIRE_FALSE(parseInvocation(gc.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t",
      "cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"},{"containerID":"b","ifname":"net1"}]})", ok));
  REQUIRE(ok.valid_attachments.size() == 2);
  CHECK(ok.valid_attachments[1].container_id == "b");
  CHECK(ok.valid_attachments[1].ifname == "net1");
  auto malformed = parseInvocation(gc.lookup(), R"({"cniVersion":"1.1.0","name":"n","type":"t",
      "cni.dev/valid-attachments":[{"containerID":7}]})", inv);
  REQUIRE(malformed);
  CHECK(malformed->code == 7);
}

TEST_CASE("PCI addresses are normalized") {
  CHECK(normalizePciAddress("0000:03:00.2") == std::optional<std::string>("0000:03:00.2"));
  CHECK(normalizePciAddress("03:1F.7") == std::optional<std::string>("0000:03:1f.7"));
  CHECK_FALSE(normalizePciAddress("0000:03:20.0"));  // device > 0x1f
  CHECK_FALSE(normalizePciAddress("0000:03:00.8"));
  CHECK_FALSE(normalizePciAddress("eth0"));
  CHECK_FALSE(normalizePciAddress("0000:0g:00.0"));
}
