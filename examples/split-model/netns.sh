# Namespaces for the split-model driver (spec/split-model.md), sourced by the example scripts
# here and by tests/netns/. Addresses from 198.18.0.0/15 only, inside namespaces made here:
#   split model: PREFIX-host (fabric 198.18.0.1, pw0 198.18.1.1) == veth == PREFIX-iou (fabric
#                198.18.0.2, owns lan0) ; lan0 moved into PREFIX-lan (198.18.1.2/24)
#   LAN emulation: PREFIX-m1..mN (fabric 198.18.0.i on a bridge in PREFIX-fab, pw0 198.18.2.i/24)
# The caller removes them with pw_cleanup (from an EXIT trap).

pw_kernel_at_least() {  # MAJOR MINOR: the running kernel is that release or a later one
  local ma mi
  read -r ma mi < <(uname -r | awk -F. '{print $1 + 0, $2 + 0}')
  [ "$ma" -gt "$1" ] || { [ "$ma" = "$1" ] && [ "$mi" -ge "$2" ]; }
}
# The interface MTU for AF_XDP on veth: 9000 where the kernel has multi-buffer AF_XDP (6.6; path
# MTU 4096, spec/net.md §6), else 3000 (veth's native XDP takes up to about 3500 with one buffer
# a frame; path MTU 2048).
pw_xdp_mtu() {
  if pw_kernel_at_least 6 6; then echo 9000; else echo 3000; fi
}
# Exits 0 with "SKIPPED: ..." unless root with network namespaces and the commands named.
pw_require() {
  if [ "$(id -u)" != 0 ] || ! ip netns add pwcheck$$ 2>/dev/null; then
    echo "SKIPPED: needs root and network namespaces"; exit 0
  fi
  ip netns del pwcheck$$
  local c
  for c in "$@"; do command -v "$c" >/dev/null || { echo "SKIPPED: $c missing"; exit 0; }; done
}

