// The attach service in-process, over the fakes of its two interfaces
// (tests/fakes: FakeNetlink keeps VFs in namespaces with their names, MACs,
// MTUs, addresses and routes; FakeDpuApi keeps the DPU's attachments) and a
// fake sysfs tree on disk: ADD/CHECK/DEL as plumbed; a failure injected at
// every operation of ADD leaves nothing behind; GC and DEL scoped by network;
// an ADD that timed out leaves no orphan on the DPU (the reconcile sweep, the
// agent's rule for attaches older than the list); replay after a DPU reboot;
// the management port; a VF handed back by a destroyed pod netns.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "fake_dpu.h"
#include "fake_netlink.h"
#include "host-shim/attach_service.h"
#include "common/log.h"
#include "host-shim/checkpoint.h"

namespace fs = std::filesystem;
using namespace dpu;
using namespace dpu::hostshim;
using dpu::fakes::FakeNetlink;

namespace {

constexpr uint32_t kVfs = 5;  // VFs 0-3 for pods, 4 the management port
const char* kHost = FakeNetlink::kHostPath;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hostshim-service-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

MacAddress mac(const std::string& text) { return *MacAddress::parse(text); }

// A host: fake sysfs, VFs p0v0..p0v4 in host-shim's netns (VF 0 with MTU
// 1450 and PF-side settings, to see them restored), the fake DPU, the service.
struct Host {
  TempDir dir;
  fakes::FaultPlan faults;
  FakeNetlink netlink{faults};
  std::unique_ptr<fakes::FakeDpuState> state = fakes::FakeDpuState::create({}).value();
  fakes::FakeDpuApi dpu{*state, faults};
  Config config;
  std::unique_ptr<AttachService> service;
  nl::PfVfSettings vf0_pf{mac("02:aa:00:00:00:01"), 10, true, false};

  explicit Host(bool real_vfs = false) {
    log::setLevel(log::Level::kWarn);
    makeFakeSriovHost(netlink, dir.path() + "/sys", "p0", kVfs, "p0", real_vfs);
    netlink.setPf("p0", kVfs);
    netlink.setPfSettings("p0", 0, vf0_pf);
    auto l = netlink.link(kHost, "p0v0");
    REQUIRE(l);
    REQUIRE(netlink.links(kHost).size() == kVfs);
    config.state_dir = dir.path() + "/state";
    config.sysfs_root = dir.path() + "/sys";
    PfConfig pf;
    pf.name = "p0";
    pf.index = 0;
    for (uint32_t v = 0; v + 1 < kVfs; ++v) pf.pool.insert(v);
    pf.reserved = {kVfs - 1};
    config.pfs = {pf};
    config.dpu.url = "fake://dpu";
    config.management.enabled = true;
    config.management.pf_index = 0;
    config.management.vf_index = kVfs - 1;
    config.management.ifname = "dpu-mgmt";
    config.management.cluster_cidrs = {"10.244.0.0/16"};
    config.management.service_cidrs = {"10.96.0.0/12"};
    // VF 0 starts with a non-default MTU: a restore must bring back exactly it.
    setMtu("p0v0", 1450);
    start();
  }
  ~Host() { service.reset(); }

  void setMtu(const std::string& name, uint32_t mtu) {
    auto ns = netlink.host();
    auto l = (*ns)->findLink(name);
    nl::LinkChange c;
    c.mtu = mtu;
    REQUIRE((*ns)->changeLink((*l)->ifindex, c));
  }

  void start() {
    AttachService::Options o;
    o.poll_thread = false;  // the test drives the DPU session with poll()
    o.returns.quiet = std::chrono::milliseconds(0);
    const std::string path = config.state_dir + "/checkpoint.pb";
    o.checkpoint_writer = [this, path](const checkpoint::v1::HostShimCheckpoint& c) -> Result<void> {
      if (auto e = faults.check("checkpoint.write")) return *e;
      return saveCheckpoint(path, c);
    };
    service = std::make_unique<AttachService>(config, netlink, dpu, o);
    REQUIRE(service->start());
    poll();
  }
  void restart() {
    service.reset();
    start();
  }
  void poll() { service->session().pollOnce(); }

  std::string pod(const std::string& name) {
    std::string path = "/run/netns/test-" + name;
    netlink.addNetns(path);
    return path;
  }

