// The dataplane programming client (see dataplane_client.h).
#include "control/dataplane_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/ipc_proto.h"
#include "common/log.h"
#include "model/model.h"

namespace dpu::control {
namespace {

constexpr const char* kLog = "dataplane-client";
constexpr auto kReplyTimeout = std::chrono::seconds(10);
// How often the problems are asked for while nothing else is sent.
constexpr auto kStatusPeriod = std::chrono::seconds(1);

std::string problemKey(const dpv1::ObjectProblem& p) {
  return dpv1::ObjectProblem::Kind_Name(p.kind()) + " " + p.name() + " " +
         dpv1::ObjectProblem::State_Name(p.state()) + ": " + p.reason();
}

// A dataplane that does not read packed peers (older than them) gets every
// peer as text: sent packed, its rules would have no peers, be refused, and
// leave their pods open.
template <typename Policies>
void peersAsText(Policies& policies) {
  for (auto& p : policies) model::unpackPolicyPeers(p);
}

}  // namespace

// After a dataplane it was connected to went away, and when the agent starts,
// the dataplane is most likely (re)starting: its socket appears within a
// second or so and every millisecond until the full sync is an outage, so the
// client tries every 10 ms (a connect to a missing unix socket costs
// microseconds) for a while before it backs off.
ReconnectBackoff::ReconnectBackoff(Clock::time_point start, uint32_t seed)
    : quick_until_(start + kQuickRetryWindow), rng_(seed != 0 ? seed : std::random_device{}()) {}

ReconnectBackoff::Clock::duration ReconnectBackoff::next(Clock::time_point began, Clock::time_point now,
                                                         bool was_connected) {
  if (now - began > std::chrono::seconds(5)) backoff_ = std::chrono::milliseconds(100);
  if (was_connected) quick_until_ = now + kQuickRetryWindow;
  if (now < quick_until_) return kQuickRetry;
  // Jitter so that many agents (or a fast restart loop) do not hammer in step.
  std::mt19937 rng(rng_++);
  const auto jitter =
      std::chrono::milliseconds(std::uniform_int_distribution<int>(0, static_cast<int>(backoff_.count() / 4))(rng));
  const Clock::duration wait = backoff_ + jitter;
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(2000));
  return wait;
}

DataplaneClient::DataplaneClient(std::string socket_path, std::string agent_id, ModelState& model, Histogram& latency)
    : socket_path_(std::move(socket_path)), agent_id_(std::move(agent_id)), model_(model), latency_(latency) {}

DataplaneClient::~DataplaneClient() { stop(); }

void DataplaneClient::start(uint64_t generation_hint) {
  if (running_.exchange(true)) return;
  next_generation_ = generation_hint;
  thread_ = std::thread([this] { run(); });
}

void DataplaneClient::stop() {
  if (!running_.exchange(false)) return;
  model_.notifyAll();
  if (thread_.joinable()) thread_.join();
}

DataplaneStatus DataplaneClient::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void DataplaneClient::setError(const std::string& e) {
  std::lock_guard lock(mu_);
  status_.last_error = e;
}

void DataplaneClient::run() {
  using Clock = ReconnectBackoff::Clock;
  ReconnectBackoff backoff(Clock::now());
  bool logged_down = false;
  while (running_.load()) {
    auto started = Clock::now();
    bool clean = session();
    bool was_connected;
    {
      std::lock_guard lock(mu_);
      was_connected = status_.connected;
      status_.connected = false;
      status_.programmed = false;
    }
    if (!running_.load()) break;
    // Every loss of a session that had connected is said, not only the first.
    if (was_connected) logged_down = false;
    if (!clean && !logged_down) {
      DPU_LOG(kWarn, kLog) << "dataplane at " << socket_path_ << " unavailable (" << status().last_error
                           << "); retrying every " << ReconnectBackoff::kQuickRetry.count() << " ms for "
                           << ReconnectBackoff::kQuickRetryWindow.count() << " s, then with backoff";
      logged_down = true;
    }
    if (clean) logged_down = false;
    const auto until = Clock::now() + backoff.next(started, Clock::now(), was_connected);
    while (running_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
    }
    std::lock_guard lock(mu_);
    ++status_.reconnects;
  }
}

bool DataplaneClient::exchange(const ipc::Socket& s, const dpv1::ProgramRequest& req, dpv1::ProgramReply& reply) {
  if (auto sent = ipc::sendMessage(s, req, ipc::after(kReplyTimeout)); !sent) {
    setError("sending to the dataplane: " + sent.error());
    return false;
  }
  if (auto got = ipc::recvMessage(s, reply, ipc::after(kReplyTimeout)); !got) {
    setError(got.code() == ErrorCode::kClosed ? std::string("the dataplane closed the connection")
                                              : "waiting for the dataplane: " + got.error());
    return false;
  }
  takeProblems(reply);
  // The Hello's reply goes out after onHello (session()): the SAs it lists
  // belong to the instance it names.
  if (on_reply_ && !req.has_hello()) on_reply_(reply);
  return true;
}

