// The dataplane's IPsec SAs (ipsec_sas.h): built from the model off the
// lcores, kept across updates, transformed under a per-SA spinlock.
#include "ipsec_sas.h"

#include <chrono>
#include <set>

#include "counters.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

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

Result<std::shared_ptr<EspSlot>> EspSlot::create(const model::ModelIpsecSa& sa) {
  std::shared_ptr<EspSlot> slot(new EspSlot());
  slot->sa_ = sa;
  slot->installed_ms_ = wallMs();
  if (sa.direction == dataplane::v1::OUTBOUND) {
    auto out = overlay::EspOutboundSa::create(configOf(sa, sa.initial_sequence));
    if (!out) return Error{"ipsec sa " + sa.name + ": " + out.error()};
    slot->out_ = std::make_unique<overlay::EspOutboundSa>(std::move(*out));
    slot->backend_ = slot->out_->backend();
    slot->limit_ = sa.sequence_limit;
  } else {
    auto in = overlay::EspInboundSa::create(configOf(sa, sa.initial_sequence));
    if (!in) return Error{"ipsec sa " + sa.name + ": " + in.error()};
    slot->in_ = std::make_unique<overlay::EspInboundSa>(std::move(*in));
    slot->backend_ = slot->in_->backend();
    slot->highest_ = sa.initial_sequence - 1;
  }
  return slot;
}

void EspSlot::lock() {
  while (lock_.test_and_set(std::memory_order_acquire)) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
}

EspVerdict EspSlot::encrypt(overlay::PacketBuffer& packet, overlay::Status& status) {
  lock();
  if (out_->lastSequence() >= limit_) [[unlikely]] {
    bump(limit_drops_);
    unlock();
    return EspVerdict::kLimit;
  }
  const uint32_t plain = packet.size();
  status = out_->encrypt(packet);
  if (status != overlay::Status::kOk) [[unlikely]] {
    bump(other_drops_);
    unlock();
    return EspVerdict::kFailed;
  }
  bump(packets_);
  bump(bytes_, plain);
  __atomic_store_n(&highest_, out_->lastSequence(), __ATOMIC_RELAXED);
  unlock();
  return EspVerdict::kOk;
}

EspVerdict EspSlot::decrypt(overlay::PacketBuffer& packet, overlay::Status& status) {
  lock();
  status = in_->decrypt(packet);
  if (status != overlay::Status::kOk) [[unlikely]] {
    switch (status) {
      case overlay::Status::kEspReplay:
      case overlay::Status::kEspTooOld:
        bump(replay_drops_);
        break;
      case overlay::Status::kEspAuthFailed:
        bump(icv_failures_);
        break;
      default:
        bump(other_drops_);
        break;
    }
    unlock();
    return EspVerdict::kFailed;
  }
  bump(packets_);
  bump(bytes_, packet.size());
  __atomic_store_n(&highest_, in_->replayWindow().top(), __ATOMIC_RELAXED);
  unlock();
  return EspVerdict::kOk;
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
  lock();
  const uint64_t next = out_->lastSequence() + 1;
  unlock();
  std::unique_ptr<overlay::EspOutboundSa> moved;
  if (sa.initial_sequence > next) {
    // The agent reserved sequence numbers up to a mark above ours (a
    // dataplane restart it knows of, or a resync): start there. Built off
    // the lock; swapped under it, where no packet is between two numbers.
    auto out = overlay::EspOutboundSa::create(configOf(sa, sa.initial_sequence));
    if (!out) return Error{"ipsec sa " + sa.name + ": " + out.error()};
    moved = std::make_unique<overlay::EspOutboundSa>(std::move(*out));
  }
  lock();
  if (moved && moved->lastSequence() > out_->lastSequence()) std::swap(out_, moved);
  limit_ = sa.sequence_limit;
  unlock();
  sa_ = sa;
  return {};
}

std::string_view EspSlot::backendName() const { return overlay::aeadBackendName(backend_); }

void EspSlot::report(dataplane::v1::IpsecSaState& out) const {
  out.set_name(sa_.name);
  out.set_direction(sa_.direction);
  out.set_spi(sa_.spi);
  out.set_remote_node(sa_.remote_node);
  const uint64_t packets = readCounter(packets_);
  out.set_packets(packets);
  out.set_bytes(readCounter(bytes_));
  out.set_replay_drops(readCounter(replay_drops_));
  out.set_icv_failures(readCounter(icv_failures_));
  out.set_highest_sequence(readCounter(highest_));
  out.set_first_packet_received(!outbound() && packets > 0);
  out.set_limit_drops(readCounter(limit_drops_));
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
  out.set_other_drops(readCounter(other_drops_));
}

void IpsecSas::describe(bool encrypt, dataplane::v1::IpsecInfo& out) const {
  out.set_encrypt(encrypt);
  out.set_crypto_backend(std::string(overlay::aeadBackendName(overlay::defaultAeadBackend())));
  for (const auto& [name, slot] : slots_) slot->describe(*out.add_sas());
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
    auto slot = EspSlot::create(sa);
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
}

}  // namespace dpu::datapath
