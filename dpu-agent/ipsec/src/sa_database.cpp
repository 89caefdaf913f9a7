// The SA database and rotation state machine (see sa_database.h and
// docs/ipsec.md, "Rotation" and "Restarts").
#include "ipsec/sa_database.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/config_doc.h"

namespace dpu::ipsec {
namespace {

constexpr int kStateVersion = 1;

std::string spiHex(uint32_t spi) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", spi);
  return buf;
}

std::string saName(const std::string& peer, SaDirection d, uint32_t spi) {
  return peer + (d == SaDirection::kInbound ? "/in/" : "/out/") + spiHex(spi);
}

const char* stateName(int s) {
  static const char* kNames[] = {"pending", "ready", "current", "previous"};
  return kNames[s];
}

std::string seconds(int64_t ms) { return std::to_string((ms + 999) / 1000) + "s"; }

// a + b, at most kEsnHardLimit - 1 (the highest sequence number ever used).
uint64_t satAdd(uint64_t a, uint64_t b) { return a >= kEsnHardLimit - 1 - b ? kEsnHardLimit - 1 : a + b; }

// The marks as far as they must be on disk before they are used: everything
// but the reported highest sequence, which is written lazily.
template <typename Marks>
bool sameOnDisk(const Marks& a, const Marks& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    if (i->first != j->first) return false;
    auto x = i->second, y = j->second;
    x.highest = y.highest = 0;
    if (!(x == y)) return false;
  }
  return true;
}

}  // namespace

const char* rotationPhaseName(RotationPhase phase) {
  switch (phase) {
    case RotationPhase::kIdle: return "idle";
    case RotationPhase::kInstalling: return "installing";
    case RotationPhase::kPublishing: return "publishing";
    case RotationPhase::kGrace: return "grace";
  }
  return "idle";
}

SaDatabase::SaDatabase(SaDbOptions options, std::string dir)
    : options_(std::move(options)), dir_(std::move(dir)), keys_(dir_ + "/keys.json", options_.node_name) {
  // A larger reservation would lock the peers out after a dataplane restart (sa_database.h).
  options_.sequence_reservation =
      std::clamp<uint64_t>(options_.sequence_reservation, 2, SaDbOptions::kMaxSequenceReservation);
}

SaDatabase::OwnEpoch* SaDatabase::ownIn(EpochState state) {
  for (auto& o : own_) {
    if (o.state == state) return &o;
  }
  return nullptr;
}

