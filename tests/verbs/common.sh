# Shared by the verbs tests (spec/verbs.md §6): run a verbs program through the provider, and
# run a server and its client as two processes over loopback.
# pw_run CMD...            CMD with libpushwire-verbs.so preloaded (pushwire-verbs run)
# pw_pair SECS SERVER -- CLIENT    both under the provider, the client once the server listens
#                          on the TCP port $pw_port; fails unless both exit 0 within SECS
set -euo pipefail
: "${build:?}"
pw_verbs="$build/verbs/pushwire-verbs"
# PUSHWIRE_VERBS_PRELOAD (the sanitizer build's tests): the LD_PRELOAD list to run with instead
# (the sanitizer runtimes first, then the provider).
if [ -n "${PUSHWIRE_VERBS_PRELOAD:-}" ]; then
  pw_prefix=(env "LD_PRELOAD=$PUSHWIRE_VERBS_PRELOAD")
else
  pw_prefix=("$pw_verbs" run --)
fi
pw_run() { "${pw_prefix[@]}" "$@"; }
pw_work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$pw_work"' EXIT
pw_wait_listen() {  # PORT: until something listens on TCP PORT (5 s)
  for _ in $(seq 100); do
    ss -ltn "sport = :$1" 2>/dev/null | grep -q LISTEN && return 0
    sleep 0.05
  done
  echo "FAIL: nothing listens on TCP port $1"; return 1
}
pw_pair() {
  local secs=$1; shift
  local server=() client=()
  while [ "$1" != -- ]; do server+=("$1"); shift; done; shift
  client=("$@")
  command -v "${server[0]}" >/dev/null || { echo "SKIPPED: ${server[0]} is not installed (Debian: ibverbs-utils, perftest)"; exit 77; }
  timeout "$secs" "${pw_prefix[@]}" "${server[@]}" >"$pw_work/server.log" 2>&1 &
  local spid=$!
  pw_wait_listen "$pw_port" || { cat "$pw_work/server.log"; return 1; }
  local crc=0 src=0
  timeout "$secs" "${pw_prefix[@]}" "${client[@]}" >"$pw_work/client.log" 2>&1 || crc=$?
  wait $spid || src=$?
  echo "--- server: ${server[*]}"; cat "$pw_work/server.log"
  echo "--- client: ${client[*]}"; cat "$pw_work/client.log"
  if grep -qE 'ERROR: AddressSanitizer|runtime error:' "$pw_work/server.log" "$pw_work/client.log"; then
    echo "FAIL: a sanitizer report"; return 1
  fi
  if [ $crc != 0 ] || [ $src != 0 ]; then
    echo "FAIL: server exit $src, client exit $crc (124: timed out after ${secs}s)"; return 1
  fi
}