pw_namespaces=()
pw_pids=()
# Kills what was started (TERM, then KILL) and deletes the namespaces.
pw_cleanup() {
  set +e
  local p n
  for p in "${pw_pids[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.3
  for p in "${pw_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  # whatever still runs inside them (a test's background programs), then the namespaces
  for n in "${pw_namespaces[@]}"; do ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
  for n in "${pw_namespaces[@]}"; do ip netns del "$n" 2>/dev/null; done
}
pw_netns() { ip netns add "$1"; ip -n "$1" link set lo up; pw_namespaces+=("$1"); }
# Two namespaces PREFIX-a and PREFIX-b joined by a veth (each end named as its namespace), MTU
# 9000, with the addresses given (ADDRESS/LEN; several separated by spaces) on each end.
pw_veth_pair() {  # PREFIX "A_ADDRESSES" "B_ADDRESSES"
  local s=$1 a
  pw_netns $s-a; pw_netns $s-b
  ip link add $s-a type veth peer name $s-b
  ip link set $s-a netns $s-a; ip link set $s-b netns $s-b
  for a in $2; do ip -n $s-a addr add $a dev $s-a; done
  for a in $3; do ip -n $s-b addr add $a dev $s-b; done
  ip -n $s-a link set $s-a mtu 9000 up; ip -n $s-b link set $s-b mtu 9000 up
}
# Namespaces PREFIX-br (a bridge br0) and PREFIX-H for each HOST, each with a veth (named
# PREFIX-H, MTU 9000) to the bridge, and the addresses given (ADDRESS/LEN, separated by spaces).
pw_bridge() {  # PREFIX "HOST=ADDRESSES" ...
  local s=$1 h a spec
  shift
  pw_netns $s-br
  ip -n $s-br link add br0 type bridge
  ip -n $s-br link set br0 up
  for spec in "$@"; do
    h=${spec%%=*}
    pw_netns $s-$h
    ip link add $s-$h type veth peer name $h-port
    ip link set $s-$h netns $s-$h
    ip link set $h-port netns $s-br
    ip -n $s-br link set $h-port master br0 mtu 9000 up
    for a in ${spec#*=}; do ip -n $s-$h addr add $a dev $s-$h; done
    ip -n $s-$h link set $s-$h mtu 9000 up
  done
}
pw_wait_link() {  # namespace interface
  local _
  for _ in $(seq 100); do ip -n "$1" link show "$2" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "FAIL: $2 did not appear in $1"; return 1
}

# The split model's three namespaces and the fabric veth (MTU 9000).
pw_split_topology() {  # PREFIX
  local s=$1
  pw_netns $s-host; pw_netns $s-iou; pw_netns $s-lan
  ip link add $s-h type veth peer name $s-i
  ip link set $s-h netns $s-host; ip link set $s-i netns $s-iou
  ip -n $s-host addr add 198.18.0.1/30 dev $s-h; ip -n $s-host link set $s-h mtu 9000 up
  ip -n $s-iou addr add 198.18.0.2/30 dev $s-i; ip -n $s-iou link set $s-i mtu 9000 up
}
# Starts pushwire-iou (output to LOG, extra arguments after it); its lan0 goes into PREFIX-lan as
# 198.18.1.2/24. Sets pw_iou.
pw_start_iou() {  # BUILD PREFIX LOG [ARGS...]
  local b=$1 s=$2 log=$3
  shift 3
  ip netns exec $s-iou "$b/tools/pushwire-iou" --local 198.18.0.2 --peer 198.18.0.1 --tap lan0 --fabric-mtu 9000 -v "$@" >>"$log" 2>&1 &
  pw_iou=$!; pw_pids+=($pw_iou)
  pw_wait_link $s-iou lan0
  ip -n $s-iou link set lan0 netns $s-lan
  ip -n $s-lan addr add 198.18.1.2/24 dev lan0; ip -n $s-lan link set lan0 up
}
# Starts pushwire-host; its pw0 is 198.18.1.1/24. Sets pw_host.
pw_start_host() {  # BUILD PREFIX LOG [ARGS...]
  local b=$1 s=$2 log=$3
  shift 3
  ip netns exec $s-host "$b/tools/pushwire-host" --local 198.18.0.1 --peer 198.18.0.2 --tap pw0 --fabric-mtu 9000 -v "$@" >>"$log" 2>&1 &
  pw_host=$!; pw_pids+=($pw_host)
  pw_wait_link $s-host pw0
  ip -n $s-host addr add 198.18.1.1/24 dev pw0; ip -n $s-host link set pw0 up
}

# LAN emulation: N member namespaces with veths on a bridge in PREFIX-fab (MTU 9000).
pw_lan_topology() {  # PREFIX N
  local s=$1 n=$2 i
  pw_netns $s-fab
  ip -n $s-fab link add br0 type bridge; ip -n $s-fab link set br0 up
  for i in $(seq $n); do
    pw_netns $s-m$i
    ip netns exec $s-m$i sysctl -qw net.ipv4.icmp_echo_ignore_broadcasts=0
    ip link add $s-v$i type veth peer name $s-b$i
    ip link set $s-v$i netns $s-m$i; ip link set $s-b$i netns $s-fab
    ip -n $s-fab link set $s-b$i mtu 9000 master br0 up
    ip -n $s-m$i addr add 198.18.0.$i/24 dev $s-v$i; ip -n $s-m$i link set $s-v$i mtu 9000 up
  done
}
# Starts member I of N (pw0 198.18.2.I/24). Sets pw_member[I].
declare -A pw_member
pw_start_member() {  # BUILD PREFIX I N LOG [ARGS...]
  local b=$1 s=$2 i=$3 n=$4 log=$5 j peers=()
  shift 5
  for j in $(seq $n); do [ $j != $i ] && peers+=(--peer 198.18.0.$j); done
  ip netns exec $s-m$i "$b/tools/pushwire-host" --lan-emulation --local 198.18.0.$i "${peers[@]}" --tap pw0 --fabric-mtu 9000 -v "$@" \
    >>"$log" 2>&1 &
  pw_member[$i]=$!; pw_pids+=(${pw_member[$i]})
  pw_wait_link $s-m$i pw0
  ip -n $s-m$i addr add 198.18.2.$i/24 dev pw0 2>/dev/null || true
  ip -n $s-m$i link set pw0 up
}

# Moves FILE through TCP (port 5001) from namespace FROM to TO_ADDR in namespace TO, and compares
# its SHA-256 on both ends: 0 when they match. WORK: a scratch directory.
pw_tcp_file() {  # FROM TO TO_ADDR FILE WORK
  local from=$1 to=$2 addr=$3 file=$4 work=$5 srv
  [ -f "$work/tcp.py" ] || cat >"$work/tcp.py" <<'PY'
import hashlib, socket, sys
mode, addr, path = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "serve":   # receive one file, print its sha256
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, 5001)); s.listen(1)
    s.settimeout(30); c, _ = s.accept(); c.settimeout(30); h = hashlib.sha256()
    while True:
        b = c.recv(65536)
        if not b: break
        h.update(b)
    print(h.hexdigest())
else:                 # send a file
    c = socket.create_connection((addr, 5001), timeout=30); c.sendall(open(path, "rb").read()); c.close()
PY
  ip netns exec $to python3 "$work/tcp.py" serve $addr - >"$work/sum" &
  srv=$!
  sleep 0.3
  ip netns exec $from python3 "$work/tcp.py" send $addr "$file" || { wait $srv; return 1; }
  wait $srv || return 1
  [ "$(cat "$work/sum")" = "$(sha256sum "$file" | cut -d' ' -f1)" ]
}

# Live: the fabric's RoCEv2 and CM datagrams on INTERFACE in NAMESPACE, dissected by stock tshark
# with the pushwire plugin (dissectors/wireshark/tshark-pushwire), COUNT frames, each line
# prefixed with "  fabric| ". Runs in the background; sets pw_tshark. No plugin built: nothing.
pw_live_tshark() {  # BUILD NAMESPACE INTERFACE COUNT [TSHARK ARGS...]
  local b=$1 ns=$2 ifc=$3 count=$4 root
  shift 4
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  [ -f "$b/plugins/4.0/epan/pushwire.so" ] && command -v dumpcap >/dev/null || { echo "(no plugin or dumpcap: no live capture)"; return 0; }
  (ip netns exec $ns dumpcap -q -i $ifc -f "udp port 4791 or udp port 18515" -c $count -a duration:15 -w - 2>/dev/null |
     "$root/dissectors/wireshark/tshark-pushwire" --build "$b" -r - -l "$@" 2>/dev/null | sed -u 's/^/  fabric| /') &
  pw_tshark=$!; pw_pids+=($pw_tshark)
}