const SaDatabase::OwnEpoch* SaDatabase::ownIn(EpochState state) const {
  for (const auto& o : own_) {
    if (o.state == state) return &o;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Start and persistence

Result<void> SaDatabase::start(int64_t now) {
  if (auto r = makeDirectories(dir_, 0700); !r) return prefixed("the IPsec state directory", std::move(r).takeError());
  if (auto r = keys_.load(); !r) return r;
  const bool had_keys = !keys_.keys().empty();
  const bool had_state = fileExists(stateFilePath());
  if (had_state) {
    if (auto r = loadState(now); !r) {
      const std::string aside = stateFilePath() + ".corrupt";
      std::rename(stateFilePath().c_str(), aside.c_str());
      last_error_ = r.error() + "; moved it to " + aside;
      own_.clear();
      peers_.clear();
      marks_.clear();
    }
  }
  if (had_keys && own_.empty()) {
    // Keys without their sequence marks: an SA made from them could start
    // again at a sequence number already used under the same key. They are
    // dropped and a new epoch starts, as after a key compromise.
    const uint32_t next = keys_.newestEpoch() + 1;
    for (const auto& k : std::vector<OwnKey>(keys_.keys())) {
      if (auto r = keys_.remove(k.epoch); !r) return r;
    }
    auto e = keys_.addNew(next);
    if (!e) return std::move(e).takeError();
    own_.push_back({*e, EpochState::kPending, 0, 0});
    if (last_error_.empty()) last_error_ = "no IPsec state file next to the key file";
    last_error_ += ": the old keys' sequence marks are unknown, so they were dropped and epoch " +
                   std::to_string(*e) + " starts (peers derive new SAs once it is published)";
    event(last_error_);
  } else {
    // Reconcile the two files. A key the state does not know is one written
    // just before a crash: a newer one is the pending epoch, an older one a
    // retirement that did not finish.
    uint32_t newest_known = 0;
    for (const auto& o : own_) newest_known = std::max(newest_known, o.epoch);
    for (const auto& k : std::vector<OwnKey>(keys_.keys())) {
      bool known = std::any_of(own_.begin(), own_.end(), [&](const OwnEpoch& o) { return o.epoch == k.epoch; });
      if (known) continue;
      if (k.epoch > newest_known && !ownIn(EpochState::kPending) && !ownIn(EpochState::kReady)) {
        own_.push_back({k.epoch, EpochState::kPending, 0, 0});
      } else if (auto r = keys_.remove(k.epoch); !r) {
        return r;
      }
    }
    uint32_t newest_epoch = newest_known;
    std::erase_if(own_, [&](const OwnEpoch& o) { return keys_.find(o.epoch) == nullptr; });
    if (own_.empty()) {
      // Past every epoch ever used, so that peers take it as a rotation.
      auto e = keys_.addNew(newest_epoch + 1);
      if (!e) return std::move(e).takeError();
      own_.push_back({*e, EpochState::kPending, 0, 0});
      event("made the first IPsec key pair, epoch " + std::to_string(*e));
    }
    // A ready epoch was acknowledged by a dataplane that may be gone: ask again.
    if (auto* ready = ownIn(EpochState::kReady)) ready->state = EpochState::kPending;
  }
  std::sort(own_.begin(), own_.end(), [](const OwnEpoch& a, const OwnEpoch& b) { return a.epoch < b.epoch; });
  if (had_state && !own_.empty() && loaded_psk_id_ != psk_id_ && ownIn(EpochState::kCurrent)) {
    requestRotation("the PSK changed while the agent was stopped", now);
  }
  if (auto r = saveState(); !r) return r;
  recompute(now);
  return {};
}

Result<void> SaDatabase::saveState() {
  nlohmann::json j;
  j["version"] = kStateVersion;
  j["node"] = options_.node_name;
  j["pskId"] = psk_id_;
  j["rotationDeferred"] = rotation_deferred_;
  j["rotationsStarted"] = rotations_started_;
  j["own"] = nlohmann::json::array();
  for (const auto& o : own_) {
    j["own"].push_back({{"epoch", o.epoch}, {"state", stateName(static_cast<int>(o.state))},
                        {"publishedMs", o.published_ms}, {"retireMs", o.retire_ms}});
  }
  j["peers"] = nlohmann::json::array();
  for (const auto& [name, p] : peers_) {
    nlohmann::json epochs = nlohmann::json::array();
    for (const auto& e : p.epochs) {
      epochs.push_back({{"epoch", e.epoch}, {"publicKey", base64Encode(e.public_key)}, {"learnedMs", e.learned_ms},
                        {"retireMs", e.retire_ms}});
    }
    j["peers"].push_back({{"name", name}, {"tunnelIP", p.tunnel_ip}, {"senderEpoch", p.sender_epoch}, {"epochs", epochs}});
  }
  j["marks"] = nlohmann::json::array();
  for (const auto& [name, m] : marks_) {
    // Numbers as strings: a JSON reader with doubles must not round a sequence number.
    j["marks"].push_back({{"sa", name}, {"outbound", m.outbound}, {"localEpoch", m.local_epoch},
                          {"initial", std::to_string(m.initial)}, {"reserved", std::to_string(m.reserved)},
                          {"highest", std::to_string(m.highest)}, {"instance", m.instance}});
  }
  auto w = writeFileAtomic(stateFilePath(), j.dump(1) + "\n", 0600);
  if (!w) {
    last_error_ = "writing " + stateFilePath() + ": " + w.error();
    return Error{last_error_};
  }
  persisted_marks_ = marks_;
  state_dirty_ = false;
  return {};
}

Result<void> SaDatabase::loadState(int64_t now) {
  (void)now;
  auto text = readFile(stateFilePath());
  if (!text) return std::move(text).takeError();
  auto doc = parseConfigText(*text, stateFilePath());
  if (!doc) return std::move(doc).takeError();
  FieldReader r(*doc, stateFilePath());
  if (r.uint("version", 1, 1000) != static_cast<uint64_t>(kStateVersion) && r.ok()) {
    r.fail("version", "is not " + std::to_string(kStateVersion));
  }
  if (const std::string node = r.str("node"); r.ok() && node != options_.node_name) {
    r.fail("node", "names node \"" + node + "\", not this node: the state directory belongs to another node");
  }
  loaded_psk_id_ = r.str("pskId", "");
  rotation_deferred_ = r.str("rotationDeferred", "");
  rotations_started_ = r.uint("rotationsStarted", 0, ~uint64_t{0}, 0);
  auto number = [](FieldReader& f, const char* key) -> uint64_t {
    const std::string s = f.str(key);
    if (!f.ok()) return 0;
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
      f.fail(key, "must be a decimal number in a string");
      return 0;
    }
    try {
      return std::stoull(s);
    } catch (...) {
      f.fail(key, "is out of range");
      return 0;
    }
  };
  for (auto& o : r.objects("own")) {
    OwnEpoch e;
    e.epoch = static_cast<uint32_t>(o.uint("epoch", 1, 0xffffffffu));
    const std::string st = o.str("state");
    if (st == "pending") e.state = EpochState::kPending;
    else if (st == "ready") e.state = EpochState::kReady;
    else if (st == "current") e.state = EpochState::kCurrent;
    else if (st == "previous") e.state = EpochState::kPrevious;
    else if (o.ok()) o.fail("state", "must be pending, ready, current or previous");
    e.published_ms = o.integer("publishedMs", 0, INT64_MAX, 0);
    e.retire_ms = o.integer("retireMs", 0, INT64_MAX, 0);
    if (auto done = o.finish(); !done) return done;
    own_.push_back(e);
  }
  for (auto& p : r.objects("peers")) {
    Peer peer;
    peer.name = p.str("name");
    peer.tunnel_ip = p.str("tunnelIP", "");
    peer.sender_epoch = static_cast<uint32_t>(p.uint("senderEpoch", 0, 0xffffffffu, 0));
    for (auto& e : p.objects("epochs", true)) {
      PeerEpoch pe;
      pe.epoch = static_cast<uint32_t>(e.uint("epoch", 1, 0xffffffffu));
      const std::string key = e.str("publicKey");
      if (e.ok()) {
        auto raw = base64Decode(key);
        if (!raw || raw->size() != kX25519KeySize) e.fail("publicKey", "must be 32 bytes of base64");
        else std::copy(raw->begin(), raw->end(), pe.public_key.begin());
      }
      pe.learned_ms = e.integer("learnedMs", 0, INT64_MAX, 0);
      pe.retire_ms = e.integer("retireMs", 0, INT64_MAX, 0);
      if (auto done = e.finish(); !done) return done;
      peer.epochs.push_back(pe);
    }
    if (auto done = p.finish(); !done) return done;
    if (!peer.epochs.empty()) peers_[peer.name] = std::move(peer);
  }
  for (auto& m : r.objects("marks")) {
    Mark mark;
    const std::string name = m.str("sa");
    mark.outbound = m.boolean("outbound");
    mark.local_epoch = static_cast<uint32_t>(m.uint("localEpoch", 1, 0xffffffffu));
    mark.initial = number(m, "initial");
    mark.reserved = number(m, "reserved");
    mark.highest = number(m, "highest");
    mark.instance = m.str("instance", "");
    if (auto done = m.finish(); !done) return done;
    marks_[name] = mark;
  }
  if (auto done = r.finish(); !done) return done;
  persisted_marks_ = marks_;
  return {};
}

// ---------------------------------------------------------------------------
// Inputs

void SaDatabase::setPsk(const SecretBytes& psk, const std::string& id, int64_t now) {
  if (psk == psk_ && id == psk_id_) return;
  const bool started = !own_.empty();
  psk_ = psk;
  psk_id_ = id;
  derived_.clear();
  if (started) {
    event(psk.empty() ? "the cluster PSK was removed: every SA is derived anew" : "the cluster PSK changed: every SA is derived anew");
    (void)saveState();
    requestRotation("new PSK", now);
    recompute(now);
  }
}

void SaDatabase::upsertPeer(const PeerAdvert& adv, int64_t now) {
  if (adv.name.empty() || adv.name == options_.node_name || adv.epoch == 0) return;
  auto it = peers_.find(adv.name);
  if (it == peers_.end()) {
    Peer p;
    p.name = adv.name;
    p.tunnel_ip = adv.tunnel_ip;
    p.epochs.push_back({adv.epoch, adv.public_key, now, 0});
    peers_[adv.name] = std::move(p);
    event("node " + adv.name + " advertises IPsec epoch " + std::to_string(adv.epoch));
  } else {
    Peer& p = it->second;
    if (p.tunnel_ip == adv.tunnel_ip && p.epochs.back().epoch == adv.epoch && p.epochs.back().public_key == adv.public_key) {
      return;  // nothing new (a resync, a relist)
    }
    p.tunnel_ip = adv.tunnel_ip;
    const uint32_t latest = p.epochs.back().epoch;
    const X25519Key latest_key = p.epochs.back().public_key;
    bool reset = false;
    if (adv.epoch == latest) {
      reset = adv.public_key != latest_key;
    } else if (adv.epoch > latest) {
      // An epoch older than the latest is no longer used by the peer once it
      // advertises a third one (it rotates only after the last one's grace).
      std::erase_if(p.epochs, [&](const PeerEpoch& e) { return e.epoch != latest; });
      p.epochs.back().retire_ms = now + 2 * options_.grace_ms;
      p.epochs.push_back({adv.epoch, adv.public_key, now, 0});
      event("node " + adv.name + " advertises IPsec epoch " + std::to_string(adv.epoch) + " (was " +
            std::to_string(latest) + ")");
    } else {
      bool stale = std::any_of(p.epochs.begin(), p.epochs.end(), [&](const PeerEpoch& e) {
        return e.epoch == adv.epoch && e.public_key == adv.public_key;
      });
      reset = !stale;
    }
    if (reset) {
      event("node " + adv.name + " advertises a new key with epoch " + std::to_string(adv.epoch) + ", not above " +
            std::to_string(latest) + ": taken as a new node (its key file was replaced)");
      p.epochs.clear();
      p.epochs.push_back({adv.epoch, adv.public_key, now, 0});
      p.sender_epoch = 0;
    }
  }
  (void)saveState();
  recompute(now);
}

void SaDatabase::removePeer(const std::string& name, int64_t now) {
  if (!peers_.erase(name)) return;
  event("node " + name + " is no longer an IPsec peer: its SAs are removed");
  (void)saveState();
  recompute(now);
}

std::vector<std::string> SaDatabase::peerNames() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : peers_) out.push_back(name);
  return out;
}

