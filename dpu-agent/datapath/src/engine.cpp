// The control side of the Engine: create, port bindings, the programming API
// (Hello, FullSync diffed against the current model, Delta with its base
// check, each validated object by object by the model library: refused
// objects stay out of the model in force and are reported on every reply),
// snapshot publication with RCU, the operator API and maintain() (reclaiming
// snapshots, driving offload). All of it runs on the one control
// thread; the lcores only see published snapshots.
#include <rte_build_config.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <random>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/log.h"
#include "engine_impl.h"
#include "offload/offload.h"
#include "offload/offloadable.h"

namespace dpu::datapath {

namespace {

std::string roleName(PortRole r) {
  switch (r) {
    case PortRole::kUplink:
      return "uplink";
    case PortRole::kManagement:
      return "management";
    case PortRole::kRepresentor:
      return "representor";
    case PortRole::kHostPf:
      return "host_pf";
  }
  return "unknown";
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  if (config.workers == 0 || config.workers > RTE_MAX_LCORE) {
    return Error{"engine: workers must be 1.." + std::to_string(RTE_MAX_LCORE) + ", got " +
                 std::to_string(config.workers)};
  }
  if (config.flow_cache_entries < 8 || config.flow_cache_entries > (1u << 26)) {
    return Error{"engine: flow_cache_entries must be 8..67108864 per worker, got " +
                 std::to_string(config.flow_cache_entries)};
  }
  if (config.flow_idle_timeout_ms == 0) return Error{"engine: flow_idle_timeout_ms must be at least 1"};
  if (config.offload_queue == 0 || config.offload_queue > (1u << 24)) {
    return Error{"engine: offload_queue must be 1..16777216"};
  }
  if (config.miss_budget == 0 || config.miss_budget > EngineConfig::kMaxMissBudget) {
    return Error{"engine: miss_budget must be 1.." + std::to_string(EngineConfig::kMaxMissBudget) +
                 " slow-path runs per worker and poll iteration, got " + std::to_string(config.miss_budget)};
  }
  if (config.miss_cycle_share == 0 || config.miss_cycle_share > 100) {
    return Error{"engine: miss_cycle_share must be 1..100 percent of a worker's cycles (100: no cycle bound), got " +
                 std::to_string(config.miss_cycle_share)};
  }

  if (config.max_host_macs == 0 || config.max_host_macs > EngineConfig::kMaxHostMacs) {
    return Error{"engine: max_host_macs must be 1.." + std::to_string(EngineConfig::kMaxHostMacs) + ", got " +
                 std::to_string(config.max_host_macs)};
  }
  if (config.host_mac_ageing_ms < 1000) return Error{"engine: host_mac_ageing_ms must be at least 1000"};
  if (config.max_neighbours == 0 || config.max_neighbours > 65536) {
    return Error{"engine: max_neighbours must be 1..65536, got " + std::to_string(config.max_neighbours)};
  }
  if (config.neighbour_stale_ms < 1000) return Error{"engine: neighbour_stale_ms must be at least 1000"};
  if (config.conntrack_entries == 0 || config.conntrack_entries > (1u << 26)) {
    return Error{"engine: conntrack_entries must be 1..67108864 connections, got " +
                 std::to_string(config.conntrack_entries)};
  }
  if (config.affinity_entries == 0 || config.affinity_entries > (1u << 24)) {
    return Error{"engine: affinity_entries must be 1..16777216 clients, got " + std::to_string(config.affinity_entries)};
  }
  auto engine = std::make_unique<EngineImpl>(config);
  if (auto r = engine->init(); !r) return std::move(r).takeError();
  return std::unique_ptr<Engine>(std::move(engine));
}

EngineImpl::EngineImpl(const EngineConfig& config) : config_(config), ipsec_(config.workers) {
  // The no-offload backend refuses every flow: skip the queue, the per-flow
  // bookkeeping and the refusals, and say so in dump-flows.
  if (config_.offload != nullptr && config_.offload->capabilities().backend == "none") config_.offload = nullptr;
  if (config_.offload != nullptr) inherited_ = std::make_unique<offload::InheritedRules>(*config_.offload);
}

Result<void> EngineImpl::openConnectionTables() {
  try {
    if (config_.conntrack_file.empty()) {
      conntrack_ = std::make_unique<conntrack::Table>(config_.conntrack_entries, config_.conntrack_timeouts);
    } else {
      auto t = conntrack::Table::openPersistent(config_.conntrack_entries, config_.conntrack_timeouts,
                                                config_.conntrack_file);
      if (!t) return Error{"engine: conntrack: " + t.error() + " (conntrack.persist: false keeps it in memory)"};
      conntrack_ = std::move(*t);
      if (const std::string disk = conntrack_->persistDisk(); !disk.empty()) {
        DPU_LOG(kWarn, "engine") << "conntrack: " << config_.conntrack_file << " is on " << disk
                                 << ", not a tmpfs: the kernel writes its pages back to disk, and a worker that "
                                    "opens connections waits for it; put the programming socket's directory on a "
                                    "tmpfs (as /run is on systemd hosts), or set conntrack.persist: false";
      }
      if (conntrack_->resizedFrom() != 0) {
        DPU_LOG(kInfo, "engine") << "conntrack: carried " << conntrack_->adoptedConnections()
                                 << " connections over from the table of " << conntrack_->resizedFrom()
                                 << " entries a previous dataplane left in " << config_.conntrack_file << " into one of "
                                 << conntrack_->capacity() << " (conntrack.max_entries changed)"
                                 << (conntrack_->droppedNoRoom() != 0
                                         ? "; " + std::to_string(conntrack_->droppedNoRoom()) +
                                               " used least recently did not fit and were dropped"
                                         : std::string());
        control_events_[static_cast<size_t>(Event::kConntrackAdopted)] += conntrack_->adoptedConnections();
      } else if (conntrack_->adopted()) {
        DPU_LOG(kInfo, "engine") << "conntrack: took over " << conntrack_->adoptedConnections()
                                 << " connections a previous dataplane left in " << config_.conntrack_file
                                 << (conntrack_->droppedDamaged() != 0
                                         ? " (" + std::to_string(conntrack_->droppedDamaged()) + " damaged, dropped)"
                                         : std::string());
        control_events_[static_cast<size_t>(Event::kConntrackAdopted)] += conntrack_->adoptedConnections();
      } else {
        DPU_LOG(kInfo, "engine") << "conntrack: " << config_.conntrack_file << " starts empty ("
                                 << conntrack_->persistNote() << ")";
      }
    }
    if (config_.affinity_file.empty()) {
      affinity_ = std::make_unique<conntrack::Affinity>(config_.affinity_entries);
    } else {
      auto a = conntrack::Affinity::openPersistent(config_.affinity_entries, config_.affinity_file);
      if (!a) return Error{"engine: session affinity: " + a.error() + " (conntrack.persist: false keeps it in memory)"};
      affinity_ = std::move(*a);
      if (affinity_->resizedFrom() != 0) {
        DPU_LOG(kInfo, "engine") << "session affinity: " << affinity_->carriedOver()
                                 << " clients' backends carried over from the table of " << affinity_->resizedFrom()
                                 << " entries in " << config_.affinity_file << " into one of " << affinity_->capacity();
      } else if (affinity_->adopted()) {
        DPU_LOG(kInfo, "engine") << "session affinity: clients' backends taken over from " << config_.affinity_file;
      }
    }
  } catch (const std::bad_alloc&) {
    return Error{"engine: not enough memory for a connection table of " + std::to_string(config_.conntrack_entries) +
                 " entries; lower conntrack.max_entries"};
  }
  return {};
}

void EngineImpl::loadNatPorts() {
  if (config_.nat_ports_file.empty() || !fileExists(config_.nat_ports_file)) return;
  auto text = readFile(config_.nat_ports_file);
  if (!text) {
    DPU_LOG(kWarn, "engine") << "NAT traversal: " << text.error() << "; every peer is sent to at 4500 until it sends";
    return;
  }
  std::istringstream in(*text);
  std::string name, address;
  unsigned port = 0;
  size_t n = 0;
  while (in >> name >> address >> port) {
    auto ip = IpAddress::parse(address);
    if (!ip || port == 0 || port > 0xffff) {
      DPU_LOG(kWarn, "engine") << "NAT traversal: " << config_.nat_ports_file << ": ignoring '" << name << " "
                               << address << " " << port << "'";
      continue;
    }
    // Taken only while the peer's NAT address is this one (snapshot.cpp).
    auto& peer = nat_peers_[name];
    peer = std::make_unique<NatPeer>();
    peer->address = *ip;
    peer->port.store(static_cast<uint16_t>(port), std::memory_order_relaxed);
    ++n;
  }
  if (n != 0) {
    DPU_LOG(kInfo, "engine") << "NAT traversal: " << n << " peer port(s) learned before the restart";
  }
  nat_ports_written_ = *text;
}

void EngineImpl::saveNatPorts() {
  if (config_.nat_ports_file.empty()) return;
  std::string text;
  for (const auto& [name, peer] : nat_peers_) {
    const uint16_t port = peer->port.load(std::memory_order_relaxed);
    if (port != kNatTPort) text += name + " " + peer->address.str() + " " + std::to_string(port) + "\n";
  }
  if (text == nat_ports_written_) return;
  if (auto w = writeFileAtomic(config_.nat_ports_file, text); !w) {
    DPU_LOG(kWarn, "engine") << "NAT traversal: the ports learned are not kept across a restart: " << w.error();
  }
  nat_ports_written_ = text;  // not retried every call; the next change tries again
}

EngineImpl::~EngineImpl() {
  if (config_.offload != nullptr) {
    for (auto& w : workers_) {
      for (auto& s : w->offload) {
        if (s.state == OffloadSlot::kInHw) (void)config_.offload->remove(offload::OffloadHandle{s.handle});
      }
    }
  }
  delete current_.load();
  for (auto& r : retired_) delete r.snapshot;
  if (ns_event_fd_ >= 0) ::close(ns_event_fd_);
}

Result<void> EngineImpl::init() {
  std::random_device rd;
  hash_seed_ = (uint64_t{rd()} << 32) | rd();
  hash_keys_ = HashKeys::fromSeed(hash_seed_);
  char id[17];
  std::snprintf(id, sizeof id, "%08x%08x", rd(), rd());
  instance_id_ = id;
  if (!config_.tunnel_ip.empty()) {
    auto ip = IpAddress::parse(config_.tunnel_ip);
    if (!ip) return Error{"engine: tunnel_ip \"" + config_.tunnel_ip + "\": " + ip.error()};
    model_.tunnel_ip = *ip;
    model_.has_tunnel_ip = true;
  }
  // The lcore's clock: the TSC scaled to milliseconds (a multiply, not a
  // clock_gettime per burst), anchored to the steady clock once. DPDK
  // calibrated the TSC; without it (EAL not initialised) the steady clock.
  if (const uint64_t hz = rte_get_tsc_hz(); hz != 0) {
    tsc_ms_per_tick_ = static_cast<uint64_t>((static_cast<unsigned __int128>(1000) << 64) / hz);
    tsc_base_ = rte_get_tsc_cycles();
    ms_base_ = steadyMs();
  }
  start_ms_ = now();
  if (auto ns = initNorthSouth(); !ns) return ns;
  // A restart: the previous process's rules stay until the new model has been offered.
  if (inherited_ != nullptr) {
    if (const size_t n = inherited_->begin(); n != 0) {
      DPU_LOG(kInfo, "engine") << "offload: " << n
                               << " rules of a previous dataplane kept until the first full sync is offered";
    }
  }
  if (auto tables = openConnectionTables(); !tables) return tables;
  loadNatPorts();
  try {
    for (unsigned i = 0; i < config_.workers; ++i) {
      workers_.push_back(std::make_unique<WorkerContext>(i, config_.flow_cache_entries, config_.offload_queue,
                                                         config_.offload != nullptr));
      workers_.back()->last_sweep_ms = start_ms_;
      workers_.back()->miss.configure(config_.miss_budget, config_.miss_cycle_share);
    }
  } catch (const std::bad_alloc&) {
    return Error{"engine: not enough memory for " + std::to_string(config_.workers) + " flow caches of " +
                 std::to_string(config_.flow_cache_entries) + " entries; lower flow_cache_entries"};
  }
  return republish();
}

Result<void> EngineImpl::republish(const std::vector<std::string>* changed_services,
                                   const std::vector<std::string>* changed_port_policies) {
  DepRegistry deps = deps_;
  SnapshotInputs in{&model_, generation_, &bindings_, &next_hops_, config_.lanes, &ns_,
                    current_.load(std::memory_order_relaxed)};
  in.policy_names = &policy_names_;
  in.ipsec = &ipsec_;
  in.nat_peers = &nat_peers_;
  in.changed_services = changed_services;
  in.changed_port_policies = changed_port_policies;
  auto snap = buildSnapshot(in, deps);
  if (!snap) return std::move(snap).takeError();
  deps_ = std::move(deps);
  const Snapshot* old = current_.exchange(snap->release(), std::memory_order_acq_rel);
  const uint64_t epoch = epoch_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (old != nullptr) retired_.push_back({old, epoch});
  return {};
}

Result<void> EngineImpl::bindPort(const std::string& name, uint16_t dpdk_port, PortRole role, MacAddress mac) {
  if (name.empty()) return Error{"bindPort: empty port name"};
  if (dpdk_port >= kMaxPorts) {
    return Error{"bindPort " + name + ": DPDK port " + std::to_string(dpdk_port) + " is beyond the engine's " +
                     std::to_string(kMaxPorts) + " ports (RTE_MAX_ETHPORTS of its DPDK build)",
                 ErrorCode::kExhausted};
  }
  for (const auto& [other, b] : bindings_) {
    if (other == name) continue;
    if (b.port == dpdk_port) {
      return Error{"bindPort " + name + ": DPDK port " + std::to_string(dpdk_port) + " is already bound as " + other};
    }
    if (role == PortRole::kUplink && b.role == PortRole::kUplink) {
      return Error{"bindPort " + name + ": " + other + " is already the uplink; unbind it first"};
    }
  }
  Binding saved;
  auto it = bindings_.find(name);
  const bool had = it != bindings_.end();
  if (had) saved = it->second;
  bindings_[name] = Binding{dpdk_port, role, mac};
  if (auto r = republish(); !r) {
    if (had) {
      bindings_[name] = saved;
    } else {
      bindings_.erase(name);
    }
    return r;
  }
  return {};
}

void EngineImpl::unbindPort(const std::string& name) {
  if (bindings_.erase(name) == 0) return;
  (void)republish();
}

std::vector<std::string> EngineImpl::wantedRepresentors() const {
  std::vector<const ModelPort*> ports;
  for (const auto& p : model_.ports) ports.push_back(&p);
  std::stable_sort(ports.begin(), ports.end(), [](const ModelPort* a, const ModelPort* b) {
    const bool ma = a->kind == dataplane::v1::MANAGEMENT, mb = b->kind == dataplane::v1::MANAGEMENT;
    return ma != mb ? ma : a->key < b->key;
  });
  std::vector<std::string> out;
  for (const auto* p : ports) out.push_back(p->representor);
  return out;
}

std::vector<std::string> EngineImpl::logicalPortsOf(const std::string& representor) const {
  std::vector<std::string> out;
  for (const auto& p : model_.ports)
    if (p.representor == representor) out.push_back(p.name);
  return out;
}

Result<void> EngineImpl::setTunnelNextHop(const IpAddress& peer, MacAddress next_hop) {
  if (next_hop.isZero() || next_hop.isMulticast()) {
    return Error{"setTunnelNextHop " + peer.str() + ": " + next_hop.str() + " is not a unicast MAC"};
  }
  auto it = next_hops_.find(peer);
  if (it != next_hops_.end() && it->second == next_hop) return {};
  next_hops_[peer] = next_hop;
  return republish();
}

std::vector<IpAddress> EngineImpl::wantedTunnelPeers() const {
  std::vector<IpAddress> out;
  for (const auto& r : model_.remote_nodes) out.push_back(r.reach());  // behind a NAT: its NAT address
  return out;
}

NatKeepaliveTargets EngineImpl::natKeepaliveTargets() const {
  NatKeepaliveTargets t;
  if (!model_.ipsec_nat_t || model_.ipsec_nat_keepalive_s == 0 || !model_.has_tunnel_ip) return t;
  t.interval_s = model_.ipsec_nat_keepalive_s;
  t.local = model_.tunnel_ip;
  for (const auto& r : model_.remote_nodes) {
    auto nat = nat_peers_.find(r.name);
    t.peers.emplace_back(r.reach(), nat != nat_peers_.end() ? nat->second->port.load(std::memory_order_relaxed)
                                                            : kNatTPort);
  }
  return t;
}

size_t EngineImpl::bytesPerFlow() const {
  return FlowTable::bytesPerSlot() + (config_.offload != nullptr ? sizeof(OffloadSlot) : 0);
}

size_t EngineImpl::bytesPerCompactFlow() const {
  return FlowTable::bytesPerCompactSlot() + (config_.offload != nullptr ? sizeof(OffloadSlot) : 0);
}

bool EngineImpl::quiesced(uint64_t epoch) const {
  for (const auto& w : workers_) {
    if (w->quiescent_epoch.load(std::memory_order_acquire) < epoch) return false;
  }
  return true;
}

uint32_t EngineImpl::countStale(const Snapshot& snap) const {
  uint32_t n = 0;
  FlowRecord e;
  for (const auto& w : workers_) {
    // Every live flow names an action record: none in use, no flow to read.
    if (w->table.actionsInUse() == 0) continue;
    // Bucket by bucket (eight signatures a load): an empty way is skipped
    // without touching its slot, so a sparse table costs its buckets.
    for (uint32_t b = 0; b < w->table.bucketCount(); ++b) {
      const FlowBucket& bk = w->table.bucket(b);
      for (unsigned way = 0; way < FlowBucket::kWays; ++way) {
        if (__atomic_load_n(&bk.sig[way], __ATOMIC_RELAXED) == 0) continue;
        if (w->table.read(b * FlowBucket::kWays + way, e) && !snap.depsValid(e.stamp, e.dep_in, e.dep_out, e.dep_nat)) {
          ++n;
        }
      }
    }
  }
  return n;
}

dataplane::v1::ProgramReply EngineImpl::reply(dataplane::v1::ProgramStatus status, const std::string& message) const {
  dataplane::v1::ProgramReply r;
  r.set_status(status);
  r.set_message(message);
  r.set_generation(generation_);
  for (const auto& p : problems_) *r.add_problems() = p;
  // Every SA in force with its counters, on every reply (the agent's
  // rotation waits for them: docs/ipsec.md "Rotation").
  ipsec_.report(r);
  return r;
}

void EngineImpl::countRefusals(const std::vector<dataplane::v1::ObjectProblem>& next) {
  // An object refused again for the same reason (every FullSync repeats the
  // model) is one refusal, not one per request.
  std::set<std::tuple<int, std::string, std::string>> before;
  for (const auto& p : problems_) before.emplace(p.kind(), p.name(), p.reason());
  for (const auto& p : next) {
    if (!before.count({p.kind(), p.name(), p.reason()})) ++control_events_[static_cast<size_t>(Event::kObjectRefused)];
  }
}

namespace {

// The Delta fast paths' plumbing, one kind of object at a time.

// applyDelta's check that every name `deletes` lists is requested (once):
// its message when one is not, "" when all are. `deleted` gets them.
template <class Names>
std::string missingDeletion(const Names& deletes, const std::unordered_map<std::string, int>& requested,
                            const std::string& what, std::set<std::string>& deleted) {
  for (const auto& name : deletes) {
    if (!requested.count(name) || !deleted.insert(name).second) {
      return "delta deletes " + what + " " + name + ", which the dataplane does not have: send a FullSync";
    }
  }
  return "";
}

// Puts `next` in force for `key` in `in_force` (sorted by key): replaces,
// adds or removes (nullopt) one object. Returns what was there, for an undo.
template <class T, class KeyOf>
std::optional<T> setInForce(std::vector<T>& in_force, const std::string& key, std::optional<T> next, KeyOf keyOf) {
  auto it = std::lower_bound(in_force.begin(), in_force.end(), key,
                             [&keyOf](const T& x, const std::string& k) { return keyOf(x) < k; });
  const bool present = it != in_force.end() && keyOf(*it) == key;
  std::optional<T> was;
  if (present) was = std::move(*it);
  if (present && next) {
    *it = std::move(*next);
  } else if (present) {
    in_force.erase(it);
  } else if (next) {
    in_force.insert(it, std::move(*next));
  }
  return was;
}

// The requested objects of one kind, as applyDelta leaves them (their order
// does not matter: validation goes by name); `index`: where each one is.
template <class T, class KeyOf>
void patchRequested(google::protobuf::RepeatedPtrField<T>* requested, std::unordered_map<std::string, int>& index,
                    const std::set<std::string>& deleted, const google::protobuf::RepeatedPtrField<T>& upserts,
                    KeyOf keyOf) {
  for (const auto& name : deleted) {
    const int i = index.at(name);
    const int last = requested->size() - 1;
    if (i != last) {
      requested->SwapElements(i, last);
      index[keyOf(requested->Get(i))] = i;
    }
    requested->RemoveLast();
    index.erase(name);
  }
  for (const auto& v : upserts) {
    if (auto it = index.find(keyOf(v)); it != index.end()) {
      *requested->Mutable(it->second) = v;
    } else {
      index[keyOf(v)] = requested->size();
      *requested->Add() = v;
    }
  }
}

template <class T, class KeyOf>
std::unordered_map<std::string, int> indexRequested(const google::protobuf::RepeatedPtrField<T>& requested,
                                                    KeyOf keyOf) {
  std::unordered_map<std::string, int> out;
  for (int i = 0; i < requested.size(); ++i) out[keyOf(requested.Get(i))] = i;
  return out;
}

}  // namespace

dataplane::v1::ProgramReply EngineImpl::install(const dataplane::v1::LogicalModel& model, uint64_t generation) {
  auto verdict = model::validate(model, model_.programmed ? &model_ : nullptr);
  if (!verdict) return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + verdict.error());
  Model saved_model = std::move(model_);
  const uint64_t saved_generation = generation_;
  model_ = std::move(verdict->model);
  generation_ = generation;
  // The SAs first (built off the lcores), so the snapshot can name them.
  std::vector<dataplane::v1::ObjectProblem> sa_problems;
  ipsec_.sync(model_.ipsec_sas, sa_problems);
  if (auto r = republish(); !r) {
    model_ = std::move(saved_model);
    generation_ = saved_generation;
    ipsec_.sync(model_.ipsec_sas, sa_problems);
    return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + r.error());
  }
  model_proto_ = model;
  requested_services_ = indexRequested(model_proto_.services(),
                                       [](const dataplane::v1::Service& v) -> const std::string& { return v.name(); });
  requested_port_policies_ = indexRequested(
      model_proto_.port_policies(), [](const dataplane::v1::PortPolicy& p) -> const std::string& { return p.port(); });
  service_claims_ = model::ServiceClaims(model_.services);
  if (!retired_.empty()) {
    flushChangedServices(*retired_.back().snapshot, *current_.load(std::memory_order_relaxed));
    revalidatePolicyConnections(*retired_.back().snapshot, *current_.load(std::memory_order_relaxed));
  }
  model_problems_ = std::move(verdict->problems);
  sa_problems_ = std::move(sa_problems);
  std::vector<dataplane::v1::ObjectProblem> next = model_problems_;
  next.insert(next.end(), sa_problems_.begin(), sa_problems_.end());
  countRefusals(next);
  problems_ = std::move(next);
  auto out = reply(dataplane::v1::OK, "");
  out.set_flows_removed(countStale(*current_.load(std::memory_order_relaxed)));
  return out;
}

