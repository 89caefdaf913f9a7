#!/usr/bin/env python3
"""A scripted programming session for dpu-dataplane (the agent's side of
proto/dpu/dataplane/v1/dataplane.proto over the framed unix socket), and an
operator request for tests that do not go through dpuctl.

  dataplane_client.py --socket S --model model.json [--generation N] [--hold]
      Hello, then FullSync of the LogicalModel in model.json (protobuf JSON
      mapping). --hold keeps the connection open until killed, as an agent does.
  dataplane_client.py --socket S --delta delta.json
      Hello, then one Delta (base_generation/generation inside the JSON).
Prints each reply as one JSON line; exits 1 if a reply is not OK.
The Python protobuf module is generated into $DPU_PROTO_PY (or a temp dir) with protoc.
"""
import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def load_proto():
    out = os.environ.get("DPU_PROTO_PY") or tempfile.mkdtemp(prefix="dpu-proto-py-")
    module = os.path.join(out, "dpu", "dataplane", "v1", "dataplane_pb2.py")
    if not os.path.exists(module):
        # The clients of one test start together and share `out`: generate
        # aside and rename into place, so no one imports a half-written module.
        os.makedirs(os.path.dirname(module), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".gen-", dir=out)
        subprocess.run(["protoc", "--python_out=" + tmp, "-I", os.path.join(SOURCE, "proto"),
                        os.path.join(SOURCE, "proto", "dpu", "dataplane", "v1", "dataplane.proto")], check=True)
        os.replace(os.path.join(tmp, "dpu", "dataplane", "v1", "dataplane_pb2.py"), module)
        shutil.rmtree(tmp, ignore_errors=True)
    sys.path.insert(0, out)
    from dpu.dataplane.v1 import dataplane_pb2  # noqa: E402
    return dataplane_pb2


def send(sock, message):
    body = message.SerializeToString()
    sock.sendall(struct.pack(">I", len(body)) + body)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the dataplane closed the connection")
        data += chunk
    return data


def recv(sock, message):
    (length,) = struct.unpack(">I", recv_exact(sock, 4))
    message.ParseFromString(recv_exact(sock, length))
    return message


def connect(path, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.settimeout(15)
            return s
        except OSError:
            s.close()
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--model")
    ap.add_argument("--delta")
    ap.add_argument("--generation", type=int, default=1)
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--agent-id", default="scripted-client")
    args = ap.parse_args()
    pb = load_proto()
    from google.protobuf import json_format

    sock = connect(args.socket)
    ok = True

    def exchange(request):
        nonlocal ok
        send(sock, request)
        reply = recv(sock, pb.ProgramReply())
        print(json_format.MessageToJson(reply, indent=None, preserving_proto_field_name=True), flush=True)
        if reply.status != pb.OK:
            ok = False
        return reply

    hello = pb.ProgramRequest()
    hello.hello.agent_id = args.agent_id
    exchange(hello)
    if args.model:
        with open(args.model) as f:
            model = json_format.Parse(f.read(), pb.LogicalModel())
        request = pb.ProgramRequest()
        request.full_sync.generation = args.generation
        request.full_sync.model.CopyFrom(model)
        exchange(request)
    if args.delta:
        with open(args.delta) as f:
            delta = json_format.Parse(f.read(), pb.Delta())
        request = pb.ProgramRequest()
        request.delta.CopyFrom(delta)
        exchange(request)
    if args.hold:
        print("holding", flush=True)
        while True:
            time.sleep(3600)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