void SaDatabase::setDataplane(bool ipsec_capable, const std::string& instance, int64_t now) {
  dataplane_ipsec_ = ipsec_capable;
  if (instance == instance_) {
    recompute(now);
    return;
  }
  instance_ = instance;
  installed_.clear();
  for (auto& [name, m] : marks_) {
    if (m.instance == instance) continue;
    if (m.outbound) {
      // The new instance may know nothing of this SA, or hold an older
      // counter: start above everything that may have been sent.
      if (m.reserved >= kEsnHardLimit - 1) {
        m.initial = kEsnHardLimit;
        m.reserved = kEsnHardLimit - 1;  // none left: not offered, a rotation replaces it
      } else {
        m.initial = m.reserved + 1;
        m.reserved = satAdd(m.reserved, options_.sequence_reservation);
      }
    } else if (m.highest < kEsnHardLimit) {
      m.initial = std::max(m.initial, m.highest + 1);
    }
    m.instance = instance;
  }
  if (!instance.empty()) event("dataplane instance " + instance + ": SAs programmed above their sequence marks");
  (void)saveState();
  recompute(now);
}

void SaDatabase::dataplaneReport(const std::vector<SaReport>& reports, int64_t now) {
  installed_.clear();
  bool marks_changed = false;
  for (const auto& rep : reports) {
    installed_.insert(rep.name);
    auto spec = desired_.find(rep.name);
    auto mark = marks_.find(rep.name);
    if (mark == marks_.end()) continue;
    Mark& m = mark->second;
    if (rep.highest_sequence > m.highest) {
      m.highest = rep.highest_sequence;
      state_dirty_ = true;
    }
    if (m.outbound) {
      // Half the reservation used: move the mark ahead (written before the
      // dataplane is told, in recompute()).
      if (m.reserved < kEsnHardLimit - 1 && satAdd(m.highest, options_.sequence_reservation / 2) >= m.reserved) {
        m.reserved = satAdd(m.highest, options_.sequence_reservation);
        marks_changed = true;
      }
      // Only an SA of the current epoch asks: one of an older epoch is being
      // replaced already, and a newer epoch on its way will replace this one.
      const OwnEpoch* cur = ownIn(EpochState::kCurrent);
      const bool replaceable = cur && cur->epoch == m.local_epoch && !ownIn(EpochState::kPending) &&
                               !ownIn(EpochState::kReady);
      if (replaceable && m.highest >= options_.esn_soft_limit) {
        requestRotation("sequence soft limit reached on " + rep.name, now);
      }
      if (replaceable && options_.byte_soft_limit != 0 && rep.bytes >= options_.byte_soft_limit) {
        requestRotation("byte soft limit reached on " + rep.name, now);
      }
      continue;
    }
    if (spec == desired_.end()) continue;
    const SaSpec& s = spec->second;
    if (!rep.first_packet) continue;
    auto peer = peers_.find(s.peer);
    if (peer == peers_.end()) continue;
    Peer& p = peer->second;
    // The peer sent with our epoch: it has learned it, so it has our
    // outbound's inbound SA for it (it installs before it sends).
    const OwnEpoch* own = nullptr;
    for (const auto& o : own_) {
      if (o.epoch == s.local_epoch) own = &o;
    }
    if (own && (own->state == EpochState::kCurrent || own->state == EpochState::kPrevious) &&
        s.local_epoch > p.sender_epoch) {
      event("node " + p.name + " sent on our epoch " + std::to_string(s.local_epoch) + " (SA " + s.name +
            "): sending to it with that epoch now");
      p.sender_epoch = s.local_epoch;
      marks_changed = true;
    }
    // It sends with its latest epoch: its older one is done after the grace.
    if (s.remote_epoch == p.epochs.back().epoch) {
      for (auto& e : p.epochs) {
        if (e.epoch != s.remote_epoch && (e.retire_ms == 0 || e.retire_ms > now + options_.grace_ms)) {
          e.retire_ms = now + options_.grace_ms;
          marks_changed = true;
        }
      }
    }
  }
  if (marks_changed) (void)saveState();
  recompute(now);
}

