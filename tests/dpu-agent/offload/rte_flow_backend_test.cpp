// The rte_flow backend against real DPDK ports. net_null and net_ring have no
// rte_flow support, like af_xdp and af_packet: every rule is refused by the
// device, per flow, and the PMD's reason reaches the caller — the software
// fallback path the dataplane takes on every port that is not an mlx5 eswitch.
// Then the same ports with a stand-in PMD behind RteFlowCalls that accepts
// rules (FakePmd: a rule table with capacity, refusable kinds, counters and
// idle times), to prove what the backend does with rules a device takes:
// root jump and TTL guards, create, COUNT/AGE queries, destroy, stale handles.
// The EAL starts once per binary: no hugepages, no PCI, a file prefix unique
// to this process and --no-shconf (no shared config files).
#include <catch2/catch.hpp>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend_contract.h"
#include "flows.h"
#include "offload/offload_manager.h"
#include "offload/rte_flow_backend.h"

using namespace dpu::offload;
using namespace dpu::offload::fixtures;

namespace {

// ethdev ids of the two vdevs.
uint16_t g_null = 0;
uint16_t g_ring = 0;

void ensureEal() {
  static bool started = [] {
    static std::string prefix = "--file-prefix=dpu_offload_test_" + std::to_string(getpid());
    std::vector<const char*> args = {"offload_rte_flow_tests", "--no-huge", "--no-pci", "-m", "256",
                                     prefix.c_str(), "--vdev=net_null0", "--vdev=net_ring0",
                                     "--no-shconf", "--no-telemetry", "--log-level=*:error"};
    if (rte_eal_init(static_cast<int>(args.size()), const_cast<char**>(args.data())) < 0) return false;
    // The EAL leaves its (empty, with --no-shconf) runtime directory behind.
    static std::string runtime_dir = rte_eal_get_runtime_dir();
    std::atexit([] {
      rte_eal_cleanup();
      rmdir(runtime_dir.c_str());
    });
    return rte_eth_dev_get_port_by_name("net_null0", &g_null) == 0 &&
           rte_eth_dev_get_port_by_name("net_ring0", &g_ring) == 0;
  }();
  REQUIRE(started);
}

RteFlowBackendConfig config() {
  RteFlowBackendConfig c;
  c.eswitch_port = g_null;
  c.ports.add(kUplink, g_null);
  c.ports.add(kVf1, g_ring);
  c.ports.add(kVf2, g_ring);
  c.tunnel_ports = {kUplink};
  c.rule.age_timeout_s = 30;
  return c;
}

std::unique_ptr<RteFlowBackend> backend() {
  auto b = RteFlowBackend::create(config());
  INFO((b.ok() ? std::string() : b.error()));
  REQUIRE(b.ok());
  return std::move(b).value();
}

}  // namespace

TEST_CASE("contract: rte_flow backend on ports without rte_flow", "[rte_flow][eal]") {
  ensureEal();
  auto b = backend();
  contract::checkBackendContract(
      *b, {"rte_flow", false, "rte_flow_validate", "inline IPsec is not available through DPDK on mlx5"});
  const auto caps = b->capabilities();
  CHECK(caps.transfer);
  CHECK(caps.age);
  CHECK(b->installedCount() == 0);
}

TEST_CASE("rte_flow backend: port rules the device refused are recorded, not fatal", "[rte_flow][eal]") {
  ensureEal();
  auto b = backend();
  CHECK_THAT(b->portRulesError(kVf1), Catch::StartsWith("root jump rule for port 1 (group 0 -> 1) not installed: "
                                                        "rte_flow_create: "));
  CHECK_THAT(b->portRulesError(42), Catch::Contains("not on the eswitch"));
  CHECK(b->proxyPort() == g_null);
}

TEST_CASE("rte_flow backend: every kind of flow falls back per flow with the PMD's reason", "[rte_flow][eal]") {
  ensureEal();
  auto b = backend();
  for (const auto& flow : {localFlow(), encapFlow(), decapFlow(), natFlow(), localFlow(true, 6),
                           decapFlow(true, true)}) {
    const auto v = b->validate(flow);
    REQUIRE_FALSE(v.ok());
    CHECK_THAT(v.error(), Catch::StartsWith("rte_flow_validate: "));
    const auto i = b->install(flow);
    REQUIRE_FALSE(i.ok());
    CHECK(i.error() == v.error());
  }
  // Refusals decided before the device is asked keep their own reasons.
  CHECK_THAT(b->validate(encapFlow(false, true)).error(), Catch::Contains("UDP checksum"));
  auto off_switch = localFlow();
  off_switch.match.key.in_port = 42;
  CHECK_THAT(b->validate(off_switch).error(), Catch::Contains("input port 42 is not on the eswitch"));
}

