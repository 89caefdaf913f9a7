# lab/lib/core.bash — the lab's bookkeeping: its name, where its state lives,
# the list of everything it created (so `down` can undo a failed or
# interrupted `up`), naming of namespaces, waiting, and processes started
# detached with a pid file. Sourced by lab/lib/lab.bash; not run.
#
# A lab is identified by a NAME ([a-z0-9]{1,12}, no dash, so one lab's names
# never prefix another's). Everything it makes carries the name:
#   state dir   $DL_RUN_DIR/NAME/    (DL_RUN_DIR defaults to /run/dpu-lab)
#   namespaces  NAME-fabric, NAME-nN-host, NAME-nN-dpu, NAME-nN-pod-POD
#   DPDK        file prefix NAME-dpN (/var/run/dpdk/NAME-dpN)
#   processes   every daemon's command line names a file under the state dir
#
# Functions (public):
#   dl_init NAME            select the lab (sets DL_NAME, DL_DIR); does not create anything
#   dl_exists               true when the selected lab has a state dir
#   dl_record KIND VALUE    append "KIND VALUE" to $DL_DIR/created (netns, proc, dpdk)
#   dl_wait SECONDS CMD...  poll CMD (quietly) every 50 ms until it succeeds; false on timeout
#   dl_log MSG...           a progress line on stderr (silenced by DL_QUIET=1)
#   dl_die MSG...           print "dpu-lab: MSG" and return 1 (callers: `|| return 1`)
#   dl_spawn PIDFILE NETNS LOG CMD...   start CMD in NETNS detached (own session), its pid in PIDFILE
#   dl_proc_alive PIDFILE   true when the pid in PIDFILE runs and is ours (its cmdline names $DL_DIR)
#   dl_proc_stop PIDFILE [-9]           SIGTERM (or SIGKILL), wait up to 5 s, then SIGKILL
#   dl_lab_pids             pids of every process whose command line names $DL_DIR (leftovers)
#   dl_node_ns N host|dpu   the namespace name;  dl_fabric_ns;  dl_pod_ns N POD

DL_RUN_DIR=${DL_RUN_DIR:-/run/dpu-lab}
DL_QUIET=${DL_QUIET:-0}

dl_log() { [ "$DL_QUIET" = 1 ] || echo "[dpu-lab $DL_NAME] $*" >&2; }
dl_die() { echo "dpu-lab: $*" >&2; return 1; }

dl_init() {
  local name=$1
  if ! [[ "$name" =~ ^[a-z0-9]{1,12}$ ]]; then
    dl_die "lab name '$name' must be 1-12 characters of a-z and 0-9 (it prefixes namespace names)"; return 1
  fi
  DL_NAME=$name
  DL_DIR=$DL_RUN_DIR/$name
}

dl_exists() { [ -d "$DL_DIR" ]; }

dl_record() { echo "$1 $2" >> "$DL_DIR/created"; }

dl_wait() {
  local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ $(( $(date +%s%N) / 1000000 )) -ge $deadline ] && return 1
    sleep 0.05
  done
}

dl_fabric_ns() { echo "$DL_NAME-fabric"; }
dl_node_ns() { echo "$DL_NAME-n$1-$2"; }
dl_pod_ns() { echo "$DL_NAME-n$1-pod-$2"; }

# A detached daemon: its own session (an interrupted CLI does not take it
# down) and not our child (a test's bare `wait` does not wait for it), stdin
# closed, output appended to LOG. The pid is the daemon's own (bash execs
# ip-netns-exec, which execs CMD).
dl_spawn() {
  local pidfile=$1 ns=$2 log=$3; shift 3
  rm -f "$pidfile"
  dl_record proc "$pidfile"
  setsid -f bash -c 'echo $$ > "$0"; exec ip netns exec "$@"' "$pidfile" "$ns" "$@" >>"$log" 2>&1 </dev/null
  dl_wait 5 test -s "$pidfile" || { dl_die "could not start $1 (no pid file $pidfile)"; return 1; }
}

# Bash builtins only, here and in _dl_pid_gone: these are polled every 10 ms
# while a daemon restarts, and a fork per poll costs a millisecond or more on
# a loaded machine.
_dl_pid_ours() {  # PID: alive, not a zombie, and its command line names the lab dir
  local pid=$1 stat args
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  { read -r stat < "/proc/$pid/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }  # the state follows the command name, which may hold spaces
  [ "${stat%% *}" != Z ] || return 1
  { mapfile -d '' -t args < "/proc/$pid/cmdline"; } 2>/dev/null
  # An empty command line: the process is inside execve (bash -> ip netns
  # exec -> the daemon), which a loaded machine makes long enough to see.
  [ ${#args[@]} -eq 0 ] && kill -0 "$pid" 2>/dev/null && return 0
  [[ "${args[*]}" == *"$DL_DIR/"* ]]
}

dl_proc_alive() {
  [ -s "$1" ] || return 1
  _dl_pid_ours "$(cat "$1")"
}

# PID: no thread of it is left. A process's leader turns zombie before its
# other threads have exited, and they still hold its files: a DPDK process
# that is a zombie may still lock its runtime directory, so one started with
# the same file prefix at that moment fails in EAL.
_dl_pid_gone() {
  [ -d "/proc/$1" ] || return 0
  local stat tasks
  { read -r stat < "/proc/$1/stat"; } 2>/dev/null || return 0
  stat=${stat##*) }
  if [ "${stat%% *}" = Z ]; then
    tasks=("/proc/$1/task/"*)
    [ ${#tasks[@]} -le 1 ]
    return
  fi
  ! _dl_pid_ours "$1"  # running: gone only if the PID is another process's by now
}

_dl_pid_stop() {  # PID [-9]
  local pid=$1 sig=TERM i
  [ "${2:-}" = -9 ] && sig=KILL
  _dl_pid_ours "$pid" || return 0
  kill -CONT "$pid" 2>/dev/null
  kill -"$sig" "$pid" 2>/dev/null
  # Polled every 10 ms (5 s at most each): a supervisor restarting the daemon
  # waits for exactly this, and each poll's lateness adds to the outage.
  for (( i = 0; i < 500; i++ )); do
    _dl_pid_gone "$pid" && break
    sleep 0.01
  done
  _dl_pid_ours "$pid" && kill -KILL "$pid" 2>/dev/null
  for (( i = 0; i < 500; i++ )); do
    _dl_pid_gone "$pid" && break
    sleep 0.01
  done
  # Our own child (a test that sourced the library): reap it.
  wait "$pid" 2>/dev/null
  return 0
}

dl_proc_stop() {
  [ -s "$1" ] || return 0
  _dl_pid_stop "$(cat "$1")" "${2:-}"
  rm -f "$1"
}

dl_lab_pids() {
  # One grep over every command line (a zombie's is empty); NULs separate the arguments.
  local f p
  for f in $(grep -laF "$DL_DIR/" /proc/[0-9]*/cmdline 2>/dev/null); do
    p=${f#/proc/}; p=${p%/cmdline}
    [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] || ! _dl_pid_ours "$p" || echo "$p"
  done
  return 0
}