void SaDatabase::advertisementPublished(uint32_t epoch, int64_t now) {
  // Normally the ready epoch. It may have gone back to pending since it was
  // offered (a peer learned in the meantime, its inbound SA on its way): the
  // key is out all the same, so it is the current epoch from now on.
  OwnEpoch* ready = ownIn(EpochState::kReady);
  if (!ready) ready = ownIn(EpochState::kPending);
  if (!ready || ready->epoch != epoch) return;
  if (OwnEpoch* prev = ownIn(EpochState::kPrevious)) {
    // Cannot happen (a rotation waits for the previous epoch's retirement),
    // but if it did the older one goes now.
    (void)keys_.remove(prev->epoch);
    prev->epoch = 0;
    std::erase_if(own_, [](const OwnEpoch& o) { return o.epoch == 0; });
    ready = nullptr;
    for (auto& o : own_) {
      if (o.epoch == epoch) ready = &o;
    }
  }
  if (OwnEpoch* cur = ownIn(EpochState::kCurrent)) {
    cur->state = EpochState::kPrevious;
    cur->retire_ms = now + options_.grace_ms;
    event("epoch " + std::to_string(epoch) + " published; epoch " + std::to_string(cur->epoch) +
          " is still accepted for " + seconds(options_.grace_ms));
  } else {
    event("epoch " + std::to_string(epoch) + " published");
  }
  ready->state = EpochState::kCurrent;
  ready->published_ms = now;
  (void)saveState();
  recompute(now);
  ++version_;
}

