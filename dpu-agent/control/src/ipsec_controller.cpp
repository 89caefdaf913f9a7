// dpu-agent's IPsec controller (see ipsec_controller.h).
#include "control/ipsec_controller.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/net_address.h"
#include "ipsec/psk.h"
#include "model/ipsec_rotation.h"

namespace dpu::control {
namespace {

constexpr const char* kLog = "ipsec";

ipsec::SaDbOptions optionsOf(const AgentConfig& c) {
  ipsec::SaDbOptions o;
  o.node_name = c.node_name;
  o.key_size = c.ipsec.key_bits == 256 ? ipsec::KeySize::k256 : ipsec::KeySize::k128;
  o.grace_ms = static_cast<int64_t>(c.ipsec.grace_period_s) * 1000;
  o.rotation_period_ms = static_cast<int64_t>(c.ipsec.rotation_period_s) * 1000;
  o.esn_soft_limit = c.ipsec.esn_soft_limit;
  o.byte_soft_limit = c.ipsec.byte_soft_limit;
  o.replay_window = c.ipsec.replay_window;
  return o;
}

constexpr const char* kModeOn = "on";
constexpr const char* kModeKeys = "keys";

dpv1::IpsecSa toProto(const ipsec::SaSpec& s) {
  dpv1::IpsecSa a;
  a.set_name(s.name);
  a.set_remote_node(s.peer);
  a.set_peer_tunnel_ip(s.peer_tunnel_ip);
  a.set_direction(s.direction == ipsec::SaDirection::kInbound ? dpv1::INBOUND : dpv1::OUTBOUND);
  a.set_spi(s.spi);
  a.set_local_epoch(s.local_epoch);
  a.set_remote_epoch(s.remote_epoch);
  a.set_algorithm(s.key_size == ipsec::KeySize::k256 ? dpv1::AES_256_GCM : dpv1::AES_128_GCM);
  a.set_key(std::string(reinterpret_cast<const char*>(s.key.data()), s.key.size()));
  a.set_salt(std::string(reinterpret_cast<const char*>(s.salt.data()), s.salt.size()));
  a.set_esn(true);
  a.set_initial_sequence(s.initial_sequence);
  a.set_sequence_limit(s.sequence_limit);
  a.set_replay_window(s.replay_window);
  return a;
}

}  // namespace

int64_t IpsecController::wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

IpsecController::IpsecController(const AgentConfig& config, ModelState& model, Clock clock)
    : config_(config),
      model_(model),
      clock_(std::move(clock)),
      db_(std::make_unique<ipsec::SaDatabase>(optionsOf(config), config.ipsec.state_dir)) {}

Result<void> IpsecController::start() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  if (!config_.ipsec.psk_file.empty()) {
    psk_stamp_ = ipsec::pskFileStamp(config_.ipsec.psk_file);
    auto psk = ipsec::loadPsk(config_.ipsec.psk_file);
    if (!psk) return prefixed("config.ipsec.pskFile", std::move(psk).takeError());
    db_->setPsk(psk->bytes, psk->id, now);
  }
  if (auto r = db_->start(now); !r) return prefixed("IPsec", std::move(r).takeError());
  if (auto r = loadModeLocked(); !r) return std::move(r).takeError();
  if (auto why = db_->status().last_error; !why.empty()) {
    DPU_LOG(kWarn, kLog) << why;
  }
  const auto st = db_->status();
  DPU_LOG(kInfo, kLog) << "IPsec " << ipsecModeName(config_.ipsec.mode) << ": keys in " << db_->keyFilePath()
                       << ", epoch " << (st.current_epoch ? st.current_epoch : st.pending_epoch)
                       << (st.current_epoch ? "" : " (not published yet)") << ", AES-" << config_.ipsec.key_bits
                       << "-GCM, " << (config_.ipsec.psk_file.empty() ? "no PSK" : "PSK from " + config_.ipsec.psk_file)
                       << ", " << st.peers.size() << " peers restored";
  syncLocked();
  return {};
}