  cni::v1::CniResponse call(cni::v1::Command cmd, const std::string& container, const std::string& netns,
                            const std::string& network = "net-a", const std::string& ifname = "eth0") {
    cni::v1::CniRequest r;
    r.set_command(cmd);
    r.set_container_id(container);
    r.set_netns(netns);
    r.set_ifname(ifname);
    r.set_network_name(network);
    r.set_cni_version("1.1.0");
    return service->handle(r);
  }
  cni::v1::CniResponse add(const std::string& c, const std::string& ns, const std::string& net = "net-a",
                           const std::string& ifname = "eth0") {
    return call(cni::v1::ADD, c, ns, net, ifname);
  }
  cni::v1::CniResponse del(const std::string& c, const std::string& ns, const std::string& net = "net-a",
                           const std::string& ifname = "eth0") {
    return call(cni::v1::DEL, c, ns, net, ifname);
  }
  cni::v1::CniResponse gc(const std::string& network, const std::vector<std::pair<std::string, std::string>>& valid) {
    cni::v1::CniRequest r;
    r.set_command(cni::v1::GC);
    r.set_network_name(network);
    for (const auto& [c, i] : valid) {
      auto* v = r.add_valid_attachments();
      v->set_container_id(c);
      v->set_ifname(i);
    }
    return service->handle(r);
  }

  // DEL answers before the VF is home: wait (bounded) for the returns.
  bool returnsDone() {
    for (int i = 0; i < 5000; ++i) {
      bool busy = false;
      for (const auto& a : service->book().returningAll()) busy = busy || a.return_problem().empty();
      if (!busy) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  std::vector<attach::v1::Attachment> dpuPods() const {
    std::vector<attach::v1::Attachment> out;
    const auto all = state->list();
    for (const auto& a : all.attachments())
      if (a.kind() == attach::v1::POD) out.push_back(a);
    return out;
  }

  std::vector<std::string> podRecords() const {
    std::vector<std::string> out;
    AllocationStore s(config.state_dir);
    for (const auto& r : s.list())
      if (r.owner != kManagementOwner) out.push_back(r.owner + (r.returning ? " returning" : ""));
    return out;
  }

  // Nothing left of any pod: every pool VF home under its name with its MAC
  // and MTU, down, without addresses, its PF-side settings as before; no
  // record; no DPU pod attachment; the book and the checkpoint empty.
  void requireClean() {
    REQUIRE(returnsDone());
    CHECK(podRecords().empty());
    CHECK(dpuPods().empty());
    CHECK(service->book().attachments().empty());
    CHECK(service->book().returningAll().empty());
    auto cp = loadCheckpoint(config.state_dir + "/checkpoint.pb");
    REQUIRE(cp);
    CHECK(cp->attachments().empty());
    for (uint32_t v = 0; v + 1 < kVfs; ++v) {
      auto l = netlink.link(kHost, fakes::fakeVfName("p0", v));
      INFO("VF " << v);
      REQUIRE(l);
      CHECK(l->mac == mac("02:3b:00:00:00:0" + std::to_string(v)));
      CHECK(l->mtu == (v == 0 ? 1450u : 1500u));
      CHECK_FALSE(l->up);
      CHECK(l->addresses.empty());
    }
    auto pf = netlink.pfSettings("p0", 0);
    REQUIRE(pf);
    CHECK(pf->admin_mac == vf0_pf.admin_mac);
    CHECK(pf->vlan == vf0_pf.vlan);
    CHECK(pf->spoofchk == vf0_pf.spoofchk);
  }
};

uint32_t codeOf(const cni::v1::CniResponse& r) { return r.has_error() ? r.error().code() : 0; }

}  // namespace

TEST_CASE("ADD plumbs the VF as the DPU answered; CHECK agrees; DEL brings it home") {
  Host h;
  auto ns = h.pod("p1");
  auto r = h.add("c1", ns);
  REQUIRE(r.has_result());
  const auto& res = r.result();
  REQUIRE(res.interfaces_size() == 1);
  CHECK(res.interfaces(0).pci_id() == "0000:3b:00.2");
  auto eth0 = h.netlink.link(ns, "eth0");
  REQUIRE(eth0);
  CHECK(eth0->mac.str() == res.interfaces(0).mac());
  CHECK(eth0->mtu == 1400);
  CHECK(eth0->up);
  REQUIRE(eth0->addresses.size() == 1);
  CHECK(eth0->addresses[0].str() == res.ips(0).address());
  bool default_route = false;
  for (const auto& rt : h.netlink.routes(ns)) default_route = default_route || rt.spec.dst.length == 0;
  CHECK(default_route);
  CHECK(h.netlink.announcements(eth0->ifindex) == 1);
  CHECK_FALSE(h.netlink.link(kHost, "p0v0"));
  auto pods = h.dpuPods();
  REQUIRE(pods.size() == 1);
  CHECK(pods[0].network() == "net-a");
  CHECK(pods[0].sandbox_id() == "c1");
  CHECK(pods[0].host_instance() == h.service->book().hostInstance());
  CHECK(pods[0].host_seq() > 0);

  // A retried ADD answers the same; CHECK finds what ADD answered.
  auto again = h.add("c1", ns);
  REQUIRE(again.has_result());
  CHECK(again.result().ips(0).address() == res.ips(0).address());
  CHECK(h.dpuPods().size() == 1);
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 0);