void SaDatabase::requestRotation(const std::string& reason, int64_t now) {
  (void)now;
  if (!rotation_deferred_.empty()) return;  // one is waiting already
  rotation_deferred_ = reason;
  event("rotation requested: " + reason);
  (void)saveState();
}

bool SaDatabase::rotationAllowed(int64_t now) const {
  const OwnEpoch* cur = ownIn(EpochState::kCurrent);
  // One transition at a time, and the current epoch accepted by every peer
  // first (published `grace` ago), so that the previous epoch is always one
  // every peer knows.
  return cur != nullptr && !ownIn(EpochState::kPending) && !ownIn(EpochState::kReady) &&
         !ownIn(EpochState::kPrevious) && now >= cur->published_ms + options_.grace_ms;
}

void SaDatabase::startRotation(int64_t now) {
  auto e = keys_.addNew();
  if (!e) {
    last_error_ = "starting a rotation: " + e.error();
    return;
  }
  own_.push_back({*e, EpochState::kPending, 0, 0});
  event("rotation to epoch " + std::to_string(*e) + " started (" + rotation_deferred_ + "): installing its inbound SAs");
  rotation_deferred_.clear();
  ++rotations_started_;
  (void)saveState();
  recompute(now);
}

void SaDatabase::tick(int64_t now) {
  bool changed = false;
  // Retire the previous own epoch when its grace is over.
  if (OwnEpoch* prev = ownIn(EpochState::kPrevious); prev && now >= prev->retire_ms) {
    const uint32_t gone = prev->epoch;
    if (auto r = keys_.remove(gone); !r) {
      last_error_ = "retiring epoch " + std::to_string(gone) + ": " + r.error();
    } else {
      std::erase_if(own_, [&](const OwnEpoch& o) { return o.epoch == gone; });
      std::erase_if(marks_, [&](const auto& m) { return m.second.local_epoch == gone; });
      std::erase_if(derived_, [&](const auto& d) { return d.second.local_epoch == gone; });
      event("epoch " + std::to_string(gone) + " retired: its SAs are removed and its private key deleted");
      changed = true;
    }
  }
  for (auto& [name, p] : peers_) {
    const size_t before = p.epochs.size();
    std::erase_if(p.epochs, [&](const PeerEpoch& e) { return e.retire_ms != 0 && now >= e.retire_ms; });
    if (p.epochs.size() != before) {
      event("node " + name + "'s older epoch is no longer accepted");
      changed = true;
    }
  }
  if (const OwnEpoch* cur = ownIn(EpochState::kCurrent);
      cur && options_.rotation_period_ms > 0 && now >= cur->published_ms + options_.rotation_period_ms &&
      rotation_deferred_.empty()) {
    requestRotation("rotation period", now);
  }
  if (!rotation_deferred_.empty() && rotationAllowed(now)) startRotation(now);
  if (changed || (state_dirty_ && now - last_seen_save_ms_ >= options_.seen_persist_ms)) {
    last_seen_save_ms_ = now;
    (void)saveState();
  }
  recompute(now);
}