void IpsecController::nodeUpserted(const NodeInfo& node) {
  if (node.name == config_.node_name) return;
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  cluster_peers_.insert(node.name);
  if (auto& m = peer_modes_[node.name]; m != node.ipsec_mode) {
    m = node.ipsec_mode;
    ++rollout_version_;
    if (!m.empty() && m != kModeOn && m != kModeKeys) {
      DPU_LOG(kWarn, kLog) << "node " << node.name << " advertises IPsec mode \"" << m
                           << "\", neither keys nor on: its plaintext is refused as from a node that encrypts";
    } else if (config_.ipsec.encrypt()) {
      DPU_LOG(kInfo, kLog) << "node " << node.name << " advertises IPsec mode " << (m.empty() ? "(none)" : m)
                           << ": its plaintext is "
                           << (plaintextAcceptedLocked(node.name) ? "accepted (rollout: true)" : "refused");
    }
  }
  std::string problem;
  ipsec::PeerAdvert adv;
  adv.name = node.name;
  adv.epoch = node.ipsec_epoch;
  const bool advertises = !node.ipsec_public_key.empty() || node.ipsec_epoch != 0;
  if (advertises) {
    auto key = ipsec::base64Decode(node.ipsec_public_key);
    auto tip = IpAddress::parse(node.tunnel_ip);
    if (node.ipsec_public_key.empty()) problem = "it publishes an IPsec epoch but no public key";
    else if (!key) problem = "its IPsec public key " + key.error();
    else if (key->size() != ipsec::kX25519KeySize)
      problem = "its IPsec public key is " + std::to_string(key->size()) + " bytes; an X25519 key is 32";
    else if (node.ipsec_epoch == 0) problem = "it publishes an IPsec public key without an epoch (1 or more)";
    else if (!tip) problem = "it has no usable tunnel IP";
    else if (node.pod_cidrs.empty()) problem = "it has no pod CIDR yet (it is not a remote node of the model)";
    if (problem.empty()) {
      std::copy(key->begin(), key->end(), adv.public_key.begin());
      adv.tunnel_ip = tip->str();
    }
  }
  if (!advertises || !problem.empty()) {
    if (!problem.empty()) {
      // Said once per distinct problem; not being an IPsec node (yet) is not one.
      if (peer_problems_[node.name] != problem) {
        DPU_LOG(kWarn, kLog) << "node " << node.name << " is not an IPsec peer: " << problem;
      }
      peer_problems_[node.name] = problem;
    } else {
      peer_problems_.erase(node.name);
    }
    db_->removePeer(node.name, now);
  } else {
    peer_problems_.erase(node.name);
    db_->upsertPeer(adv, now);
  }
  syncLocked();
}

void IpsecController::nodeDeleted(const std::string& name) {
  std::lock_guard lock(mu_);
  cluster_peers_.erase(name);
  peer_problems_.erase(name);
  if (peer_modes_.erase(name) != 0) ++rollout_version_;
  db_->removePeer(name, clock_());
  syncLocked();
}

void IpsecController::synced() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  for (const auto& name : db_->peerNames()) {
    if (!cluster_peers_.count(name)) db_->removePeer(name, now);
  }
  syncLocked();
}

void IpsecController::dataplaneHello(const dpv1::HelloReply& hello) {
  std::lock_guard lock(mu_);
  dataplane_ipsec_ = hello.ipsec();
  if (!hello.ipsec() && !warned_no_ipsec_) {
    DPU_LOG(kWarn, kLog) << "the dataplane (instance " << hello.instance_id()
                         << ") does not install IPsec SAs: this node's IPsec key is not published until one does";
    warned_no_ipsec_ = true;
  }
  if (hello.ipsec()) warned_no_ipsec_ = false;
  db_->setDataplane(hello.ipsec(), hello.instance_id(), clock_());
  syncLocked();
}

