#!/usr/bin/env python3
"""Input packets for bench/datapath.sh, built with scapy.

  datapath_pcaps.py [--check] [--policies N] DIR [SCENARIO:FLOWS:SIZE ...]
writes DIR/<scenario>-<flows>-<size>.pcap (one packet per flow, the pcap PMD
loops it with infinite_rx=1), DIR/newflows.pcap (50,000 flows, each packet
its own flow, for the slow path), DIR/model.json (node 1's logical model, the same
topology as the component test: pods A and B on node 1, node 2 remote) and
DIR/model-service.json (the same with the service of the service scenario).

Scenarios (size = the pod's frame, FCS excluded):
  local   pod A → pod B on the same node (VF → VF, routed through the gateway MAC)
  encap   pod A → a pod on node 2 (VF → Geneve)
  decap   Geneve from node 2 → pod A (Geneve → VF); the outer headers add 58 bytes
  service pod A → ClusterIP 10.96.0.20 (VF → DNAT to a backend on node 2 → Geneve): TCP ACKs of
          established connections, one per flow
Flows differ in the UDP ports: source 1024 + i mod 50000, destination 2000 + i div 50000; a
service flow in its TCP ports: source 1024 + i mod 50000, service port 80 + i div 50000 (80 and
81, to the backend's 8080 and 8081: one client port may then hold a connection to each).

New connections (spec newconn:tcp or newconn:udp): DIR/newconn-<proto>.pcap, NEWCONN_COUNT
packets from pod A to the ClusterIP, every one a new connection (a TCP SYN, checksummed, or a UDP
datagram): source port 1024 + i mod 60000, service port 80 + i div 60000 (80..89, to the
backend's 8080..8089 on node 2); the pcap is read once. DIR/model-newconn-<proto>.json is the
model with that service (its ten ports of that protocol).

With --policies N, each model also has a "-policies" twin (model-policies.json,
model-service-policies.json, model-newconn-<proto>-policies.json): pods A and
B isolated both ways by N NetworkPolicies, each giving each direction one rule
(policy_rules). N - 1 of them allow peers and ports no packet of the benchmark
uses; the last allows the pod network over TCP and UDP, so every flow is
judged against all N rules and allowed by the last.
"""
import argparse
import json
import os
import struct

from scapy.all import IP, TCP, UDP, Ether, Raw
from scapy.contrib.geneve import GENEVE

ROUTER_MAC = "0a:58:0a:f4:00:01"
MAC_A, IP_A = "0a:58:0a:f4:01:05", "10.244.1.5"
MAC_B, IP_B = "0a:58:0a:f4:01:06", "10.244.1.6"
REMOTE_POD = "10.244.2.7"
VIP, SERVICE_CIDR = "10.96.0.20", "10.96.0.0/16"
SERVICE_PORTS = (80, 81)  # to BACKEND_PORT + port - 80 on REMOTE_POD (bench/ovs_dpdk.bash's rules say the same)
BACKEND_PORT = 8080
NEWCONN_PORTS = tuple(range(80, 90))  # bench/ovs_dpdk.bash's ovs_newconn says the same
NEWCONN_PER_PORT = 60000
NEWCONN_COUNT = NEWCONN_PER_PORT * len(NEWCONN_PORTS)
TUN1, TUN2 = "192.168.100.1", "192.168.100.2"
UPLINK_MAC = "02:00:00:00:01:00"
NEXT_HOP_MAC = "02:00:00:00:02:00"


def model():
    return {
        "node": {"name": "node1", "tunnel_ip": TUN1, "underlay_mtu": 1600, "pod_mtu": 1500,
                 "router_mac": ROUTER_MAC, "cluster_cidrs": ["10.244.0.0/16"]},
        "local_subnets": [{"cidr": "10.244.1.0/24", "gateway_ip": "10.244.1.1", "datapath_key": 1}],
        "ports": [
            {"name": "pod-a", "key": 1, "kind": "POD", "representor": "pf0vf1", "mac": MAC_A, "ips": [IP_A],
             "datapath_key": 1},
            {"name": "pod-b", "key": 2, "kind": "POD", "representor": "pf0vf2", "mac": MAC_B, "ips": [IP_B],
             "datapath_key": 1},
        ],
        "remote_nodes": [{"name": "node2", "tunnel_ip": TUN2,
                          "subnets": [{"cidr": "10.244.2.0/24", "gateway_ip": "10.244.2.1", "datapath_key": 2}]}],
    }


def service_model(protocol="TCP", service_ports=SERVICE_PORTS):
    m = model()
    m["node"]["service_cidrs"] = [SERVICE_CIDR]
    m["services"] = [{
        "name": "default/bench", "cluster_ips": [VIP],
        "ports": [{"name": f"{protocol.lower()}-{p}", "protocol": protocol, "port": p,
                   "backends": [{"ip": REMOTE_POD, "port": BACKEND_PORT + p - 80, "local": False, "ready": True,
                                 "serving": True}]} for p in service_ports]}]
    return m


