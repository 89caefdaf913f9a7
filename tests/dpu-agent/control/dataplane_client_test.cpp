// The programming protocol end to end in one process: the agent's
// DataplaneClient against the fake dataplane's state machine served on a
// unix socket — full sync on connect, one Delta per change, RESYNC_NEEDED and
// a dataplane restart lead to a full sync that changes only what differs.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "common/ipc_proto.h"
#include "control/dataplane_client.h"
#include "control_test_util.h"
#include "fake_dataplane_model.h"

using namespace dpu::control;
using dpu::control::testing::TempDir;
using dpu::fakes::FakeDataplaneModel;

namespace {

// A fake dataplane on a socket, one connection at a time.
class Server {
 public:
  explicit Server(std::string path) : path_(std::move(path)) {
    auto l = dpu::ipc::listenUnix(path_);
    REQUIRE(l.ok());
    listener_ = std::move(*l);
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
  }
  // Restart: drop the connection and forget everything.
  void restart() { restart_ = true; }
  template <typename F>
  auto with(F f) {
    std::lock_guard lock(mu_);
    return f(model_);
  }

 private:
  void run() {
    while (!stop_) {
      auto c = dpu::ipc::acceptUnix(listener_, dpu::ipc::after(std::chrono::milliseconds(20)));
      if (!c || !c->valid()) continue;
      while (!stop_) {
        if (restart_.exchange(false)) {
          std::lock_guard lock(mu_);
          model_.wipe();
          break;
        }
        dpv1::ProgramRequest req;
        auto f = dpu::ipc::recvMessage(*c, req, dpu::ipc::after(std::chrono::milliseconds(20)));
        if (f.failure == dpu::ipc::RecvFailure::kTimeout) continue;
        if (!f.ok()) break;
        dpv1::ProgramReply reply;
        {
          std::lock_guard lock(mu_);
          reply = model_.apply(req);
        }
        if (!dpu::ipc::sendMessage(*c, reply, dpu::ipc::after(std::chrono::seconds(2)))) break;
      }
    }
  }
  std::string path_;
  dpu::ipc::Socket listener_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, restart_{false};
  std::mutex mu_;
  FakeDataplaneModel model_;
};

template <typename F>
bool eventually(F f) {
  for (int i = 0; i < 300; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

dpv1::LogicalPort port(const std::string& name, uint32_t key) {
  dpv1::LogicalPort p;
  p.set_name(name);
  p.set_key(key);
  p.set_kind(dpv1::POD);
  p.set_representor("pf0vf" + std::to_string(key));
  p.set_mac("0a:58:0a:f4:01:0" + std::to_string(key));
  p.add_ips("10.244.1." + std::to_string(key));
  p.set_datapath_key(2);
  return p;
}

dpv1::RemoteNode remote(const std::string& name, const std::string& tip) {
  dpv1::RemoteNode r;
  r.set_name(name);
  r.set_tunnel_ip(tip);
  auto* s = r.add_subnets();
  s->set_cidr("10.244.9.0/24");
  s->set_gateway_ip("10.244.9.1");
  s->set_datapath_key(10);
  return r;
}

}  // namespace

TEST_CASE("full sync on connect, then one Delta per change, restarts resync") {
  TempDir dir;
  Server server(dir / "dp.sock");
  ModelState model;
  dpv1::NodeSettings n;
  n.set_name("node-a");
  n.set_tunnel_ip("192.168.50.1");
  model.setNode(n);
  model.upsertPort(port("a", 1));
  Histogram latency(Histogram::latencyBounds());
  DataplaneClient client(dir / "dp.sock", "test", model, latency);
  client.start(0);
  REQUIRE(eventually([&] { return client.status().programmed; }));
  CHECK(server.with([](auto& m) { return m.model().ports_size(); }) == 1);

  model.upsertRemoteNode(remote("node-c", "192.168.50.3"));
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().remote_nodes_size() == 1; }); }));
  auto last = server.with([](auto& m) { return m.history().back(); });
  CHECK(last.request == "delta");
  CHECK(last.objects == std::vector<std::string>{"+remote:node-c"});

  model.deleteRemoteNode("node-c");
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().remote_nodes_size() == 0; }); }));
  last = server.with([](auto& m) { return m.history().back(); });
  CHECK(last.objects == std::vector<std::string>{"-remote:node-c"});
  REQUIRE(eventually([&] { return client.status().generation == server.with([](auto& m) { return m.generation(); }); }));
  uint64_t gen = client.status().generation;

  // The dataplane restarts: the agent reconnects and programs everything again.
  std::string old_instance = client.status().instance_id;
  server.restart();
  REQUIRE(eventually([&] { return client.status().programmed && client.status().instance_id != old_instance; }));
  auto h = server.with([](auto& m) { return m.history(); });
  REQUIRE(h.size() == 2);
  CHECK(h[1].request == "full_sync");
  CHECK(h[1].added == 2);  // node settings and the one port
  CHECK(client.status().generation > gen);  // generations never go back
  CHECK(latency.snapshot().count >= 4);
  client.stop();
}

TEST_CASE("a Delta on a stale base gets RESYNC_NEEDED and a full sync that changes nothing extra") {
  TempDir dir;
  Server server(dir / "dp.sock");
  ModelState model;
  model.upsertPort(port("a", 1));
  Histogram latency(Histogram::latencyBounds());
  DataplaneClient client(dir / "dp.sock", "test", model, latency);
  client.start(0);
  REQUIRE(eventually([&] { return client.status().programmed; }));
  // Someone else moved the dataplane's generation (as a second writer would).
  server.with([](FakeDataplaneModel& m) {
    dpv1::ProgramRequest r;
    r.mutable_delta()->set_base_generation(m.generation());
    r.mutable_delta()->set_generation(m.generation() + 5);
    return m.apply(r).status();
  });
  model.upsertPort(port("b", 2));
  REQUIRE(eventually([&] { return server.with([](auto& m) { return m.model().ports_size() == 2; }); }));
  REQUIRE(eventually([&] { return client.status().resyncs_requested == 1; }));
  auto h = server.with([](auto& m) { return m.history(); });
  CHECK(h.back().request == "full_sync");
  CHECK(h.back().objects == std::vector<std::string>{"+port:b"});
  client.stop();
}

TEST_CASE("the fake dataplane refuses invalid models whole") {
  FakeDataplaneModel m;
  dpv1::ProgramRequest r;
  auto* fs = r.mutable_full_sync();
  fs->set_generation(1);
  *fs->mutable_model()->add_ports() = port("a", 1);
  *fs->mutable_model()->add_ports() = port("b", 1);  // the same key twice
  auto reply = m.apply(r);
  CHECK(reply.status() == dpv1::INVALID);
  CHECK_THAT(reply.message(), Catch::Contains("port key 1 is used twice"));
  CHECK(m.generation() == 0);
  CHECK(m.model().ports_size() == 0);
  fs->mutable_model()->mutable_ports(1)->set_key(2);
  fs->mutable_model()->mutable_ports(1)->set_mac("0a:58:0a:f4:01:09");
  CHECK(m.apply(r).status() == dpv1::OK);
  // The same full sync again changes nothing.
  fs->set_generation(2);
  CHECK(m.apply(r).status() == dpv1::OK);
  CHECK(m.history().back().added + m.history().back().changed + m.history().back().removed == 0);
  CHECK(m.dump()["generation"] == 2);
}