void IpsecController::dataplaneReply(const dpv1::ProgramReply& reply) {
  std::lock_guard lock(mu_);
  if (!dataplane_ipsec_) return;
  std::vector<ipsec::SaReport> reports;
  reports.reserve(reply.ipsec_sas_size());
  sa_states_.clear();
  for (const auto& st : reply.ipsec_sas()) {
    ipsec::SaReport r;
    r.name = st.name();
    r.packets = st.packets();
    r.bytes = st.bytes();
    r.replay_drops = st.replay_drops();
    r.icv_failures = st.icv_failures();
    r.highest_sequence = st.highest_sequence();
    r.first_packet = st.first_packet_received();
    reports.push_back(std::move(r));
    sa_states_[st.name()] = st;
  }
  ++sa_reports_;
  // dpuctl ipsec rotate. A new connection starts from what the dataplane
  // says was taken (a restarted agent, a restarted dataplane: 0).
  if (reply.has_hello()) rotations_taken_ = reply.ipsec_rotations_taken();
  if (reply.ipsec_rotation_requests() > rotations_taken_) {
    DPU_LOG(kInfo, kLog) << "dpuctl ipsec rotate (request " << reply.ipsec_rotation_requests()
                         << " to the dataplane): starting an IPsec key rotation";
    db_->requestRotation("operator (dpuctl ipsec rotate)", clock_());
    rotations_taken_ = reply.ipsec_rotation_requests();
  }
  // A reply to a program (not to the Hello) follows one that carried
  // NodeSettings.ipsec as it is now (set before the client starts).
  if (encrypting_ && !encrypt_confirmed_ && !reply.has_hello()) {
    encrypt_confirmed_ = true;
    saveModeLocked();
  }
  db_->dataplaneReport(reports, clock_());
  syncLocked();
}

uint64_t IpsecController::rotationsTaken() const {
  std::lock_guard lock(mu_);
  return rotations_taken_;
}

void IpsecController::statusPoll(dpv1::StatusRequest& out) const {
  std::lock_guard lock(mu_);
  out.set_ipsec_rotations_taken(rotations_taken_);
  const auto st = db_->status();
  auto& r = *out.mutable_ipsec_rotation();
  r.set_phase(ipsec::rotationPhaseName(st.phase));
  r.set_current_epoch(st.current_epoch);
  r.set_next_epoch(st.pending_epoch);
  r.set_previous_epoch(st.previous_epoch);
  if (st.previous_epoch != 0) r.set_previous_accepted_for_ms(std::max<int64_t>(0, st.previous_retire_ms - clock_()));
  // Texts clipped to what the dataplane takes (model/ipsec_rotation.h).
  const auto clip = model::clipRotationText;
  r.set_waiting_for(clip(st.waiting_for));
  r.set_deferred(clip(st.rotation_deferred));
  r.set_rotations_started(st.rotations_started);
  r.set_last_error(clip(st.last_error));
  std::map<std::string, dpv1::IpsecPeerEpochs> peers;
  for (const auto& p : st.peers) {
    auto& e = peers[p.name];
    e.set_node(clip(p.name));
    e.set_advertised_epoch(p.latest_epoch);
    e.set_sending_epoch(p.sender_epoch);
    e.set_inbound_sas(static_cast<uint32_t>(p.inbound));
    e.set_problem(clip(p.problem));
  }
  // Nodes whose advertisement cannot be used at all (no key the database took).
  for (const auto& [node, why] : peer_problems_) {
    auto& e = peers[node];
    e.set_node(clip(node));
    if (e.problem().empty()) e.set_problem(clip(why));
  }
  for (auto& [node, e] : peers) *r.add_peers() = std::move(e);
}

void IpsecController::pollPskLocked(int64_t now) {
  if (config_.ipsec.psk_file.empty()) return;
  const std::string stamp = ipsec::pskFileStamp(config_.ipsec.psk_file);
  if (stamp == psk_stamp_) return;
  psk_stamp_ = stamp;
  auto psk = ipsec::loadPsk(config_.ipsec.psk_file);
  if (!psk) {
    if (psk.error() != psk_error_) {
      DPU_LOG(kError, kLog) << psk.error() << "; keeping the PSK in use";
    }
    psk_error_ = psk.error();
    return;
  }
  psk_error_.clear();
  db_->setPsk(psk->bytes, psk->id, now);
}

