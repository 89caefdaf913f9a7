// The Engine's implementation, shared by its source files: engine.cpp (create
// and the control methods), engine_datapath.cpp (the lcore loop), pipeline.cpp
// (the slow path), miss_budget.cpp (its budget) and actions.cpp (flows back to
// flow::FlowSpec).
#pragma once

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/keyed_hash.h"
#include "datapath/engine.h"
#include "conntrack/affinity.h"
#include "conntrack/conntrack.h"
#include "flow/flow.h"
#include "flow_cache.h"
#include "offload/inherited_rules.h"
#include "overlay/geneve.h"
#include "overlay/parse.h"
#include "snapshot.h"
#include "worker.h"

struct rte_mempool;

namespace dpu::datapath {

struct TunnelLanePacket;  // worker_parse.h

// What the actions read of a packet besides its frame: the L3 type and the
// offsets (a lane's are constants), and the IP packet's length.
struct PacketShape {
  overlay::L3Type l3;
  uint32_t l3_offset;
  uint32_t l4_offset;  // valid when the packet was fully parsed, or the shape is the lanes' IPv4
  uint32_t l3_len;
};

// What applyActions did (engine_impl.h: EngineImpl::applyActions).
enum class Applied : uint8_t { kNoLane, kDone, kTooBig, kPunt };

// What the slow path decided for one packet.
struct Decision {
  enum Kind : uint8_t {
    kFlow,      // `flow` filled: install it and apply its actions
    kDrop,      // drop, not cached (reason)
    kReplied,   // a reply was sent; drop the request (not counted as a drop)
    kSent,      // the slow path queued the packet itself, uncached (north–south ARP and ND: learned from each)
    kOnce,      // `flow` filled: apply its actions to this packet only, uncached
  };
  Kind kind = kDrop;
  DropReason reason = DropReason::kOk;
};
// The slow path's two drops: this packet only, or cached as the flow's
// action (its later packets drop on the fast path).
inline Decision dropNow(DropReason reason) { return {Decision::kDrop, reason}; }
inline Decision cacheDrop(FlowRecord& f, DropReason reason) {
  f.ops = op::kDrop;
  f.drop_reason = static_cast<uint8_t>(reason);
  return {Decision::kFlow, reason};
}


// The service stage's translation of one packet (services.cpp): where it
// goes once translated, and how.
// The source ports a pod's connection leaving the cluster is translated to
// (on the node IP, which the host uses too): above Linux's default
// ip_local_port_range (32768-60999), so the host's own connections never
// take one. A host configured otherwise must keep its range below 61000.
inline constexpr std::pair<uint16_t, uint16_t> kSnatPorts{61000, 65535};

struct NatPlan {
  bool active = false;
  bool v6 = false;
  Ip16 src{};
  Ip16 dst{};
  uint16_t sport = 0;  // host order
  uint16_t dport = 0;
  uint32_t dep = kDepNode;  // the service the flow depends on (dep_nat)
  // The packet belongs to a connection conntrack knows (translated or
  // tracked for NetworkPolicy): it was judged when the connection began.
  bool established = false;
  // The packet is forwarded uncached: the packet that opens a connection
  // (openerOnce), a TCP connection's packets until its handshake ends, so
  // conntrack sees it end (the flow it then installs is the established
  // connection's), and a flushed connection's late answer (no flow may
  // outlive its tombstone). The same for a connection tracked for
  // NetworkPolicy only (untranslated, `active` false).
  bool once = false;
};

// Whether the packet that opens a connection is forwarded uncached: yes,
// unless it picks up a connection mid-stream (`loose`: a TCP segment of a
// connection that lived before a restart, which goes on cached at once). A
// TCP SYN is the handshake's; a UDP, ICMP or SCTP connection is cached by
// its next packet, either way. So a one-packet exchange (a DNS query and
// its answer) costs no flow for its query and no NIC rule, and a new
// connection costs one table insert (conntrack's), not three.
inline bool openerOnce(bool loose) { return !loose; }

// A TCP connection in these states has not finished its handshake.
inline bool inHandshake(conntrack::State s) {
  return s == conntrack::State::kSynSent || s == conntrack::State::kSynReceived;
}

// A flow decided for a packet of plan's connection is applied to that
// packet only while the plan says so (NatPlan::once).
inline void onceWhilePlanned(const NatPlan& plan, Decision& d) {
  if (plan.once && d.kind == Decision::kFlow) d.kind = Decision::kOnce;
}

// A packet's connection tuple: addresses and ports as conntrack keeps them.
inline conntrack::Tuple connectionTuple(const overlay::FlowKey& k, bool v6) {
  conntrack::Tuple t;
  t.family = v6 ? 6 : 4;
  t.protocol = k.ip_proto;
  std::memcpy(t.src.data(), k.l3_src.data(), v6 ? 16 : 4);
  std::memcpy(t.dst.data(), k.l3_dst.data(), v6 ? 16 : 4);
  if (k.ip_proto == overlay::ipproto::kIcmp || k.ip_proto == overlay::ipproto::kIcmpv6) {
    // An echo's identifier is its "port", in both directions.
    t.src_port = t.dst_port = k.l4_dst;
  } else {
    t.src_port = k.l4_src;
    t.dst_port = k.l4_dst;
  }
  return t;
}

inline uint8_t tcpFlagsOf(const PacketContext& pc) {
  if (pc.parsed.l4 != overlay::L4Type::kTcp) return 0;
  const rte_mbuf* m = pc.mbuf;
  return static_cast<const uint8_t*>(m->buf_addr)[m->data_off + pc.parsed.l4_offset + 13];
}

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(const EngineConfig& config);
  ~EngineImpl() override;

