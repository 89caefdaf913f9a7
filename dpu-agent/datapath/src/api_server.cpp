// The programming and operator sockets of dpu-dataplane (api_server.h).
#include "datapath/api_server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "common/ipc_proto.h"
#include "common/log.h"
#include "datapath/dataplane_neighbours.h"
#include "datapath/dataplane_ports.h"
#include "datapath/engine.h"
#include "datapath/nat_keepalive.h"
#include "datapath/startup_timeline.h"
#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::datapath {
namespace {

using namespace std::chrono_literals;
namespace v1 = dataplane::v1;

constexpr auto kMaintainPeriod = 100ms;
// Tunnel peers whose next hop did not answer (next-hop changes themselves
// arrive as netlink events, polled below); representors that could not be
// opened are retried on their own backoff (DataplanePorts::nextRetry).
constexpr auto kReconcileRetry = 1s;
// A FullSync of a large model may take a while to arrive once it has started.
constexpr auto kRequestDeadline = 10s;
constexpr auto kReplyDeadline = 5s;

}  // namespace

ApiServer::ApiServer(Engine& engine, DataplanePorts& ports, TunnelNeighbours& neighbours, SocketConfig sockets)
    : engine_(engine), ports_(ports), neighbours_(neighbours), sockets_(std::move(sockets)) {}

ApiServer::~ApiServer() { close(); }

Result<void> ApiServer::open() {
  auto programming = ipc::listenUnix(sockets_.programming, 0600);
  if (!programming) return prefixed("programming socket", std::move(programming).takeError());
  auto op = ipc::listenUnix(sockets_.operator_api, 0660);
  if (!op) {
    ::unlink(sockets_.programming.c_str());
    return prefixed("operator socket", std::move(op).takeError());
  }
  programming_ = std::move(*programming);
  operator_ = std::move(*op);
  DPU_LOG(kInfo, "dataplane") << "programming API on " << sockets_.programming << ", operator API on "
                              << sockets_.operator_api;
  return {};
}

void ApiServer::close() {
  agent_.close();
  if (programming_.valid()) {
    programming_.close();
    ::unlink(sockets_.programming.c_str());
  }
  if (operator_.valid()) {
    operator_.close();
    ::unlink(sockets_.operator_api.c_str());
  }
}

void ApiServer::acceptAgent() {
  auto sock = ipc::acceptUnix(programming_, ipc::after(0ms));
  if (!sock || !sock->valid()) return;
  auto creds = ipc::peerCredentials(*sock);
  int pid = creds ? creds->pid : -1;
  if (agent_.valid()) {
    v1::ProgramReply refusal;
    refusal.set_status(v1::INVALID);
    refusal.set_message("another agent (pid " + std::to_string(agent_pid_) +
                        ") is connected to this dataplane; only one may program it");
    (void)ipc::sendMessage(*sock, refusal, ipc::after(1s));
    DPU_LOG(kWarn, "dataplane") << "refused a second agent (pid " << pid << ")";
    return;
  }
  agent_ = std::move(*sock);
  agent_pid_ = pid;
  if (timeline_ != nullptr) timeline_->mark("agent connected", std::chrono::steady_clock::now());
  DPU_LOG(kInfo, "dataplane") << "agent connected (pid " << pid << ")";
}

void ApiServer::serveAgent() {
  v1::ProgramRequest request;
  auto got = ipc::recvMessage(agent_, request, ipc::after(kRequestDeadline));
  if (!got) {
    if (got.code() == ErrorCode::kClosed) {
      DPU_LOG(kInfo, "dataplane") << "agent (pid " << agent_pid_
                                  << ") disconnected; forwarding on with the last programmed model";
    } else {
      DPU_LOG(kWarn, "dataplane") << "dropping the agent connection: " << got.error();
    }
    agent_.close();
    return;
  }
  if (request.has_hello()) {
    DPU_LOG(kInfo, "dataplane") << "hello from agent " << request.hello().agent_id();
  }
  const auto began = std::chrono::steady_clock::now();
  v1::ProgramReply reply = engine_.program(request);
  if (reply.status() == v1::OK && (request.has_full_sync() || request.has_delta())) {
    const bool first = !ports_.active() && reply.generation() > 0;
    if (first && timeline_ != nullptr) timeline_->add("first full sync", began);
    const auto reconciling = std::chrono::steady_clock::now();
    ports_.reconcile();
    if (first && timeline_ != nullptr) timeline_->add("representors", reconciling);
    const auto refreshing = std::chrono::steady_clock::now();
    neighbours_.refresh();
    if (first) {
      const auto activating = std::chrono::steady_clock::now();
      if (auto polling = ports_.activate(); !polling) {
        failure_ = polling.error();
      } else if (timeline_ != nullptr) {
        timeline_->add("next hops refresh", refreshing, activating);
        timeline_->add("polling", activating);
        DPU_LOG(kInfo, "dataplane") << "start-up: " << timeline_->finish(std::chrono::steady_clock::now());
      }
    }
  }
  if (reply.status() != v1::OK) {
    DPU_LOG(kWarn, "dataplane") << "program request refused (" << v1::ProgramStatus_Name(reply.status())
                                << "): " << reply.message();
  }
  // The engine does not open ports: the process adds its capacity (Hello) and
  // the logical ports left without one.
  ports_.annotate(request, reply);
  if (auto sent = ipc::sendMessage(agent_, reply, ipc::after(kReplyDeadline)); !sent) {
    DPU_LOG(kWarn, "dataplane") << "cannot answer the agent: " << sent.error();
    agent_.close();
  }
}

