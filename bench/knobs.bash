# The benchmarks' numeric knobs (DPU_BENCH_RUNS and the like), checked before
# anything is built or started: a value that is not a whole number in range
# stops the script with exit code 2 and says which variable to fix.
#   runs=$(bench_number DPU_BENCH_RUNS 3 1 100)
# Sourced by the scripts in bench/; "set -e" turns the failed substitution
# into the script's exit.

# bench_number NAME DEFAULT MIN MAX: the value of $NAME (DEFAULT if unset or
# empty) on stdout, or a message on stderr and status 2.
bench_number() {
  local name=$1 default=$2 min=$3 max=$4 value
  value=${!name:-$default}
  # Leading zeros would make bash read the number as octal.
  if [[ ! $value =~ ^(0|[1-9][0-9]{0,9})$ ]] || (( value < min || value > max )); then
    echo "${0##*/}: $name must be a whole number from $min to $max, not \"$value\"" >&2
    return 2
  fi
  echo "$value"
}
