// The state of a fake dpu-dataplane: the logical model it was programmed with,
// its generation and instance id, applied exactly as the programming API
// (proto/dpu/dataplane/v1/dataplane.proto) says — a FullSync is applied as a
// diff against what is there, a Delta only on top of its base generation, and
// every model validated object by object with the same library the real
// dataplane's engine uses (dpu-agent/model): a refused object is left out of
// the model in force and reported in `problems` on every reply, a request is
// refused whole (INVALID) only when the engine would refuse it whole. Every
// applied request is recorded with what it changed, so tests can say "this
// resync changed nothing" or "that Delta added one remote node". Used by the
// fake-dataplane process and by unit tests.
//
// Like the real one it has a port capacity (by default that of Debian's DPDK,
// RTE_MAX_ETHPORTS 32 less the uplink): the answer to Hello says it, and every
// reply lists the ports in force beyond it, in the order the real dataplane
// opens them (the management port, then by key), as PORT_UNAVAILABLE.
//
// It stands for a dataplane that installs IPsec SAs (HelloReply.ipsec, unless
// setIpsec(false)): every reply lists the SAs in force with their counters,
// kept by the rules of the proto (an SA sent again with the same key keeps
// its state, an outbound one's next sequence raised to initial_sequence, and
// nothing sent past sequence_limit). Packets are simulated with transfer().
// Its dump never holds a key: each SA's key is replaced by its SHA-256 prefix.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dpu/dataplane/v1/dataplane.pb.h"
#include "model/ipsec_rotation.h"
#include "model/model.h"

namespace dpu::fakes {

namespace dpv1 = ::dpu::dataplane::v1;

struct FakeChange {
  std::string request;           // "hello", "full_sync", "delta", "status"
  std::string status;            // "OK", "RESYNC_NEEDED", "INVALID"
  uint64_t generation = 0;       // after the request
  uint32_t added = 0, changed = 0, removed = 0;  // objects (node settings, subnets, ports, remote nodes, SAs, port policies)
  std::vector<std::string> objects;  // "+remote:node-c", "~port:att-1", "-subnet:10.0.0.0/24", "~port-policy:att-1"
  std::string message;
  std::vector<std::string> problems;  // after the request: "port:att-1", "remote node:node-c"...
};

class FakeDataplaneModel {
 public:
  FakeDataplaneModel();

  dpv1::ProgramReply apply(const dpv1::ProgramRequest& request);
  // Forget everything: a dataplane restart (new instance id, generation 0).
  void wipe();
  // Representor ports it can open, and the RTE_MAX_ETHPORTS it reports.
  void setPortCapacity(uint32_t capacity, uint32_t max_ethports);

  const std::string& instanceId() const { return instance_id_; }
  uint64_t generation() const { return generation_; }
  // The model as the agent programmed it (refused objects included).
  dpv1::LogicalModel model() const;
  // What is in force, and the requested objects that are not (with why).
  const model::Model& inForce() const { return in_force_; }
  const std::vector<dpv1::ObjectProblem>& problems() const { return problems_; }
  uint64_t refusedCount() const { return refused_; }  // each refusal once, as the engine's ObjectRefused
  // A dataplane that installs IPsec SAs (the default) or one that ignores them.
  void setIpsec(bool on) { ipsec_ = on; }
  // A dataplane older than packed policy peers: its Hello does not say
  // packed_peers, and it never sees PolicyRule.peers_v4/peers_v6 (protobuf
  // sets aside a field it does not know), so a rule sent packed reaches its
  // validation without peers.
  void setPackedPeers(bool on) { packed_peers_ = on; }
  // Brings SA `name`'s packet count up to `packets`: an outbound SA sends
  // them (one sequence number each, never past its limit: the rest count as
  // limit drops), an inbound one receives them (authenticated, in order).
  // False when no SA of that name is in force.
  bool transfer(const std::string& name, uint64_t packets);
  // `dpuctl ipsec rotate` as dpu-dataplane takes it (model/ipsec_rotation.h,
  // the same code): counted on every reply, refused while no SA is in force;
  // the agent's StatusRequest (its acknowledgement and rotation state) is
  // validated, kept and reported back.
  Result<void> requestRotation() { return rotation_.request(ipsec_ && !in_force_.ipsec_sas.empty()); }
  uint64_t rotationRequests() const { return rotation_.requests(); }
  uint64_t rotationsTaken() const { return rotation_.taken(); }
  // `dpuctl ipsec`: the SAs in force with their counters, the rotation counts
  // and the agent's last rotation state.
  void describeIpsec(dpv1::IpsecInfo& out) const;
  // A test (or the fake-dataplane process) reports problems of its own on
  // top of the model's refusals, as the real process adds ports it could
  // not open (PORT_UNAVAILABLE); they are kept until replaced.
  void setExtraProblems(std::vector<dpv1::ObjectProblem> extra) { extra_problems_ = std::move(extra); }
  const std::deque<FakeChange>& history() const { return history_; }
  // Everything above as JSON, for the --dump file.
  nlohmann::json dump() const;

 private:
  struct State {
    std::optional<dpv1::NodeSettings> node;
    std::map<std::string, dpv1::Subnet> subnets;
    std::map<std::string, dpv1::LogicalPort> ports;
    std::map<std::string, dpv1::RemoteNode> remotes;
    std::map<std::string, dpv1::IpsecSa> sas;
    std::map<std::string, dpv1::PortPolicy> port_policies;  // by port
  };
  struct SaCounters {
    std::string key;               // the key the counters are for
    uint64_t next = 1;             // outbound: the next sequence to send
    uint64_t highest = 0;
    uint64_t packets = 0, bytes = 0, limit_drops = 0;
  };
  void updateSaCounters();
  static State fromModel(const dpv1::LogicalModel& m);
  dpv1::ProgramReply reply(dpv1::ProgramStatus status, const std::string& message) const;
  static void diff(const State& before, const State& after, FakeChange& c);
  void record(FakeChange c);
  void addUnavailable(dpv1::ProgramReply& reply) const;

  std::string instance_id_;
  uint64_t generation_ = 0;
  dpv1::LogicalModel requested_;  // what Deltas apply to
  State state_;                   // requested_ by name, for the history's diffs
  model::Model in_force_;
  std::vector<dpv1::ObjectProblem> problems_, extra_problems_;
  std::deque<FakeChange> history_;
  std::map<std::string, SaCounters> sa_counters_;  // by SA name, for the SAs in force
  bool ipsec_ = true;
  bool packed_peers_ = true;
  uint32_t port_capacity_ = 31;
  uint32_t max_ethports_ = 32;
  model::IpsecRotation rotation_;
  uint64_t full_syncs_ = 0, deltas_ = 0, resyncs_ = 0, invalid_ = 0, hellos_ = 0, statuses_ = 0, refused_ = 0;
};

}  // namespace dpu::fakes