  Result<void> bindPort(const std::string& name, uint16_t dpdk_port, PortRole role, MacAddress mac) override;
  void unbindPort(const std::string& name) override;
  std::vector<std::string> wantedRepresentors() const override;
  std::vector<std::string> logicalPortsOf(const std::string& representor) const override;
  dataplane::v1::ProgramReply program(const dataplane::v1::ProgramRequest& request) override;
  dataplane::v1::OperatorReply operate(const dataplane::v1::OperatorRequest& request) override;
  void maintain() override;
  Result<void> setTunnelNextHop(const IpAddress& peer_tunnel_ip, MacAddress next_hop) override;
  std::vector<IpAddress> wantedTunnelPeers() const override;
  NatKeepaliveTargets natKeepaliveTargets() const override;
  size_t bytesPerFlow() const override;
  size_t bytesPerCompactFlow() const override;
  int northSouthEventFd() const override { return ns_event_fd_; }
  void northSouthUpdate() override;
  HostSteering hostSteering() const override;
  // Every worker has passed quiescent() since `epoch` (RCU grace period).
  bool quiesced(uint64_t epoch) const;

  WorkerContext& worker(unsigned index) override { return *workers_[index]; }
  uint16_t rxBurstSize(WorkerContext& worker, uint16_t rx_port) override;  // miss_budget.cpp
  void processBurst(WorkerContext& worker, uint16_t rx_port, rte_mbuf** packets, uint16_t count) override;
  void flush(WorkerContext& worker) override;
  void quiescent(WorkerContext& worker) override;
  void awake(WorkerContext& worker) override;  // miss_budget.cpp

  Result<void> init();

  // --- lcore: the slow path's north–south next hops (north_south.cpp) ---
  // How a packet from a node IP reaches IPv4 destination `dst` (host order)
  // through the uplink: kOk and `out` filled, or why not — NoRoute (no node
  // network holds it and there is no gateway), NoUplink, or
  // NeighbourUnresolved (its next hop's MAC, or the host's MAC for the node
  // IP, is not known yet; an ARP request from the node IP went out,
  // rate-limited). A known neighbour not confirmed for a while is probed and
  // used. A flow built from it records out.dep. `pc` gives the mbuf pool of
  // the request. Public for the engine's tests, which act as the lcore.
  DropReason northSouthRoute(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, const uint8_t* dst,
                             bool v6, NorthSouthRoute& out);
  // The snapshot in force (the control thread, or a test acting as an lcore between bursts).
  const Snapshot& currentSnapshot() const { return *current_.load(std::memory_order_acquire); }

