#!/usr/bin/env bash
# fake_dpu_api under as many requests at once as a node's pods can send: more
# than its HTTP pool has threads (cpprest's 40). Every one is answered, and the
# fake exits on SIGTERM. Like dpu-agent's API server, it never blocks a thread
# of that pool on I/O: a handler that waited there for its request's body or
# for its own answer to be sent starved the pool that does both, and all hung
# until their clients gave up (hostshim_system_concurrent's 50 DELs, once in
# many runs), and then the fake never exited.
#   fake_dpu_api_concurrency_test.sh FAKE_DPU_API
set -u
source "$(dirname "$0")/../support/shell.bash"
fake=$1
py=/usr/bin/python3
fail() { echo "FAIL: $*" >&2; exit 1; }
port=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp /tmp/fake-dpu-api-concurrency.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -f "$log"' EXIT
"$fake" --listen "http://127.0.0.1:$port" --pod-cidr 10.244.1.0/24 --vfs 8 2> "$log" &
pid=$!
wait_for 10 curl -sf "http://127.0.0.1:$port/v1/health" || { cat "$log" >&2; fail "the fake did not answer"; }

# N connections open first, then every request sent at once (a barrier), each
# answer awaited for at most 10 s. Detaches of unknown sandboxes: 200 each.
for n in 120 300; do
  $py - "$port" "$n" <<'PY' || fail "not every request of $n was answered"
import socket, sys, threading, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
barrier = threading.Barrier(n)
answered = []
lock = threading.Lock()
def one(i, s):
    body = b'{"sandboxId": "s%d", "ifname": "eth0"}' % i
    req = (b"POST /v1/attachments:detach HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    barrier.wait()
    s.sendall(req)
    s.settimeout(10)
    try:
        if s.recv(4096).startswith(b"HTTP/1.1 200"):
            with lock:
                answered.append(i)
    except OSError:
        pass
start = time.time()
threads = [threading.Thread(target=one, args=(i, s)) for i, s in enumerate(socks)]
for t in threads: t.start()
for t in threads: t.join()
print("%d requests at once: %d answered 200 in %.1f s" % (n, len(answered), time.time() - start))
sys.exit(0 if len(answered) == n else 1)
PY
done

kill -TERM "$pid"
wait_for 10 bash -c "! kill -0 $pid" || fail "the fake did not exit 10 s after SIGTERM"
wait "$pid"; rc=$?
pid=
[ "$rc" = 0 ] || { cat "$log" >&2; fail "the fake exited with $rc"; }
echo PASS