TEST_CASE("rte_flow backend: the offload manager keeps every flow in software", "[rte_flow][eal]") {
  ensureEal();
  auto b = backend();
  OffloadManager m(*b);
  CHECK(*m.offer(0, localFlow()) == OffloadState::kSoftware);
  CHECK(*m.offer(1, espFlow()) == OffloadState::kSoftware);
  CHECK_THAT(m.describe(0), Catch::StartsWith("software: rte_flow_validate: "));
  CHECK_THAT(m.describe(1), Catch::StartsWith("software: inline IPsec"));
  CHECK(m.pollCounters().empty());
  CHECK(m.stats().software == 2);
}

TEST_CASE("rte_flow backend: bad configuration fails fast with what to fix", "[rte_flow][eal]") {
  ensureEal();
  auto c = config();
  c.eswitch_port = 200;
  auto r = RteFlowBackend::create(c);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("ethdev 200 does not exist"));

  c = config();
  c.ports.add(5, 201);
  CHECK_THAT(RteFlowBackend::create(c).error(), Catch::Contains("maps to ethdev 201"));

  c = config();
  c.rule.group = 0;
  CHECK_THAT(RteFlowBackend::create(c).error(), Catch::Contains("group 0"));

  auto b = backend();
  CHECK_FALSE(b->addPort(7, 202).ok());
  REQUIRE(b->addPort(7, g_ring).ok());
  auto via7 = localFlow();
  via7.match.key.in_port = 7;
  CHECK_THAT(b->validate(via7).error(), Catch::StartsWith("rte_flow_validate: "));
  b->removePort(7);
  CHECK_THAT(b->validate(via7).error(), Catch::Contains("not on the eswitch"));
}

// ---------------------------------------------------------------------------
// A PMD that supports rte_flow, standing in behind RteFlowCalls.

namespace {

struct FakePmd {
  struct Rule {
    uint16_t port = 0;
    rte_flow_attr attr{};
    std::vector<rte_flow_item_type> items;
    std::vector<rte_flow_action_type> actions;
    void* age_context = nullptr;
    uint32_t jump_group = 0;
    uint8_t tcp_flags = 0;  // the TCP item's tcp_flags mask (the close punt rules')
    uint16_t to_representor = UINT16_MAX;  // PORT_REPRESENTOR's port
    uint64_t hits = 0;
    uint64_t bytes = 0;
    uint32_t idle = 0;
  };
  std::map<uintptr_t, Rule> rules;
  uintptr_t next = 1;
  std::set<rte_flow_action_type> refused;
  size_t capacity = SIZE_MAX;
  bool fail_destroy = false;
  size_t creates = 0;              // create calls so far
  size_t fail_create_at = SIZE_MAX;  // this create call fails after validating (the device ran out)