void DataplaneClient::takeProblems(const dpv1::ProgramReply& reply) {
  std::vector<dpv1::ObjectProblem> next(reply.problems().begin(), reply.problems().end());
  std::set<std::string> before, after;
  {
    std::lock_guard lock(mu_);
    for (const auto& p : status_.problems) before.insert(problemKey(p));
    status_.problems = next;
    status_.ports_unavailable = 0;
    for (const auto& p : next) status_.ports_unavailable += p.state() == dpv1::ObjectProblem::PORT_UNAVAILABLE;
  }
  // Said once when it appears and once when it goes, not on every reply.
  for (const auto& p : next) {
    const std::string k = problemKey(p);
    after.insert(k);
    if (!before.count(k)) {
      DPU_LOG(kWarn, kLog) << "the dataplane does not forward for " << k;
    }
  }
  for (const auto& k : before) {
    if (!after.count(k)) {
      DPU_LOG(kInfo, kLog) << "resolved: " << k;
    }
  }
}

bool DataplaneClient::pollStatus(const ipc::Socket& s) {
  dpv1::ProgramRequest req;
  req.mutable_status();
  if (on_status_poll_) on_status_poll_(*req.mutable_status());
  dpv1::ProgramReply reply;
  if (!exchange(s, req, reply)) return false;
  // A refused poll (what the agent reported does not pass the dataplane's
  // checks: an agent bug) keeps the connection; it is said once, not every second.
  const bool refused = reply.status() != dpv1::OK;
  std::string refusal = refused ? reply.message() : "";
  if (refusal != status_refusal_) {
    if (refused) DPU_LOG(kError, kLog) << "the dataplane refused a status poll: " << refusal;
    else DPU_LOG(kInfo, kLog) << "the dataplane takes status polls again";
    status_refusal_ = refusal;
  }
  std::lock_guard lock(mu_);
  ++status_.status_polls;
  if (refused) {
    ++status_.refused;
    status_.last_error = "the dataplane refused a status poll: " + refusal;
  }
  return true;
}

std::string DataplaneClient::portState(const std::string& name) const {
  {
    std::lock_guard lock(mu_);
    if (!status_.connected) {
      return "dataplane not connected" + (status_.last_error.empty() ? std::string() : ": " + status_.last_error);
    }
    if (!status_.programmed) {
      return "dataplane not programmed" + (status_.last_error.empty() ? std::string() : ": " + status_.last_error);
    }
  }
  // A problem is about the version the dataplane has: a newer one on its way
  // is pending, whatever the old one's fate.
  if (!model_.portAcknowledged(name)) return kPending;
  std::lock_guard lock(mu_);
  for (const auto& p : status_.problems) {
    if (p.kind() != dpv1::ObjectProblem::PORT || p.name() != name) continue;
    if (p.state() == dpv1::ObjectProblem::PORT_UNAVAILABLE) return "port unavailable: " + p.reason();
    return "refused: " + p.reason();
  }
  return kProgrammed;
}

void DataplaneClient::acked(uint64_t generation, std::chrono::steady_clock::time_point since) {
  auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  latency_.observe(took);
  if (on_generation_) on_generation_(generation);
}

bool DataplaneClient::packedPeers() const {
  std::lock_guard lock(mu_);
  return status_.packed_peers;
}

bool DataplaneClient::fullSync(const ipc::Socket& s) {
  dpv1::ProgramRequest req;
  auto* fs = req.mutable_full_sync();
  uint64_t sequence = 0;
  *fs->mutable_model() = model_.snapshotAndClear(nullptr, &sequence);
  auto started = std::chrono::steady_clock::now();
  fs->set_generation(++next_generation_);
  if (!packedPeers()) peersAsText(*fs->mutable_model()->mutable_port_policies());
  dpv1::ProgramReply reply;
  if (!exchange(s, req, reply)) return false;
  if (reply.status() != dpv1::OK) {
    std::string why = "the dataplane refused the full sync: " + reply.message();
    DPU_LOG(kError, kLog) << why;
    std::lock_guard lock(mu_);
    status_.last_error = why;
    ++status_.refused;
    status_.programmed = false;
    return false;
  }
  {
    std::lock_guard lock(mu_);
    status_.generation = fs->generation();
    status_.programmed = true;
    ++status_.full_syncs;
    status_.last_error.clear();
  }
  model_.acknowledge(sequence);
  // Measured from the request: changes made while disconnected waited for the
  // connection, which the reconnect counter shows, not this histogram.
  acked(fs->generation(), started);
  DPU_LOG(kInfo, kLog) << "full sync generation " << fs->generation() << ": " << fs->model().ports_size() << " ports, "
                       << fs->model().remote_nodes_size() << " remote nodes (" << reply.flows_removed()
                       << " flows invalidated, " << reply.problems_size() << " objects not forwarding)";
  return true;
}

