"""Probe many destinations at once from one pod, as the upstream netpol
harness's prober does: one process per source pod, every destination
concurrently, one short deadline.

usage: netpol_probe.py TARGETS-FILE DEADLINE-SECONDS

TARGETS-FILE holds one "KEY IP PORT PROTO" a line (PROTO tcp or udp). TCP:
connect and read who_server.py's HTTP answer (the kernel resends a SYN the
dataplane dropped over its slow-path budget after 1 s, within the
deadline); UDP: a datagram every 0.4 s until its echo comes. The probes
start 5 ms apart, so a source does not hit the slow path with all its new
connections in one burst. Prints "KEY 1" or "KEY 0" a line.
"""
import socket
import sys
import threading
import time

targets_file, deadline = sys.argv[1], float(sys.argv[2])
targets = [line.split() for line in open(targets_file) if line.strip()]
results = {}


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
