# host-shim's CNI socket: it has its mode (socketMode); a peer that is not
# root nor in socketAllowedUids is answered code 104 (SO_PEERCRED), even when
# the mode lets it connect; an allowed uid is served, with mode 0660 once the
# socket has its group (socketGroup); past maxConnections
# requests in flight the next is answered 11 at once, and served again once
# one ends.
source "$(dirname "$0")/lib.bash"

nobody=65534
as_nobody() { setpriv --reuid=$nobody --regid=$nobody --clear-groups "$@"; }
reconfigure() {  # reconfigure JQ-EXPR: edit the config and restart host-shim
  jq "$1" "$HOSTSHIM_CONFIG" > "$TEST_DIR/edited.json" && cp "$TEST_DIR/edited.json" "$HOSTSHIM_CONFIG" ||
    fail "cannot edit the config"
  hostshim_restart || fail "restart"
}

step "the socket has its mode (default 0660)"
[ "$(stat -c %a "$HOSTSHIM_SOCKET")" = 660 ] || fail "mode $(stat -c %a "$HOSTSHIM_SOCKET")"
expect_ok status

step "a uid that may connect but is not allowed is refused with 104"
chmod 755 "$TEST_DIR"  # let uid $nobody reach the socket's directory
reconfigure '.socketMode = "0666"'
[ "$(stat -c %a "$HOSTSHIM_SOCKET")" = 666 ] || fail "mode $(stat -c %a "$HOSTSHIM_SOCKET")"
OUT=$(as_nobody "$HOSTSHIM_CLIENT" --socket "$HOSTSHIM_SOCKET" status 2>"$TEST_DIR/nobody.err"); RC=$?
[ $RC = 1 ] || fail "uid $nobody got rc $RC: $OUT $(cat "$TEST_DIR/nobody.err")"
[ "$(jq -r .error.code <<<"$OUT")" = 104 ] || fail "uid $nobody was not refused: $OUT"
jq -r .error.details <<<"$OUT" | matches "uid $nobody" || fail "the refusal does not name the uid: $OUT"
grep -q "refused a CNI request from uid $nobody" "$HOSTSHIM_LOG" || fail "the refusal is not logged"
expect_ok status  # root still is

step "a uid in socketAllowedUids is served"
reconfigure ".socketAllowedUids = [$nobody]"
OUT=$(as_nobody "$HOSTSHIM_CLIENT" --socket "$HOSTSHIM_SOCKET" status 2>"$TEST_DIR/nobody.err"); RC=$?
[ $RC = 0 ] || fail "uid $nobody was not served: rc $RC $OUT $(cat "$TEST_DIR/nobody.err")"

step "socketGroup lets an allowed uid in with mode 0660 (the socket open to no one else)"
# By name, as an operator writes it: the name of gid $nobody, as_nobody's group.
group=$(getent group $nobody | cut -d: -f1)
[ -n "$group" ] || fail "no group with gid $nobody on this host"
reconfigure ".socketMode = \"0660\" | .socketGroup = \"$group\""
[ "$(stat -c '%a %g' "$HOSTSHIM_SOCKET")" = "660 $nobody" ] || fail "socket is $(stat -c '%a %g' "$HOSTSHIM_SOCKET")"
OUT=$(as_nobody "$HOSTSHIM_CLIENT" --socket "$HOSTSHIM_SOCKET" status 2>"$TEST_DIR/nobody.err"); RC=$?
[ $RC = 0 ] || fail "uid $nobody in group $nobody was not served: rc $RC $OUT $(cat "$TEST_DIR/nobody.err")"
# Without the group the file's mode already keeps it out: connect() fails.
reconfigure 'del(.socketGroup)'
[ "$(stat -c '%a %g' "$HOSTSHIM_SOCKET")" = "660 0" ] || fail "socket is $(stat -c '%a %g' "$HOSTSHIM_SOCKET")"
as_nobody "$HOSTSHIM_CLIENT" --socket "$HOSTSHIM_SOCKET" status >/dev/null 2>&1 && fail "uid $nobody got past mode 0660"

step "past maxConnections the next request is answered 11 at once"
reconfigure '.maxConnections = 2 | del(.socketAllowedUids)'
holders=()
for i in 1 2; do
  mkfifo "$TEST_DIR/hold$i"
  # Connects and sends nothing until its fifo is written: a request in flight.
  /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("connected", flush=True)
open(sys.argv[2]).read()
' "$HOSTSHIM_SOCKET" "$TEST_DIR/hold$i" > "$TEST_DIR/hold$i.out" &
  holders+=($!)
  _hostshim_wait 5 grep -q connected "$TEST_DIR/hold$i.out" || fail "holder $i did not connect"
done
expect_code 11 status
jq -r .error.details <<<"$OUT" | matches "maxConnections" || fail "busy not explained: $OUT"
for i in 1 2; do echo > "$TEST_DIR/hold$i"; done
wait "${holders[@]}"
_hostshim_wait 5 hostshim_client status || fail "not served again once the holders went: $(hostshim_client status)"
pod=$(hostshim_pod_netns_add p1)
expect_ok add --container c1 --netns "$pod" --ifname eth0
expect_ok del --container c1 --netns "$pod" --ifname eth0
hostshim_assert_clean || fail "left state"
echo PASS
