#!/usr/bin/python3
"""An RC or UC QP takes requests from its peer's address only (spec/rnic.md §7; rxe's
check_addr), through the verbs provider. rdma-core's pyverbs makes two QPs and a 4 KiB region
with remote write; scapy (an implementation independent of pushwire) builds RDMA WRITE ONLY
packets with a QP's number, its expected PSN and the region's R_Key, ICRC included, and sends
them as datagrams to the device's UDP port 4791.
  IPv4 (GID 0): both QPs are connected to 127.0.0.2. From 127.0.0.3 (any other address) the
    region does not change; from 127.0.0.2, the same packet otherwise writes its 64 bytes.
  IPv6 (GID 1, the device configured NAME:auto@::1): loopback has one IPv6 address, so the
    sender is always ::1. The first QP is connected to fd00::2: nothing written; the second to
    ::1: written.
  Over AF_XDP (xdp NETNS IFACE: the device's port is over AF_XDP on an interface whose veth peer
    IFACE is in namespace NETNS, 198.18.11.2 there): both QPs are connected to 198.18.11.2, and the
    packets are whole Ethernet frames to the device's MAC, sent onto IFACE from NETNS (scapy's
    sendp), from 198.18.11.3 and from 198.18.11.2.
usage (under the provider): source_check.py rc|uc [v6 | xdp NETNS IFACE]    exit 0 pass, 1 fail,
77 a tool is missing"""
import socket
import struct
import subprocess
import sys
import time

try:
    from scapy.all import Ether, IP, IPv6, UDP, Raw, raw
    from scapy.contrib.roce import BTH
    from roce_icrc import icrc_v6
    import pyverbs.enums as e
    from pyverbs.addr import AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context, get_device_list
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
except ImportError as x:
    print(f"SKIPPED: {x}")
    sys.exit(77)

kind = sys.argv[1] if len(sys.argv) > 1 else "rc"
v6 = len(sys.argv) > 2 and sys.argv[2] == "v6"
wire = sys.argv[3:5] if len(sys.argv) > 4 and sys.argv[2] == "xdp" else None  # NETNS, IFACE
WRITE_ONLY = {"rc": 0x0A, "uc": 0x2A}[kind]
QP_TYPE = {"rc": e.IBV_QPT_RC, "uc": e.IBV_QPT_UC}[kind]
RQ_PSN = 100


def gid_text(addr):
    """pyverbs' GID text (8 groups of 4 hex digits) of an IPv4 (mapped) or IPv6 address."""
    b = socket.inet_pton(socket.AF_INET6, addr) if ":" in addr else b"\0" * 10 + b"\xff\xff" + socket.inet_aton(addr)
    h = b.hex()
    return ":".join(h[i:i + 4] for i in range(0, 32, 4))


names = [d.name.decode() for d in get_device_list()]
if not names:
    print("FAIL: no device (is the provider loaded?)")
    sys.exit(1)
ctx = Context(name=names[0])
sgid_index = 1 if v6 else 0
gid = str(ctx.query_gid(1, sgid_index))
raw_gid = bytes.fromhex(gid.replace(":", ""))
dev_ip = socket.inet_ntop(socket.AF_INET6, raw_gid) if v6 else socket.inet_ntoa(raw_gid[12:])
if v6:
    sender = "::1"
    peers = {"other": "fd00::2", "peer": "::1"}  # the first QP's peer is not the sender, the second's is
    sources = {"other": sender, "peer": sender}
elif wire:
    peers = {"other": "198.18.11.2", "peer": "198.18.11.2"}
    sources = {"other": "198.18.11.3", "peer": "198.18.11.2"}
else:
    peers = {"other": "127.0.0.2", "peer": "127.0.0.2"}
    sources = {"other": "127.0.0.3", "peer": "127.0.0.2"}
pd = PD(ctx)
cq = CQ(ctx, 8, None, None, 0)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
mr.write(b"\x5a" * 4096, 4096)