void IpsecController::tick() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  pollPskLocked(now);
  db_->tick(now);
  leaveTickLocked(now);
  syncLocked();
}

void IpsecController::requestRotation(const std::string& reason) {
  std::lock_guard lock(mu_);
  db_->requestRotation(reason, clock_());
  syncLocked();
}

std::optional<ipsec::Advertisement> IpsecController::advertisement() const {
  std::lock_guard lock(mu_);
  auto a = db_->advertisement();
  // "on" only once the dataplane encrypts: a peer that learns it refuses our
  // plaintext from then on.
  if (a) a->mode = config_.ipsec.encrypt() && encrypt_confirmed_ ? kModeOn : kModeKeys;
  return a;
}

uint64_t IpsecController::versionOf(const ipsec::Advertisement& a) {
  // The epoch only moves forward; with the mode it names the advertisement.
  return uint64_t{a.epoch} * 2 + (a.mode == kModeOn ? 1 : 0);
}

uint64_t IpsecController::advertisementVersion() const {
  auto a = advertisement();
  return a ? versionOf(*a) : 0;
}

void IpsecController::published(uint32_t epoch, const std::string& mode) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_();
  db_->advertisementPublished(epoch, now);
  if (encrypting_ && !config_.ipsec.encrypt() && mode != kModeOn && plaintext_at_ms_ == 0) {
    // Leaving mode on: "keys" is out; once every peer can have seen it (the
    // grace period) they accept our plaintext, and we stop encrypting.
    plaintext_at_ms_ = now + static_cast<int64_t>(config_.ipsec.grace_period_s) * 1000;
    DPU_LOG(kInfo, kLog) << "IPsec mode keys published: still sending ESP for " << config_.ipsec.grace_period_s
                         << " s, until every peer accepts this node's plaintext";
    saveModeLocked();
  }
  syncLocked();
}

bool IpsecController::encrypting() const {
  std::lock_guard lock(mu_);
  return encrypting_;
}

std::string IpsecController::modeFilePath() const { return config_.ipsec.state_dir + "/mode.json"; }

// <ipsec.stateDir>/mode.json: {"version": 1, "encrypting": bool, "confirmed":
// bool, "plaintextAtMs": n}. No secret. Written when any of them changes.
Result<void> IpsecController::loadModeLocked() {
  const std::string path = modeFilePath();
  bool was_encrypting = false, was_confirmed = false;
  int64_t plaintext_at = 0;
  if (fileExists(path)) {
    auto text = readFile(path);
    if (!text) return prefixed("IPsec mode file", std::move(text).takeError());
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.value("encrypting", nlohmann::json()).is_boolean() ||
        !j.value("plaintextAtMs", nlohmann::json()).is_number_integer()) {
      return Error{"IPsec mode file " + path +
                   " is malformed (it needs \"encrypting\": true|false and \"plaintextAtMs\": a number); delete it "
                   "if this node has not encrypted in the last gracePeriodSeconds, or write {\"version\": 1, "
                   "\"encrypting\": true, \"plaintextAtMs\": 0} to leave mode on with a grace period"};
    }
    was_encrypting = j["encrypting"].get<bool>();
    // Optional: a file written by hand (the message above) may leave it out.
    was_confirmed = j.contains("confirmed") && j["confirmed"].is_boolean() && j["confirmed"].get<bool>();
    plaintext_at = j["plaintextAtMs"].get<int64_t>();
  }
  if (config_.ipsec.encrypt()) {
    encrypting_ = true;
    // A restart in mode on: the dataplane encrypts already.
    encrypt_confirmed_ = was_encrypting && was_confirmed;
    plaintext_at_ms_ = 0;
  } else if (was_encrypting) {
    encrypting_ = true;
    plaintext_at_ms_ = plaintext_at;
    DPU_LOG(kInfo, kLog) << "leaving IPsec mode on: this node keeps sending ESP until "
                         << (plaintext_at ? std::to_string(config_.ipsec.grace_period_s) +
                                                " s after it published mode keys (at " + std::to_string(plaintext_at) +
                                                " ms)"
                                          : "gracePeriodSeconds after it has published mode keys");
  }
  model_.setNodeIpsec(encrypting_);
  saveModeLocked();
  return {};
}