  int validate(uint16_t, const rte_flow_attr* attr, const rte_flow_item* items, const rte_flow_action* actions,
               rte_flow_error* error) {
    if (!attr->transfer) return rte_flow_error_set(error, ENOTSUP, RTE_FLOW_ERROR_TYPE_ATTR, attr, "not transfer");
    for (const rte_flow_item* i = items; i->type != RTE_FLOW_ITEM_TYPE_END; ++i) {
      if (i->spec == nullptr || i->mask == nullptr) {
        return rte_flow_error_set(error, EINVAL, RTE_FLOW_ERROR_TYPE_ITEM, i, "item without spec or mask");
      }
    }
    for (const rte_flow_action* a = actions; a->type != RTE_FLOW_ACTION_TYPE_END; ++a) {
      if (refused.count(a->type)) {
        const std::string msg = "action " + dpu::offload::actionTypeName(a->type) + " not supported on this port";
        static std::string keep;  // rte_flow_error.message must outlive the call
        keep = msg;
        return rte_flow_error_set(error, ENOTSUP, RTE_FLOW_ERROR_TYPE_ACTION, a, keep.c_str());
      }
    }
    if (rules.size() >= capacity) {
      return rte_flow_error_set(error, ENOSPC, RTE_FLOW_ERROR_TYPE_UNSPECIFIED, nullptr, "flow table is full");
    }
    return 0;
  }
  rte_flow* create(uint16_t port, const rte_flow_attr* attr, const rte_flow_item* items,
                   const rte_flow_action* actions, rte_flow_error* error) {
    if (validate(port, attr, items, actions, error) != 0) return nullptr;
    if (++creates == fail_create_at) {
      rte_flow_error_set(error, ENOMEM, RTE_FLOW_ERROR_TYPE_UNSPECIFIED, nullptr, "cannot create flow");
      return nullptr;
    }
    Rule r;
    r.port = port;
    r.attr = *attr;
    for (const rte_flow_item* i = items; i->type != RTE_FLOW_ITEM_TYPE_END; ++i) {
      r.items.push_back(i->type);
      if (i->type == RTE_FLOW_ITEM_TYPE_TCP) {
        r.tcp_flags = static_cast<const rte_flow_item_tcp*>(i->mask)->hdr.tcp_flags;
      }
    }
    for (const rte_flow_action* a = actions; a->type != RTE_FLOW_ACTION_TYPE_END; ++a) {
      r.actions.push_back(a->type);
      if (a->type == RTE_FLOW_ACTION_TYPE_AGE) r.age_context = static_cast<const rte_flow_action_age*>(a->conf)->context;
      if (a->type == RTE_FLOW_ACTION_TYPE_JUMP) r.jump_group = static_cast<const rte_flow_action_jump*>(a->conf)->group;
      if (a->type == RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR) {
        r.to_representor = static_cast<const rte_flow_action_ethdev*>(a->conf)->port_id;
      }
    }
    const uintptr_t id = next++;
    rules.emplace(id, r);
    return reinterpret_cast<rte_flow*>(id);
  }
  int destroy(uint16_t, rte_flow* flow, rte_flow_error* error) {
    auto it = rules.find(reinterpret_cast<uintptr_t>(flow));
    if (it == rules.end()) return rte_flow_error_set(error, EINVAL, RTE_FLOW_ERROR_TYPE_HANDLE, flow, "no such flow");
    if (fail_destroy) return rte_flow_error_set(error, EBUSY, RTE_FLOW_ERROR_TYPE_HANDLE, flow, "device busy");
    rules.erase(it);
    return 0;
  }
  int query(uint16_t, rte_flow* flow, const rte_flow_action* action, void* data, rte_flow_error* error) {
    auto it = rules.find(reinterpret_cast<uintptr_t>(flow));
    if (it == rules.end()) return rte_flow_error_set(error, EINVAL, RTE_FLOW_ERROR_TYPE_HANDLE, flow, "no such flow");
    if (action->type == RTE_FLOW_ACTION_TYPE_COUNT) {
      auto* q = static_cast<rte_flow_query_count*>(data);
      q->hits_set = 1;
      q->bytes_set = 1;
      q->hits = it->second.hits;
      q->bytes = it->second.bytes;
      return 0;
    }
    if (action->type == RTE_FLOW_ACTION_TYPE_AGE) {
      auto* q = static_cast<rte_flow_query_age*>(data);
      q->sec_since_last_hit_valid = 1;
      q->sec_since_last_hit = it->second.idle;
      return 0;
    }
    return rte_flow_error_set(error, ENOTSUP, RTE_FLOW_ERROR_TYPE_ACTION, action, "query not supported");
  }
  // Rules of the flow group (not the root jump, not the guards).
  std::vector<Rule*> flowRules() {
    std::vector<Rule*> out;
    for (auto& [id, r] : rules) {
      if (r.attr.group == 1 && r.attr.priority == 1) out.push_back(&r);
    }
    return out;
  }
  // Close punt rules: the flow group's priority-0 rules that match TCP flags.
  std::vector<std::pair<uintptr_t, Rule*>> puntRules() {
    std::vector<std::pair<uintptr_t, Rule*>> out;
    for (auto& [id, r] : rules) {
      if (r.attr.group == 1 && r.attr.priority == 0 && r.tcp_flags != 0) out.emplace_back(id, &r);
    }
    return out;
  }
  size_t count(rte_flow_action_type type) const {
    size_t n = 0;
    for (const auto& [id, r] : rules) n += std::count(r.actions.begin(), r.actions.end(), type);
    return n;
  }
};

RteFlowCalls callsInto(FakePmd& pmd) {
  RteFlowCalls c;
  c.validate = [&pmd](uint16_t p, const rte_flow_attr* a, const rte_flow_item* i, const rte_flow_action* x,
                      rte_flow_error* e) { return pmd.validate(p, a, i, x, e); };
  c.create = [&pmd](uint16_t p, const rte_flow_attr* a, const rte_flow_item* i, const rte_flow_action* x,
                    rte_flow_error* e) { return pmd.create(p, a, i, x, e); };
  c.destroy = [&pmd](uint16_t p, rte_flow* f, rte_flow_error* e) { return pmd.destroy(p, f, e); };
  c.query = [&pmd](uint16_t p, rte_flow* f, const rte_flow_action* a, void* d, rte_flow_error* e) {
    return pmd.query(p, f, a, d, e);
  };
  return c;
}

std::unique_ptr<RteFlowBackend> backendOn(FakePmd& pmd) {
  auto c = config();
  c.calls = callsInto(pmd);
  auto b = RteFlowBackend::create(c);
  INFO((b.ok() ? std::string() : b.error()));
  REQUIRE(b.ok());
  return std::move(b).value();
}

}  // namespace

