// The agent's side of the dataplane programming API (proto
// dpu.dataplane.v1, unix socket, framed protobuf): Hello, then a FullSync of
// the whole model, then one Delta per batch of changes, each stamped
// base_generation → generation. RESYNC_NEEDED, a reconnect (the dataplane
// restarted, or we did) and a refused Delta all lead back to a FullSync,
// which the dataplane applies as a diff, so nothing that stayed the same is
// touched. The client notices at once that the dataplane went away (it waits
// on the connection as well as on the model) and retries every 10 ms for the
// first 3 s after that and after its own start (a restarting dataplane is
// back within them, and until the full sync its pods have no network), then
// with exponential backoff (100 ms .. 2 s, jittered); the model keeps
// collecting changes meanwhile.
//
// The dataplane reports, on every reply, the objects of the model it does not
// forward for (refused by its validation, or a port it could not open) and
// its IPsec SAs with their counters. The client keeps the latest list, asks
// for it with a Status request every second while nothing else is sent (a
// port that could not be opened may come up later, SA counters move), and
// answers portState() for the attach API and CHECK.
//
// Runs in its own thread; the model (logical_model.h) is the only input.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ipc.h"
#include "control/logical_model.h"
#include "control/metrics.h"

namespace dpu::control {

struct DataplaneStatus {
  bool connected = false;
  bool programmed = false;       // the dataplane forwards with our current model (modulo pending changes)
  uint64_t generation = 0;       // acknowledged by the dataplane
  std::string instance_id;       // the dataplane process we talk to
  uint64_t full_syncs = 0;
  uint64_t deltas = 0;
  uint64_t resyncs_requested = 0;  // RESYNC_NEEDED answers
  uint64_t reconnects = 0;
  uint64_t refused = 0;          // INVALID answers (to programs and status polls)
  uint64_t status_polls = 0;     // Status requests answered
  std::string last_error;
  uint32_t port_capacity = 0;    // representor ports the dataplane can open (its Hello answer; 0: not told)
  uint32_t max_ethports = 0;     // its DPDK's RTE_MAX_ETHPORTS
  // It reads packed PolicyRule peers (HelloReply.packed_peers); one that does
  // not is an older dataplane, sent every peer as text.
  bool packed_peers = false;
  uint32_t ports_unavailable = 0;  // logical ports whose representor it could not open (last reply)
  std::vector<dpv1::ObjectProblem> problems;  // from the last reply
};

// What Attachment.dataplane_state says of a port (attach.proto): the
// dataplane forwards for it, or not yet, or why not.
inline constexpr const char* kProgrammed = "programmed";
inline constexpr const char* kPending = "pending";

// When the client tries the dataplane's socket again (see the top): every
// kQuickRetry for kQuickRetryWindow after it lost a dataplane it was connected
// to (and after its own start), then 100 ms doubling to 2 s, each with up to a
// quarter more of jitter; back to 100 ms after a session that lasted 5 s.
// Pure, on the clock it is given.
class ReconnectBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kQuickRetry{10};
  static constexpr std::chrono::seconds kQuickRetryWindow{3};

  explicit ReconnectBackoff(Clock::time_point start, uint32_t seed = 0);
  // A session that began at `began` ended at `now`, after a connection to a
  // dataplane (`was_connected`) or not: how long to wait before the next try.
  Clock::duration next(Clock::time_point began, Clock::time_point now, bool was_connected);

 private:
  Clock::time_point quick_until_;
  std::chrono::milliseconds backoff_{100};
  uint32_t rng_;
};

class DataplaneClient {
 public:
  DataplaneClient(std::string socket_path, std::string agent_id, ModelState& model, Histogram& latency);
  ~DataplaneClient();

  // `generation_hint`: the generation from the checkpoint, so generations keep
  // increasing across agent restarts even when the dataplane forgot.
  void start(uint64_t generation_hint = 0);
  void stop();
  DataplaneStatus status() const;
  // "programmed", "pending" (its latest version is not acknowledged yet), or
  // why the dataplane does not forward for port `name` ("refused: <reason>",
  // "port unavailable: <reason>", "dataplane not connected: <why>").
  std::string portState(const std::string& name) const;
  // Called (on the client thread) after each acknowledged generation.
  void onGeneration(std::function<void(uint64_t)> fn) { on_generation_ = std::move(fn); }
  // Called (on the client thread) with HelloReply.port_capacity and max_ethports on each connection.
  void onPortCapacity(std::function<void(uint32_t, uint32_t)> fn) { on_capacity_ = std::move(fn); }
  // Called (on the client thread) with each connection's HelloReply before
  // the full sync, so that what depends on the dataplane instance (IPsec
  // sequence marks) is in the model the full sync sends.
  void onHello(std::function<void(const dpv1::HelloReply&)> fn) { on_hello_ = std::move(fn); }
  // Called (on the client thread) with every reply, the Hello's included.
  void onReply(std::function<void(const dpv1::ProgramReply&)> fn) { on_reply_ = std::move(fn); }
  // Called (on the client thread) to fill each status poll (the IPsec
  // rotation requests taken).
  void onStatusPoll(std::function<void(dpv1::StatusRequest&)> fn) { on_status_poll_ = std::move(fn); }

 private:
  void run();
  bool session();  // one connection; false when it ended in an error
  bool packedPeers() const;  // the dataplane said HelloReply.packed_peers
  bool fullSync(const ipc::Socket& s);
  bool sendDelta(const ipc::Socket& s, ModelState::Pending& pending, bool& resync);
  bool exchange(const ipc::Socket& s, const dpv1::ProgramRequest& req, dpv1::ProgramReply& reply);
  bool pollStatus(const ipc::Socket& s);
  void takeProblems(const dpv1::ProgramReply& reply);
  // Waits up to `timeout` for a change of the model or the end of the
  // connection; true when the dataplane closed it.
  bool waitIdle(const ipc::Socket& s, std::chrono::milliseconds timeout) const;
  void setError(const std::string& e);
  void acked(uint64_t generation, std::chrono::steady_clock::time_point since);

  const std::string socket_path_;
  const std::string agent_id_;
  ModelState& model_;
  Histogram& latency_;
  std::function<void(uint64_t)> on_generation_;
  std::function<void(uint32_t, uint32_t)> on_capacity_;
  std::function<void(const dpv1::HelloReply&)> on_hello_;
  std::function<void(const dpv1::ProgramReply&)> on_reply_;
  std::function<void(dpv1::StatusRequest&)> on_status_poll_;

  std::thread thread_;
  std::atomic<bool> running_{false};
  mutable std::mutex mu_;
  DataplaneStatus status_;
  uint64_t next_generation_ = 0;
  std::string status_refusal_;  // the dataplane's last refusal of a status poll, said once (client thread)
};

}  // namespace dpu::control
