# The setting of tests/verbs/migrate.sh and bench/migration.sh: three namespaces on one bridge,
# host a and host b each with a device process, and a peer with an in-process device. The guest
# function is a's VF 1 on an address of its own, $G, which moves with it.
# Set daemon_args (pushwire-rnicd's extra options), daemon_faults (--faults without a seed: each
# device process gets its own) and peer_env (the peer's environment), then
# source this with $build set; it sets up everything and cleans up on exit.
#   fail TEXT             prints the device processes' logs and exits 1
#   ctl SIDE ARGS...      pushwire-rnicd ctl on a or b
#   peer LOG PROG ARGS    the peer's server on the next TCP port ($server)
#   guest LOG PROG ARGS   the guest's client on VF 1 where it is ($client)
#   move                  the function to the other host; the answer is appended to $work/moves.txt
#   attached_on SIDE      how many programs are attached to VF 1 there
: "${build:?}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../../examples/split-model/netns.sh"
verbs=$build/verbs/pushwire-verbs rnicd=$build/verbs/pushwire-rnicd
s=pg$$; work=$(mktemp -d); chmod 755 "$work"
trap 'pw_cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
A=198.18.42.1 B=198.18.42.2 P=198.18.42.3 G=198.18.42.11
pw_bridge $s "a=$A/24 $G/24" "b=$B/24" "p=$P/24"  # $G: the guest function's address, moving with it

fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -15 "$f"; done; exit 1; }
start_daemon() {  # SIDE
  local side=$1 addr=$A
  [ $side = b ] && addr=$B
  rm -f "$work/$side.sock"
  ip netns exec $s-$side "$rnicd" --port pw0:$addr --functions 2 --control "$work/$side.sock" "${daemon_args[@]}" \
    ${daemon_faults:+--faults "$daemon_faults,seed=$(( $$ + ${#side} + $(printf %d "'$side") ))"} 2>>"$work/rnicd-$side.log" &
  local pid=$!; pw_pids+=($pid); eval "daemon_$side=$pid"
  for _ in $(seq 100); do [ -S "$work/$side.sock" ] && return 0; sleep 0.05; done
  fail "pushwire-rnicd did not start in $side"
}
ctl() { local side=$1; shift; "$rnicd" ctl "$work/$side.sock" "$@"; }
start_daemon a; start_daemon b
ctl a vf set 1 gid $G >/dev/null || fail "vf set 1 gid $G on a"
ctl b vf del 1 >/dev/null  # b has no VF 1: it arrives
port=19600
peer() {  # LOG PROGRAM ARGS...: the peer's server
  local log=$1; shift
  port=$((port + 1))
  ip netns exec $s-p env PUSHWIRE_VERBS=pw0:$P "${peer_env[@]}" timeout 200 "$verbs" run -- "$@" -p $port >"$log" 2>&1 &
  server=$!; pw_pids+=($server)
  for _ in $(seq 200); do ip netns exec $s-p ss -ltn "sport = :$port" | grep -q LISTEN && return 0; sleep 0.05; done
  fail "the peer does not listen"
}
guest() {  # LOG PROGRAM ARGS...: the guest's client, on VF 1 where it is (backgrounded: $client)
  local log=$1; shift
  ip netns exec $s-a env "PUSHWIRE_VERBS=pw0@$work/$where.sock#vf1" timeout 200 "$verbs" run -- "$@" -p $port $P >"$log" 2>&1 &
  client=$!; pw_pids+=($client)
}
where=a
move() {  # the function to the other host
  local to=b
  [ $where = b ] && to=a
  ctl $where migrate 1 --to "$work/$to.sock" >>"$work/moves.txt" || fail "migrate $where -> $to"
  where=$to
}
attached_on() {  # SIDE: how many programs are attached to VF 1 there
  ctl "$1" show --json | /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(sum(1 for a in j['attachments'] if a['function'] == 1))"
}