TEST_CASE("contract: rte_flow backend on a PMD that accepts rules", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  auto b = backendOn(pmd);
  contract::checkBackendContract(*b, {"rte_flow", true, "", "inline IPsec is not available through DPDK on mlx5"});
}

TEST_CASE("rte_flow backend: root jump and TTL guards live as long as the backend", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  {
    auto b = backendOn(pmd);
    CHECK(b->portRulesError(kVf1).empty());
    // A root jump per port; guards: 2 per plain port (VF1, VF2), 6 on the uplink.
    CHECK(pmd.rules.size() == 3 + 2 + 2 + 6);
    CHECK(pmd.count(RTE_FLOW_ACTION_TYPE_JUMP) == 3);
    CHECK(pmd.count(RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR) == 10);
    for (const auto& [id, r] : pmd.rules) {
      CHECK(r.attr.transfer == 1);
      if (r.jump_group != 0) {
        CHECK(r.attr.group == 0);
        CHECK(r.jump_group == 1);
      } else {
        CHECK(r.attr.group == 1);
        CHECK(r.attr.priority == 0);
      }
    }
    REQUIRE(b->addPort(9, g_ring).ok());
    CHECK(pmd.rules.size() == 16);
    b->removePort(9);
    CHECK(pmd.rules.size() == 13);
  }
  CHECK(pmd.rules.empty());
}

TEST_CASE("rte_flow backend: install, counters and idle time, remove", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  auto b = backendOn(pmd);
  auto h = b->install(encapFlow());
  REQUIRE(h.ok());
  CHECK(b->installedCount() == 1);
  auto rules = pmd.flowRules();
  REQUIRE(rules.size() == 1);
  FakePmd::Rule& r = *rules[0];
  CHECK(r.port == b->proxyPort());
  CHECK(r.items == std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT, RTE_FLOW_ITEM_TYPE_ETH,
                                                   RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_UDP});
  CHECK(r.actions == std::vector<rte_flow_action_type>{
                         RTE_FLOW_ACTION_TYPE_DEC_TTL, RTE_FLOW_ACTION_TYPE_SET_MAC_SRC,
                         RTE_FLOW_ACTION_TYPE_SET_MAC_DST, RTE_FLOW_ACTION_TYPE_RAW_ENCAP, RTE_FLOW_ACTION_TYPE_COUNT,
                         RTE_FLOW_ACTION_TYPE_AGE, RTE_FLOW_ACTION_TYPE_REPRESENTED_PORT});
  // Aged-flow reports name the handle.
  CHECK(reinterpret_cast<uintptr_t>(r.age_context) == h->id);

  r.hits = 42;
  r.bytes = 4200;
  r.idle = 3;
  auto c = b->query(*h);
  REQUIRE(c.ok());
  CHECK(c->packets == 42);
  CHECK(c->bytes == 4200);
  CHECK(c->idle_seconds == 3);

  REQUIRE(b->remove(*h).ok());
  CHECK(pmd.flowRules().empty());
  CHECK(b->installedCount() == 0);
  // The slot is reused with a new generation: the old handle stays dead.
  auto h2 = b->install(localFlow());
  REQUIRE(h2.ok());
  CHECK_FALSE(*h2 == *h);
  CHECK_FALSE(b->query(*h).ok());
  CHECK_FALSE(b->remove(*h).ok());
  CHECK(b->query(*h2).ok());
}

