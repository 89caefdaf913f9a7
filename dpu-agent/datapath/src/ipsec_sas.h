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
//    traffic, and the AES-GCM runs outside any lock, as in DPDK's
//    librte_ipsec (overlay/esp.h, encryptShared/decryptShared): outbound,
//    each worker reserves its packets' sequence numbers a block at a time
//    with one compare-and-swap (overlay::EspSequenceBlock: never twice,
//    never above sequence_limit); inbound, only the replay
//    window's check and its re-check and update after the ICV verified are
//    under the SA's short spinlock (with one worker, under none: nothing
//    contends). N workers sending to one peer encrypt in parallel.
//  - The counters are per worker (a lane each, on its own cache line),
//    written by that worker alone and summed by the control thread with
//    relaxed loads (a reply may be a packet behind).
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
#include "common/result.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "model/ipsec_rotation.h"
#include "model/model.h"
#include "overlay/esp.h"
#include "single_writer_counter.h"

namespace dpu::datapath {

// What a packet's transform under a slot came to, besides a packet-format
// status from the overlay.
enum class EspVerdict : uint8_t { kOk, kLimit, kFailed };

class EspSlot {
 public:
  // Builds the SA from the model (off the lcores: the AEAD key schedule),
  // with counters for `workers` workers.
  static Result<std::shared_ptr<EspSlot>> create(const model::ModelIpsecSa& sa, unsigned workers = 1);

  // --- lcore (any number at once; `worker` is the caller's index, below
  // the workers it was created for) ---
  // Encrypts the IP packet in `packet` (transport mode). kLimit: the next
  // sequence number is above sequence_limit, nothing done; kFailed:
  // `status` says why (the packet is as it was, or must be dropped).
  EspVerdict encrypt(overlay::PacketBuffer& packet, overlay::Status& status, unsigned worker);
  // The same for a UDP packet (the Geneve one) the caller placed after room
  // for the ESP header (overlay::EspOutboundSa::sealPlacedShared): `plain`
  // is the IP packet's length before ESP, counted as encrypt() counts it;
  // `esp_len` the ESP packet's length on kOk.
  EspVerdict sealPlaced(uint8_t* esp, uint32_t payload_len, uint32_t plain, uint32_t& esp_len,
                        overlay::Status& status, unsigned worker);
  // Bytes the ESP header takes in front of the payload (sealPlaced).
  uint32_t espHeadroom() const { return out_->headroom(); }
  // Bytes ESP adds around a payload of `payload_len` bytes, front and back.
  uint32_t espOverhead(uint32_t payload_len) const { return out_->overhead(payload_len); }
  // Authenticates, anti-replays and decrypts the ESP packet in `packet`,
  // whose layout overlay::espParse found, where it lies: its headers stay
  // (`opened`; overlay::EspInboundSa::stripPlaced removes the ESP header).
  // Counts the bytes of the packet without ESP. Inline: it runs on every
  // packet received, and a call cost as much as its body.
  EspVerdict decryptPlaced(overlay::PacketBuffer& packet, const overlay::EspLayout& layout,
                           overlay::EspOpened& opened, overlay::Status& status, unsigned worker) {
    // With one worker no other thread decrypts under this SA: its window
    // needs no lock (the control thread reads only highestSequence()).
    status = lane_count_ == 1 ? in_->decryptPlacedOwned(packet, layout, opened)
                              : in_->decryptPlacedShared(packet, layout, opened);
    if (status != overlay::Status::kOk) [[unlikely]] return decryptFailed(status, worker);
    Lane& l = lane(worker);
    bump(l.packets);
    bump(l.bytes, packet.size() - opened.front);
    return EspVerdict::kOk;
  }

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
  // One worker's counters (bump by that worker; readCounter by others).
  struct alignas(64) Lane {
    uint64_t packets = 0;
    uint64_t bytes = 0;
    uint64_t replay_drops = 0;
    uint64_t icv_failures = 0;
    uint64_t other_drops = 0;
    uint64_t limit_drops = 0;
    // Outbound: the last sequence number this worker sent (its block's
    // lastTaken(), published for report()).
    uint64_t last_sent = 0;
    overlay::EspSequenceBlock block;  // outbound: the worker's own numbers
  };

  EspSlot() = default;
  Lane& lane(unsigned worker) { return lanes_[worker < lane_count_ ? worker : worker % lane_count_]; }
  EspVerdict decryptFailed(overlay::Status status, unsigned worker);
  // An outbound transform's verdict, counted.
  EspVerdict encrypted(overlay::Status status, uint64_t limit, uint32_t plain, unsigned worker);
  // An outbound transform's sequence number: the worker's block (its lane's
  // own), or one at a time if `worker` shares its lane with another.
  template <class Transform>
  overlay::Status sealWith(unsigned worker, Transform&& transform);
  uint64_t sum(uint64_t Lane::*field) const;
  uint64_t lastSent() const;

  model::ModelIpsecSa sa_;  // holds the key: never printed
  std::unique_ptr<overlay::EspOutboundSa> out_;
  std::unique_ptr<overlay::EspInboundSa> in_;
  overlay::AeadBackend backend_ = overlay::AeadBackend::kOpenSsl;
  // Outbound: the highest sequence number it may send (update() raises or
  // lowers it while workers encrypt).
  std::atomic<uint64_t> limit_{0};
  std::unique_ptr<Lane[]> lanes_;
  unsigned lane_count_ = 1;
  // Outbound: what workers beyond the lanes may have sent (sealWith).
  std::atomic<uint64_t> laneless_sent_{0};
  uint64_t installed_ms_ = 0;
};

// The SAs in force, by name (control thread).
class IpsecSas {
 public:
  // SAs with counters for `workers` workers (EngineConfig::workers).
  explicit IpsecSas(unsigned workers = 1) : workers_(workers) {}

  // Makes the table the model's SAs: an SA already held under its name with
  // the same key keeps its state (update()), any other is built anew; SAs
  // no longer in the model are dropped (a snapshot that still names one
  // keeps it alive). An SA that cannot be built (no backend for its key) is
  // left out and named in `problems`.
  void sync(const std::vector<model::ModelIpsecSa>& sas, std::vector<dataplane::v1::ObjectProblem>& problems);
  const std::map<std::string, std::shared_ptr<EspSlot>>& slots() const { return slots_; }
  // Every SA with its counters, and the rotation counts below.
  void report(dataplane::v1::ProgramReply& out) const;
  void describe(bool encrypt, dataplane::v1::IpsecInfo& out) const;

  // `dpuctl ipsec rotate` (model/ipsec_rotation.h): a request, refused
  // while no SA is held; the agent's status poll (its acknowledgement and
  // its rotation state).
  Result<void> requestRotation() { return rotation_.request(!slots_.empty()); }
  Result<void> agentStatus(const dataplane::v1::StatusRequest& status);

 private:
  unsigned workers_;
  std::map<std::string, std::shared_ptr<EspSlot>> slots_;
  model::IpsecRotation rotation_;
};

}  // namespace dpu::datapath
