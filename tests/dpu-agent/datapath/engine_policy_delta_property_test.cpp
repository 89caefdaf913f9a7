// Property test of the port-policies-only Delta (EngineImpl::installPortPolicyDelta):
// random sequences of Deltas that upsert and delete PortPolicies — for ports
// in force, for a port the dataplane refused and for one it never had,
// defects (a peer with host bits, an unknown protocol, rules in a direction
// that is not isolated), policies re-sent unchanged, a deleted port upserted
// again in the same Delta, now and then a Delta the dataplane must refuse (a
// port policy without a port, the deletion of one it lacks) or a FullSync —
// sent to three dataplanes:
//  - an Engine that gets them as they are (the incremental path: only the
//    named port policies parsed, only their ports' policies rebuilt),
//  - an Engine that gets each with the node settings added, unchanged, which
//    takes the whole-model path (applyDelta, validate, every port looked at),
//  - the fake dataplane (the model library's validate() on applyDelta()).
// After every request all three answer alike (status, message, generation,
// problems word for word, the refusal count), and every port's published
// policy gives the same verdict — the rule that allows, not isolated, or
// denied — in both Engines and in the fake's model in force, for peers,
// protocols and ports around the rules'.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "delta_property.h"
#include "engine_impl.h"
#include "fake_dataplane_model.h"
#include "model/policy_match.h"

using namespace dpu;
namespace v1 = dpu::dataplane::v1;

namespace {

const std::vector<std::string> kPorts = {"p0", "p1", "p2", "p3"};
const char* const kRefusedPort = "bad";  // requested with a zero MAC: refused
const char* const kMissingPort = "p9";   // never requested

v1::LogicalModel baseModel() {
  v1::LogicalModel m;
  auto* n = m.mutable_node();
  n->set_name("node1");
  n->set_tunnel_ip("192.168.100.1");
  n->set_underlay_mtu(1500);
  n->set_pod_mtu(1400);
  n->set_router_mac("0a:58:a9:fe:00:01");
  n->add_cluster_cidrs("10.244.0.0/16");
  n->add_service_cidrs("10.96.0.0/16");
  auto* sub = m.add_local_subnets();
  sub->set_cidr("10.244.1.0/24");
  sub->set_gateway_ip("10.244.1.1");
  sub->set_datapath_key(10);
  for (unsigned i = 0; i <= kPorts.size(); ++i) {
    auto* p = m.add_ports();
    p->set_name(i < kPorts.size() ? kPorts[i] : kRefusedPort);
    p->set_key(1 + i);
    p->set_kind(v1::POD);
    p->set_representor("pf0vf" + std::to_string(i));
    p->set_mac(i < kPorts.size() ? "0a:58:0a:f4:01:0" + std::to_string(2 + i) : "00:00:00:00:00:00");
    p->add_ips("10.244.1." + std::to_string(2 + i));
    p->set_datapath_key(10);
  }
  return m;
}

class Run : public delta_property::Harness {
 public:
  explicit Run(uint32_t seed) : Harness(seed) {
    v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(++generation_);
    *req.mutable_full_sync()->mutable_model() = baseModel();
    send(req, req);
  }

  void step() {
    if (pick(100) < 5) {
      // A FullSync of what is requested now (a reconnect's).
      v1::ProgramRequest req;
      auto* fs = req.mutable_full_sync();
      fs->set_generation(generation_ + 1);
      *fs->mutable_model() = fake_.model();
      send(req, req);
      return;
    }
    v1::ProgramRequest req;
    auto* d = req.mutable_delta();
    d->set_base_generation(generation_);
    d->set_generation(generation_ + 1 + pick(2));
    const unsigned ops = 1 + pick(3);
    std::set<std::string> deleted;
    const auto m = fake_.model();
    auto requested = [&]() -> const v1::PortPolicy& {
      return m.port_policies(static_cast<int>(pick(static_cast<unsigned>(m.port_policies_size()))));
    };
    for (unsigned i = 0; i < ops; ++i) {
      const unsigned what = pick(100);
      if (what < 3) {
        *d->add_upsert_port_policies() = policy("");  // refused whole: a port policy without a port
      } else if (what < 6) {
        d->add_delete_port_policies(kMissingPort);  // the dataplane lacks it: resync
      } else if (what < 30 && m.port_policies_size() > 0) {
        const std::string port = requested().port();
        if (deleted.insert(port).second) d->add_delete_port_policies(port);
        if (pick(4) == 0) *d->add_upsert_port_policies() = policy(port);  // deleted and back in one Delta
      } else if (what < 40 && m.port_policies_size() > 0) {
        // Sent again unchanged (a resync of one object).
        *d->add_upsert_port_policies() = requested();
      } else {
        const unsigned p = pick(12);
        const std::string port = p < 10 ? kPorts[p % kPorts.size()] : (p == 10 ? kRefusedPort : kMissingPort);
        *d->add_upsert_port_policies() = policy(port);
      }
    }
    v1::ProgramRequest whole = req;
    *whole.mutable_delta()->mutable_node() = baseModel().node();
    send(req, whole);
  }

