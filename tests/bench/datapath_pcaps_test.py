#!/usr/bin/env python3
"""bench/datapath_pcaps.py: what it writes, and what it refuses.

A bad spec (an unknown scenario, no flows, a frame outside 60..1514 bytes, a
service with more connections than its client ports hold, a new-connections
protocol it has no pcap for) is refused before anything is written, with the
spec and what to fix; bench/datapath.sh's DPU_BENCH_CASES goes through the same
check (--check). Good specs give one packet per flow (at least a burst's 32),
each flow its own UDP or TCP ports, frames of the asked size (the decap's with
its 58 bytes of outer headers, to our tunnel IP, Geneve VNI 1), and a service
pcap whose TCP checksums scapy finds right.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from scapy.all import IP, TCP, UDP, Ether
from scapy.contrib.geneve import GENEVE

GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "datapath_pcaps.py")


def run(*args):
    return subprocess.run([sys.executable, GEN, *args], capture_output=True, text=True)


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, _, _, _, _, _, linktype = struct.unpack("<IHHiIII", data[:24])
    assert magic == 0xa1b2c3d4 and linktype == 1, (magic, linktype)
    at, out = 24, []
    while at < len(data):
        _, _, caplen, wirelen = struct.unpack("<IIII", data[at:at + 16])
        assert caplen == wirelen
        out.append(data[at + 16:at + 16 + caplen])
        at += 16 + caplen
    return out


def refusals(tmp):
    out = os.path.join(tmp, "refused")
    cases = [
        (["foo:1:64"], '"foo:1:64" is not scenario:flows:size'),
        (["encap:0:64"], '"encap:0:64": flows must be between 1 and 1000000'),
        (["encap:1000001:64"], "flows must be between 1 and 1000000"),
        (["local:10:59"], '"local:10:59": size is the pod\'s frame without FCS, 60 to 1514 bytes'),
        (["decap:10:1515"], "60 to 1514 bytes"),
        (["encap:x:64"], "flows and size numbers"),
        (["encap:10"], "is not scenario:flows:size"),
        (["service:100001:64"], "the service scenario has at most 100000 connections"),
        (["newconn:icmp"], '"newconn:icmp": a new-connections spec is newconn:tcp or newconn:udp'),
        (["--policies", "-1", "encap:1:64"], "--policies must be from 0 to 65536, not -1"),
        (["--policies", "65537", "encap:1:64"], "--policies must be from 0 to 65536, not 65537"),
        # One bad spec among good ones: nothing is written for the good ones either.
        (["encap:1:64", "decap:1:64", "local:1:9000"], '"local:1:9000": size'),
    ]
    for args, want in cases:
        r = run(*args[:-1], out, args[-1]) if args[0] == "--policies" else run(out, *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert want in r.stderr, (args, r.stderr)
        assert not os.path.exists(out), (args, os.listdir(out))
    # --check: the same refusals, and on good specs success with nothing written.
    r = run("--check", out, "encap:1000:64", "newconn:tcp", "service:100000:1400")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(out)
    r = run("--check", out, "decap:1:20")
    assert r.returncode == 2 and "60 to 1514 bytes" in r.stderr, r.stderr


def written(tmp):
    out = os.path.join(tmp, "pcaps")
    # bench/datapath.sh's order: the directory, then --policies, then the specs.
    r = run(out, "--policies", "3", "encap:40:64", "decap:2:1400", "service:70:64", "local:1:1514")
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(out))
    for want in ("encap-40-64.pcap", "decap-2-1400.pcap", "service-70-64.pcap", "local-1-1514.pcap",
                 "newflows.pcap", "model.json", "model-policies.json", "model-service.json",
                 "model-service-policies.json"):
        assert want in names, (want, names)
    with open(os.path.join(out, "model-policies.json")) as f:
        port_policies = json.load(f)["port_policies"]
    assert port_policies and all(len(p["ingress"]["policies"]) == 3 and len(p["egress"]["policies"]) == 3
                                 for p in port_policies), port_policies

    encap = frames(os.path.join(out, "encap-40-64.pcap"))
    assert len(encap) == 40 and {len(f) for f in encap} == {64}
    assert len({(Ether(f)[UDP].sport, Ether(f)[UDP].dport) for f in encap}) == 40
    assert {Ether(f)[IP].dst for f in encap} == {"10.244.2.7"}

    decap = frames(os.path.join(out, "decap-2-1400.pcap"))
    assert len(decap) == 32 and {len(f) for f in decap} == {1400 + 58}
    flows = set()
    for f in decap:
        p = Ether(f)
        assert p[IP].dst == "192.168.100.1" and p[UDP].dport == 6081 and p[GENEVE].vni == 1, p.summary()
        assert p[GENEVE].optionlen == 2 and p[GENEVE].proto == 0x6558, p.summary()
        inner = Ether(f[58:])  # after the Geneve header and its 8-byte option
        assert inner[IP].dst == "10.244.1.5", inner.summary()
        flows.add((inner[UDP].sport, inner[UDP].dport))
    assert len(flows) == 2, flows

    service = frames(os.path.join(out, "service-70-64.pcap"))
    assert len(service) == 70
    for f in service:
        p = Ether(f)
        sent = p[TCP].chksum
        del p[TCP].chksum
        assert Ether(bytes(p))[TCP].chksum == sent, p.summary()
    assert len({Ether(f)[TCP].sport for f in service}) == 70

    assert len(frames(os.path.join(out, "local-1-1514.pcap"))) == 32
    assert len(frames(os.path.join(out, "newflows.pcap"))) == 50000


def main():
    with tempfile.TemporaryDirectory() as tmp:
        refusals(tmp)
        written(tmp)
    print("datapath_pcaps: refusals and pcaps as expected")


if __name__ == "__main__":
    main()