// ---------------------------------------------------------------------------
// Decisions

bool SaDatabase::confirmSenders(int64_t now) {
  const OwnEpoch* cur = ownIn(EpochState::kCurrent);
  bool changed = false;
  for (auto& [name, p] : peers_) {
    uint32_t s = 0;
    // First contact: a peer met just now has most likely just listed the
    // cluster and seen our newest epoch. (The one case where a packet can
    // go before the peer knows the SA, as plaintext would go before the
    // peer knows the route.)
    if (p.sender_epoch == 0 && cur != nullptr) s = cur->epoch;
    for (const auto& o : own_) {
      if (o.state != EpochState::kCurrent && o.state != EpochState::kPrevious) continue;
      if (o.epoch == p.sender_epoch) s = std::max(s, o.epoch);
      // Published `grace` ago: every live peer has learned it.
      if (now >= o.published_ms + options_.grace_ms) s = std::max(s, o.epoch);
    }
    if (s != p.sender_epoch) {
      if (p.sender_epoch != 0 && s > p.sender_epoch) {
        event("sending to node " + name + " with epoch " + std::to_string(s) + " (published " +
              seconds(options_.grace_ms) + " ago)");
      }
      p.sender_epoch = s;
      changed = true;
    }
  }
  return changed;
}

void SaDatabase::maybeMarkReady() {
  OwnEpoch* next = ownIn(EpochState::kPending);
  if (!next) next = ownIn(EpochState::kReady);
  if (!next) return;
  // Ready while the dataplane holds every inbound SA of the epoch with every
  // peer known now: a peer (or a peer's epoch) learned before the
  // publication makes it pending again until its SA is there too.
  bool all = dataplane_ipsec_;
  for (const auto& [name, s] : desired_) {
    all = all && !(s.direction == SaDirection::kInbound && s.local_epoch == next->epoch && !installed_.count(name));
  }
  const EpochState want = all ? EpochState::kReady : EpochState::kPending;
  if (next->state == want) return;
  next->state = want;
  if (all) event("epoch " + std::to_string(next->epoch) + ": every inbound SA is installed; publishing it");
  ++version_;
}

