// The IPsec SA database of one node and its rotation state machine: from the
// node's own key epochs, the peers' published keys and epochs, and what the
// dataplane reports, it decides which SAs the dataplane must hold (per peer:
// the inbound SAs, one per accepted epoch pair, and the one outbound SA),
// which epoch the node may advertise, and what must survive a restart. No
// I/O but its two files (key_store.h and the state file below), no clock of
// its own (every call takes `now`, wall-clock milliseconds), no DPDK and no
// proto: dpu-agent's IpsecController carries its output to the dataplane and
// to the cluster. docs/ipsec.md, "Rotation" and "Restarts", is the spec.
//
// Epochs. Each own epoch is a key pair and is, in order:
//   pending  — inbound SAs for it are being installed (with every peer known);
//   ready    — the dataplane reported all of them installed: advertisement()
//              offers it, and the caller publishes it;
//   current  — published (advertisementPublished()); the older current becomes
//   previous — still accepted inbound, retired `grace` after the current was
//              published, when its private key is deleted.
// A rotation (requestRotation(): operator, period, new PSK, sequence or byte
// soft limit) starts only when no other is in progress; it is deferred, not
// lost, otherwise.
//
// SAs with a peer P. The SA of a direction is keyed by the pair (sender epoch,
// receiver epoch). Inbound: every own epoch (pending, ready, current,
// previous) × every live epoch of P. Outbound: (S, R) where R is P's latest
// advertised epoch — P installed its inbound SAs for R before advertising it —
// and S is the newest own published epoch P is known to accept: one on which
// a packet from P arrived (the dataplane's first-packet report), or one
// published at least `grace` ago (every live peer has learned it by then);
// for a peer met just now, the newest published epoch (the first contact,
// which is no worse than plaintext: a receiver drops what comes before it
// knows the sender). S never goes back. A rotation starts only once the
// current epoch is accepted by every peer (published `grace` ago), so the
// previous epoch of a rotation in progress is always one every peer knows. P's older epoch stays accepted until
// `grace` after its first packet on the newer one, or 2 × `grace` after the
// newer one was learned.
//
// Sequence numbers (no nonce is ever reused, no peer is locked out after a
// restart): an outbound SA's starting sequence and the highest sequence the
// dataplane may use (`sequence_limit`) come from a mark persisted in the state
// file BEFORE the SA is offered. The dataplane reports the highest sequence it
// sent; the mark moves ahead by `sequence_reservation` when half of it is
// used. A new dataplane instance (it restarted) gets every outbound SA again
// starting above the mark, so no number is used twice under one key, and
// less than 2^32 ahead of what the peer saw, so its receiver still infers
// the ESN's high half; inbound SAs restart their replay window at the
// highest sequence reported seen.
//
// Not thread-safe: one owner (the controller) serializes calls.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "ipsec/crypto.h"
#include "ipsec/derive.h"
#include "ipsec/key_store.h"

