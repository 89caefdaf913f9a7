// Property test of the services-only Delta (EngineImpl::installServiceDelta):
// random sequences of Deltas that upsert and delete services — clashing
// addresses and node ports, defects, services re-sent unchanged, a deleted
// name upserted again in the same Delta, now and then a Delta the dataplane
// must refuse (a service without a name, the deletion of one it lacks) or a
// FullSync — sent to three dataplanes:
//  - an Engine that gets them as they are (the incremental path: only the
//    named services validated and rebuilt),
//  - an Engine that gets each with the node settings added, unchanged, which
//    takes the whole-model path (applyDelta, validate, every service looked at),
//  - the fake dataplane (the model library's validate() on applyDelta()).
// After every request all three answer alike (status, generation, problems
// word for word, the refusal count), and both Engines balance alike: the
// same frontends, backends, Maglev shares and conditions in `dpuctl services`,
// only for services the fake has in force (every one with an address).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "datapath/engine.h"
#include "delta_property.h"
#include "fake_dataplane_model.h"

using namespace dpu;
namespace v1 = dpu::dataplane::v1;

namespace {

v1::NodeSettings node() {
  v1::NodeSettings n;
  n.set_name("node1");
  n.set_tunnel_ip("192.168.100.1");
  n.set_underlay_mtu(1500);
  n.set_pod_mtu(1400);
  n.set_router_mac("0a:58:a9:fe:00:01");
  n.add_cluster_cidrs("10.244.0.0/16");
  n.add_service_cidrs("10.96.0.0/16");
  n.add_node_ips("172.18.0.1/24");  // node ports are served here
  return n;
}

class Run : public delta_property::Harness {
 public:
  explicit Run(uint32_t seed) : Harness(seed) {
    v1::ProgramRequest req;
    req.mutable_full_sync()->set_generation(++generation_);
    *req.mutable_full_sync()->mutable_model()->mutable_node() = node();
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
    for (unsigned i = 0; i < ops; ++i) {
      const unsigned what = pick(100);
      const auto requested = requestedNames();
      if (what < 3) {
        *d->add_upsert_services() = service("");  // refused whole: a service without a name
      } else if (what < 6) {
        d->add_delete_services("ns/never");  // the dataplane lacks it: resync
      } else if (what < 30 && !requested.empty()) {
        const std::string name = requested[pick(static_cast<unsigned>(requested.size()))];
        if (deleted.insert(name).second) d->add_delete_services(name);
        if (pick(4) == 0) *d->add_upsert_services() = service(name);  // deleted and back in one Delta
      } else if (what < 40 && !requested.empty()) {
        // Sent again unchanged (a resync of one object).
        const auto m = fake_.model();
        *d->add_upsert_services() = m.services(static_cast<int>(pick(static_cast<unsigned>(m.services_size()))));
      } else {
        *d->add_upsert_services() = service("ns/s" + std::to_string(pick(10)));
      }
    }
    v1::ProgramRequest whole = req;
    *whole.mutable_delta()->mutable_node() = node();
    send(req, whole);
  }

 private:
  std::vector<std::string> requestedNames() const {
    std::vector<std::string> out;
    const auto m = fake_.model();
    for (const auto& s : m.services()) out.push_back(s.name());
    return out;
  }

  // A service over a few addresses, ports and node ports, so that services
  // clash often; now and then with a defect of its own.
  v1::Service service(const std::string& name) {
    v1::Service s;
    s.set_name(name);
    if (pick(10) != 0) s.add_cluster_ips("10.96.0." + std::to_string(1 + pick(6)));
    if (pick(5) == 0) s.add_external_ips("192.0.2." + std::to_string(1 + pick(3)));
    const unsigned ports = 1 + pick(2);
    for (unsigned i = 0; i < ports; ++i) {
      auto* p = s.add_ports();
      if (ports > 1) p->set_name("p" + std::to_string(i));
      p->set_protocol(pick(2) == 0 ? v1::TCP : v1::UDP);
      p->set_port(i == 0 ? 80 : (pick(2) == 0 ? 443 : 53));
      if (pick(4) == 0) p->set_node_port(30000 + pick(4));
      if (pick(25) == 0) p->set_port(0);  // a defect
      const unsigned backends = pick(5);
      for (unsigned b = 0; b < backends; ++b) {
        auto* be = p->add_backends();
        be->set_ip("10.244.1." + std::to_string(2 + pick(8)));
        be->set_port(8080 + pick(2));
        be->set_local(pick(2) == 0);
        be->set_ready(pick(3) != 0);
        be->set_serving(be->ready() || pick(2) == 0);
        be->set_terminating(!be->ready() && pick(2) == 0);
      }
    }
    if (pick(10) == 0) s.set_affinity_timeout_s(30);
    if (pick(8) == 0) s.set_internal_local(true);
    if (pick(8) == 0) s.set_external_local(true);
    return s;
  }

  static std::vector<std::string> balancing(datapath::Engine& e) {
    v1::OperatorRequest req;
    req.mutable_services();
    std::vector<std::string> out;
    const auto reply = e.operate(req);
    for (const auto& f : reply.services()) out.push_back(f.ShortDebugString());
    return out;
  }

  void send(const v1::ProgramRequest& req, const v1::ProgramRequest& whole) {
    INFO(req.ShortDebugString());
    program(req, whole);
    const auto view = balancing(*incremental_);
    REQUIRE(view == balancing(*whole_));
    std::set<std::string> balanced, in_force;
    v1::OperatorRequest services;
    services.mutable_services();
    const auto reply = incremental_->operate(services);
    for (const auto& f : reply.services()) balanced.insert(f.service());
    std::set<std::string> addressed;  // in force with a cluster or external IP: balanced there
    for (const auto& s : fake_.inForce().services) {
      in_force.insert(s.name);
      if (!s.cluster_ips.empty() || !s.external_ips.empty()) addressed.insert(s.name);
    }
    for (const auto& name : balanced) REQUIRE(in_force.count(name));
    for (const auto& name : addressed) REQUIRE(balanced.count(name));
  }

};

}  // namespace

TEST_CASE("services-only Deltas: the incremental path decides and balances as the whole-model path",
          "[engine][services][property]") {
  for (uint32_t seed : {1u, 7u, 20261204u}) {
    INFO("seed " << seed);
    Run run(seed);
    for (int i = 0; i < 300; ++i) run.step();
    CHECK(run.refusals() > 20);   // the sequences did clash and refuse
    CHECK(run.accepted() > 200);  // and most requests went through
  }
}