  unsigned isolatedVerdicts() const { return isolated_verdicts_; }

 private:
  // Rules over a few overlapping peers, protocols and ports, so that
  // verdicts differ from port to port; now and then with a defect.
  v1::PolicyDirection direction() {
    v1::PolicyDirection d;
    if (pick(3) == 0) {
      if (pick(30) == 0) d.add_rules()->add_peers("0.0.0.0/0");  // a defect: rules, not isolated
      return d;
    }
    d.set_isolated(true);
    d.add_policies("ns/pol" + std::to_string(pick(3)));
    const unsigned rules = pick(4);
    static const char* const kPeers[] = {"10.244.1.0/24", "10.244.2.0/25", "10.244.1.5/32", "0.0.0.0/0",
                                         "10.0.0.0/8"};
    for (unsigned i = 0; i < rules; ++i) {
      auto* r = d.add_rules();
      r->add_peers(kPeers[pick(5)]);
      if (pick(40) == 0) r->set_peers(0, "10.244.1.5/24");  // a defect: host bits
      static const uint32_t kProtocols[] = {0, 6, 17, 132};
      r->set_protocol(kProtocols[pick(4)]);
      if (pick(40) == 0) r->set_protocol(7);  // a defect: no such protocol here
      const uint32_t first = pick(2) == 0 ? 80 : 1000;
      r->set_port_first(first);
      r->set_port_last(pick(2) == 0 ? first : 5000);
      r->set_policy("ns/pol" + std::to_string(pick(3)));
    }
    return d;
  }

  v1::PortPolicy policy(const std::string& port) {
    v1::PortPolicy p;
    p.set_port(port);
    p.set_pod("ns/pod-" + port);
    *p.mutable_ingress() = direction();
    *p.mutable_egress() = direction();
    return p;
  }

  // Every port's verdict for each probe, ingress then egress: the rule
  // index that allows, kNotIsolated or kDenied ("none": no policy).
  struct Probe {
    IpAddress peer;
    uint8_t protocol;
    uint16_t port;
  };
  static const std::vector<Probe>& probes() {
    static const std::vector<Probe> out = [] {
      std::vector<Probe> v;
      for (const char* a : {"10.244.1.5", "10.244.1.9", "10.244.2.3", "10.244.2.200", "10.9.9.9", "192.0.2.1"}) {
        for (uint8_t proto : {uint8_t{6}, uint8_t{17}, uint8_t{132}, uint8_t{1}}) {
          for (uint16_t port : {uint16_t{80}, uint16_t{443}, uint16_t{1000}, uint16_t{5001}}) {
            v.push_back({*IpAddress::parse(a), proto, port});
          }
        }
      }
      return v;
    }();
    return out;
  }
  static std::string judged(const model::PolicyMatcher& m) {
    std::string out;
    for (const auto& p : probes()) out += std::to_string(m.match(p.peer, p.protocol, p.port)) + ",";
    return out;
  }
  static std::vector<std::string> verdicts(datapath::Engine& e) {
    const auto& snap = static_cast<datapath::EngineImpl&>(e).currentSnapshot();
    std::vector<std::string> out;
    for (const auto& port : snap.ports) {
      out.push_back(port.name + ": " +
                    (port.policy ? judged(port.policy->ingress.matcher) + " | " + judged(port.policy->egress.matcher)
                                 : "none"));
    }
    return out;
  }
  std::vector<std::string> fakeVerdicts() {
    std::vector<std::string> out;
    const auto& m = fake_.inForce();
    for (const auto& port : m.ports) {
      const model::ModelPortPolicy* pp = nullptr;
      for (const auto& x : m.port_policies) {
        if (x.port == port.name) pp = &x;
      }
      if (pp != nullptr && (pp->ingress.isolated || pp->egress.isolated)) ++isolated_verdicts_;
      out.push_back(port.name + ": " +
                    (pp ? judged(model::PolicyMatcher(pp->ingress)) + " | " + judged(model::PolicyMatcher(pp->egress))
                        : "none"));
    }
    return out;
  }

  void send(const v1::ProgramRequest& req, const v1::ProgramRequest& whole) {
    INFO(req.ShortDebugString());
    program(req, whole);
    const auto view = verdicts(*incremental_);
    REQUIRE(view == verdicts(*whole_));
    REQUIRE(view == fakeVerdicts());
  }

  unsigned isolated_verdicts_ = 0;
};

}  // namespace

TEST_CASE("port-policies-only Deltas: the incremental path decides and judges as the whole-model path",
          "[engine][policy][property]") {
  for (uint32_t seed : {1u, 7u, 20261204u}) {
    INFO("seed " << seed);
    Run run(seed);
    for (int i = 0; i < 300; ++i) run.step();
    CHECK(run.refusals() > 20);          // the sequences did refuse
    CHECK(run.accepted() > 200);         // and most requests went through
    CHECK(run.isolatedVerdicts() > 300);  // with isolated ports to judge
  }
}
