// dpu-agent's side of IPsec: the node's SA database (dpu-agent/ipsec) wired
// to the agent's three neighbours.
//  - The cluster: every node's published key and epoch (NodeInfo) is a peer;
//    this node's own advertisement (key, epoch) goes out with its SelfEntry
//    once the database offers it, and the database is told when it did.
//  - The dataplane: the SAs the database wants become IpsecSa objects of the
//    logical model (one ModelState change per database change, so an outbound
//    switch is one Delta); the dataplane's Hello (does it install SAs, which
//    process is it) and every reply's SA states go back to the database.
//  - The operator: log lines for every rotation step, /metrics with the
//    epochs, the rotation phase and each peer's state; `dpuctl ipsec rotate`
//    (counted by the dataplane, taken from its replies) or SIGUSR1 to rotate.
//  - The rollout (docs/ipsec.md, "Rollout"): the node advertises its mode
//    ("keys" or "on") with its key, "on" only once its dataplane was
//    programmed to encrypt; each inbound SA says whether that peer's
//    plaintext is still accepted (mode on: only with `rollout` and from a
//    peer that does not advertise "on"); a node leaving mode on keeps
//    encrypting until `gracePeriodSeconds` after it published "keys"
//    (<ipsec.stateDir>/mode.json carries that across restarts).
// Never a key: log lines and metrics name SAs by peer, direction, SPI and
// epochs only, and the IpsecSa objects are handed to the model, which nothing
// prints.
//
// Thread-safe: the cluster source, the dataplane client and the main loop
// call in; one lock serializes them (the database is not thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/agent_config.h"
#include "control/cluster_source.h"
#include "control/logical_model.h"
#include "control/metrics.h"
#include "ipsec/sa_database.h"

namespace dpu::control {

class IpsecController {
 public:
  using Clock = std::function<int64_t()>;  // wall-clock milliseconds
  static int64_t wallClockMs();

  IpsecController(const AgentConfig& config, ModelState& model, Clock clock = wallClockMs);

  // Reads the PSK and the key file (making the first key pair on a first
  // start) and the SA state. An error stops the agent: the message names the
  // file and what to do.
  Result<void> start();

  // The cluster's nodes, this one included (ignored), as the source delivers them.
  void nodeUpserted(const NodeInfo& node);
  void nodeDeleted(const std::string& name);
  // After a complete listing: peers the cluster no longer lists are dropped.
  void synced();

  // The dataplane client: its Hello answer (before the full sync), then every
  // reply. A reply whose ipsec_rotation_requests is above what this node took
  // (the dataplane keeps the count acknowledged: ipsec_rotations_taken) starts
  // one rotation, however many requests it adds.
  void dataplaneHello(const dpv1::HelloReply& hello);
  void dataplaneReply(const dpv1::ProgramReply& reply);
  // The acknowledgement each status poll carries (StatusRequest.ipsec_rotations_taken).
  uint64_t rotationsTaken() const;
  // What a status poll tells the dataplane: that acknowledgement and where the
  // rotation stands (StatusRequest.ipsec_rotation), for `dpuctl ipsec`.
  void statusPoll(dpv1::StatusRequest& out) const;

  // Timers (grace periods, the rotation period, lazy writes) and the PSK
  // file's poll; the main loop calls it a few times a second.
  void tick();
  void requestRotation(const std::string& reason);

  // What this node publishes (empty until the dataplane holds the inbound
  // SAs of its first epoch), a number that changes whenever it does, and the
  // acknowledgement of a successful publication.
  std::optional<ipsec::Advertisement> advertisement() const;
  uint64_t advertisementVersion() const;
  static uint64_t versionOf(const ipsec::Advertisement& a);
  // `mode`: the advertisement's mode as published ("" counts as "keys").
  void published(uint32_t epoch, const std::string& mode = "");
  // Whether the dataplane is told to encrypt (NodeSettings.ipsec).
  bool encrypting() const;

  ipsec::SaDbStatus status() const;
  // The dpu_agent_ipsec_* families.
  void writeMetrics(PromWriter& w) const;

 private:
  // After every database call: the SAs into the model, the events into the log.
  void syncLocked();
  void pollPskLocked(int64_t now);
  // The rollout: the mode file, the plaintext accepted per peer, leaving mode on.
  std::string modeFilePath() const;
  Result<void> loadModeLocked();
  void saveModeLocked();
  bool plaintextAcceptedLocked(const std::string& peer) const;
  void leaveTickLocked(int64_t now);

  const AgentConfig& config_;
  ModelState& model_;
  Clock clock_;
  mutable std::mutex mu_;
  std::unique_ptr<ipsec::SaDatabase> db_;
  uint64_t synced_version_ = ~uint64_t{0};
  std::string psk_stamp_;
  std::string psk_error_;
  std::set<std::string> cluster_peers_;  // names seen since the last synced()
  std::map<std::string, std::string> peer_problems_;  // node -> why its advertisement is unusable
  bool dataplane_ipsec_ = false;
  bool warned_no_ipsec_ = false;
  uint64_t sa_reports_ = 0;
  uint64_t rotations_taken_ = 0;  // of the dataplane instance's rotation requests
  std::map<std::string, dpv1::IpsecSaState> sa_states_;  // the dataplane's last report, by SA name
  std::map<std::string, std::string> peer_modes_;  // node -> its advertised mode ("", "keys", "on")
  bool encrypting_ = false;           // NodeSettings.ipsec as this controller set it
  bool encrypt_confirmed_ = false;    // the dataplane replied since it was told to encrypt
  int64_t plaintext_at_ms_ = 0;       // leaving mode on: when to stop encrypting (0: "keys" not published yet)
  uint64_t rollout_version_ = 0;      // changes with any per-peer plaintext decision
  uint64_t synced_rollout_version_ = ~uint64_t{0};
};

// Delivers every cluster change to two listeners (the Agent and the IPsec
// controller), in order, on the source's thread.
class ClusterTee : public ClusterListener {
 public:
  ClusterTee(ClusterListener& first, IpsecController& ipsec) : first_(first), ipsec_(ipsec) {}
  void nodeUpserted(const NodeInfo& node) override;
  void nodeDeleted(const std::string& name) override;
  void podUpserted(const PodInfo& pod) override { first_.podUpserted(pod); }
  void podDeleted(const std::string& ns, const std::string& name) override { first_.podDeleted(ns, name); }
  void serviceUpserted(const ServiceInfo& svc) override { first_.serviceUpserted(svc); }
  void serviceDeleted(const std::string& ns, const std::string& name) override { first_.serviceDeleted(ns, name); }
  void endpointSliceUpserted(const EndpointSliceInfo& s) override { first_.endpointSliceUpserted(s); }
  void endpointSliceDeleted(const std::string& ns, const std::string& name) override {
    first_.endpointSliceDeleted(ns, name);
  }
  void networkPolicyUpserted(const NetworkPolicyInfo& p) override { first_.networkPolicyUpserted(p); }
  void networkPolicyDeleted(const std::string& ns, const std::string& name) override {
    first_.networkPolicyDeleted(ns, name);
  }
  void namespaceUpserted(const NamespaceInfo& ns) override { first_.namespaceUpserted(ns); }
  void namespaceDeleted(const std::string& name) override { first_.namespaceDeleted(name); }
  void synced() override;

 private:
  ClusterListener& first_;
  IpsecController& ipsec_;
};

// The checks --check-config makes of the IPsec files without changing them:
// the PSK file reads and parses, an existing key file is usable.
Result<void> checkIpsecFiles(const AgentConfig& config);

}  // namespace dpu::control