  // PF-side settings changed while the pod ran come back with the VF.
  h.netlink.setPfSettings("p0", 0, {mac("02:bb:00:00:00:09"), 0, false, true});
  REQUIRE(h.del("c1", ns).has_result());
  CHECK_FALSE(h.netlink.link(ns, "eth0"));
  CHECK(h.dpuPods().empty());
  CHECK(codeOf(h.del("c1", ns)) == 0);  // DEL twice
  h.requireClean();
}

TEST_CASE("CHECK fails while the DPU's dataplane does not forward for the pod; a reserved MAC is code 7") {
  Host h;
  auto ns = h.pod("p1");
  auto r = h.add("c1", ns);
  REQUIRE(r.has_result());
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 0);
  const std::string id = h.dpuPods().at(0).id();

  // Refused by the dataplane: 102 with its reason; pending: 11 (retry helps).
  h.state->setDataplaneState(id, "refused: mac 0a:58:a9:fe:00:01 is the router MAC");
  auto refused = h.call(cni::v1::CHECK, "c1", ns);
  CHECK(codeOf(refused) == 102);
  CHECK_THAT(refused.error().details(), Catch::Contains("does not forward for attachment " + id + ": refused: mac"));
  h.state->setDataplaneState(id, "pending");
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 11);
  // The agent unreachable while CHECK asks: 11.
  h.faults.failNext("dpu.get", Error{"timed out", ErrorCode::kUnavailable});
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 11);
  h.state->setDataplaneState(id, "programmed");
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 0);

  // An ADD asking for the router's MAC, or one in use: 7, the reason named, nothing held.
  auto ns2 = h.pod("p2");
  for (const std::string& mac : {std::string("0a:58:a9:fe:00:01"), r.result().interfaces(0).mac()}) {
    cni::v1::CniRequest req;
    req.set_command(cni::v1::ADD);
    req.set_container_id("c2");
    req.set_netns(ns2);
    req.set_ifname("eth0");
    req.set_network_name("net-a");
    req.set_cni_version("1.1.0");
    req.set_requested_mac(mac);
    auto add = h.service->handle(req);
    INFO(mac);
    CHECK(codeOf(add) == 7);
    CHECK_THAT(add.error().details(), Catch::Contains("requested_mac (runtimeConfig.mac)"));
    CHECK(h.dpuPods().size() == 1);
    CHECK_FALSE(h.netlink.link(ns2, "eth0"));
  }
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
}

TEST_CASE("a failure at every operation of ADD leaves nothing behind") {
  Host h;
  auto ns = h.pod("p1");
  // The operations a good ADD makes, in order.
  h.faults.clearLog();
  REQUIRE(h.add("c1", ns).has_result());
  const auto ops = h.faults.log();
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
  std::set<std::string> kinds(ops.begin(), ops.end());
  for (const char* op : {"nl.open", "nl.host", "nl.findLink", "nl.readPfVfSettings", "checkpoint.write",
                         "dpu.attach", "nl.moveLink", "nl.addAddress", "nl.replaceRoute", "nl.announce"})
    CHECK(kinds.count(op));
  // Failing these does not fail an ADD: a VF without a PF-side snapshot (a
  // veth reports none either), a pod whose neighbours learn its address from
  // its first packet.
  const std::set<std::string> not_fatal = {"nl.readPfVfSettings", "nl.announce"};
  for (size_t i = 0; i < ops.size(); ++i) {
    INFO("operation " << i << " of " << ops.size() << ": " << ops[i]);
    h.faults.clearLog();
    h.faults.failCall(i, Error{"injected failure of " + ops[i]});
    auto r = h.add("c1", ns);
    h.faults.clear();
    REQUIRE(h.faults.fired().size() == 1);
    CHECK(h.faults.fired()[0] == ops[i]);
    if (not_fatal.count(ops[i])) {
      CHECK(r.has_result());
      REQUIRE(h.del("c1", ns).has_result());
    } else {
      REQUIRE(r.has_error());
      CHECK_THAT(r.error().details(), Catch::Contains("injected failure of " + ops[i]));
      CHECK_FALSE(h.netlink.link(ns, "eth0"));
    }
    h.requireClean();
  }
  // And after all that, an ADD works.
  REQUIRE(h.add("c1", ns).has_result());
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
}