void EngineImpl::settleProblems(dataplane::v1::ObjectProblem::Kind kind, const std::vector<std::string>& settled,
                                std::vector<dataplane::v1::ObjectProblem> fresh) {
  std::set<std::string> names(settled.begin(), settled.end());
  std::erase_if(model_problems_, [&](const dataplane::v1::ObjectProblem& p) {
    return p.kind() == kind && names.count(p.name());
  });
  for (auto& p : fresh) model_problems_.push_back(std::move(p));
  std::stable_sort(model_problems_.begin(), model_problems_.end(),
                   [](const dataplane::v1::ObjectProblem& a, const dataplane::v1::ObjectProblem& b) {
                     return a.kind() != b.kind() ? a.kind() < b.kind() : a.name() < b.name();
                   });
  std::vector<dataplane::v1::ObjectProblem> next = model_problems_;
  next.insert(next.end(), sa_problems_.begin(), sa_problems_.end());
  countRefusals(next);
  problems_ = std::move(next);
}

dataplane::v1::ProgramReply EngineImpl::installServiceDelta(const dataplane::v1::Delta& d) {
  std::set<std::string> deleted;
  if (auto why = missingDeletion(d.delete_services(), requested_services_, "service", deleted); !why.empty()) {
    return reply(dataplane::v1::RESYNC_NEEDED, why);
  }
  std::set<std::string> upserted;
  for (const auto& v : d.upsert_services()) upserted.insert(v.name());
  // The requested services refused now that the Delta leaves as they are:
  // a claim they want may be free after it.
  std::vector<const dataplane::v1::Service*> waiting;
  for (const auto& p : model_problems_) {
    if (p.kind() != dataplane::v1::ObjectProblem::SERVICE || deleted.count(p.name()) || upserted.count(p.name())) {
      continue;
    }
    if (auto it = requested_services_.find(p.name()); it != requested_services_.end()) {
      waiting.push_back(&model_proto_.services(it->second));
    }
  }
  auto verdict = model::validateServiceDelta(d, model_.services, waiting, service_claims_);
  if (!verdict) return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + verdict.error());

  auto name = [](const auto& s) -> const std::string& { return s.name; };
  std::vector<std::string> changed;
  std::vector<std::pair<std::string, std::optional<model::ModelService>>> undo;
  for (auto& u : verdict->updates) {
    changed.push_back(u.name);
    undo.emplace_back(u.name, setInForce(model_.services, u.name, std::move(u.in_force), name));
  }
  const uint64_t saved_generation = generation_;
  generation_ = d.generation();
  if (auto r = republish(&changed); !r) {
    for (auto& [n, was] : undo) setInForce(model_.services, n, std::move(was), name);
    generation_ = saved_generation;
    service_claims_ = model::ServiceClaims(model_.services);
    return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + r.error());
  }
  patchRequested(model_proto_.mutable_services(), requested_services_, deleted, d.upsert_services(),
                 [](const dataplane::v1::Service& v) -> const std::string& { return v.name(); });

  const Snapshot& after = *current_.load(std::memory_order_relaxed);
  if (!retired_.empty()) flushChangedServices(*retired_.back().snapshot, after, &changed);
  // The SERVICE problems of the services the verdict settled are its own.
  settleProblems(dataplane::v1::ObjectProblem::SERVICE, changed, std::move(verdict->problems));
  auto out = reply(dataplane::v1::OK, "");
  out.set_flows_removed(countStale(after));
  return out;
}

