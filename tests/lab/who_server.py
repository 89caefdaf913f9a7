"""A lab backend that says who it is and who asked.

usage: who_server.py NAME TCP-PORTS UDP-PORTS [UDP-ADDRESSES]

HTTP GET on each TCP port (comma-separated) and a UDP echo on each UDP port
answer "NAME PEER-IP:PEER-PORT": the test sees which backend answered and
the source address it saw (SNAT, hairpin, client IP preserved). The UDP
sockets bind each of UDP-ADDRESSES (comma-separated, default 0.0.0.0): a
server outside the cluster must answer from the address it was asked on, not
from its route's address, which no NAT maps back. An IPv6 address among them
(:: for all) makes it a dual-stack server: the TCP ports are served on :: as
well (IPv6 only there, so IPv4 peers keep their plain addresses), and the
IPv6 peer's address is written without brackets (the port follows its last
colon).
"""
import http.server
import socket
import sys
import threading

name, tcp, udp = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
udp_addresses = (sys.argv[4] if len(sys.argv) > 4 else "0.0.0.0").split(",")
dual_stack = any(":" in a for a in udp_addresses)


def who(peer):
    return ("%s %s:%d" % (name, peer[0], peer[1])).encode()


class Who(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = who(self.client_address)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Who6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6

    def server_bind(self):
        # Beside the IPv4 socket on the same port: IPv6 only.
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()


def echo(address, port):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((address, int(port)))
    while True:
        _, peer = s.recvfrom(2048)
        s.sendto(who(peer), peer)


for a in udp_addresses:
    for p in udp:
        threading.Thread(target=echo, args=(a, p), daemon=True).start()
servers = []
for p in tcp:
    servers.append(http.server.ThreadingHTTPServer(("0.0.0.0", int(p)), Who))
    if dual_stack:
        servers.append(Who6(("::", int(p)), Who))
for srv in servers[1:]:
    threading.Thread(target=srv.serve_forever, daemon=True).start()
servers[0].serve_forever()