const PairKeys* SaDatabase::pairKeys(const Peer& peer, uint32_t local_epoch, const PeerEpoch& remote) {
  const std::string key = peer.name + "|" + std::to_string(local_epoch) + "|" + std::to_string(remote.epoch) + "|" +
                          hex(remote.public_key);
  used_derivations_.insert(key);
  if (auto it = derived_.find(key); it != derived_.end()) return &it->second.keys;
  const OwnKey* own = keys_.find(local_epoch);
  if (!own) return nullptr;
  PairInputs in;
  in.local_node = options_.node_name;
  in.local_epoch = local_epoch;
  in.local_private = own->pair.private_key;
  in.remote_node = peer.name;
  in.remote_epoch = remote.epoch;
  in.remote_public = remote.public_key;
  in.psk = psk_;
  in.key_size = options_.key_size;
  auto derived = derivePairKeys(in);
  wipe(in.local_private);
  if (!derived) {
    derive_error_ = derived.error();
    return nullptr;
  }
  auto& slot = derived_[key];
  slot.local_epoch = local_epoch;
  slot.keys = std::move(*derived);
  return &slot.keys;
}

void SaDatabase::recompute(int64_t now) {
  const bool senders_changed = confirmSenders(now);
  const OwnEpoch* cur = ownIn(EpochState::kCurrent);
  std::vector<SaSpec> wanted;
  used_derivations_.clear();
  for (auto& [name, p] : peers_) {
    p.problem.clear();
    derive_error_.clear();
    const size_t first = wanted.size();
    for (const auto& o : own_) {
      for (const auto& pe : p.epochs) {
        const PairKeys* k = pairKeys(p, o.epoch, pe);
        if (!k) {
          p.problem = derive_error_.empty() ? "no key for epoch " + std::to_string(o.epoch) : derive_error_;
          continue;
        }
        SaSpec s;
        s.name = saName(name, SaDirection::kInbound, k->inbound.spi);
        s.direction = SaDirection::kInbound;
        s.spi = k->inbound.spi;
        s.key = k->inbound.key;
        s.salt = k->inbound.salt;
        s.local_epoch = o.epoch;
        s.remote_epoch = pe.epoch;
        wanted.push_back(std::move(s));
      }
    }
    if (cur && p.sender_epoch != 0 && !p.epochs.empty()) {
      if (const PairKeys* k = pairKeys(p, p.sender_epoch, p.epochs.back())) {
        SaSpec s;
        s.name = saName(name, SaDirection::kOutbound, k->outbound.spi);
        s.direction = SaDirection::kOutbound;
        s.spi = k->outbound.spi;
        s.key = k->outbound.key;
        s.salt = k->outbound.salt;
        s.local_epoch = p.sender_epoch;
        s.remote_epoch = p.epochs.back().epoch;
        wanted.push_back(std::move(s));
      } else if (p.problem.empty()) {
        p.problem = derive_error_;
      }
    }
    for (size_t i = first; i < wanted.size(); ++i) {
      wanted[i].peer = name;
      wanted[i].peer_tunnel_ip = p.tunnel_ip;
    }
  }
  // Marks first, written before any SA that depends on them is offered.
  bool marks_changed = false;
  for (const auto& s : wanted) {
    if (marks_.count(s.name)) continue;
    if (s.direction == SaDirection::kOutbound && instance_.empty()) continue;  // made once a dataplane is known
    Mark m;
    m.outbound = s.direction == SaDirection::kOutbound;
    m.local_epoch = s.local_epoch;
    m.initial = 1;
    m.reserved = m.outbound ? satAdd(0, options_.sequence_reservation) : 0;
    m.instance = instance_;
    marks_[s.name] = m;
    marks_changed = true;
  }
  if (senders_changed || marks_changed || !sameOnDisk(marks_, persisted_marks_)) (void)saveState();

  std::map<std::string, SaSpec> next;
  for (auto& s : wanted) {
    s.key_size = options_.key_size;
    if (s.direction == SaDirection::kOutbound) {
      auto pm = persisted_marks_.find(s.name);
      // Offered only with a mark on disk for the dataplane we talk to, and
      // with a sequence number left.
      if (pm == persisted_marks_.end() || pm->second.instance != instance_ || instance_.empty() ||
          pm->second.reserved < pm->second.initial) {
        if (pm != persisted_marks_.end() && pm->second.reserved < pm->second.initial) {
          requestRotation("no sequence number left on " + s.name, now);
        }
        continue;
      }
      s.initial_sequence = pm->second.initial;
      s.sequence_limit = pm->second.reserved;
    } else {
      auto m = marks_.find(s.name);
      s.initial_sequence = m == marks_.end() ? 1 : m->second.initial;
      s.replay_window = options_.replay_window;
    }
    next[s.name] = std::move(s);
  }
  if (next != desired_) {
    desired_ = std::move(next);
    ++version_;
  }
  // Keys of pairs no longer wanted (a peer gone, an epoch retired) are dropped.
  std::erase_if(derived_, [&](const auto& d) { return !used_derivations_.count(d.first); });
  maybeMarkReady();
}

