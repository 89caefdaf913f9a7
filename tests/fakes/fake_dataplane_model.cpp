// The fake dataplane's programmed state (see fake_dataplane_model.h).
#include "fake_dataplane_model.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <random>
#include <set>

#include "common/net_address.h"

namespace dpu::fakes {
namespace {

using google::protobuf::util::MessageDifferencer;

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
  state_ = State{};
  history_.clear();
  full_syncs_ = deltas_ = resyncs_ = invalid_ = hellos_ = 0;
}

FakeDataplaneModel::State FakeDataplaneModel::fromModel(const dpv1::LogicalModel& m) {
  State s;
  if (m.has_node()) s.node = m.node();
  for (const auto& x : m.local_subnets()) s.subnets[x.cidr()] = x;
  for (const auto& x : m.ports()) s.ports[x.name()] = x;
  for (const auto& x : m.remote_nodes()) s.remotes[x.name()] = x;
  return s;
}

std::string FakeDataplaneModel::validate(const State& s) {
  std::set<uint32_t> keys;
  std::set<std::string> macs;
  for (const auto& [name, p] : s.ports) {
    if (name.empty()) return "a port has no name";
    if (p.key() < 1 || p.key() > 32767) return "port " + name + " has key " + std::to_string(p.key()) + " outside 1..32767";
    if (!keys.insert(p.key()).second) return "port key " + std::to_string(p.key()) + " is used twice";
    auto mac = MacAddress::parse(p.mac());
    if (!mac || mac->isMulticast() || mac->isZero()) return "port " + name + " has a bad MAC '" + p.mac() + "'";
    if (!macs.insert(p.mac()).second) return "MAC " + p.mac() + " is used by two ports";
    if (p.representor().empty()) return "port " + name + " has no representor";
    if (p.datapath_key() == 0) return "port " + name + " has no datapath key";
    for (const auto& ip : p.ips()) {
      if (!IpAddress::parse(ip)) return "port " + name + " has a bad IP '" + ip + "'";
    }
  }
  for (const auto& [cidr, sn] : s.subnets) {
    if (!IpPrefix::parse(cidr)) return "subnet '" + cidr + "' is not a CIDR";
    if (!IpAddress::parse(sn.gateway_ip())) return "subnet " + cidr + " has a bad gateway";
    if (sn.datapath_key() == 0 || sn.datapath_key() >= (1u << 24)) return "subnet " + cidr + " has a bad datapath key";
  }
  for (const auto& [name, r] : s.remotes) {
    if (!IpAddress::parse(r.tunnel_ip())) return "remote node " + name + " has a bad tunnel IP '" + r.tunnel_ip() + "'";
    for (const auto& sn : r.subnets()) {
      if (!IpPrefix::parse(sn.cidr())) return "remote node " + name + " has a bad subnet '" + sn.cidr() + "'";
    }
  }
  if (s.node && !s.node->tunnel_ip().empty() && !IpAddress::parse(s.node->tunnel_ip())) return "node settings: bad tunnel IP";
  return "";
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
}

void FakeDataplaneModel::record(FakeChange c) {
  history_.push_back(std::move(c));
  while (history_.size() > 200) history_.pop_front();
}

dpv1::ProgramReply FakeDataplaneModel::apply(const dpv1::ProgramRequest& req) {
  dpv1::ProgramReply reply;
  FakeChange c;
  if (req.has_hello()) {
    ++hellos_;
    reply.set_status(dpv1::OK);
    reply.mutable_hello()->set_instance_id(instance_id_);
    reply.mutable_hello()->set_generation(generation_);
    reply.set_generation(generation_);
    c.request = "hello";
    c.status = "OK";
    c.generation = generation_;
    c.message = req.hello().agent_id();
    record(c);
    return reply;
  }
  State next;
  if (req.has_full_sync()) {
    c.request = "full_sync";
    next = fromModel(req.full_sync().model());
    if (req.full_sync().generation() == 0) {
      reply.set_status(dpv1::INVALID);
      reply.set_message("a full sync needs a generation > 0");
    }
  } else if (req.has_delta()) {
    c.request = "delta";
    const auto& d = req.delta();
    if (d.base_generation() != generation_) {
      ++resyncs_;
      reply.set_status(dpv1::RESYNC_NEEDED);
      reply.set_message("delta based on generation " + std::to_string(d.base_generation()) + ", I forward with " +
                        std::to_string(generation_));
    } else if (d.generation() <= d.base_generation()) {
      reply.set_status(dpv1::INVALID);
      reply.set_message("delta generation must be above its base");
    } else {
      next = state_;
      if (d.has_node()) next.node = d.node();
      for (const auto& n : d.delete_ports()) next.ports.erase(n);
      for (const auto& p : d.upsert_ports()) next.ports[p.name()] = p;
      for (const auto& n : d.delete_local_subnets()) next.subnets.erase(n);
      for (const auto& s : d.upsert_local_subnets()) next.subnets[s.cidr()] = s;
      for (const auto& n : d.delete_remote_nodes()) next.remotes.erase(n);
      for (const auto& r : d.upsert_remote_nodes()) next.remotes[r.name()] = r;
    }
  } else {
    reply.set_status(dpv1::INVALID);
    reply.set_message("empty request");
    c.request = "empty";
  }
  if (reply.status() == dpv1::PROGRAM_STATUS_UNSPECIFIED) {
    if (std::string why = validate(next); !why.empty()) {
      reply.set_status(dpv1::INVALID);
      reply.set_message(why);
    }
  }
  if (reply.status() == dpv1::PROGRAM_STATUS_UNSPECIFIED) {
    diff(state_, next, c);
    state_ = std::move(next);
    generation_ = req.has_full_sync() ? req.full_sync().generation() : req.delta().generation();
    reply.set_status(dpv1::OK);
    reply.set_flows_removed(c.changed + c.removed);
    (req.has_full_sync() ? full_syncs_ : deltas_)++;
  } else if (reply.status() == dpv1::INVALID) {
    ++invalid_;
  }
  reply.set_generation(generation_);
  c.status = dpv1::ProgramStatus_Name(reply.status());
  c.generation = generation_;
  c.message = reply.message();
  record(c);
  return reply;
}

dpv1::LogicalModel FakeDataplaneModel::model() const {
  dpv1::LogicalModel m;
  if (state_.node) *m.mutable_node() = *state_.node;
  for (const auto& [k, v] : state_.subnets) *m.add_local_subnets() = v;
  for (const auto& [k, v] : state_.ports) *m.add_ports() = v;
  for (const auto& [k, v] : state_.remotes) *m.add_remote_nodes() = v;
  return m;
}

nlohmann::json FakeDataplaneModel::dump() const {
  nlohmann::json j;
  j["instance_id"] = instance_id_;
  j["generation"] = generation_;
  j["model"] = toJson(model());
  j["counts"] = {{"hellos", hellos_}, {"full_syncs", full_syncs_}, {"deltas", deltas_}, {"resync_needed", resyncs_},
                 {"invalid", invalid_}};
  nlohmann::json h = nlohmann::json::array();
  for (const auto& c : history_) {
    h.push_back({{"request", c.request}, {"status", c.status}, {"generation", c.generation}, {"added", c.added},
                 {"changed", c.changed}, {"removed", c.removed}, {"objects", c.objects}, {"message", c.message}});
  }
  j["history"] = h;
  return j;
}

}  // namespace dpu::fakes
