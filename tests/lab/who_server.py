"""A lab backend that says who it is and who asked.

usage: who_server.py NAME TCP-PORTS UDP-PORTS [UDP-ADDRESS]

HTTP GET on each TCP port (comma-separated) and a UDP echo on each UDP port
answer "NAME PEER-IP:PEER-PORT": the test sees which backend answered and
the source address it saw (SNAT, hairpin, client IP preserved). The UDP
sockets bind UDP-ADDRESS (default all): a server outside the cluster must
answer from the address it was asked on, not from its route's address,
which no NAT maps back.
"""
import http.server
import socket
import sys
import threading

name, tcp, udp = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
udp_address = sys.argv[4] if len(sys.argv) > 4 else "0.0.0.0"


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


def echo(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((udp_address, int(port)))
    while True:
        _, peer = s.recvfrom(2048)
        s.sendto(who(peer), peer)


for p in udp:
    threading.Thread(target=echo, args=(p,), daemon=True).start()
for p in tcp[1:]:
    srv = http.server.ThreadingHTTPServer(("0.0.0.0", int(p)), Who)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", int(tcp[0])), Who).serve_forever()