 private:
  // --- lcore ---
  // prepare, lookupAndApply and applyFlow are defined inline in engine_datapath.cpp: call them from there only.
  template <bool kUplink, bool kLagged>
  uint64_t runBurst(WorkerContext& w, const Snapshot& snap, uint16_t rx_port, rte_mbuf** packets, uint16_t count);
  // The general path's parse (and, on the uplink, Geneve decap) of a frame
  // no lane took; `decrypted`: the uplink's ESP it came in (runBurst).
  bool prepare(WorkerContext& w, const Snapshot& snap, rte_mbuf* m, uint16_t rx_port, bool uplink, bool decrypted,
               PacketContext& pc);
  template <bool kUplink>
  void lookupAndApply(WorkerContext& w, const Snapshot& snap, PacketContext& pc);
  // The general routine for a cached flow `index` (UINT32_MAX: uncached):
  // its actions, the "too big" answer, or, for a tracked connection's TCP
  // control packet, conntrack first (punt); `tracked`: conntrack saw this
  // packet already (the slow path's own).
  void applyFlow(WorkerContext& w, const Snapshot& snap, uint32_t index, FlowEntry& e, const FlowActions& a,
                 PacketContext& pc, bool tracked);
  // The record's actions in the fused order of actions.def: kKind is a lane
  // (the record is of that kind and the packet of the lane's shape) or
  // kActionsGeneral (each action tested). kTooBig and kPunt: nothing was
  // done (applyFlow answers them); kDone: the mbuf was queued or dropped and
  // counted. `punt`: a TCP control packet of a tracked connection is
  // handed back (kPunt) rather than forwarded.
  template <ActionKind kKind>
  Applied applyActions(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m, uint16_t rx_port,
                       const PacketShape& shape, bool punt);
  // The record's lane, when it has one and the packet has that lane's shape
  // (`ipv4_at_14`: untagged IPv4 without options at 14, as the lane parse and
  // the fast parse take it). kDecapped: the packet came through a tunnel.
  // kNoLane: no lane applied, nothing was done.
  template <bool kDecapped>
  Applied applyLane(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m, uint16_t rx_port,
                    bool ipv4_at_14, const PacketShape& shape);
  // A tracked connection's TCP SYN, FIN or RST that hit flow `index`:
  // conntrack advances the connection, then the packet is forwarded as the
  // flow says; a connection that closed loses its flow, one that is reused
  // (a new SYN) or gone takes the slow path.
  void punt(WorkerContext& w, const Snapshot& snap, uint32_t index, PacketContext& pc);
  // Records where a translated connection's new flow is (conntrack's user
  // field of that direction), so expiry sees the flow's hits.
  // False: the connection's entry is gone (its flow must not stay).
  bool noteConnectionFlow(WorkerContext& w, const PacketContext& pc, uint32_t index);
  // The Encap action; kFixedIpv4: the record's template is the 58-byte IPv4
  // one (offsets are constants). False: dropped and counted.
  template <bool kFixedIpv4>
  bool encapGeneve(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m, uint16_t rx_port);
  void output(WorkerContext& w, uint16_t port, rte_mbuf* m);
  // IPsec on the lcore (engine_datapath.cpp): the Esp action, and ESP
  // received on the uplink (kNotOurs: not for our tunnel IP, left alone).
  bool espProtect(WorkerContext& w, const FlowActions& a, rte_mbuf* m, uint16_t rx_port);
  bool encapEsp4(WorkerContext& w, FlowEntry& e, const FlowActions& a, rte_mbuf* m, uint16_t rx_port);
  bool espSealed(WorkerContext& w, rte_mbuf* m, uint16_t rx_port, EspVerdict verdict, overlay::Status status);
  // kDecrypted: the packet is the IP packet ESP carried, for the general
  // path; kLane: the lane took what it carried (`key`, `t`; the mbuf is the
  // inner frame), offered only when `lane` (the uplink's lane is on and
  // takes this mbuf).
  enum class EspReceived : uint8_t { kNotOurs, kDropped, kDecrypted, kLane };
  EspReceived espReceive(WorkerContext& w, const Snapshot& snap, rte_mbuf* m, uint16_t rx_port, bool lane,
                         CompactKey& key, TunnelLanePacket& t);
  bool plaintextRefused(const Snapshot& snap, const TunnelProbe& probe) const;
  // The fast lanes: burst packet i of w.lane.
  template <bool kUplink>
  void laneApply(WorkerContext& w, const Snapshot& snap, uint32_t stamp, uint16_t rx_port, unsigned i);
  template <bool kUplink>
  PacketContext& laneContext(WorkerContext& w, uint16_t rx_port, unsigned i);
  template <bool kUplink>
  void prefetchEntries(WorkerContext& w, unsigned i, uint32_t alive);
  // Out of line, so the hit path that calls them stays small: a miss (slow
  // path, install, apply) and a flow whose stamp is older than the snapshot's.
  void missPath(WorkerContext& w, const Snapshot& snap, PacketContext& pc);
  // A miss streak (a flood of new connections) spends its time in
  // conntrack's lookups, each a cache miss in a large table: missPath of
  // burst packet `pc` starts loading the next packet's conntrack bucket
  // (a lane packet's; a guess: it may hit its flow) and, when it is for a
  // service, the bucket of the reply tuple Maglev's backend gives it (a
  // guess too: affinity or a masquerade may change the reply).
  void prefetchNextConnection(WorkerContext& w, const Snapshot& snap, const PacketContext& pc) const;
  bool revalidate(WorkerContext& w, const Snapshot& snap, uint32_t index, FlowActions& a);
  // Fills the ParsedPacket fields the hit path's fast parse skipped.
  static void completeParse(PacketContext& pc);
  Decision slowPath(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& out);
  Decision slowPathFromPort(WorkerContext& w, const Snapshot& snap, PacketContext& pc, const PortSlot& slot,
                            FlowRecord& out);
  Decision slowPathFromTunnel(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& out);
  // Routing of a packet to `dst` (its own destination, or the translated
  // one): a pod here, the management port, or a remote node (Geneve with
  // `ingress_key` as the OVN option's ingress port). A `translated` packet
  // whose destination is off the cluster (a node port's or an egress
  // connection's, translated) leaves through the uplink to the fabric.
  Decision routeFromPort(WorkerContext& w, const Snapshot& snap, PacketContext& pc, uint16_t ingress_key,
                         const uint8_t* dst, bool v6, FlowRecord& f, bool translated);
  // The fabric side of routeFromPort: IPv4 through the node network's next
  // hop (northSouthRoute), from the host's MAC for the node IP.
  Decision toFabric(WorkerContext& w, const Snapshot& snap, PacketContext& pc, const uint8_t* dst, bool v6,
                    FlowRecord& f);
  // Where a packet entered the service stage.
  enum class From : uint8_t {
    kPod,     // a pod's port: new connections to any frontend are balanced
    kTunnel,  // another node: only tracked connections are translated
    kFabric,  // the uplink, not tunnelled: node ports and external IPs are balanced, the rest left alone
  };
  // The load balancer and connection tracking (services.cpp), after port
  // security and before routing: a decision (dropped, refused) or nullopt
  // with `plan` saying whether and how the packet is translated.
  std::optional<Decision> serviceStage(WorkerContext& w, const Snapshot& snap, PacketContext& pc, From from,
                                       FlowRecord& f, NatPlan& plan);
  // A pod's connection leaving the cluster (services.cpp): tracked and its
  // source translated to the node IP on the way out, on a port of
  // kSnatPorts; nullopt and `plan` filled, or why it cannot leave.
  std::optional<Decision> egressSnat(WorkerContext& w, const Snapshot& snap, PacketContext& pc, NatPlan& plan);
  // Adds the plan's translation to a forwarding decision (uncached while a
  // TCP handshake is on).
  void addNat(const PacketContext& pc, const NatPlan& plan, FlowRecord& f, Decision& d) const;
  // NetworkPolicy (policy.cpp) for a new connection, after service DNAT and
  // before SNAT: egress at `from` (the source pod's port; nullptr when the
  // packet came from another node) against `dst` (translated) and
  // `dst_port`, ingress at the local port holding `dst` against the source.
  // nullopt: allowed, `f` records what allowed it and `track` says whether
  // its replies must be tracked to pass (an isolated direction on their
  // way); else the drop (PolicyDenied, counted against the policies
  // isolating the port that denied it).
  std::optional<Decision> policyStage(WorkerContext& w, const Snapshot& snap, PacketContext& pc, const SnapPort* from,
                                      const uint8_t* dst, bool v6, uint16_t dst_port, FlowRecord& f, bool& track);
  // Tracks an allowed connection (untranslated) so its replies pass; false:
  // the table is full (the connection is dropped: ConntrackFull). The
  // packet that opened it sets plan.once (openerOnce), as a translated
  // connection's does.
  bool trackForPolicy(WorkerContext& w, PacketContext& pc, bool v6, NatPlan& plan);
  // After a change of some ports' PortPolicy (control thread): every
  // tracked connection with an end on such a port is judged again; those
  // denied now are removed, so their next packet is judged as new.
  // `changed_ports`: the only ports whose policy may have changed (nullptr:
  // compare every port's).
  void revalidatePolicyConnections(const Snapshot& before, const Snapshot& after,
                                   const std::vector<std::string>* changed_ports = nullptr);
  // The policy answer (dpuctl policy).
  void describePolicy(const dataplane::v1::PolicyRequest& request, dataplane::v1::OperatorReply& out) const;
  // The drops of every policy isolating a port in force (or of `only`), summed over the workers.
  void addPolicyDrops(dataplane::v1::OperatorReply& out, const std::string& only_port = "") const;
  // Refuses a connection to a service as kube-proxy does: TCP reset, else
  // ICMP port unreachable, from the service address.
  Decision reject(WorkerContext& w, const Snapshot& snap, PacketContext& pc);
  // An ICMP error about a translated connection, translated back in place,
  // the quoted packet too (services.cpp); false when it is not one. The
  // slow path forwards it once, uncached (WorkerContext::related).
  bool translateIcmpError(WorkerContext& w, PacketContext& pc);
  bool sendReply(WorkerContext& w, const Snapshot& snap, PacketContext& pc, int kind, const SnapPort& port, uint32_t mtu);
  // North–south (north_south.h): the host PF's frames (to the uplink) and
  // the uplink's frames that are not our tunnel traffic (to the host PF, or
  // dropped), in pipeline.cpp; the helpers in north_south.cpp.
  Decision slowPathFromHost(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& out);
  Decision slowPathFromFabric(WorkerContext& w, const Snapshot& snap, PacketContext& pc, FlowRecord& out);
  // Learning from an ARP frame, or an IPv6 neighbour solicitation or
  // advertisement, the slow path sees (either port); both end in
  // learnNeighbour: `sender` at `mac`, `asked` the address the frame asked
  // for or answered to (nullptr: none, an unsolicited one), `reply` whether
  // it answers.
  void learnFromArp(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host);
  // learnFromNd also hands the message back (false: not a valid one).
  bool learnFromNd(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host,
                   overlay::NeighborMessage& msg);
  void learnNeighbour(WorkerContext& w, const Snapshot& snap, const PacketContext& pc, bool from_host,
                      const IpAddress& sender, const overlay::MacAddress& mac, const uint8_t* asked, bool reply);
  // Reports to the control thread; `news` (something the snapshot does not
  // have yet) wakes it at once.
  void observeNorthSouth(WorkerContext& w, const NorthSouthObservation& o, bool news);
  // An ARP probe (IPv6: a solicitation from ::) to the host for `node_ip`
  // (the host PF port), whose answer says which of the host's MACs holds it.
  void askHost(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, const IpAddress& node_ip);
  // An ARP request or neighbour solicitation for `target` from the node IP
  // `from`, to `dst` (broadcast: resolve; a neighbour's MAC: probe it).
  bool sendSolicitation(WorkerContext& w, const Snapshot& snap, rte_mempool* pool, const SnapNodeIp& from,
                        const IpAddress& target, const overlay::MacAddress& dst);
  void tooBig(WorkerContext& w, const Snapshot& snap, const FlowActions& a, PacketContext& pc);
  void drop(WorkerContext& w, rte_mbuf* m, uint16_t rx_port, DropReason reason);
  void enqueueTx(WorkerContext& w, uint16_t port, rte_mbuf* m);
  // Sends on `port` the frame `build(overlay::PacketBuffer&)` writes into a
  // new mbuf of `pool` (a reply, a request the dataplane makes itself). False,
  // nothing sent, when the pool is empty or the builder refuses.
  template <typename Build>
  bool sendBuilt(WorkerContext& w, rte_mempool* pool, uint16_t port, Build&& build) {
    rte_mbuf* r = rte_pktmbuf_alloc(pool);
    if (r == nullptr) return false;
    overlay::PacketBuffer out(static_cast<uint8_t*>(r->buf_addr), r->buf_len, r->data_off, 0);
    if (build(out) != overlay::Status::kOk) {
      rte_pktmbuf_free(r);
      return false;
    }
    r->data_off = static_cast<uint16_t>(out.headroom());
    r->data_len = static_cast<uint16_t>(out.size());
    r->pkt_len = out.size();
    enqueueTx(w, port, r);
    return true;
  }
  void txPort(WorkerContext& w, uint16_t port);
  void sweep(WorkerContext& w, const Snapshot& snap, uint32_t buckets);
  uint64_t now() const;
  // The connection and affinity tables, in memory or on their files (EngineConfig).
  Result<void> openConnectionTables();
  // The cycle counter of the slow-path budget (EngineConfig::cycles).
  uint64_t cycles() const { return config_.cycles != nullptr ? config_.cycles() : rte_rdtsc(); }
  static uint64_t steadyMs();