TEST_CASE("a step after the move fails: the VF comes back from the pod netns") {
  Host h;
  auto ns = h.pod("p1");
  h.state->answerMtuOnce(70000);  // an MTU the device refuses, applied right after the move
  auto r = h.add("c1", ns);
  CHECK(codeOf(r) == 103);
  CHECK_FALSE(h.netlink.link(ns, "eth0"));
  CHECK(h.netlink.links(ns).empty());
  h.requireClean();
}

TEST_CASE("an attach that took effect but whose answer was lost is released by the next sweep") {
  Host h;
  auto ns = h.pod("p1");
  h.dpu.loseNextAttachAnswer();
  h.faults.clearLog();
  CHECK(codeOf(h.add("c1", ns)) == 11);
  // No detach waited on an agent that did not answer: the ADD failed at once.
  auto ops = h.faults.log();
  CHECK(std::count(ops.begin(), ops.end(), "dpu.detach") == 0);
  CHECK(h.dpuPods().size() == 1);
  h.poll();
  h.requireClean();
}

TEST_CASE("GC and DEL of one network never touch another's attachments") {
  Host h;
  auto p1 = h.pod("p1"), p2 = h.pod("p2");
  // One pod on two dpu-cni networks (Multus: eth0 on net-a, net1 on net-b), and another pod on net-a.
  REQUIRE(h.add("c1", p1, "net-a", "eth0").has_result());
  REQUIRE(h.add("c1", p1, "net-b", "net1").has_result());
  REQUIRE(h.add("c2", p2, "net-a", "eth0").has_result());
  REQUIRE(h.dpuPods().size() == 3);

  // A DEL for a network that never had c1/eth0 changes nothing.
  REQUIRE(h.del("c1", p1, "net-b", "eth0").has_result());
  CHECK(h.netlink.link(p1, "eth0"));
  CHECK(h.dpuPods().size() == 3);

  // GC of net-a keeping c2/eth0: c1/eth0 goes; c1/net1 (net-b) stays.
  REQUIRE(h.gc("net-a", {{"c2", "eth0"}}).has_result());
  CHECK_FALSE(h.netlink.link(p1, "eth0"));
  CHECK(h.netlink.link(p1, "net1"));
  CHECK(h.netlink.link(p2, "eth0"));
  std::set<std::string> left;
  for (const auto& a : h.dpuPods()) left.insert(a.network() + "/" + a.sandbox_id() + "/" + a.ifname());
  CHECK(left == std::set<std::string>{"net-b/c1/net1", "net-a/c2/eth0"});

  // GC of net-b with nothing valid: only net-b's go.
  REQUIRE(h.gc("net-b", {}).has_result());
  CHECK_FALSE(h.netlink.link(p1, "net1"));
  CHECK(h.netlink.link(p2, "eth0"));
  REQUIRE(h.gc("net-a", {}).has_result());
  h.requireClean();
}

TEST_CASE("a return that failed is retried by GC; GC answers once the VF is home") {
  Host h;
  auto p1 = h.pod("p1");
  REQUIRE(h.add("c1", p1).has_result());
  // Every attempt of the return fails (a busy rtnl, say): the VF stays flagged, never handed out.
  for (int i = 0; i < 3; ++i) h.faults.failNext("nl.moveLink", Error{"Device or resource busy"});
  REQUIRE(h.del("c1", p1).has_result());
  REQUIRE(h.returnsDone());
  auto stuck = h.service->book().returningAll();
  REQUIRE(stuck.size() == 1);
  CHECK_THAT(stuck[0].return_problem(), Catch::Matchers::Contains("Device or resource busy"));
  CHECK(h.podRecords() == std::vector<std::string>{"net-a/c1/eth0 returning"});
  // GC retries it; when GC answers, the VF is home: nothing left to wait for.
  REQUIRE(h.gc("net-a", {}).has_result());
  CHECK(h.service->book().returningAll().empty());
  CHECK(h.podRecords().empty());
  h.requireClean();
}