dataplane::v1::ProgramReply EngineImpl::installPortPolicyDelta(const dataplane::v1::Delta& d) {
  std::set<std::string> deleted;
  if (auto why = missingDeletion(d.delete_port_policies(), requested_port_policies_, "the port policy of port",
                                 deleted);
      !why.empty()) {
    return reply(dataplane::v1::RESYNC_NEEDED, why);
  }
  auto verdict = model::validatePortPolicyDelta(d, model_, model_problems_);
  if (!verdict) return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + verdict.error());

  auto port = [](const model::ModelPortPolicy& p) -> const std::string& { return p.port; };
  std::vector<std::string> changed;
  std::vector<std::pair<std::string, std::optional<model::ModelPortPolicy>>> undo;
  for (auto& u : verdict->updates) {
    changed.push_back(u.port);
    undo.emplace_back(u.port, setInForce(model_.port_policies, u.port, std::move(u.in_force), port));
  }
  const uint64_t saved_generation = generation_;
  generation_ = d.generation();
  const std::vector<std::string> no_services;
  if (auto r = republish(&no_services, &changed); !r) {
    for (auto& [p, was] : undo) setInForce(model_.port_policies, p, std::move(was), port);
    generation_ = saved_generation;
    return reply(dataplane::v1::INVALID, "model refused, nothing changed: " + r.error());
  }
  patchRequested(model_proto_.mutable_port_policies(), requested_port_policies_, deleted, d.upsert_port_policies(),
                 [](const dataplane::v1::PortPolicy& p) -> const std::string& { return p.port(); });

  const Snapshot& after = *current_.load(std::memory_order_relaxed);
  if (!retired_.empty()) revalidatePolicyConnections(*retired_.back().snapshot, after, &changed);
  settleProblems(dataplane::v1::ObjectProblem::PORT_POLICY, changed, std::move(verdict->problems));
  auto out = reply(dataplane::v1::OK, "");
  out.set_flows_removed(countStale(after));
  return out;
}