void IpsecController::saveModeLocked() {
  nlohmann::json j = {{"version", 1},
                      {"encrypting", encrypting_},
                      {"confirmed", encrypt_confirmed_},
                      {"plaintextAtMs", plaintext_at_ms_}};
  if (auto r = writeFileAtomic(modeFilePath(), j.dump() + "\n"); !r) {
    DPU_LOG(kError, kLog) << "cannot write the IPsec mode file: " << r.error();
  }
}

void IpsecController::leaveTickLocked(int64_t now) {
  if (!encrypting_ || config_.ipsec.encrypt()) return;
  // Without a published key no peer holds an SA from us: nothing to wait for.
  const bool nothing_published = db_->status().current_epoch == 0;
  if (!nothing_published && (plaintext_at_ms_ == 0 || now < plaintext_at_ms_)) return;
  encrypting_ = false;
  encrypt_confirmed_ = false;
  plaintext_at_ms_ = 0;
  model_.setNodeIpsec(false);
  saveModeLocked();
  DPU_LOG(kInfo, kLog) << "IPsec mode keys: every peer has had mode keys for the grace period; sending plaintext now";
}

bool IpsecController::plaintextAcceptedLocked(const std::string& peer) const {
  if (!config_.ipsec.encrypt()) return true;  // keys (or leaving on): nothing refused
  if (!config_.ipsec.rollout) return false;   // fail closed
  auto it = peer_modes_.find(peer);
  const std::string mode = it == peer_modes_.end() ? "" : it->second;
  return mode.empty() || mode == kModeKeys;
}

ipsec::SaDbStatus IpsecController::status() const {
  std::lock_guard lock(mu_);
  return db_->status();
}

void IpsecController::syncLocked() {
  if (db_->version() != synced_version_ || rollout_version_ != synced_rollout_version_) {
    synced_version_ = db_->version();
    synced_rollout_version_ = rollout_version_;
    std::map<std::string, dpv1::IpsecSa> sas;
    for (const auto& [name, s] : db_->desired()) {
      auto& a = sas[name] = toProto(s);
      if (s.direction == ipsec::SaDirection::kInbound) a.set_plaintext_accepted(plaintextAcceptedLocked(s.peer));
    }
    model_.setIpsecSas(sas);
  }
  for (const auto& e : db_->takeEvents()) DPU_LOG(kInfo, kLog) << e;
}