TEST_CASE("an ADD that timed out while the agent hung leaves no attachment once the agent is back") {
  Host h;
  auto ns = h.pod("p1");

  SECTION("the agent works through its backlog, then hears from host-shim") {
    h.dpu.hang(true);
    CHECK(codeOf(h.add("c1", ns)) == 11);
    h.poll();  // health times out: unreachable
    CHECK_FALSE(h.service->health().reachable);
    h.dpu.hang(false);  // SIGCONT: the queued attach is processed now
    REQUIRE(h.dpuPods().size() == 1);  // the orphan: an IP and a port for a pod that does not exist
    h.poll();  // reachable again: the on-reconnect sweep
    CHECK(h.dpuPods().empty());
  }
  SECTION("the agent hears host-shim's list before its backlog: the old attach is refused") {
    h.dpu.hang(true);
    CHECK(codeOf(h.add("c1", ns)) == 11);
    h.poll();
    h.dpu.hang(false, /*apply_backlog=*/false);
    h.poll();  // the sweep first
    h.dpu.applyBacklog();
    CHECK(h.dpuPods().empty());
  }
  SECTION("no outage seen by the health poll: the rollback asks for a sweep") {
    h.dpu.loseNextAttachAnswer();
    CHECK(codeOf(h.add("c1", ns)) == 11);
    REQUIRE(h.dpuPods().size() == 1);
    h.poll();
    CHECK(h.dpuPods().empty());
  }
  // The runtime's retry works, once.
  REQUIRE(h.add("c1", ns).has_result());
  CHECK(h.dpuPods().size() == 1);
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
}

TEST_CASE("a reconcile never releases an ADD newer than its list, nor one in flight") {
  Host h;
  auto p1 = h.pod("p1"), p2 = h.pod("p2");
  REQUIRE(h.add("c1", p1).has_result());
  // A list taken before the ADD of c2 that reaches the agent after it.
  auto old_list = h.service->book().heldList();
  REQUIRE(h.add("c2", p2).has_result());
  auto r = h.state->reconcile(old_list);
  REQUIRE(r);
  CHECK(r->released_size() == 0);
  CHECK(h.dpuPods().size() == 2);
  // The sweep host-shim sends now lists both.
  auto sweep = h.service->session().reconcile();
  REQUIRE(sweep);
  CHECK(sweep->kept() == 2);
  // An attachment the DPU holds but host-shim does not (a DEL that could not reach it) goes.
  h.faults.failNext("dpu.detach", Error{"connection refused", ErrorCode::kUnavailable});
  REQUIRE(h.del("c2", p2).has_result());
  REQUIRE(h.returnsDone());
  CHECK(h.dpuPods().size() == 2);
  h.poll();
  CHECK(h.dpuPods().size() == 1);
  REQUIRE(h.del("c1", p1).has_result());
  h.requireClean();
}

TEST_CASE("a sweep asked for while the DPU was down is the reconnect's: a later stray is left to GC") {
  Host h;
  auto ns = h.pod("p1");
  REQUIRE(h.add("c1", ns).has_result());
  // The DEL cannot reach the DPU: it asks for a sweep; the DPU is down at the next poll.
  h.faults.failNext("dpu.detach", Error{"connection refused", ErrorCode::kUnavailable});
  REQUIRE(h.del("c1", ns).has_result());
  REQUIRE(h.returnsDone());
  h.faults.failNext("dpu.health", Error{"connection refused", ErrorCode::kUnavailable});
  h.poll();
  REQUIRE_FALSE(h.service->health().reachable);
  CHECK(h.dpuPods().size() == 1);
  h.poll();  // back: the reconnect's sweep releases c1
  CHECK(h.dpuPods().empty());
  // Attached behind host-shim's back after that sweep: no sweep was asked
  // for since, so the next poll keeps it (the periodic sweep or GC releases it).
  attach::v1::AttachRequest stray;
  stray.set_kind(attach::v1::POD);
  stray.set_sandbox_id("stray");
  stray.set_ifname("eth0");
  stray.set_network("net-a");
  stray.set_pf_index(0);
  stray.set_vf_index(3);
  REQUIRE(h.state->attach(stray));
  h.faults.clearLog();
  h.poll();
  auto ops = h.faults.log();
  CHECK(std::count(ops.begin(), ops.end(), "dpu.reconcile") == 0);
  CHECK(h.dpuPods().size() == 1);
  REQUIRE(h.gc("net-a", {}).has_result());
  h.requireClean();
}

