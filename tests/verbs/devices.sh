#!/usr/bin/env bash
# ibv_devices and ibv_devinfo -v list the devices PUSHWIRE_VERBS configures (spec/verbs.md §2):
# names, port 1 active with link layer Ethernet, the active MTU asked for, and the GID table's
# RoCEv2 entry of the device's address; a malformed configuration lists no device and says why.
# usage: devices.sh BUILD
build=$(cd "$1" && pwd)
. "$(dirname "$0")/common.sh"
fail() { echo "FAIL: $*"; exit 1; }
out=$(PUSHWIRE_VERBS="pw0:127.0.0.1 rdma7:127.0.0.9:1024" pw_run ibv_devices)
echo "$out"
grep -qE '^\s+pw0\s+00007ffffe000001$' <<<"$out" || fail "ibv_devices: pw0 and its GUID"
grep -qE '^\s+rdma7\s+00007ffffe000009$' <<<"$out" || fail "ibv_devices: rdma7 and its GUID"
info=$(PUSHWIRE_VERBS="pw0:127.0.0.1 rdma7:127.0.0.9:1024" pw_run ibv_devinfo -v -d rdma7)
echo "$info" | grep -E 'hca_id|link_layer|active_mtu|state:|GID\[|node_guid'
grep -q 'hca_id:.rdma7' <<<"$info" || fail "ibv_devinfo: hca_id"
grep -q 'link_layer:.*Ethernet' <<<"$info" || fail "ibv_devinfo: link layer"
grep -q 'state:.*PORT_ACTIVE (4)' <<<"$info" || fail "ibv_devinfo: port state"
grep -q 'active_mtu:.*1024 (3)' <<<"$info" || fail "ibv_devinfo: active MTU 1024"
grep -q 'GID\[  0\]:.*::ffff:127.0.0.9, RoCE v2' <<<"$info" || fail "ibv_devinfo: GID 0"
bad=$(PUSHWIRE_VERBS="pw0:300.1.2.3" pw_run ibv_devices 2>&1 || true)
echo "$bad"
grep -q "PUSHWIRE_VERBS: '300.1.2.3': not an IPv4 address or 'auto': no devices" <<<"$bad" || fail "a malformed address is refused, with the reason"
echo "PASS: ibv_devices and ibv_devinfo"