  // --- control ---
  // Validates `model` object by object and puts what passes in force.
  dataplane::v1::ProgramReply install(const dataplane::v1::LogicalModel& model, uint64_t generation);
  // A Delta that changes services only (model::changesServicesOnly): the
  // same outcome as install(applyDelta(...)), in the time of the services it
  // names — validated against the claims in force, only their frontends and
  // Maglev tables rebuilt, everything else shared with the snapshot in force.
  dataplane::v1::ProgramReply installServiceDelta(const dataplane::v1::Delta& delta);
  // A Delta that changes port policies only (model::changesPortPoliciesOnly):
  // the same outcome as install(applyDelta(...)), in the time of the port
  // policies it names — only they are parsed, only their ports' SnapPolicy
  // is built (the other ports' and the services shared with the snapshot in
  // force), only their ports' connections revalidated.
  dataplane::v1::ProgramReply installPortPolicyDelta(const dataplane::v1::Delta& delta);
  // After a fast path: the problems of `kind` named in `settled` are
  // replaced by `fresh` (the verdict's), and problems_ follows.
  void settleProblems(dataplane::v1::ObjectProblem::Kind kind, const std::vector<std::string>& settled,
                      std::vector<dataplane::v1::ObjectProblem> fresh);
  // A reply with the current generation and problems.
  dataplane::v1::ProgramReply reply(dataplane::v1::ProgramStatus status, const std::string& message) const;
  void countRefusals(const std::vector<dataplane::v1::ObjectProblem>& next);
  // `changed_services`, `changed_port_policies`: the only services, port
  // policies (by port) whose state in force changed since the snapshot in
  // force (nullptr: any of them may have changed).
  Result<void> republish(const std::vector<std::string>* changed_services = nullptr,
                         const std::vector<std::string>* changed_port_policies = nullptr);
  // Deletes the retired snapshots no lcore can still be reading.
  void reclaimSnapshots();
  uint32_t countStale(const Snapshot& snap) const;
  void drainOffload();
  // The first full sync is programmed (or none came in time): the previous
  // process's rules not taken over by now go (inherited_rules.h).
  void endOffloadResync();
  // Every call: removes rules whose flow left the cache. `full` (about once a
  // second): also offers flows never offered and reads hardware counters.
  void scanOffload(bool full);
  void offerFlow(WorkerContext& w, uint32_t index, const FlowRecord& e, const Snapshot& snap, uint32_t now32);
  flow::FlowSpec toFlowSpec(const Snapshot& snap, const FlowRecord& e) const;
  uint16_t internReason(const std::string& text);
  // North–south, control side (north_south.cpp).
  Result<void> initNorthSouth();
  // One lcore observation into the tables; true when the snapshot must change.
  bool applyObservation(const NorthSouthObservation& o, uint64_t now_ms);
  void northSouthOperate(dataplane::v1::OperatorReply& out) const;
  // Forgets host MACs idle past the ageing time (true when one went); one
  // still in use by a cached flow is kept.
  bool ageHostMacs(uint64_t now_ms);