dataplane::v1::ProgramReply EngineImpl::program(const dataplane::v1::ProgramRequest& request) {
  // Deltas can come faster than maintain() runs: the snapshots the lcores
  // left since the last one go now, so a burst of changes does not pile up
  // retired snapshots until the next maintain().
  reclaimSnapshots();
  switch (request.body_case()) {
    case dataplane::v1::ProgramRequest::kHello: {
      auto out = reply(dataplane::v1::OK, "");
      out.mutable_hello()->set_instance_id(instance_id_);
      out.mutable_hello()->set_generation(generation_);
      // It installs the IpsecSa objects and reports them (ipsec_sas.h).
      out.mutable_hello()->set_ipsec(true);
      // It reads PolicyRule peers packed (model::packPolicyPeers).
      out.mutable_hello()->set_packed_peers(true);
      return out;
    }
    case dataplane::v1::ProgramRequest::kFullSync: {
      const auto& fs = request.full_sync();
      if (fs.generation() == 0) {
        return reply(dataplane::v1::INVALID, "FullSync generation must be non-zero (0 means never programmed)");
      }
      return install(fs.model(), fs.generation());
    }
    case dataplane::v1::ProgramRequest::kDelta: {
      const auto& d = request.delta();
      if (generation_ == 0 || d.base_generation() != generation_) {
        return reply(dataplane::v1::RESYNC_NEEDED, "Delta base generation " + std::to_string(d.base_generation()) +
                                                       " is not the dataplane's current generation " +
                                                       std::to_string(generation_) + ": send a FullSync");
      }
      if (d.generation() <= d.base_generation()) {
        return reply(dataplane::v1::INVALID, "Delta generation " + std::to_string(d.generation()) +
                                                 " must be above its base " + std::to_string(d.base_generation()));
      }
      if (model::changesServicesOnly(d)) return installServiceDelta(d);
      if (model::changesPortPoliciesOnly(d)) return installPortPolicyDelta(d);
      auto next = model::applyDelta(model_proto_, d);
      if (!next) {
        return reply(next.code() == ErrorCode::kNotFound ? dataplane::v1::RESYNC_NEEDED : dataplane::v1::INVALID,
                     next.error());
      }
      return install(*next, d.generation());
    }
    case dataplane::v1::ProgramRequest::kStatus:
      if (auto r = ipsec_.agentStatus(request.status()); !r) return reply(dataplane::v1::INVALID, r.error());
      return reply(dataplane::v1::OK, "");
    case dataplane::v1::ProgramRequest::BODY_NOT_SET:
      break;
  }
  return reply(dataplane::v1::INVALID, "empty ProgramRequest: send Hello, FullSync, Delta or Status");
}