def connected_qp(peer):
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=QP_TYPE, scq=cq, rcq=cq, cap=cap))
    attr = QPAttr()
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = 0x000123
    attr.rq_psn = RQ_PSN
    attr.max_dest_rd_atomic = 1
    attr.min_rnr_timer = 1
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=GID(gid_text(peer)), sgid_index=sgid_index))
    qp.to_init(attr)
    qp.to_rtr(attr)
    return qp


qps = {role: connected_qp(peer) for role, peer in peers.items()}
if wire:  # the interface with the device's address (its port's AF_XDP socket is on it)
    dev_iface = next(n for n in socket.if_nameindex() if n[1] != "lo" and
                     subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", n[1]], capture_output=True, text=True).stdout.find(f" {dev_ip}/") >= 0)[1]
print(f"device {names[0]} at {dev_ip}: {kind.upper()} QPs 0x{qps['other'].qp_num:06x} (peer {peers['other']}) and "
      f"0x{qps['peer'].qp_num:06x} (peer {peers['peer']}), expecting PSN {RQ_PSN}; region 0x{mr.buf:x} R_Key 0x{mr.rkey:08x}")


def write(role, offset, fill):
    """One RDMA WRITE ONLY of 64 bytes of `fill` to offset `offset` of the region, to QP `role`."""
    src = sources[role]
    reth = struct.pack(">QII", mr.buf + offset, mr.rkey, 64)
    if wire:
        # To the MAC of the interface the port is on (the device's); any source MAC.
        dev_mac = open(f"/sys/class/net/{dev_iface}/address").read().strip()
        frame = Ether(dst=dev_mac, src="02:00:00:00:11:02") / IP(src=src, dst=dev_ip, flags="DF", id=7, ttl=64) / \
            UDP(sport=49152 + offset, dport=4791) / BTH(opcode=WRITE_ONLY, dqpn=qps[role].qp_num, psn=RQ_PSN, ackreq=1) / \
            Raw(reth + bytes([fill]) * 64)
        hexed = raw(frame).hex()
        subprocess.run(["ip", "netns", "exec", wire[0], "/usr/bin/python3", "-c",
                        "import sys; from scapy.all import sendp, Raw; sendp(Raw(bytes.fromhex(sys.argv[1])), iface=sys.argv[2], verbose=0)",
                        hexed, wire[1]], check=True)
        time.sleep(0.5)
        return
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, 23, 2)  # IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO
    else:
        s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF, identification 0
    s.bind((src, 0))
    sport = s.getsockname()[1]
    bth = BTH(opcode=WRITE_ONLY, dqpn=qps[role].qp_num, psn=RQ_PSN, ackreq=1, icrc=0 if v6 else None)
    net = IPv6(src=src, dst=dev_ip, hlim=64) if v6 else IP(src=src, dst=dev_ip, flags="DF", id=0, ttl=64)
    pkt = net / UDP(sport=sport, dport=4791) / bth / Raw(reth + bytes([fill]) * 64)
    body = raw(pkt[BTH])
    if v6:
        body = body[:-4] + icrc_v6(IPv6(raw(pkt)))
    s.sendto(body, (dev_ip, 4791))
    s.close()
    time.sleep(0.5)  # the provider's progress thread takes it


before = mr.read(4096, 0)
write("other", 128, 0xC3)
after_other = mr.read(4096, 0)
write("peer", 256, 0xA1)
after_peer = mr.read(4096, 0)
ok = True
if after_other != before:
    changed = [i for i in range(4096) if after_other[i] != before[i]]
    print(f"FAIL: a WRITE from {sources['other']} to the QP whose peer is {peers['other']} changed {len(changed)} bytes (first at offset {changed[0]})")
    ok = False
else:
    print(f"a WRITE from {sources['other']} to the QP whose peer is {peers['other']}: nothing written")
want = before[:256] + bytes([0xA1]) * 64 + before[320:]
if after_peer != want:
    print(f"FAIL: the same WRITE from {sources['peer']} to the QP whose peer it is did not write exactly its 64 bytes at offset 256")
    ok = False
else:
    print(f"the same WRITE from {sources['peer']} to the QP whose peer it is: its 64 bytes at offset 256, nothing else")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