bool DataplaneClient::sendDelta(const ipc::Socket& s, ModelState::Pending& pending, bool& resync) {
  dpv1::ProgramRequest req;
  auto* d = req.mutable_delta();
  *d = std::move(pending.delta);
  uint64_t base;
  {
    std::lock_guard lock(mu_);
    base = status_.generation;
  }
  d->set_base_generation(base);
  d->set_generation(++next_generation_);
  if (!packedPeers()) peersAsText(*d->mutable_upsert_port_policies());
  dpv1::ProgramReply reply;
  if (!exchange(s, req, reply)) return false;
  if (reply.status() == dpv1::RESYNC_NEEDED) {
    DPU_LOG(kInfo, kLog) << "dataplane asked for a resync (it forwards with generation " << reply.generation()
                         << ", we based on " << base << ")";
    std::lock_guard lock(mu_);
    ++status_.resyncs_requested;
    next_generation_ = std::max(next_generation_, reply.generation());
    resync = true;
    return true;
  }
  if (reply.status() != dpv1::OK) {
    std::string why = "the dataplane refused delta " + std::to_string(base) + "→" + std::to_string(d->generation()) + ": " +
                      reply.message();
    DPU_LOG(kError, kLog) << why;
    std::lock_guard lock(mu_);
    status_.last_error = why;
    ++status_.refused;
    status_.programmed = false;
    // Its generation did not move: the next Delta has the same base. A full sync
    // later (reconnect) retries the whole model.
    return true;
  }
  {
    std::lock_guard lock(mu_);
    status_.generation = d->generation();
    ++status_.deltas;
    status_.programmed = status_.refused == 0 || status_.programmed;
    status_.last_error.clear();
  }
  model_.acknowledge(pending.sequence);
  acked(d->generation(), pending.oldest);
  return true;
}

bool DataplaneClient::waitIdle(const ipc::Socket& s, std::chrono::milliseconds timeout) const {
  // The dataplane never speaks first: anything readable on an idle connection
  // is the end of the stream (it restarted or closed us). Waiting on the
  // socket too, not only on the model, notices it at once: every moment
  // until the reconnect's full sync is an outage.
  pollfd fds[2] = {{s.fd(), POLLIN, 0}, {model_.changeFd(), POLLIN, 0}};
  if (fds[1].fd < 0) timeout = std::min(timeout, std::chrono::milliseconds(20));  // no eventfd: look often
  if (::poll(fds, 2, static_cast<int>(timeout.count())) <= 0) return false;
  if (fds[1].revents & POLLIN) model_.clearChangeFd();
  return fds[0].revents != 0;
}

bool DataplaneClient::session() {
  auto sock = ipc::connectUnix(socket_path_, ipc::after(std::chrono::seconds(1)));
  if (!sock) {
    setError(sock.error());
    return false;
  }
  dpv1::ProgramRequest hello;
  hello.mutable_hello()->set_agent_id(agent_id_);
  dpv1::ProgramReply reply;
  if (!exchange(*sock, hello, reply)) return false;
  {
    std::lock_guard lock(mu_);
    status_.connected = true;
    if (status_.instance_id != reply.hello().instance_id()) {
      DPU_LOG(kInfo, kLog) << "connected to dataplane instance " << reply.hello().instance_id() << " at generation "
                           << reply.hello().generation();
      // Another dataplane process: it has nothing of ours until the full sync.
      model_.forgetAcknowledged();
      if (!reply.hello().packed_peers()) {
        DPU_LOG(kWarn, kLog) << "dataplane instance " << reply.hello().instance_id()
                             << " does not read packed policy peers (it is older than this agent): they go as text";
      }
    }
    status_.instance_id = reply.hello().instance_id();
    status_.generation = reply.hello().generation();
    status_.port_capacity = reply.hello().port_capacity();
    status_.max_ethports = reply.hello().max_ethports();
    status_.packed_peers = reply.hello().packed_peers();
    next_generation_ = std::max(next_generation_, reply.hello().generation());
  }
  if (on_capacity_) on_capacity_(reply.hello().port_capacity(), reply.hello().max_ethports());
  if (on_hello_) on_hello_(reply.hello());
  if (on_reply_) on_reply_(reply);
  if (!fullSync(*sock)) return false;
  auto last_exchange = std::chrono::steady_clock::now();
  while (running_.load()) {
    if (!model_.hasPending()) {
      const auto since = std::chrono::steady_clock::now() - last_exchange;
      const auto until_status = since >= kStatusPeriod ? std::chrono::milliseconds(0)
                                                       : std::chrono::duration_cast<std::chrono::milliseconds>(
                                                             kStatusPeriod - since) + std::chrono::milliseconds(1);
      if (waitIdle(*sock, until_status)) {
        setError("the dataplane closed the connection");
        DPU_LOG(kWarn, kLog) << "dataplane connection closed; reconnecting";
        return false;
      }
      if (!running_.load() || model_.hasPending()) continue;
      if (std::chrono::steady_clock::now() - last_exchange >= kStatusPeriod) {
        if (!pollStatus(*sock)) return false;
        last_exchange = std::chrono::steady_clock::now();
      }
      continue;
    }
    last_exchange = std::chrono::steady_clock::now();
    auto pending = model_.takePending();
    if (!pending) continue;
    bool resync = false;
    if (!sendDelta(*sock, *pending, resync)) {
      return false;  // the reconnect's full sync carries the lost changes
    }
    if (resync && !fullSync(*sock)) return false;
  }
  return true;
}

}  // namespace dpu::control