uint16_t EngineImpl::internReason(const std::string& text) {
  auto [it, inserted] = reason_index_.emplace(text, static_cast<uint16_t>(reasons_.size()));
  if (inserted) {
    if (reasons_.size() >= UINT16_MAX) return 0;
    reasons_.push_back(text);
  }
  return it->second;
}

void EngineImpl::offerFlow(WorkerContext& w, uint32_t index, const FlowRecord& e, const Snapshot& snap,
                           uint32_t now32) {
  OffloadSlot& s = w.offload[index];
  if (s.state == OffloadSlot::kInHw) (void)config_.offload->remove(offload::OffloadHandle{s.handle});
  OffloadSlot next;
  next.flow_id = e.flow_id;
  next.hw_used_ms = now32;
  const flow::FlowSpec spec = toFlowSpec(snap, e);
  // A previous process's rule for this match (a restart): taken over when it
  // does exactly this, else removed once the replacement below is in place.
  offload::InheritedRule* old = inherited_ != nullptr ? inherited_->find(spec) : nullptr;
  if (old != nullptr && old->flow == spec) {
    next.state = OffloadSlot::kInHw;
    next.handle = inherited_->adopt(*old).id;
    old = nullptr;
  } else if (auto ok = config_.offload->validate(spec); !ok) {
    next.state = OffloadSlot::kSoftware;
    next.reason = internReason(ok.error());
  } else if (auto h = config_.offload->install(spec); !h) {
    next.state = OffloadSlot::kSoftware;
    next.reason = internReason(h.error());
  } else {
    next.state = OffloadSlot::kInHw;
    next.handle = h->id;
  }
  if (old != nullptr && !inherited_->replaced(*old)) {
    DPU_LOG(kWarn, "engine") << "offload: removing a previous dataplane's rule failed (retried)";
  }
  // The lcore's sweep reads flow_id, state and hw_used_ms: stored atomically,
  // state last (kNone while the others change).
  __atomic_store_n(&s.state, OffloadSlot::kNone, __ATOMIC_RELAXED);
  s.reason = next.reason;
  s.handle = next.handle;
  s.hw_packets_lo = 0;
  __atomic_store_n(&s.hw_used_ms, next.hw_used_ms, __ATOMIC_RELAXED);
  __atomic_store_n(&s.flow_id, next.flow_id, __ATOMIC_RELAXED);
  __atomic_store_n(&s.state, next.state, __ATOMIC_RELEASE);
}