TEST_CASE("an ADD on a VF the DPU still holds for a pod gone (a DEL it missed) detaches the stale one") {
  Host h;
  auto ns = h.pod("p1");
  REQUIRE(h.add("c4", ns).has_result());
  h.faults.failNext("dpu.detach", Error{"connection refused", ErrorCode::kUnavailable});
  REQUIRE(h.del("c4", ns).has_result());
  REQUIRE(h.returnsDone());
  REQUIRE(h.dpuPods().size() == 1);  // no poll yet: no sweep has released it
  cni::v1::CniRequest r;
  r.set_command(cni::v1::ADD);
  r.set_container_id("c5");
  r.set_netns(ns);
  r.set_ifname("eth0");
  r.set_network_name("net-a");
  r.set_device_id("0000:3b:00.2");  // VF 0, c4's
  auto again = h.service->handle(r);
  REQUIRE(again.has_result());
  auto pods = h.dpuPods();
  REQUIRE(pods.size() == 1);
  CHECK(pods[0].sandbox_id() == "c5");
  CHECK(pods[0].vf_index() == 0);
  REQUIRE(h.del("c5", ns).has_result());
  h.requireClean();
}

TEST_CASE("a DPU reboot is replayed: the pods keep MAC and addresses; the management port comes back") {
  Host h;
  auto mgmt = h.netlink.link(kHost, "dpu-mgmt");
  REQUIRE(mgmt);
  CHECK(mgmt->up);
  REQUIRE(mgmt->addresses.size() == 1);
  CHECK(mgmt->addresses[0].str() == "10.244.1.2/24");
  auto ns = h.pod("p1");
  auto r = h.add("c1", ns);
  REQUIRE(r.has_result());
  REQUIRE(h.state->reboot());
  CHECK(h.dpuPods().empty());
  h.poll();
  auto pods = h.dpuPods();
  REQUIRE(pods.size() == 1);
  CHECK(pods[0].ips(0).address() == r.result().ips(0).address());
  CHECK(pods[0].mac() == r.result().interfaces(0).mac());
  CHECK(pods[0].network() == "net-a");
  bool mgmt_back = false;
  const auto all = h.state->list();
  for (const auto& a : all.attachments()) mgmt_back = mgmt_back || a.kind() == attach::v1::MANAGEMENT;
  CHECK(mgmt_back);
  CHECK(h.service->book().bootId() == h.state->bootId());
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
}

TEST_CASE("after a restart host-shim still knows its attachments and DEL works") {
  Host h;
  auto ns = h.pod("p1");
  REQUIRE(h.add("c1", ns).has_result());
  const std::string instance = h.service->book().hostInstance();
  h.restart();
  CHECK(h.service->book().hostInstance() == instance);  // the numbering goes on
  CHECK(h.dpuPods().size() == 1);                     // the restart's sweep keeps what it holds
  CHECK(codeOf(h.call(cni::v1::CHECK, "c1", ns)) == 0);
  REQUIRE(h.del("c1", ns).has_result());
  h.requireClean();
}

TEST_CASE("a real VF handed back to the host by a destroyed pod netns is restored by DEL") {
  Host h(/*real_vfs=*/true);
  auto ns = h.pod("p1");
  REQUIRE(h.add("c1", ns).has_result());
  h.netlink.deleteNetns(ns);  // the runtime removed the netns first: the VF is back as "eth0"
  REQUIRE(h.netlink.link(kHost, "eth0"));
  REQUIRE(h.del("c1", ns).has_result());
  CHECK_FALSE(h.netlink.link(kHost, "eth0"));
  h.requireClean();
}

TEST_CASE("a VF returning after DEL is not handed out; a deviceID ADD waits for it") {
  Host h;
  auto ns = h.pod("p1");
  REQUIRE(h.add("c1", ns).has_result());
  REQUIRE(h.del("c1", ns).has_result());
  cni::v1::CniRequest r;
  r.set_command(cni::v1::ADD);
  r.set_container_id("c2");
  r.set_netns(ns);
  r.set_ifname("eth0");
  r.set_network_name("net-a");
  r.set_device_id("0000:3b:00.2");
  auto again = h.service->handle(r);
  REQUIRE(again.has_result());
  CHECK(again.result().interfaces(0).pci_id() == "0000:3b:00.2");
  REQUIRE(h.del("c2", ns).has_result());
  h.requireClean();
}