TEST_CASE("rte_flow backend: the PMD's refusal of one flow leaves the others", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  pmd.refused = {RTE_FLOW_ACTION_TYPE_RAW_ENCAP};
  auto b = backendOn(pmd);
  auto encap = b->install(encapFlow());
  REQUIRE_FALSE(encap.ok());
  CHECK(encap.error() == "rte_flow_validate: action RAW_ENCAP not supported on this port (Operation not supported)");
  CHECK(b->install(localFlow()).ok());
  CHECK(b->install(decapFlow()).ok());

  pmd.capacity = pmd.rules.size();
  auto full = b->install(natFlow());
  REQUIRE_FALSE(full.ok());
  CHECK_THAT(full.error(), Catch::Contains("flow table is full"));
}

TEST_CASE("rte_flow backend: without its TTL guards a port offloads no DEC_TTL flow", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  pmd.refused = {RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR};
  auto b = backendOn(pmd);
  CHECK(pmd.rules.size() == 3);  // the root jumps only
  auto local = b->validate(localFlow());
  REQUIRE_FALSE(local.ok());
  CHECK_THAT(local.error(), Catch::StartsWith("TTL guard rules on port 1 not installed: rte_flow_create: action "
                                              "PORT_REPRESENTOR not supported"));
  CHECK(b->validate(decapFlow()).ok());  // no DEC_TTL: no guard needed
}

TEST_CASE("rte_flow backend: a failed destroy keeps the rule and its handle", "[rte_flow][eal][pmd]") {
  ensureEal();
  FakePmd pmd;
  auto b = backendOn(pmd);
  OffloadManager m(*b);
  REQUIRE(*m.offer(3, localFlow()) == OffloadState::kInHw);
  pmd.flowRules()[0]->hits = 5;
  pmd.flowRules()[0]->bytes = 500;
  auto d = m.pollCounters();
  REQUIRE(d.size() == 1);
  CHECK(d[0].packets == 5);
  pmd.fail_destroy = true;
  auto w = m.withdraw(3);
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.error(), Catch::Contains("rte_flow_destroy: device busy"));
  CHECK(m.status(3).state == OffloadState::kRemoving);
  CHECK(b->installedCount() == 1);
  pmd.fail_destroy = false;
  CHECK(m.pollCounters().empty());
  CHECK(m.status(3).state == OffloadState::kNone);
  CHECK(b->installedCount() == 0);
}