void EngineImpl::drainOffload() {
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  const uint32_t now32 = static_cast<uint32_t>(now());
  FlowRecord e;
  for (auto& w : workers_) {
    uint64_t v;
    while (w->offload_ring.pop(v)) {
      const uint32_t index = static_cast<uint32_t>(v >> 32);
      const uint32_t id = static_cast<uint32_t>(v);
      if (!w->table.read(index, e) || e.flow_id != id) continue;
      if (!snap.depsValid(e.stamp, e.dep_in, e.dep_out, e.dep_nat)) continue;
      const OffloadSlot& s = w->offload[index];
      if (s.flow_id == id && s.state != OffloadSlot::kNone) continue;  // offered by a scan already
      offerFlow(*w, index, e, snap, now32);
    }
  }
}

void EngineImpl::scanOffload(bool full) {
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  const uint32_t now32 = static_cast<uint32_t>(now());
  FlowRecord e;
  for (auto& w : workers_) {
    for (uint32_t i = 0; i < w->offload.size(); ++i) {
      OffloadSlot& s = w->offload[i];
      if (s.state == OffloadSlot::kNone && !full) continue;
      const bool present = w->table.read(i, e);
      const bool valid = present && snap.depsValid(e.stamp, e.dep_in, e.dep_out, e.dep_nat);
      if (s.state != OffloadSlot::kNone && (!valid || e.flow_id != s.flow_id)) {
        // The flow left the cache (aged, evicted, invalidated): so does its rule.
        if (s.state == OffloadSlot::kInHw) (void)config_.offload->remove(offload::OffloadHandle{s.handle});
        __atomic_store_n(&s.state, OffloadSlot::kNone, __ATOMIC_RELEASE);
      }
      if (!full || !valid) continue;
      if (s.state == OffloadSlot::kNone) {
        // A flow the lcore could not queue (queue full): offered now.
        offerFlow(*w, i, e, snap, now32);
      } else if (s.state == OffloadSlot::kInHw) {
        auto c = config_.offload->query(offload::OffloadHandle{s.handle});
        if (c && static_cast<uint32_t>(c->packets) != s.hw_packets_lo) {
          s.hw_packets_lo = static_cast<uint32_t>(c->packets);
          __atomic_store_n(&s.hw_used_ms, now32, __ATOMIC_RELAXED);
        }
      }
    }
  }
}