  EngineConfig config_;
  uint64_t hash_seed_ = 0;
  HashKeys hash_keys_{};  // from hash_seed_
  std::string instance_id_;
  uint64_t generation_ = 0;
  dataplane::v1::LogicalModel model_proto_;  // as requested, refused objects included (Deltas apply to it)
  Model model_;                               // in force
  std::vector<dataplane::v1::ObjectProblem> problems_;  // the requested objects not in force, and why
  // problems_ is the validation's problems (by kind, name) then the IPsec SAs'.
  std::vector<dataplane::v1::ObjectProblem> model_problems_;
  std::vector<dataplane::v1::ObjectProblem> sa_problems_;
  // For services-only Deltas: where each requested service is in
  // model_proto_, and the claims of the services in force.
  std::unordered_map<std::string, int> requested_services_;
  std::unordered_map<std::string, int> requested_port_policies_;  // the same for port policies, by port
  model::ServiceClaims service_claims_;
  uint64_t control_events_[kEventCount] = {};  // events counted on the control thread (ObjectRefused)
  std::map<std::string, Binding> bindings_;
  std::map<IpAddress, MacAddress> next_hops_;
  DepRegistry deps_;
  PolicyNames policy_names_;  // grows only: flows and counters keep indexes

  std::unique_ptr<conntrack::Table> conntrack_;
  std::unique_ptr<conntrack::Affinity> affinity_;
  // Expiry and the UDP flush after a service change (control thread).
  void expireConnections();
  void describeServices(const Snapshot& snap, dataplane::v1::OperatorReply& out) const;
  void describeConntrack(const dataplane::v1::ConntrackRequest& request, dataplane::v1::OperatorReply& out) const;
  // `changed`: the services that changed, by name (nullptr: compare every service).
  void flushChangedServices(const Snapshot& before, const Snapshot& after,
                            const std::vector<std::string>* changed = nullptr);
  uint64_t flowLastUse(const conntrack::Entry& e) const;