TEST_CASE("rte_flow backend: the first NAT TCP flow of a port makes the port's close punt rules, before its own",
          "[rte_flow][eal][pmd][nat]") {
  ensureEal();
  FakePmd pmd;
  auto b = backendOn(pmd);
  const size_t port_rules = pmd.rules.size();
  auto h = b->install(natFlow());
  REQUIRE(h.ok());
  CHECK(b->installedCount() == 1);
  CHECK(pmd.rules.size() == port_rules + 4);
  CHECK(b->closePuntRuleCount() == 3);
  auto flow_rules = pmd.flowRules();
  REQUIRE(flow_rules.size() == 1);
  CHECK(flow_rules[0]->tcp_flags == 0);
  auto punts = pmd.puntRules();
  REQUIRE(punts.size() == 3);
  uint8_t flags = 0;
  for (const auto& [id, r] : punts) {
    flags |= r->tcp_flags;
    CHECK(r->port == b->proxyPort());
    CHECK(r->items == std::vector<rte_flow_item_type>{RTE_FLOW_ITEM_TYPE_REPRESENTED_PORT, RTE_FLOW_ITEM_TYPE_ETH,
                                                      RTE_FLOW_ITEM_TYPE_IPV4, RTE_FLOW_ITEM_TYPE_TCP});
    CHECK(r->actions == std::vector<rte_flow_action_type>{RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR});
    CHECK(r->to_representor == g_ring);  // VF1's ethdev: where the flow's packets arrive
  }
  CHECK(flags == 0x07);
  // The punt rules went in before the flow's rule (the fake PMD's ids grow).
  uintptr_t flow_id = 0;
  for (const auto& [id, r] : pmd.rules) {
    if (r.attr.group == 1 && r.attr.priority == 1) flow_id = id;
  }
  for (const auto& [id, r] : punts) CHECK(id < flow_id);
  // Counters are the flow rule's.
  flow_rules[0]->hits = 7;
  auto c = b->query(*h);
  REQUIRE(c.ok());
  CHECK(c->packets == 7);
  // A second connection from the same port costs one rule: the punt rules are the port's.
  auto second = natFlow();
  second.match.key.l4_src = 41000;
  const size_t creates = pmd.creates;
  auto h2 = b->install(second);
  REQUIRE(h2.ok());
  CHECK(pmd.creates == creates + 1);
  CHECK(pmd.rules.size() == port_rules + 5);
  // A reply arriving over Geneve is another shape on another port: its own three.
  auto h3 = b->install(natDecapFlow());
  REQUIRE(h3.ok());
  CHECK(b->closePuntRuleCount() == 6);
  CHECK(pmd.puntRules().size() == 6);
  // Removing the flows removes their rules only; the port keeps its punt rules.
  REQUIRE(b->remove(*h).ok());
  REQUIRE(b->remove(*h2).ok());
  REQUIRE(b->remove(*h3).ok());
  CHECK(b->installedCount() == 0);
  CHECK(pmd.rules.size() == port_rules + 6);
  // A flow without a NAT rewrite on TCP makes none.
  REQUIRE(b->install(localFlow(false, 6)).ok());
  CHECK(pmd.rules.size() == port_rules + 7);
  // The port leaving the eswitch takes them with its other rules.
  b->removePort(kUplink);
  CHECK(b->closePuntRuleCount() == 3);
  REQUIRE(pmd.puntRules().size() == 3);
  for (const auto& [id, r] : pmd.puntRules()) CHECK(r->to_representor == g_ring);  // VF1's are left
}

TEST_CASE("rte_flow backend: a punt rule that fails leaves nothing of its set; the flow's rule failing keeps the set",
          "[rte_flow][eal][pmd][nat]") {
  ensureEal();
  FakePmd pmd;
  auto b = backendOn(pmd);
  OffloadManager m(*b);
  const size_t port_rules = pmd.rules.size();
  // The second punt rule (SYN) fails: the first goes again, the flow stays in software.
  pmd.fail_create_at = pmd.creates + 2;
  REQUIRE(*m.offer(1, natFlow()) == OffloadState::kSoftware);
  CHECK(m.describe(1) == "software: close punt rule: rte_flow_create: cannot create flow (Cannot allocate memory)");
  CHECK(pmd.rules.size() == port_rules);
  CHECK(b->closePuntRuleCount() == 0);
  CHECK(b->installedCount() == 0);
  // The flow's rule (the fourth create) fails after the port's punt rules
  // went in: they stay (they send to software what would go there anyway).
  pmd.fail_create_at = pmd.creates + 4;
  auto h = b->install(natFlow());
  REQUIRE_FALSE(h.ok());
  CHECK(h.error() == "rte_flow_create: cannot create flow (Cannot allocate memory)");
  CHECK(pmd.rules.size() == port_rules + 3);
  CHECK(b->installedCount() == 0);
  // A device that refuses the punt rule's action refuses the flow.
  FakePmd no_punt;
  auto b2 = backendOn(no_punt);
  no_punt.refused = {RTE_FLOW_ACTION_TYPE_PORT_REPRESENTOR};
  auto v = b2->validate(natFlow());
  REQUIRE_FALSE(v.ok());
  CHECK(v.error() ==
        "close punt rule: rte_flow_validate: action PORT_REPRESENTOR not supported on this port (Operation not "
        "supported)");
  // Offered again once the device takes it: in hardware, with the port's
  // punt rules already there (one create), as dump-flows says.
  pmd.fail_create_at = SIZE_MAX;
  const size_t creates = pmd.creates;
  REQUIRE(*m.offer(1, natFlow()) == OffloadState::kInHw);
  CHECK(pmd.creates == creates + 1);
  CHECK(m.describe(1) == "offloaded+punt:fin,syn,rst");
  CHECK(pmd.rules.size() == port_rules + 4);
  REQUIRE(m.withdraw(1).ok());
  CHECK(pmd.rules.size() == port_rules + 3);
}