void ApiServer::serveOperator() {
  auto sock = ipc::acceptUnix(operator_, ipc::after(0ms));
  if (!sock || !sock->valid()) return;
  v1::OperatorRequest request;
  if (!ipc::recvMessage(*sock, request, ipc::after(1s))) return;
  v1::OperatorReply reply = engine_.operate(request);
  if (request.has_ports()) ports_.describe(reply);
  if (request.has_stats()) {
    if (timeline_ != nullptr) timeline_->describe(reply);
    ports_.addCounters(reply);
    neighbours_.addCounters(reply);
    if (keepalives_ != nullptr) keepalives_->addCounters(reply);
    auto* c = reply.add_counters();
    c->set_name("flow_bytes");
    c->set_value(engine_.bytesPerFlow());
    c->set_description("memory per cached flow in bytes (flow entry, bucket share, offload bookkeeping)");
    c->set_kind(v1::COUNTER_GAUGE);
  }
  (void)ipc::sendMessage(*sock, reply, ipc::after(kReplyDeadline));
}

void ApiServer::run(const std::atomic<bool>& stop) {
  auto next_maintain = std::chrono::steady_clock::now();
  next_reconcile_ = next_maintain + kReconcileRetry;
  while (!stop.load() && failure_.empty()) {
    // poll(2) skips a negative fd: no kernel next-hop lookup, or no agent.
    pollfd fds[5] = {{programming_.fd(), POLLIN, 0},
                     {operator_.fd(), POLLIN, 0},
                     {neighbours_.eventFd(), POLLIN, 0},
                     {agent_.valid() ? agent_.fd() : -1, POLLIN, 0},
                     {engine_.northSouthEventFd(), POLLIN, 0}};
    auto now = std::chrono::steady_clock::now();
    auto wake = std::min(next_maintain, next_reconcile_);
    if (auto retry = ports_.nextRetry(); retry) wake = std::min(wake, *retry);
    int timeout = wake > now ? static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count()) + 1
                             : 0;
    int ready = ::poll(fds, 5, timeout);
    if (ready > 0) {
      // The lcores learned a host MAC or a neighbour: publish it now.
      if (fds[4].revents & POLLIN) {
        engine_.northSouthUpdate();
        ports_.steerHost(engine_.hostSteering());
      }
      // POLLERR on the netlink socket is an overrun, which onEvents repairs.
      if (fds[2].revents & (POLLIN | POLLERR)) neighbours_.onEvents();
      if (fds[3].revents & (POLLIN | POLLHUP | POLLERR)) serveAgent();
      if (fds[0].revents & POLLIN) acceptAgent();
      if (fds[1].revents & POLLIN) serveOperator();
    }
    now = std::chrono::steady_clock::now();
    if (now >= next_maintain) {
      engine_.maintain();
      ports_.steerHost(engine_.hostSteering());
      if (keepalives_ != nullptr) keepalives_->tick(now);
      next_maintain = now + kMaintainPeriod;
    }
    // A representor that could not be opened is tried again when its backoff says so.
    if (auto retry = ports_.nextRetry(); retry && now >= *retry) ports_.reconcile();
    if (now >= next_reconcile_) {
      neighbours_.refresh();
      next_reconcile_ = now + kReconcileRetry;
    }
  }
}

}  // namespace dpu::datapath
