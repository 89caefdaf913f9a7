// The dataplane programming client (see dataplane_client.h).
#include "control/dataplane_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/ipc_proto.h"
#include "common/log.h"

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

}  // namespace

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
  std::mt19937 rng(std::random_device{}());
  auto backoff = std::chrono::milliseconds(100);
  bool logged_down = false;
  while (running_.load()) {
    auto started = std::chrono::steady_clock::now();
    bool clean = session();
    {
      std::lock_guard lock(mu_);
      status_.connected = false;
      status_.programmed = false;
    }
    if (!running_.load()) break;
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(5)) backoff = std::chrono::milliseconds(100);
    if (!clean && !logged_down) {
      DPU_LOG(kWarn, kLog) << "dataplane at " << socket_path_ << " unavailable (" << status().last_error
                           << "); retrying with backoff";
      logged_down = true;
    }
    if (clean) logged_down = false;
    // Jitter so that many agents (or a fast restart loop) do not hammer in step.
    auto jitter = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, static_cast<int>(backoff.count() / 4))(rng));
    auto wait = backoff + jitter;
    for (auto slept = std::chrono::milliseconds(0); slept < wait && running_.load(); slept += std::chrono::milliseconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    std::lock_guard lock(mu_);
    ++status_.reconnects;
  }
}

bool DataplaneClient::exchange(const ipc::Socket& s, const dpv1::ProgramRequest& req, dpv1::ProgramReply& reply) {
  if (auto sent = ipc::sendMessage(s, req, ipc::after(kReplyTimeout)); !sent) {
    setError("sending to the dataplane: " + sent.error());
    return false;
  }
  ipc::Frame f = ipc::recvMessage(s, reply, ipc::after(kReplyTimeout));
  if (!f.ok()) {
    setError(f.failure == ipc::RecvFailure::kClosed ? std::string("the dataplane closed the connection")
                                                    : "waiting for the dataplane: " + f.error);
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
  dpv1::ProgramReply reply;
  if (!exchange(s, req, reply)) return false;
  std::lock_guard lock(mu_);
  ++status_.status_polls;
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

bool DataplaneClient::fullSync(const ipc::Socket& s) {
  dpv1::ProgramRequest req;
  auto* fs = req.mutable_full_sync();
  uint64_t sequence = 0;
  *fs->mutable_model() = model_.snapshotAndClear(nullptr, &sequence);
  auto started = std::chrono::steady_clock::now();
  fs->set_generation(++next_generation_);
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

bool DataplaneClient::peerClosed(const ipc::Socket& s) const {
  // The dataplane never speaks first: anything readable on an idle connection
  // is the end of the stream (it restarted or closed us).
  pollfd p{s.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
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
    }
    status_.instance_id = reply.hello().instance_id();
    status_.generation = reply.hello().generation();
    status_.port_capacity = reply.hello().port_capacity();
    status_.max_ethports = reply.hello().max_ethports();
    next_generation_ = std::max(next_generation_, reply.hello().generation());
  }
  if (on_capacity_) on_capacity_(reply.hello().port_capacity(), reply.hello().max_ethports());
  if (on_hello_) on_hello_(reply.hello());
  if (on_reply_) on_reply_(reply);
  if (!fullSync(*sock)) return false;
  auto last_exchange = std::chrono::steady_clock::now();
  while (running_.load()) {
    if (!model_.waitForChange(std::chrono::milliseconds(100))) {
      if (peerClosed(*sock)) {
        setError("the dataplane closed the connection");
        DPU_LOG(kWarn, kLog) << "dataplane connection closed; reconnecting";
        return false;
      }
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