void EngineImpl::reclaimSnapshots() {
  while (!retired_.empty() && quiesced(retired_.front().epoch)) {
    delete retired_.front().snapshot;
    retired_.pop_front();
  }
}

void EngineImpl::maintain() {
  reclaimSnapshots();
  ++maintain_calls_;
  northSouthUpdate();
  expireConnections();
  saveNatPorts();
  if (config_.offload != nullptr) {
    drainOffload();
    scanOffload(maintain_calls_ % 10 == 0);
    if (inherited_->active()) {
      if (generation_ != 0 || now() - start_ms_ >= config_.offload_resync_timeout_ms) endOffloadResync();
    } else if (maintain_calls_ % 10 == 0 && inherited_->retryStale() != 0) {
      DPU_LOG(kWarn, "engine") << "offload: a previous dataplane's rules still cannot be removed (retried)";
    }
  }
}

void EngineImpl::endOffloadResync() {
  const offload::ResyncResult r = inherited_->end();
  if (r.adopted + r.replaced + r.removed + r.remove_errors == 0) return;
  DPU_LOG(kInfo, "engine") << "offload resync " << (generation_ != 0 ? "after the first full sync" : "timed out without one")
                           << ": " << r.adopted << " rules of the previous dataplane taken over, " << r.replaced
                           << " replaced, " << r.removed << " removed"
                           << (r.remove_errors != 0 ? ", " + std::to_string(r.remove_errors) + " removals failed (retried)"
                                                    : std::string());
}

