# tests/support/shell.bash — small shell helpers shared by the system tests.

# matches GREP-ARGS... — `grep -q` that reads its whole input. Under
# `set -o pipefail`, `cmd | matches X` fails at random: grep exits at the first
# match and cmd dies of SIGPIPE on its next write (ip(8) flushes per line).
matches() { grep "$@" >/dev/null; }
