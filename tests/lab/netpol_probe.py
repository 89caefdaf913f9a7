"""Probe many destinations at once from one pod, as the upstream netpol
harness's prober does: one process per source pod, every destination
concurrently, one short deadline.

usage: netpol_probe.py TARGETS-FILE DEADLINE-SECONDS

TARGETS-FILE holds one "KEY IP PORT PROTO" a line (PROTO tcp, udp, sctp or
icmp; PORT is ignored for icmp).
TCP: connect and read who_server.py's HTTP answer (the kernel resends a SYN
the dataplane dropped over its slow-path budget after 1 s, within the
deadline); UDP: a datagram every 0.4 s until its echo comes; SCTP: an INIT
every 0.4 s until the INIT ACK of sctp_raw.py's answerer comes; ICMP: an
echo request every 0.4 s until the destination's kernel answers. The probes
start 5 ms apart, so a source does not hit the slow path with all its new
connections in one burst. Prints "KEY 1" or "KEY 0" a line.
"""
import os
import socket
import struct
import sys
import threading
import time

import sctp_raw

targets_file, deadline = sys.argv[1], float(sys.argv[2])
targets = [line.split() for line in open(targets_file) if line.strip()]
results = {}


def icmp_checksum(data):
    data += b"\0" * (len(data) % 2)
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF


def ping(ip, deadline):
    """True when ip answers an echo request (its kernel does) in time."""
    end = time.monotonic() + deadline
    ident = struct.unpack("!H", os.urandom(2))[0]
    seq = 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        while time.monotonic() < end:
            seq += 1
            head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            payload = b"netpol-probe"
            s.sendto(struct.pack("!BBHHH", 8, 0, icmp_checksum(head + payload), ident, seq) + payload, (ip, 0))
            until = min(end, time.monotonic() + 0.4)
            while time.monotonic() < until:
                s.settimeout(max(0.01, until - time.monotonic()))
                try:
                    got, peer = s.recvfrom(2048)
                except socket.timeout:
                    break
                ihl = (got[0] & 0x0F) * 4
                if peer[0] == ip and len(got) >= ihl + 8:
                    kind, _, _, gid, _ = struct.unpack("!BBHHH", got[ihl:ihl + 8])
                    if kind == 0 and gid == ident:
                        return True
    return False


def probe(key, ip, port, proto):
    port = int(port)
    end = time.monotonic() + deadline
    ok = False
    try:
        if proto == "tcp":
            with socket.create_connection((ip, port), timeout=deadline) as s:
                s.settimeout(max(0.1, end - time.monotonic()))
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                ok = len(s.recv(256)) > 0
        elif proto == "sctp":
            ok = sctp_raw.probe(ip, port, deadline)
        elif proto == "icmp":
            ok = ping(ip, deadline)
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                while not ok and time.monotonic() < end:
                    s.sendto(b"probe", (ip, port))
                    s.settimeout(min(0.4, max(0.05, end - time.monotonic())))
                    try:
                        ok = len(s.recvfrom(256)[0]) > 0
                    except socket.timeout:
                        pass
    except OSError:
        ok = False
    results[key] = ok


threads = []
for t in targets:
    threads.append(threading.Thread(target=probe, args=t))
    threads[-1].start()
    time.sleep(0.005)
for t in threads:
    t.join()
for key, _, _, _ in targets:
    print(key, 1 if results.get(key) else 0)
