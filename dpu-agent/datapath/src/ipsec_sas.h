// The IPsec SAs of dpu-dataplane (docs/ipsec.md, "What the dataplane part
// must do"): the model's IpsecSa objects as overlay/esp.h SAs, their state
// kept across updates, their counters reported to the agent and the operator.
//
// Ownership and threads:
//  - The control thread owns the table (IpsecSas): sync() creates, keeps or
//    drops an EspSlot per SA of the model in force, before the snapshot that
//    names them is built; a snapshot holds shared_ptrs to the slots it uses,
//    so a slot an lcore may still read lives until that snapshot is retired
//    (RCU, engine.h).
//  - An SA's state (the outbound sequence counter, the inbound replay
//    window, the AEAD context) is one state however many workers carry its
//    traffic: a slot is taken with its own spinlock around each packet's
//    transform. One worker (the lab, and most DPUs, which pin one peer's
//    traffic to one queue) never waits on it; with several, a peer's ESP
//    traffic is serialized per SA, not per node.
//  - The counters are written under the lock and read by the control thread
//    without it (relaxed loads: a reply may be a packet behind).
// No key leaves this file except into the AEAD context: reports and dumps
// name an SA, its peer, SPI, epochs and counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "model/model.h"
#include "overlay/esp.h"

namespace dpu::datapath {

// What a packet's transform under a slot came to, besides a packet-format
// status from the overlay.
enum class EspVerdict : uint8_t { kOk, kLimit, kFailed };

class EspSlot {
 public:
  // Builds the SA from the model (off the lcores: the AEAD key schedule).
  static Result<std::shared_ptr<EspSlot>> create(const model::ModelIpsecSa& sa);

  // --- lcore ---
  // Encrypts the IP packet in `packet` (transport mode). kLimit: the next
  // sequence number is above sequence_limit, nothing done; kFailed:
  // `status` says why (the packet is as it was, or must be dropped).
  EspVerdict encrypt(overlay::PacketBuffer& packet, overlay::Status& status);
  // Authenticates, anti-replays and decrypts the ESP packet in `packet`.
  EspVerdict decrypt(overlay::PacketBuffer& packet, overlay::Status& status);

  // --- control ---
  // The model object it was built from (its key compared, never shown).
  const model::ModelIpsecSa& sa() const { return sa_; }
  bool sameKey(const model::ModelIpsecSa& sa) const;
  // The same SA sent again: a new sequence_limit, and an outbound counter
  // moved up to initial_sequence (never down: a nonce is never reused).
  Result<void> update(const model::ModelIpsecSa& sa);
  void report(dataplane::v1::IpsecSaState& out) const;
  // The operator's view (dpuctl ipsec, metrics): no key.
  void describe(dataplane::v1::IpsecSaInfo& out) const;
  std::string_view backendName() const;
  // Inbound: the SPI it is looked up by, with the peer's tunnel IP.
  uint32_t spi() const { return sa_.spi; }
  bool outbound() const { return sa_.direction == dataplane::v1::OUTBOUND; }

 private:
  EspSlot() = default;
  void lock();
  void unlock() { lock_.clear(std::memory_order_release); }

  model::ModelIpsecSa sa_;  // holds the key: never printed
  std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::unique_ptr<overlay::EspOutboundSa> out_;
  std::unique_ptr<overlay::EspInboundSa> in_;
  overlay::AeadBackend backend_ = overlay::AeadBackend::kOpenSsl;
  uint64_t limit_ = 0;  // outbound: the highest sequence number it may send (under the lock)
  // Counters (written under the lock; read with readCounter).
  uint64_t packets_ = 0;
  uint64_t bytes_ = 0;
  uint64_t replay_drops_ = 0;
  uint64_t icv_failures_ = 0;
  uint64_t other_drops_ = 0;
  uint64_t limit_drops_ = 0;
  uint64_t highest_ = 0;
  uint64_t installed_ms_ = 0;
};

// The SAs in force, by name (control thread).
class IpsecSas {
 public:
  // Makes the table the model's SAs: an SA already held under its name with
  // the same key keeps its state (update()), any other is built anew; SAs
  // no longer in the model are dropped (a snapshot that still names one
  // keeps it alive). An SA that cannot be built (no backend for its key) is
  // left out and named in `problems`.
  void sync(const std::vector<model::ModelIpsecSa>& sas, std::vector<dataplane::v1::ObjectProblem>& problems);
  const std::map<std::string, std::shared_ptr<EspSlot>>& slots() const { return slots_; }
  void report(dataplane::v1::ProgramReply& out) const;
  void describe(bool encrypt, dataplane::v1::IpsecInfo& out) const;

 private:
  std::map<std::string, std::shared_ptr<EspSlot>> slots_;
};

}  // namespace dpu::datapath