  std::atomic<const Snapshot*> current_{nullptr};
  std::atomic<uint64_t> epoch_{0};
  struct Retired {
    const Snapshot* snapshot;
    uint64_t epoch;
  };
  std::deque<Retired> retired_;
  std::vector<std::unique_ptr<WorkerContext>> workers_;
  std::vector<std::string> reasons_;
  std::unordered_map<std::string, uint16_t> reason_index_;
  IpsecSas ipsec_;  // the SAs in force (ipsec_sas.h)
  // ESP in UDP per remote node name (snapshot.h NatPeer): added, never removed, so a pointer an
  // lcore holds stays valid; a node that comes back gets its entry again.
  std::map<std::string, std::unique_ptr<NatPeer>> nat_peers_;
  // The NAT-T ports as last written to config_.nat_ports_file ("name address port" lines).
  std::string nat_ports_written_;
  // Reads config_.nat_ports_file into nat_peers_ (at start); writes what the
  // lcores learned since (maintain).
  void loadNatPorts();
  void saveNatPorts();
  uint64_t maintain_calls_ = 0;
  std::unique_ptr<offload::InheritedRules> inherited_;  // with an offload backend
  uint64_t start_ms_ = 0;
  // now(): ms = ms_base_ + (TSC - tsc_base_) * tsc_ms_per_tick_ / 2^64.
  uint64_t tsc_ms_per_tick_ = 0;
  uint64_t tsc_base_ = 0;
  uint64_t ms_base_ = 0;
  // North–south (north_south.h).
  NorthSouthTables ns_;
  int ns_event_fd_ = -1;
  mutable HostSteering steering_;  // the last answer of hostSteering(), its version bumped on change
};

}  // namespace dpu::datapath