def policy_rules(n):
    """The PortPolicy direction of pods A and B with n policies (see the top)."""
    names = [f"bench/p{i:05d}" for i in range(n)]
    rules = [{"peers": [f"172.16.{i // 256}.{i % 256}/32"], "protocol": 6, "port_first": 9000 + i % 1000,
              "port_last": 9000 + i % 1000, "policy": names[i]} for i in range(n - 1)]
    rules += [{"peers": ["10.244.0.0/16"], "protocol": proto, "port_first": 0, "port_last": 65535,
               "policy": names[-1]} for proto in (6, 17)]
    return {"isolated": True, "policies": names, "rules": rules}


def with_policies(m, n):
    m = json.loads(json.dumps(m))
    direction = policy_rules(n)
    m["port_policies"] = [{"port": p["name"], "pod": f"bench/{p['name']}", "ingress": direction,
                           "egress": direction} for p in m["ports"]]
    return m


def write_model(out, name, m, policies):
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(m, f, indent=1)
    if policies:
        with open(os.path.join(out, f"{name}-policies.json"), "w") as f:
            json.dump(with_policies(m, policies), f)


def ports(i):
    return 1024 + i % 50000, 2000 + i // 50000


def inner(src_mac, dst_mac, src, dst, size):
    # UDP checksum 0 (allowed over IPv4): patching the ports needs no checksum update.
    p = Ether(src=src_mac, dst=dst_mac) / IP(src=src, dst=dst, ttl=64) / UDP(sport=1024, dport=2000, chksum=0)
    return p / Raw(b"\0" * max(0, size - len(p)))


def template(scenario, size):
    if scenario == "local":
        return bytes(inner(MAC_A, ROUTER_MAC, IP_A, IP_B, size))
    if scenario == "encap":
        return bytes(inner(MAC_A, ROUTER_MAC, IP_A, REMOTE_POD, size))
    if scenario == "service":
        # An established connection's ACK, checksummed: OVS's conntrack checks it (flows_of patches it).
        p = Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=VIP, ttl=64) / \
            TCP(sport=1024, dport=SERVICE_PORTS[0], flags="A", seq=1000, ack=2000, window=8192)
        return bytes(Ether(bytes(p / Raw(b"\0" * max(0, size - len(p))))))
    if scenario == "decap":
        opt = bytes([0x01, 0x02, 0x80, 0x01]) + ((7 << 16) | 1).to_bytes(4, "big")
        return bytes(Ether(src=NEXT_HOP_MAC, dst=UPLINK_MAC) / IP(src=TUN2, dst=TUN1, flags="DF", id=0) /
                     UDP(sport=49152, dport=6081, chksum=0) /
                     GENEVE(vni=1, proto=0x6558, optionlen=2, critical=1) / Raw(opt) /
                     inner(ROUTER_MAC, MAC_A, REMOTE_POD, IP_A, size))
    raise ValueError(scenario)


def newconn_frames(protocol):
    """Every frame a new connection to the VIP: a SYN (valid checksum: OVS's
    conntrack checks it) or a UDP datagram (checksum 0)."""
    if protocol == "tcp":
        p = Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=VIP, ttl=64) / \
            TCP(sport=1024, dport=NEWCONN_PORTS[0], flags="S", seq=1000, window=8192)
        csum_at = 50
    else:
        p = Ether(src=MAC_A, dst=ROUTER_MAC) / IP(src=IP_A, dst=VIP, ttl=64) / \
            UDP(sport=1024, dport=NEWCONN_PORTS[0], chksum=0)
        csum_at = None
    base = bytearray(bytes(Ether(bytes(p / Raw(b"\0" * max(0, 64 - len(p)))))))
    sport0, dport0 = struct.unpack(">HH", base[34:38])
    csum0 = struct.unpack(">H", base[csum_at:csum_at + 2])[0] if csum_at else 0
    for i in range(NEWCONN_COUNT):
        sport, dport = 1024 + i % NEWCONN_PER_PORT, NEWCONN_PORTS[i // NEWCONN_PER_PORT]
        frame = bytearray(base)
        frame[34:38] = struct.pack(">HH", sport, dport)
        if csum_at:  # RFC 1624 incremental update for the new ports
            c = ~csum0 & 0xffff
            for old, new in ((sport0, sport), (dport0, dport)):
                c = ones_add(ones_add(c, ~old & 0xffff), new)
            frame[csum_at:csum_at + 2] = struct.pack(">H", ~c & 0xffff)
        yield bytes(frame)


def write_pcap(path, frames):
    # libpcap format, microsecond timestamps, Ethernet: scapy's writer is too slow for 200,000 packets.
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(frame), len(frame)))
            f.write(frame)


def ones_add(a, b):
    s = a + b
    return (s & 0xffff) + (s >> 16)


