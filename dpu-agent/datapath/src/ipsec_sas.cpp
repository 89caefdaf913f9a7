// The dataplane's IPsec SAs (ipsec_sas.h): built from the model off the
// lcores, kept across updates, transformed by any number of workers at once
// with the crypto outside any lock.
#include "ipsec_sas.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "single_writer_counter.h"

namespace dpu::datapath {
namespace {

overlay::EspSaConfig configOf(const model::ModelIpsecSa& sa, uint64_t initial_sequence) {
  overlay::EspSaConfig c;
  c.spi = sa.spi;
  c.key.assign(sa.key.begin(), sa.key.end());
  c.salt = sa.salt;
  c.mode = overlay::EspMode::kTransport;
  c.esn = sa.esn;
  c.replay_window = sa.replay_window;
  c.initial_sequence = initial_sequence;
  return c;
}

uint64_t wallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Result<std::shared_ptr<EspSlot>> EspSlot::create(const model::ModelIpsecSa& sa, unsigned workers) {
  std::shared_ptr<EspSlot> slot(new EspSlot());
  slot->sa_ = sa;
  slot->installed_ms_ = wallMs();
  slot->lane_count_ = workers == 0 ? 1 : workers;
  slot->lanes_ = std::make_unique<Lane[]>(slot->lane_count_);
  if (sa.direction == dataplane::v1::OUTBOUND) {
    auto out = overlay::EspOutboundSa::create(configOf(sa, sa.initial_sequence));
    if (!out) return Error{"ipsec sa " + sa.name + ": " + out.error()};
    slot->out_ = std::make_unique<overlay::EspOutboundSa>(std::move(*out));
    slot->backend_ = slot->out_->backend();
    slot->limit_.store(sa.sequence_limit, std::memory_order_relaxed);
  } else {
    auto in = overlay::EspInboundSa::create(configOf(sa, sa.initial_sequence));
    if (!in) return Error{"ipsec sa " + sa.name + ": " + in.error()};
    slot->in_ = std::make_unique<overlay::EspInboundSa>(std::move(*in));
    slot->backend_ = slot->in_->backend();
  }
  return slot;
}

template <class Transform>
overlay::Status EspSlot::sealWith(unsigned worker, Transform&& transform) {
  if (worker < lane_count_) [[likely]] {
    Lane& l = lanes_[worker];
    const overlay::Status status = transform(&l.block);
    const uint64_t taken = l.block.lastTaken();
    if (taken != l.last_sent) __atomic_store_n(&l.last_sent, taken, __ATOMIC_RELAXED);
    return status;
  }
  // A worker beyond the lanes (not one the engine has) would share a lane's
  // block: it takes numbers one at a time instead, and the counter's top,
  // kept apart from the lanes' (their owners write those unlocked), is what
  // it may have sent.
  const overlay::Status status = transform(nullptr);
  const uint64_t top = out_->lastSequence();
  uint64_t cur = laneless_sent_.load(std::memory_order_relaxed);
  while (cur < top && !laneless_sent_.compare_exchange_weak(cur, top, std::memory_order_relaxed)) {
  }
  return status;
}

EspVerdict EspSlot::encrypt(overlay::PacketBuffer& packet, overlay::Status& status, unsigned worker) {
  const uint32_t plain = packet.size();
  const uint64_t limit = limit_.load(std::memory_order_relaxed);
  status = sealWith(worker, [&](overlay::EspSequenceBlock* block) {
    return block != nullptr ? out_->encryptShared(packet, limit, *block) : out_->encryptShared(packet, limit);
  });
  return encrypted(status, limit, plain, worker);
}

EspVerdict EspSlot::sealPlaced(uint8_t* esp, uint32_t payload_len, uint32_t plain, uint32_t& esp_len,
                               overlay::Status& status, unsigned worker) {
  const uint64_t limit = limit_.load(std::memory_order_relaxed);
  status = sealWith(worker, [&](overlay::EspSequenceBlock* block) {
    return block != nullptr
               ? out_->sealPlacedShared(esp, payload_len, overlay::ipproto::kUdp, limit, *block, esp_len)
               : out_->sealPlacedShared(esp, payload_len, overlay::ipproto::kUdp, limit, esp_len);
  });
  return encrypted(status, limit, plain, worker);
}

EspVerdict EspSlot::encrypted(overlay::Status status, uint64_t limit, uint32_t plain, unsigned worker) {
  Lane& l = lane(worker);
  if (status != overlay::Status::kOk) [[unlikely]] {
    // No number left below sequence_limit (the hard limit is the overlay's
    // own failure, counted as the other drops are).
    if (status == overlay::Status::kEspSeqExhausted && limit <= out_->hardSequenceLimit()) {
      bump(l.limit_drops);
      return EspVerdict::kLimit;
    }
    bump(l.other_drops);
    return EspVerdict::kFailed;
  }
  bump(l.packets);
  bump(l.bytes, plain);
  return EspVerdict::kOk;
}

EspVerdict EspSlot::decryptFailed(overlay::Status status, unsigned worker) {
  Lane& l = lane(worker);
  switch (status) {
    case overlay::Status::kEspReplay:
    case overlay::Status::kEspTooOld:
      bump(l.replay_drops);
      break;
    case overlay::Status::kEspAuthFailed:
      bump(l.icv_failures);
      break;
    default:
      bump(l.other_drops);
      break;
  }
  return EspVerdict::kFailed;
}

// The highest number the workers sent (not the counter's top: each worker
// holds a block of numbers it may not have sent yet); before the first
// packet, the counter's (initial_sequence - 1).
uint64_t EspSlot::lastSent() const {
  uint64_t top = laneless_sent_.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < lane_count_; ++i) top = std::max(top, readCounter(lanes_[i].last_sent));
  return top != 0 ? top : out_->lastSequence();
}

uint64_t EspSlot::sum(uint64_t Lane::*field) const {
  uint64_t total = 0;
  for (unsigned i = 0; i < lane_count_; ++i) total += readCounter(lanes_[i].*field);
  return total;
}

bool EspSlot::sameKey(const model::ModelIpsecSa& sa) const {
  return sa.direction == sa_.direction && sa.spi == sa_.spi && sa.algorithm == sa_.algorithm && sa.key == sa_.key &&
         sa.salt == sa_.salt && sa.esn == sa_.esn && sa.peer_tunnel_ip == sa_.peer_tunnel_ip &&
         sa.remote_node == sa_.remote_node && sa.replay_window == sa_.replay_window;
}

Result<void> EspSlot::update(const model::ModelIpsecSa& sa) {
  if (!outbound()) {
    // The replay window stays: a packet accepted before is still a replay.
    sa_ = sa;
    return {};
  }
  // The agent may have reserved sequence numbers up to a mark above ours (a
  // dataplane restart it knows of, or a resync): go on from there. Workers
  // may be encrypting meanwhile; the counter only moves up.
  if (sa.initial_sequence > 1) out_->advanceTo(sa.initial_sequence - 1);
  limit_.store(sa.sequence_limit, std::memory_order_relaxed);
  sa_ = sa;
  return {};
}

std::string_view EspSlot::backendName() const { return overlay::aeadBackendName(backend_); }

void EspSlot::report(dataplane::v1::IpsecSaState& out) const {
  out.set_name(sa_.name);
  out.set_direction(sa_.direction);
  out.set_spi(sa_.spi);
  out.set_remote_node(sa_.remote_node);
  const uint64_t packets = sum(&Lane::packets);
  out.set_packets(packets);
  out.set_bytes(sum(&Lane::bytes));
  out.set_replay_drops(sum(&Lane::replay_drops));
  out.set_icv_failures(sum(&Lane::icv_failures));
  out.set_highest_sequence(outbound() ? lastSent() : in_->highestSequence());
  out.set_first_packet_received(!outbound() && packets > 0);
  out.set_limit_drops(sum(&Lane::limit_drops));
}

void EspSlot::describe(dataplane::v1::IpsecSaInfo& out) const {
  report(*out.mutable_state());
  out.set_peer_tunnel_ip(sa_.peer_tunnel_ip.str());
  out.set_local_epoch(sa_.local_epoch);
  out.set_remote_epoch(sa_.remote_epoch);
  out.set_algorithm(sa_.algorithm);
  if (outbound()) out.set_sequence_limit(sa_.sequence_limit);
  else out.set_replay_window(sa_.replay_window);
  const uint64_t now = wallMs();
  out.set_age_ms(now > installed_ms_ ? now - installed_ms_ : 0);
  out.set_other_drops(sum(&Lane::other_drops));
}

void IpsecSas::describe(bool encrypt, dataplane::v1::IpsecInfo& out) const {
  out.set_encrypt(encrypt);
  out.set_crypto_backend(std::string(overlay::aeadBackendName(overlay::defaultAeadBackend())));
  for (const auto& [name, slot] : slots_) slot->describe(*out.add_sas());
  rotation_.describe(out, wallMs());
}

Result<void> IpsecSas::agentStatus(const dataplane::v1::StatusRequest& status) {
  return rotation_.status(status, wallMs());
}

void IpsecSas::sync(const std::vector<model::ModelIpsecSa>& sas, std::vector<dataplane::v1::ObjectProblem>& problems) {
  std::map<std::string, std::shared_ptr<EspSlot>> next;
  for (const auto& sa : sas) {
    auto it = slots_.find(sa.name);
    if (it != slots_.end() && it->second->sameKey(sa)) {
      if (auto r = it->second->update(sa); !r) {
        auto* p = &problems.emplace_back();
        p->set_kind(dataplane::v1::ObjectProblem::IPSEC_SA);
        p->set_name(sa.name);
        p->set_reason(r.error());
        continue;
      }
      next.emplace(sa.name, it->second);
      continue;
    }
    auto slot = EspSlot::create(sa, workers_);
    if (!slot) {
      auto* p = &problems.emplace_back();
      p->set_kind(dataplane::v1::ObjectProblem::IPSEC_SA);
      p->set_name(sa.name);
      p->set_reason(slot.error());
      continue;
    }
    next.emplace(sa.name, std::move(*slot));
  }
  slots_ = std::move(next);
}

void IpsecSas::report(dataplane::v1::ProgramReply& out) const {
  for (const auto& [name, slot] : slots_) slot->report(*out.add_ipsec_sas());
  out.set_ipsec_rotation_requests(rotation_.requests());
  out.set_ipsec_rotations_taken(rotation_.taken());
}

}  // namespace dpu::datapath