namespace dpu::ipsec {

enum class SaDirection : uint8_t { kInbound, kOutbound };

// The ESN hard limit (RFC 4303 §3.3.3: the counter never wraps).
inline constexpr uint64_t kEsnHardLimit = ~uint64_t{0};

// One SA as the dataplane must hold it. `key` is secret.
struct SaSpec {
  std::string name;            // "<peer>/in/<spi as 8 hex digits>" or "<peer>/out/<spi>"
  std::string peer;            // the remote node
  std::string peer_tunnel_ip;  // inbound: looked up by (this, spi); outbound: the destination
  SaDirection direction = SaDirection::kInbound;
  uint32_t spi = 0;
  uint32_t local_epoch = 0;
  uint32_t remote_epoch = 0;
  KeySize key_size = KeySize::k128;
  SecretBytes key;
  std::array<uint8_t, kSaltSize> salt{};
  uint64_t initial_sequence = 1;  // outbound: first to send; inbound: first accepted
  uint64_t sequence_limit = 0;    // outbound: the highest the dataplane may send; inbound: 0
  uint32_t replay_window = 0;     // inbound: packets; outbound: 0
  bool operator==(const SaSpec&) const = default;
};

// What the dataplane says of one SA it holds (ProgramReply.ipsec_sas).
struct SaReport {
  std::string name;
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t replay_drops = 0;
  uint64_t icv_failures = 0;
  uint64_t highest_sequence = 0;  // outbound: sent; inbound: seen (authenticated)
  bool first_packet = false;      // inbound: a packet authenticated on it
};

// A peer's published key: Node annotations or the cluster file.
struct PeerAdvert {
  std::string name;
  std::string tunnel_ip;
  uint32_t epoch = 0;
  X25519Key public_key{};
};

struct SaDbOptions {
  std::string node_name;
  KeySize key_size = KeySize::k128;
  int64_t grace_ms = 60'000;
  int64_t rotation_period_ms = 0;   // 0: no periodic rotation
  uint64_t esn_soft_limit = uint64_t{1} << 63;
  uint64_t byte_soft_limit = 0;     // 0: none
  // Sequence numbers reserved ahead of use (the mark). At most 2^31: after a
  // dataplane restart the SA starts above the mark, up to a reservation
  // ahead of what the peer has seen, and an ESN receiver infers the high
  // half from its window only across a jump below 2^32 less its window
  // (RFC 4303 Appendix A2.2): a larger one fails every ICV, a lock-out.
  static constexpr uint64_t kMaxSequenceReservation = uint64_t{1} << 31;
  uint64_t sequence_reservation = kMaxSequenceReservation;
  uint32_t replay_window = 1024;
  int64_t seen_persist_ms = 10'000;  // how often inbound "highest seen" marks are written
};

// What this node publishes: its newest key the dataplane can receive with.
struct Advertisement {
  uint32_t epoch = 0;
  std::string public_key;  // base64
  std::string mode = {};   // "keys" or "on": set by the agent, which knows what its dataplane does
  bool operator==(const Advertisement&) const = default;
};

enum class RotationPhase : uint8_t {
  kIdle,        // one epoch, nothing in progress
  kInstalling,  // a pending epoch's inbound SAs are not all installed
  kPublishing,  // ready: waiting for the publication to succeed
  kGrace,       // published; the previous epoch is accepted until its grace ends
};
const char* rotationPhaseName(RotationPhase phase);

struct PeerStatus {
  std::string name;
  uint32_t latest_epoch = 0;  // its advertised epoch
  uint32_t sender_epoch = 0;  // our epoch we send to it with (0: no outbound)
  size_t inbound = 0;         // inbound SAs with it
  std::string problem;        // why it has no SAs ("" when it has)
};

struct SaDbStatus {
  uint32_t current_epoch = 0;
  uint32_t pending_epoch = 0;   // pending or ready
  uint32_t previous_epoch = 0;
  int64_t previous_retire_ms = 0;  // when the previous epoch stops being accepted (0: no previous)
  RotationPhase phase = RotationPhase::kIdle;
  std::string waiting_for;      // why the phase does not move on ("" when nothing waits)
  std::string rotation_deferred;  // the reason of a requested rotation not started yet
  uint64_t rotations_started = 0;
  bool dataplane_ipsec = false;  // the dataplane installs SAs
  size_t inbound_sas = 0, outbound_sas = 0;
  std::vector<PeerStatus> peers;
  std::string last_error;       // the last persistence or derivation problem ("" when none)
};

class SaDatabase {
 public:
  // `dir`: the IPsec state directory (keys.json, sa-state.json).
  SaDatabase(SaDbOptions options, std::string dir);

  // Loads the key file and the state file; makes the first key pair on a
  // first start. A key file that cannot be used is an error (the agent does
  // not start); a missing or unreadable state file with existing keys starts
  // a new epoch (no sequence mark can be trusted for the old keys), logged by
  // the caller from status().last_error.
  Result<void> start(int64_t now);

  // The cluster PSK (empty: none) and its public id (psk.h). Set before
  // start(); changing it later (or between two runs) re-derives every SA and
  // starts a rotation.
  void setPsk(const SecretBytes& psk, const std::string& id, int64_t now);

  void upsertPeer(const PeerAdvert& peer, int64_t now);
  void removePeer(const std::string& name, int64_t now);
  // The peers it knows (restored ones included), for the caller to remove
  // those the cluster no longer lists.
  std::vector<std::string> peerNames() const;

  // A dataplane connection: whether it installs SAs, and its instance id (a
  // new one lost every SA; outbound SAs then restart above their marks).
  void setDataplane(bool ipsec_capable, const std::string& instance, int64_t now);
  // Everything the dataplane holds (a complete list), with counters.
  void dataplaneReport(const std::vector<SaReport>& reports, int64_t now);