def flows_of(scenario, size, count, flows):
    base = bytearray(template(scenario, size))
    if scenario == "service":
        # TCP ports at 34; the checksum (at 50) updated for the new ports (RFC 1624: HC' = ~(~HC + ~m + m')).
        csum0 = struct.unpack(">H", base[50:52])[0]
        sport0, dport0 = struct.unpack(">HH", base[34:38])
        for i in range(count):
            sport, dport = 1024 + (i % flows) % 50000, SERVICE_PORTS[(i % flows) // 50000]
            c = ~csum0 & 0xffff
            for old, new in ((sport0, sport), (dport0, dport)):
                c = ones_add(ones_add(c, ~old & 0xffff), new)
            frame = bytearray(base)
            frame[34:38] = struct.pack(">HH", sport, dport)
            frame[50:52] = struct.pack(">H", ~c & 0xffff)
            yield bytes(frame)
        return
    # The inner UDP header is the last one: its ports sit `size - 34` bytes before the end minus the payload.
    inner_udp = len(base) - size + 34
    for i in range(count):
        sport, dport = ports(i % flows)
        frame = bytearray(base)
        frame[inner_udp:inner_udp + 4] = struct.pack(">HH", sport, dport)
        if scenario == "decap":  # spread the outer source port too, as senders do
            frame[34:36] = struct.pack(">H", 49152 + (i % flows) % 16384)
        yield bytes(frame)


SCENARIOS = ("local", "encap", "decap", "service")
MAX_FLOWS = 1000000  # bench/datapath.sh sizes the flow cache at twice the flows, up to 2^21
MAX_POLICIES = 65536  # policy_rules: each but the last has a peer address of its own in 172.16.0.0/16
MIN_SIZE, MAX_SIZE = 60, 1514  # an Ethernet frame without FCS, up to the pods' MTU of 1500


def parse_spec(spec):
    """("newconn", protocol) or (scenario, flows, size); ValueError saying what to fix."""
    parts = spec.split(":")
    if parts[0] == "newconn":
        if len(parts) != 2 or parts[1] not in ("tcp", "udp"):
            raise ValueError(f'"{spec}": a new-connections spec is newconn:tcp or newconn:udp')
        return ("newconn", parts[1])
    if len(parts) != 3 or parts[0] not in SCENARIOS or not parts[1].isdigit() or not parts[2].isdigit():
        raise ValueError(f'"{spec}" is not scenario:flows:size with scenario one of {", ".join(SCENARIOS)} '
                         "and flows and size numbers (e.g. encap:1000:64), nor newconn:tcp or newconn:udp")
    scenario, flows, size = parts[0], int(parts[1]), int(parts[2])
    if not 1 <= flows <= MAX_FLOWS:
        raise ValueError(f'"{spec}": flows must be between 1 and {MAX_FLOWS}')
    # A client port holds one connection per service port: 50,000 ports, two service ports.
    if scenario == "service" and flows > 50000 * len(SERVICE_PORTS):
        raise ValueError(f'"{spec}": the service scenario has at most {50000 * len(SERVICE_PORTS)} connections')
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f'"{spec}": size is the pod\'s frame without FCS, {MIN_SIZE} to {MAX_SIZE} bytes')
    return (scenario, flows, size)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="where the pcaps and models are written (created if missing)")
    parser.add_argument("--policies", type=int, default=0, metavar="N",
                        help="also write each model's twin with N NetworkPolicies (default 0: none)")
    parser.add_argument("--check", action="store_true", help="check the specs and write nothing")
    parser.add_argument("specs", nargs="*", metavar="SPEC",
                        help="scenario:flows:size or newconn:tcp|udp (default: every local, encap and decap case)")
    opts = parser.parse_intermixed_args()  # bench/datapath.sh: DIR --policies N SPEC...
    if not 0 <= opts.policies <= MAX_POLICIES:
        parser.error(f"--policies must be from 0 to {MAX_POLICIES}, not {opts.policies}")
    specs = opts.specs or [f"{s}:{n}:{b}" for s in ("local", "encap", "decap")
                                   for n in (1, 1000, 100000) for b in (64, 1400)]
    try:
        parsed = [parse_spec(spec) for spec in specs]  # every spec checked before anything is written
    except ValueError as e:
        parser.error(str(e))
    if opts.check:
        return
    out, policies = opts.dir, opts.policies
    os.makedirs(out, exist_ok=True)
    write_model(out, "model", model(), policies)
    write_model(out, "model-service", service_model(), policies)
    for spec in parsed:
        if spec[0] == "newconn":
            protocol = spec[1]
            write_pcap(os.path.join(out, f"newconn-{protocol}.pcap"), newconn_frames(protocol))
            write_model(out, f"model-newconn-{protocol}", service_model(protocol.upper(), NEWCONN_PORTS), policies)
            continue
        scenario, flows, size = spec
        path = os.path.join(out, f"{scenario}-{flows}-{size}.pcap")
        count = max(flows, 32)  # a one-flow pcap still holds a burst's worth of packets
        write_pcap(path, flows_of(scenario, size, count, flows))
    # The slow path: 50,000 distinct flows (pod A → pod B, UDP source ports
    # 1024..51023), looped by the pcap PMD.
    write_pcap(os.path.join(out, "newflows.pcap"), flows_of("local", 64, 50000, 50000))


if __name__ == "__main__":
    main()