dataplane::v1::OperatorReply EngineImpl::operate(const dataplane::v1::OperatorRequest& request) {
  dataplane::v1::OperatorReply out;
  out.set_generation(generation_);
  out.set_instance_id(instance_id_);
  const Snapshot& snap = *current_.load(std::memory_order_relaxed);
  switch (request.body_case()) {
    case dataplane::v1::OperatorRequest::kDumpFlows: {
      const uint64_t t = now();
      const uint32_t now32 = static_cast<uint32_t>(t);
      FlowRecord e;
      for (const auto& w : workers_) {
        for (uint32_t i = 0; i < w->table.capacity(); ++i) {
          if (!w->table.read(i, e) || !snap.depsValid(e.stamp, e.dep_in, e.dep_out, e.dep_nat)) continue;
          const flow::FlowSpec spec = toFlowSpec(snap, e);
          auto* f = out.add_flows();
          f->set_match(flow::describeMatch(spec.match));
          if (e.ops & op::kDrop) {
            f->set_actions("drop(" + std::string(dropReasonName(static_cast<DropReason>(e.drop_reason))) + ")");
          } else {
            f->set_actions(flow::describeActions(spec.actions));
          }
          uint64_t packets = e.packets, bytes = e.bytes;
          uint64_t idle = now32 - e.used_ms;  // from the consistent copy
          std::string status = "software";
          if (config_.offload == nullptr) {
            status = "software: no offload backend";
          } else {
            const OffloadSlot& s = w->offload[i];
            if (s.flow_id != e.flow_id || s.state == OffloadSlot::kNone) {
              status = "software: offload pending";
            } else if (s.state == OffloadSlot::kInHw) {
              f->set_in_hw(true);
              status = "offloaded";
              // Its close punt rules send SYN, FIN and RST to conntrack (offloadable.h).
              if (const uint8_t punt = offload::closePuntFlags(spec); punt != 0) {
                status += "+" + offload::describeClosePunt(punt);
              }
              if (auto c = config_.offload->query(offload::OffloadHandle{s.handle}); c) {
                packets += c->packets;
                bytes += c->bytes;
              }
              idle = std::min<uint64_t>(idle, now32 - s.hw_used_ms);
            } else {
              status = "software: " + (s.reason < reasons_.size() ? reasons_[s.reason] : std::string("refused"));
            }
          }
          f->set_offload_status(status);
          if (e.allowed_egress != kAllowedNone || e.allowed_ingress != kAllowedNone) {
            std::string why;
            if (e.allowed_egress != kAllowedNone) why = "egress " + policy_names_.name(e.allowed_egress);
            if (e.allowed_ingress != kAllowedNone) {
              why += (why.empty() ? "" : ", ") + std::string("ingress ") + policy_names_.name(e.allowed_ingress);
            }
            f->set_policy(why);
          }
          f->set_packets(packets);
          f->set_bytes(bytes);
          const uint64_t created_ms = uint64_t{e.created_s} * 1000;
          f->set_age_ms(t > created_ms ? t - created_ms : 0);
          f->set_idle_ms(idle);
        }
      }
      break;
    }
    case dataplane::v1::OperatorRequest::kPorts: {
      for (const auto& [name, b] : bindings_) {
        auto* p = out.add_ports();
        p->set_name(name);
        p->set_role(roleName(b.role));
        p->set_dpdk_port(b.port);
        const PortSlot& slot = snap.slots[b.port];
        if (slot.lport != nullptr) p->set_logical_port(slot.lport->name);
        PortCounters sum;
        for (const auto& w : workers_) {
          const PortCounters& c = w->counters.ports[b.port];
          const uint64_t rx = readCounter(c.rx_packets);  // once: the split sums to the total
          p->add_worker_rx_packets(rx);
          sum.rx_packets += rx;
          sum.tx_packets += readCounter(c.tx_packets);
          sum.rx_dropped += readCounter(c.rx_dropped);
          sum.tx_dropped += readCounter(c.tx_dropped);
          sum.miss_budget_dropped += readCounter(c.miss_budget_dropped);
          sum.miss_throttled += readCounter(c.miss_throttled);
        }
        p->set_rx_packets(sum.rx_packets);
        p->set_tx_packets(sum.tx_packets);
        p->set_rx_dropped(sum.rx_dropped);
        p->set_tx_dropped(sum.tx_dropped);
        p->set_miss_budget_dropped(sum.miss_budget_dropped);
        p->set_miss_throttled_polls(sum.miss_throttled);
        rte_eth_link link{};
        const uint16_t ethdev = ethdevOf(b.port);
        const bool up = rte_eth_dev_is_valid_port(ethdev) && rte_eth_link_get_nowait(ethdev, &link) == 0 &&
                        link.link_status == RTE_ETH_LINK_UP;
        p->set_state(up ? "up" : "down");
      }
      break;
    }
    case dataplane::v1::OperatorRequest::kStats: {
      addPolicyDrops(out);
      for (size_t r = 1; r < kDropReasonCount; ++r) {
        uint64_t v = 0;
        for (const auto& w : workers_) v += readCounter(w->counters.drops[r]);
        auto* c = out.add_counters();
        c->set_name(std::string(dropReasonName(static_cast<DropReason>(r))));
        c->set_value(v);
        c->set_description(std::string(dropReasonText(static_cast<DropReason>(r))));
        c->set_kind(dataplane::v1::COUNTER_DROP);
      }
      for (size_t ev = 0; ev < kEventCount; ++ev) {
        uint64_t v = control_events_[ev];
        for (const auto& w : workers_) v += readCounter(w->counters.events[ev]);
        auto* c = out.add_counters();
        c->set_name(std::string(eventName(static_cast<Event>(ev))));
        c->set_value(v);
        c->set_description(std::string(eventText(static_cast<Event>(ev))));
        c->set_kind(dataplane::v1::COUNTER_EVENT);
      }
      auto gauge = [&out](const char* name, uint64_t value, const char* description) {
        auto* c = out.add_counters();
        c->set_name(name);
        c->set_value(value);
        c->set_description(description);
        c->set_kind(dataplane::v1::COUNTER_GAUGE);
      };
      uint64_t records = 0;
      for (const auto& w : workers_) records += w->table.actionsInUse();
      gauge("flow_action_records", records, "action records in use (cached flows that act alike share one)");
      // Where the cached flows run: the same walk as dump_flows, without
      // building its text (a monitoring scrape asks for this every few seconds).
      uint64_t in_hw = 0, in_sw = 0;
      FlowRecord e;
      for (const auto& w : workers_) {
        for (uint32_t i = 0; i < w->table.capacity(); ++i) {
          if (!w->table.read(i, e) || !snap.depsValid(e.stamp, e.dep_in, e.dep_out, e.dep_nat)) continue;
          const bool hw = config_.offload != nullptr && w->offload[i].flow_id == e.flow_id &&
                          w->offload[i].state == OffloadSlot::kInHw;
          ++(hw ? in_hw : in_sw);
        }
      }
      gauge("flows_in_hw", in_hw, "cached flows offloaded to the NIC");
      gauge("flows_in_sw", in_sw, "cached flows forwarded by the DPU's cores");
      uint64_t reachable = 0, incomplete = 0;
      for (const auto& [ip, n] : ns_.neighbours) ++(n.complete ? reachable : incomplete);
      gauge("north_south_host_macs", ns_.host_macs.size(), "host MACs learned on the host PF port (dpuctl neighbours)");
      gauge("north_south_neighbours", reachable, "node-network neighbours whose MAC is known (dpuctl neighbours)");
      gauge("north_south_neighbours_incomplete", incomplete,
            "node-network addresses being resolved (ARP requests sent, no answer yet)");
      gauge("conntrack_entries", conntrack_->size(), "connections tracked (services and NAT)");
      gauge("conntrack_capacity", conntrack_->capacity(), "connections the table holds at most (conntrack.max_entries)");
      const conntrack::Stats ct = conntrack_->stats();
      auto event = [&out](const char* name, uint64_t value, const char* description) {
        auto* c = out.add_counters();
        c->set_name(name);
        c->set_value(value);
        c->set_description(description);
        c->set_kind(dataplane::v1::COUNTER_EVENT);
      };
      event("conntrack_inserted", ct.inserted, "connections the table took");
      event("conntrack_refused_full", ct.refused_full,
            "new connections refused because the table was full (none unanswered near them to drop)");
      event("conntrack_early_dropped", ct.early_dropped,
            "unanswered connections dropped to make room for new ones because the table was full");
      break;
    }
    case dataplane::v1::OperatorRequest::kServices:
      describeServices(snap, out);
      break;
    case dataplane::v1::OperatorRequest::kConntrack:
      describeConntrack(request.conntrack(), out);
      break;
    case dataplane::v1::OperatorRequest::kPolicy:
      describePolicy(request.policy(), out);
      break;
    case dataplane::v1::OperatorRequest::kProblems:
      for (const auto& p : problems_) *out.add_problems() = p;
      break;
    case dataplane::v1::OperatorRequest::kNeighbours:
      northSouthOperate(out);
      break;
    case dataplane::v1::OperatorRequest::kIpsec:
      ipsec_.describe(model_.ipsec, *out.mutable_ipsec());
      // With NAT traversal: where each SA's peer is sent to (address:port learned or 4500).
      if (model_.ipsec_nat_t) {
        for (auto& sa : *out.mutable_ipsec()->mutable_sas()) {
          auto nat = nat_peers_.find(sa.state().remote_node());
          if (nat == nat_peers_.end()) continue;
          sa.set_nat_peer(nat->second->address.str() + ":" +
                          std::to_string(nat->second->port.load(std::memory_order_relaxed)));
        }
      }
      break;
    case dataplane::v1::OperatorRequest::kIpsecRotate:
      // The agent takes it from its next reply (a status poll a second).
      if (auto r = ipsec_.requestRotation(); !r) {
        out.set_error(r.error());
        break;
      }
      ipsec_.describe(model_.ipsec, *out.mutable_ipsec());
      break;
    case dataplane::v1::OperatorRequest::BODY_NOT_SET:
      out.set_error(
          "empty OperatorRequest: ask for dump_flows, ports, stats, problems, neighbours, services, conntrack, ipsec "
          "or ipsec_rotate");
      break;
  }
  return out;
}

}  // namespace dpu::datapath
