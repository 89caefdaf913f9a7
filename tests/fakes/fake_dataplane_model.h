// The state of a fake dpu-dataplane: the logical model it was programmed with,
// its generation and instance id, applied exactly as the programming API
// (proto/dpu/dataplane/v1/dataplane.proto) says — a FullSync is applied as a
// diff against what is there, a Delta only on top of its base generation, an
// invalid model is refused whole. Every applied request is recorded with what
// it changed, so tests can say "this resync changed nothing" or "that Delta
// added one remote node". Used by the fake-dataplane process and by unit tests.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::fakes {

namespace dpv1 = ::dpu::dataplane::v1;

struct FakeChange {
  std::string request;           // "hello", "full_sync", "delta"
  std::string status;            // "OK", "RESYNC_NEEDED", "INVALID"
  uint64_t generation = 0;       // after the request
  uint32_t added = 0, changed = 0, removed = 0;  // objects (node settings, subnets, ports, remote nodes)
  std::vector<std::string> objects;  // "+remote:node-c", "~port:att-1", "-subnet:10.0.0.0/24"
  std::string message;
};

class FakeDataplaneModel {
 public:
  FakeDataplaneModel();

  dpv1::ProgramReply apply(const dpv1::ProgramRequest& request);
  // Forget everything: a dataplane restart (new instance id, generation 0).
  void wipe();

  const std::string& instanceId() const { return instance_id_; }
  uint64_t generation() const { return generation_; }
  dpv1::LogicalModel model() const;
  const std::deque<FakeChange>& history() const { return history_; }
  // Everything above as JSON, for the --dump file.
  nlohmann::json dump() const;

 private:
  struct State {
    std::optional<dpv1::NodeSettings> node;
    std::map<std::string, dpv1::Subnet> subnets;
    std::map<std::string, dpv1::LogicalPort> ports;
    std::map<std::string, dpv1::RemoteNode> remotes;
  };
  static std::string validate(const State& s);
  static State fromModel(const dpv1::LogicalModel& m);
  static void diff(const State& before, const State& after, FakeChange& c);
  void record(FakeChange c);

  std::string instance_id_;
  uint64_t generation_ = 0;
  State state_;
  std::deque<FakeChange> history_;
  uint64_t full_syncs_ = 0, deltas_ = 0, resyncs_ = 0, invalid_ = 0, hellos_ = 0;
};

}  // namespace dpu::fakes