  // The caller published advertisement() (its epoch) to the cluster. It
  // becomes the current epoch even if it went back to pending in between (a
  // peer learned since it was offered): the key is out.
  void advertisementPublished(uint32_t epoch, int64_t now);
  void requestRotation(const std::string& reason, int64_t now);
  // Timers: retirements, the periodic rotation, deferred rotations, lazy writes.
  void tick(int64_t now);

  // The SAs the dataplane must hold, by name.
  const std::map<std::string, SaSpec>& desired() const { return desired_; }
  // Changes whenever desired() or advertisement() does.
  uint64_t version() const { return version_; }
  std::optional<Advertisement> advertisement() const;
  SaDbStatus status() const;
  // Events worth a log line since the last call (rotations, switches,
  // retirements, refusals); never a key.
  std::vector<std::string> takeEvents();

  std::string keyFilePath() const { return keys_.path(); }
  std::string stateFilePath() const { return dir_ + "/sa-state.json"; }

 private:
  enum class EpochState : uint8_t { kPending, kReady, kCurrent, kPrevious };
  struct OwnEpoch {
    uint32_t epoch = 0;
    EpochState state = EpochState::kPending;
    int64_t published_ms = 0;
    int64_t retire_ms = 0;  // previous only
  };
  struct PeerEpoch {
    uint32_t epoch = 0;
    X25519Key public_key{};
    int64_t learned_ms = 0;
    int64_t retire_ms = 0;  // 0: live (the latest); set when superseded
  };
  struct Peer {
    std::string name;
    std::string tunnel_ip;
    std::vector<PeerEpoch> epochs;  // ascending; the last is the latest advertised
    uint32_t sender_epoch = 0;      // the newest own epoch it is known to accept
    std::string problem;
  };
  // The sequence state of one SA (outbound or inbound), keyed by SA name,
  // kept until its local epoch is retired (the same pair can come back and
  // must continue above what was used).
  struct Mark {
    bool outbound = false;
    uint32_t local_epoch = 0;
    uint64_t initial = 1;
    uint64_t reserved = 0;  // outbound: highest usable
    uint64_t highest = 0;   // the last reported highest sent/seen
    std::string instance;   // the dataplane instance `initial` is for
    bool operator==(const Mark&) const = default;
  };

  OwnEpoch* ownIn(EpochState state);
  const OwnEpoch* ownIn(EpochState state) const;
  void recompute(int64_t now);
  bool confirmSenders(int64_t now);  // true when a sender epoch changed
  void maybeMarkReady();
  bool rotationAllowed(int64_t now) const;
  void startRotation(int64_t now);
  Result<void> saveState();
  Result<void> loadState(int64_t now);
  void event(std::string text) { events_.push_back(std::move(text)); }
  const PairKeys* pairKeys(const Peer& peer, uint32_t local_epoch, const PeerEpoch& remote);

  struct Derived {
    uint32_t local_epoch = 0;
    PairKeys keys;
  };

  SaDbOptions options_;
  std::string dir_;
  KeyStore keys_;
  SecretBytes psk_;
  std::string psk_id_;
  std::string loaded_psk_id_;  // the PSK id the state file was written with
  std::vector<OwnEpoch> own_;  // ascending
  std::map<std::string, Peer> peers_;
  std::map<std::string, Mark> marks_;            // in memory, maybe ahead of the file
  std::map<std::string, Mark> persisted_marks_;  // as in the state file
  std::map<std::string, Derived> derived_;       // cache: "peer|local|remote|pubkey"
  std::set<std::string> used_derivations_;       // cache keys the last recompute() used
  std::string derive_error_;                     // the last derivation's failure
  std::set<std::string> installed_;              // names the dataplane reported
  std::string instance_;
  bool dataplane_ipsec_ = false;
  std::string rotation_deferred_;
  uint64_t rotations_started_ = 0;
  std::map<std::string, SaSpec> desired_;
  uint64_t version_ = 0;
  bool state_dirty_ = false;        // the file lags (lazy "highest seen" marks)
  int64_t last_seen_save_ms_ = 0;
  std::string last_error_;
  std::vector<std::string> events_;
};

}  // namespace dpu::ipsec