void IpsecController::writeMetrics(PromWriter& w) const {
  std::lock_guard lock(mu_);
  const auto st = db_->status();
  w.gauge("dpu_agent_ipsec_mode", "The IPsec mode of this agent (1 for the one in use): off, keys or on.", 1,
          {{"mode", ipsecModeName(config_.ipsec.mode)}});
  w.gauge("dpu_agent_ipsec_encrypting",
          "1 while the dataplane is told to encrypt: mode on, or leaving it until peers accept plaintext.",
          encrypting_ ? 1 : 0);
  {
    // IPsec peers only (a node without a usable key has no SA to say it in).
    std::vector<std::pair<Labels, double>> accepted;
    for (const auto& p : st.peers) {
      auto it = peer_modes_.find(p.name);
      const std::string mode = it == peer_modes_.end() || it->second.empty() ? "none" : it->second;
      accepted.push_back({{{"node", p.name}, {"mode", mode}}, plaintextAcceptedLocked(p.name) ? 1.0 : 0.0});
    }
    w.family("dpu_agent_ipsec_peer_plaintext_accepted", "gauge",
             "Per peer node and the IPsec mode it advertises: 1 when its plaintext Geneve is accepted (this node "
             "does not encrypt, or rollout is true and the peer does not advertise on).",
             accepted);
  }
  w.family("dpu_agent_ipsec_epoch", "gauge",
           "This node's key epochs: current (published), next (being installed or published), previous "
           "(accepted until its grace period ends); 0 when there is none.",
           {{{{"state", "current"}}, static_cast<double>(st.current_epoch)},
            {{{"state", "next"}}, static_cast<double>(st.pending_epoch)},
            {{{"state", "previous"}}, static_cast<double>(st.previous_epoch)}});
  std::vector<std::pair<Labels, double>> phases;
  for (auto p : {ipsec::RotationPhase::kIdle, ipsec::RotationPhase::kInstalling, ipsec::RotationPhase::kPublishing,
                 ipsec::RotationPhase::kGrace}) {
    phases.push_back({{{"phase", ipsec::rotationPhaseName(p)}}, st.phase == p ? 1.0 : 0.0});
  }
  w.family("dpu_agent_ipsec_rotation_phase", "gauge",
           "1 for the phase of the key rotation: idle, installing (the next epoch's inbound SAs), publishing, "
           "grace (the previous epoch still accepted).",
           phases);
  w.gauge("dpu_agent_ipsec_rotation_deferred",
          "1 while a requested rotation waits for the one in progress to end (or for the current epoch's grace period).",
          st.rotation_deferred.empty() ? 0 : 1);
  w.counter("dpu_agent_ipsec_rotations_total", "Key rotations started (operator, period, PSK change, soft limits).",
            static_cast<double>(st.rotations_started));
  w.gauge("dpu_agent_ipsec_dataplane_support",
          "1 when the dataplane installs IPsec SAs; a key is published only once it holds the inbound SAs.",
          st.dataplane_ipsec ? 1 : 0);
  w.family("dpu_agent_ipsec_sas", "gauge", "IPsec SAs in the model, by direction.",
           {{{{"direction", "inbound"}}, static_cast<double>(st.inbound_sas)},
            {{{"direction", "outbound"}}, static_cast<double>(st.outbound_sas)}});
  std::vector<std::pair<Labels, double>> epochs, problems;
  for (const auto& p : st.peers) {
    epochs.push_back({{{"node", p.name}, {"epoch", "advertised"}}, static_cast<double>(p.latest_epoch)});
    epochs.push_back({{{"node", p.name}, {"epoch", "sending"}}, static_cast<double>(p.sender_epoch)});
    if (!p.problem.empty()) problems.push_back({{{"node", p.name}}, 1});
  }
  for (const auto& [node, why] : peer_problems_) problems.push_back({{{"node", node}}, 1});
  w.family("dpu_agent_ipsec_peer_epoch", "gauge",
           "Per peer node: its advertised epoch, and our epoch we send to it with (0: no outbound SA yet).", epochs);
  w.family("dpu_agent_ipsec_peer_problem", "gauge",
           "1 for each node whose IPsec advertisement cannot be used (the agent's log says why).", problems);
}

void ClusterTee::nodeUpserted(const NodeInfo& node) {
  first_.nodeUpserted(node);
  ipsec_.nodeUpserted(node);
}

void ClusterTee::nodeDeleted(const std::string& name) {
  first_.nodeDeleted(name);
  ipsec_.nodeDeleted(name);
}

void ClusterTee::synced() {
  first_.synced();
  ipsec_.synced();
}

Result<void> checkIpsecFiles(const AgentConfig& config) {
  if (!config.ipsec.enabled()) return {};
  if (!config.ipsec.psk_file.empty()) {
    if (auto psk = ipsec::loadPsk(config.ipsec.psk_file); !psk) {
      return prefixed("config.ipsec.pskFile", std::move(psk).takeError());
    }
  }
  if (!config.node_name.empty()) {
    ipsec::KeyStore keys(config.ipsec.state_dir + "/keys.json", config.node_name);
    if (auto r = keys.load(); !r) return prefixed("config.ipsec.stateDir", std::move(r).takeError());
  }
  return {};
}

}  // namespace dpu::control
