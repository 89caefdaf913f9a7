// The fake dataplane's programmed state (see fake_dataplane_model.h).
#include "fake_dataplane_model.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "common/net_address.h"

namespace dpu::fakes {
namespace {

using google::protobuf::util::MessageDifferencer;

uint64_t wallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string newInstanceId() {
  std::random_device rd;
  char buf[17];
  snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

template <typename Map>
void diffMap(const Map& before, const Map& after, const std::string& kind, FakeChange& c) {
  for (const auto& [k, v] : before) {
    if (!after.count(k)) {
      ++c.removed;
      c.objects.push_back("-" + kind + ":" + k);
    }
  }
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    if (it == before.end()) {
      ++c.added;
      c.objects.push_back("+" + kind + ":" + k);
    } else if (!MessageDifferencer::Equals(it->second, v)) {
      ++c.changed;
      c.objects.push_back("~" + kind + ":" + k);
    }
  }
}

// The first 8 bytes of SHA-256(key), hex: names a key in the dump without it.
std::string keyDigest(const std::string& key) {
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

nlohmann::json toJson(const google::protobuf::Message& m) {
  std::string s;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &s, o);
  return nlohmann::json::parse(s);
}

}  // namespace

FakeDataplaneModel::FakeDataplaneModel() : instance_id_(newInstanceId()) {}

void FakeDataplaneModel::wipe() {
  instance_id_ = newInstanceId();
  generation_ = 0;
  requested_.Clear();
  state_ = State{};
  in_force_ = model::Model{};
  problems_.clear();
  extra_problems_.clear();
  sa_counters_.clear();
  history_.clear();
  full_syncs_ = deltas_ = resyncs_ = invalid_ = hellos_ = statuses_ = refused_ = 0;
  rotation_ = model::IpsecRotation{};
}

FakeDataplaneModel::State FakeDataplaneModel::fromModel(const dpv1::LogicalModel& m) {
  State s;
  if (m.has_node()) s.node = m.node();
  for (const auto& x : m.local_subnets()) s.subnets[x.cidr()] = x;
  for (const auto& x : m.ports()) s.ports[x.name()] = x;
  for (const auto& x : m.remote_nodes()) s.remotes[x.name()] = x;
  for (const auto& x : m.ipsec_sas()) s.sas[x.name()] = x;
  for (const auto& x : m.port_policies()) s.port_policies[x.port()] = x;
  return s;
}

void FakeDataplaneModel::diff(const State& before, const State& after, FakeChange& c) {
  if (before.node.has_value() != after.node.has_value()) {
    (after.node ? c.added : c.removed)++;
    c.objects.push_back(std::string(after.node ? "+" : "-") + "node");
  } else if (before.node && !MessageDifferencer::Equals(*before.node, *after.node)) {
    ++c.changed;
    c.objects.push_back("~node");
  }
  diffMap(before.subnets, after.subnets, "subnet", c);
  diffMap(before.ports, after.ports, "port", c);
  diffMap(before.remotes, after.remotes, "remote", c);
  diffMap(before.sas, after.sas, "sa", c);
  diffMap(before.port_policies, after.port_policies, "port-policy", c);
}

void FakeDataplaneModel::updateSaCounters() {
  std::map<std::string, SaCounters> next;
  for (const auto& sa : in_force_.ipsec_sas) {
    SaCounters c;
    auto it = sa_counters_.find(sa.name);
    if (it != sa_counters_.end() && it->second.key == sa.key) c = it->second;  // kept: its state stays
    else c.highest = sa.direction == dpv1::INBOUND ? sa.initial_sequence - 1 : 0;
    c.key = sa.key;
    if (sa.direction == dpv1::OUTBOUND) c.next = std::max(c.next, sa.initial_sequence);
    next[sa.name] = std::move(c);
  }
  sa_counters_ = std::move(next);
}

bool FakeDataplaneModel::transfer(const std::string& name, uint64_t packets) {
  auto it = sa_counters_.find(name);
  if (it == sa_counters_.end()) return false;
  const model::ModelIpsecSa* sa = nullptr;
  for (const auto& s : in_force_.ipsec_sas) {
    if (s.name == name) sa = &s;
  }
  SaCounters& c = it->second;
  while (c.packets + c.limit_drops < packets) {
    if (sa->direction == dpv1::OUTBOUND) {
      if (c.next > sa->sequence_limit) {
        ++c.limit_drops;
        continue;
      }
      c.highest = c.next++;
    } else {
      ++c.highest;
    }
    ++c.packets;
    c.bytes += 1400;
  }
  return true;
}

void FakeDataplaneModel::record(FakeChange c) {
  history_.push_back(std::move(c));
  while (history_.size() > 200) history_.pop_front();
}

void FakeDataplaneModel::setPortCapacity(uint32_t capacity, uint32_t max_ethports) {
  port_capacity_ = capacity;
  max_ethports_ = max_ethports;
}

void FakeDataplaneModel::addUnavailable(dpv1::ProgramReply& reply) const {
  std::vector<const dpv1::LogicalPort*> order;
  // Refused ports are not in force: they take no DPDK port.
  std::set<std::string> refused;
  for (const auto& p : problems_) {
    if (p.kind() == dpv1::ObjectProblem::PORT) refused.insert(p.name());
  }
  for (const auto& [name, p] : state_.ports) {
    if (!refused.count(name)) order.push_back(&p);
  }
  std::stable_sort(order.begin(), order.end(), [](const dpv1::LogicalPort* a, const dpv1::LogicalPort* b) {
    const bool ma = a->kind() == dpv1::MANAGEMENT, mb = b->kind() == dpv1::MANAGEMENT;
    return ma != mb ? ma : a->key() < b->key();
  });
  for (size_t i = port_capacity_; i < order.size(); ++i) {
    auto* problem = reply.add_problems();
    problem->set_kind(dpv1::ObjectProblem::PORT);
    problem->set_name(order[i]->name());
    problem->set_state(dpv1::ObjectProblem::PORT_UNAVAILABLE);
    problem->set_reason("representor " + order[i]->representor() + " could not be opened: RTE_MAX_ETHPORTS (" +
                        std::to_string(max_ethports_) + ") ports are in use (fake dataplane)");
  }
}

dpv1::ProgramReply FakeDataplaneModel::reply(dpv1::ProgramStatus status, const std::string& message) const {
  dpv1::ProgramReply r;
  r.set_status(status);
  r.set_message(message);
  r.set_generation(generation_);
  for (const auto& p : problems_) *r.add_problems() = p;
  for (const auto& p : extra_problems_) *r.add_problems() = p;
  addUnavailable(r);
  if (ipsec_) {
    for (const auto& sa : in_force_.ipsec_sas) {
      const SaCounters& c = sa_counters_.at(sa.name);
      auto* st = r.add_ipsec_sas();
      st->set_name(sa.name);
      st->set_direction(sa.direction);
      st->set_spi(sa.spi);
      st->set_remote_node(sa.remote_node);
      st->set_packets(c.packets);
      st->set_bytes(c.bytes);
      st->set_highest_sequence(c.highest);
      st->set_first_packet_received(sa.direction == dpv1::INBOUND && c.packets > 0);
      st->set_limit_drops(c.limit_drops);
    }
    r.set_ipsec_rotation_requests(rotation_.requests());
    r.set_ipsec_rotations_taken(rotation_.taken());
  }
  return r;
}

dpv1::ProgramReply FakeDataplaneModel::apply(const dpv1::ProgramRequest& request) {
  // An older dataplane reads the request without the packed peers.
  const bool older = !packed_peers_ && (request.has_full_sync() || request.has_delta());
  dpv1::ProgramRequest unpacked;
  if (older) {
    unpacked = request;
    auto& policies = unpacked.has_full_sync() ? *unpacked.mutable_full_sync()->mutable_model()->mutable_port_policies()
                                              : *unpacked.mutable_delta()->mutable_upsert_port_policies();
    for (auto& pp : policies) {
      for (auto* d : {pp.has_ingress() ? pp.mutable_ingress() : nullptr, pp.has_egress() ? pp.mutable_egress() : nullptr}) {
        if (d == nullptr) continue;
        for (auto& r : *d->mutable_rules()) {
          r.clear_peers_v4();
          r.clear_peers_v6();
        }
      }
    }
  }
  const dpv1::ProgramRequest& req = older ? unpacked : request;
  FakeChange c;
  if (req.has_hello()) {
    ++hellos_;
    auto r = reply(dpv1::OK, "");
    r.mutable_hello()->set_instance_id(instance_id_);
    r.mutable_hello()->set_generation(generation_);
    r.mutable_hello()->set_port_capacity(port_capacity_);
    r.mutable_hello()->set_max_ethports(max_ethports_);
    r.mutable_hello()->set_ipsec(ipsec_);
    r.mutable_hello()->set_packed_peers(packed_peers_);
    c.request = "hello";
    c.status = "OK";
    c.generation = generation_;
    c.message = req.hello().agent_id();
    record(c);
    return r;
  }
  if (req.has_status()) {
    // Not in the history: the agent polls it every second.
    ++statuses_;
    if (auto r = rotation_.status(req.status(), wallMs()); !r) {
      ++invalid_;
      return reply(dpv1::INVALID, r.error());
    }
    return reply(dpv1::OK, "");
  }
  // The same checks, in the same order, with the same library as the engine
  // (dpu-agent/datapath/src/engine.cpp), so both answer alike.
  std::optional<dpv1::LogicalModel> next;
  dpv1::ProgramStatus status = dpv1::PROGRAM_STATUS_UNSPECIFIED;
  std::string message;
  uint64_t next_generation = 0;
  if (req.has_full_sync()) {
    c.request = "full_sync";
    if (req.full_sync().generation() == 0) {
      status = dpv1::INVALID;
      message = "FullSync generation must be non-zero (0 means never programmed)";
    } else {
      next = req.full_sync().model();
      next_generation = req.full_sync().generation();
    }
  } else if (req.has_delta()) {
    c.request = "delta";
    const auto& d = req.delta();
    if (generation_ == 0 || d.base_generation() != generation_) {
      ++resyncs_;
      status = dpv1::RESYNC_NEEDED;
      message = "Delta base generation " + std::to_string(d.base_generation()) +
                " is not the dataplane's current generation " + std::to_string(generation_) + ": send a FullSync";
    } else if (d.generation() <= d.base_generation()) {
      status = dpv1::INVALID;
      message = "Delta generation " + std::to_string(d.generation()) + " must be above its base " +
                std::to_string(d.base_generation());
    } else if (auto applied = model::applyDelta(requested_, d); !applied) {
      status = applied.code() == ErrorCode::kNotFound ? dpv1::RESYNC_NEEDED : dpv1::INVALID;
      if (status == dpv1::RESYNC_NEEDED) ++resyncs_;
      message = applied.error();
    } else {
      next = std::move(*applied);
      next_generation = d.generation();
    }
  } else {
    c.request = "empty";
    status = dpv1::INVALID;
    message = "empty ProgramRequest: send Hello, FullSync, Delta or Status";
  }
  uint32_t flows_removed = 0;
  if (next) {
    auto verdict = model::validate(*next, in_force_.programmed ? &in_force_ : nullptr);
    if (!verdict) {
      status = dpv1::INVALID;
      message = "model refused, nothing changed: " + verdict.error();
    } else {
      State after = fromModel(*next);
      diff(state_, after, c);
      // A refusal counts once, not once per request that repeats it.
      std::set<std::tuple<int, std::string, std::string>> before;
      for (const auto& p : problems_) before.emplace(p.kind(), p.name(), p.reason());
      for (const auto& p : verdict->problems) refused_ += !before.count({p.kind(), p.name(), p.reason()});
      state_ = std::move(after);
      requested_ = std::move(*next);
      in_force_ = std::move(verdict->model);
      problems_ = std::move(verdict->problems);
      updateSaCounters();
      generation_ = next_generation;
      status = dpv1::OK;
      flows_removed = c.changed + c.removed;
      (req.has_full_sync() ? full_syncs_ : deltas_)++;
    }
  }
  if (status == dpv1::INVALID) ++invalid_;
  auto r = reply(status, message);
  r.set_flows_removed(flows_removed);
  c.status = dpv1::ProgramStatus_Name(status);
  c.generation = generation_;
  c.message = message;
  for (const auto& p : r.problems()) c.problems.push_back(model::kindName(p.kind()) + ":" + p.name());
  record(c);
  return r;
}

dpv1::LogicalModel FakeDataplaneModel::model() const {
  dpv1::LogicalModel m;
  if (state_.node) *m.mutable_node() = *state_.node;
  for (const auto& [k, v] : state_.subnets) *m.add_local_subnets() = v;
  for (const auto& [k, v] : state_.ports) *m.add_ports() = v;
  for (const auto& [k, v] : state_.remotes) *m.add_remote_nodes() = v;
  for (const auto& [k, v] : state_.sas) *m.add_ipsec_sas() = v;
  for (const auto& [k, v] : state_.port_policies) *m.add_port_policies() = v;
  return m;
}

nlohmann::json FakeDataplaneModel::dump() const {
  nlohmann::json j;
  j["instance_id"] = instance_id_;
  j["generation"] = generation_;
  dpv1::LogicalModel shown = model();
  // Peers sent packed are dumped as text, as dpuctl policy shows them.
  for (auto& pp : *shown.mutable_port_policies()) dpu::model::unpackPolicyPeers(pp);
  j["model"] = toJson(shown);
  // No key leaves the programming socket, not even in a fake's dump.
  if (j["model"].contains("ipsec_sas")) {
    for (auto& sa : j["model"]["ipsec_sas"]) {
      const auto name = sa.value("name", "");
      sa.erase("key");
      sa.erase("salt");
      if (auto it = state_.sas.find(name); it != state_.sas.end()) sa["key_sha256"] = keyDigest(it->second.key());
    }
  }
  j["ipsec"] = ipsec_;
  nlohmann::json states = nlohmann::json::array();
  if (ipsec_) {
    const auto now = reply(dpv1::OK, "");
    for (const auto& st : now.ipsec_sas()) states.push_back(toJson(st));
  }
  j["ipsec_sas"] = states;
  j["counts"] = {{"hellos", hellos_}, {"full_syncs", full_syncs_}, {"deltas", deltas_}, {"resync_needed", resyncs_},
                 {"invalid", invalid_}, {"statuses", statuses_}, {"refused", refused_},
                 {"ipsec_rotation_requests", rotation_.requests()}, {"ipsec_rotations_taken", rotation_.taken()}};
  nlohmann::json in_force = {{"ports", nlohmann::json::array()}, {"remote_nodes", nlohmann::json::array()},
                             {"local_subnets", nlohmann::json::array()}, {"ipsec_sas", nlohmann::json::array()}};
  for (const auto& a : in_force_.ipsec_sas) in_force["ipsec_sas"].push_back(a.name);
  for (const auto& p : in_force_.ports) in_force["ports"].push_back(p.name);
  for (const auto& r : in_force_.remote_nodes) in_force["remote_nodes"].push_back(r.name);
  for (const auto& l : in_force_.local_subnets) in_force["local_subnets"].push_back(l.cidr);
  in_force["node_ips"] = nlohmann::json::array();
  for (const auto& ip : in_force_.node_ips) in_force["node_ips"].push_back(ip.str());
  in_force["node_gateways"] = nlohmann::json::array();
  for (const auto& gw : in_force_.node_gateways) in_force["node_gateways"].push_back(gw.str());
  j["in_force"] = in_force;
  nlohmann::json problems = nlohmann::json::array();
  for (const auto* list : {&problems_, &extra_problems_}) {
    for (const auto& p : *list) problems.push_back(toJson(p));
  }
  j["problems"] = problems;
  nlohmann::json h = nlohmann::json::array();
  for (const auto& c : history_) {
    h.push_back({{"request", c.request}, {"status", c.status}, {"generation", c.generation}, {"added", c.added},
                 {"changed", c.changed}, {"removed", c.removed}, {"objects", c.objects}, {"message", c.message},
                 {"problems", c.problems}});
  }
  j["history"] = h;
  return j;
}

void FakeDataplaneModel::describeIpsec(dpv1::IpsecInfo& out) const {
  out.set_encrypt(in_force_.ipsec);
  out.set_crypto_backend("fake");
  const auto now = reply(dpv1::OK, "");
  for (const auto& st : now.ipsec_sas()) *out.add_sas()->mutable_state() = st;
  rotation_.describe(out, wallMs());
}

}  // namespace dpu::fakes