// ---------------------------------------------------------------------------
// Outputs

std::optional<Advertisement> SaDatabase::advertisement() const {
  const OwnEpoch* e = ownIn(EpochState::kReady);
  if (!e) e = ownIn(EpochState::kCurrent);
  if (!e) return std::nullopt;
  const OwnKey* k = keys_.find(e->epoch);
  if (!k) return std::nullopt;
  return Advertisement{e->epoch, base64Encode(k->pair.public_key)};
}

SaDbStatus SaDatabase::status() const {
  SaDbStatus st;
  if (const auto* c = ownIn(EpochState::kCurrent)) st.current_epoch = c->epoch;
  const OwnEpoch* pending = ownIn(EpochState::kPending);
  const OwnEpoch* ready = ownIn(EpochState::kReady);
  if (pending) st.pending_epoch = pending->epoch;
  if (ready) st.pending_epoch = ready->epoch;
  const OwnEpoch* prev = ownIn(EpochState::kPrevious);
  if (prev) {
    st.previous_epoch = prev->epoch;
    st.previous_retire_ms = prev->retire_ms;
  }
  st.rotation_deferred = rotation_deferred_;
  st.rotations_started = rotations_started_;
  st.dataplane_ipsec = dataplane_ipsec_;
  st.last_error = last_error_;
  if (pending) {
    st.phase = RotationPhase::kInstalling;
    size_t missing = 0, total = 0;
    for (const auto& [name, s] : desired_) {
      if (s.direction != SaDirection::kInbound || s.local_epoch != pending->epoch) continue;
      ++total;
      missing += !installed_.count(name);
    }
    if (!dataplane_ipsec_) {
      st.waiting_for = "the dataplane does not install IPsec SAs (it reports no IPsec support), so epoch " +
                       std::to_string(pending->epoch) + " is not published";
    } else {
      st.waiting_for = "the dataplane to install " + std::to_string(missing) + " of " + std::to_string(total) +
                       " inbound SAs of epoch " + std::to_string(pending->epoch);
    }
  } else if (ready) {
    st.phase = RotationPhase::kPublishing;
    st.waiting_for = "the publication of epoch " + std::to_string(ready->epoch);
  } else if (prev) {
    st.phase = RotationPhase::kGrace;
    st.waiting_for = "the end of epoch " + std::to_string(prev->epoch) + "'s grace period";
  }
  for (const auto& [name, s] : desired_) (s.direction == SaDirection::kInbound ? st.inbound_sas : st.outbound_sas)++;
  for (const auto& [name, p] : peers_) {
    PeerStatus ps;
    ps.name = name;
    ps.latest_epoch = p.epochs.empty() ? 0 : p.epochs.back().epoch;
    ps.problem = p.problem;
    for (const auto& [n, s] : desired_) {
      if (s.peer != name) continue;
      if (s.direction == SaDirection::kInbound) ++ps.inbound;
      else ps.sender_epoch = s.local_epoch;
    }
    st.peers.push_back(std::move(ps));
  }
  return st;
}

std::vector<std::string> SaDatabase::takeEvents() {
  std::vector<std::string> out;
  out.swap(events_);
  return out;
}

}  // namespace dpu::ipsec
