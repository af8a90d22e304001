#!/usr/bin/python3
"""An RC QP takes requests from its peer's address only (spec/rnic.md §7; rxe's check_addr),
through the verbs provider: rdma-core's pyverbs makes an RC QP connected to 127.0.0.2 and a
4 KiB region with remote write; scapy (an implementation independent of pushwire) builds RDMA
WRITE ONLY packets with the QP's number, its expected PSN and the region's R_Key, ICRC
included, and sends them as datagrams to the device's UDP port 4791:
  - from 127.0.0.3 (any other address): the region does not change;
  - from 127.0.0.2, the same packet otherwise: the 64 bytes land where its RETH says.
usage (under the provider): source_check.py     exit 0 pass, 1 fail, 77 a tool is missing"""
import socket
import struct
import sys
import time

try:
    from scapy.all import IP, UDP, Raw, raw
    from scapy.contrib.roce import BTH
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

RC_RDMA_WRITE_ONLY = 0x0A
PEER, OTHER = "127.0.0.2", "127.0.0.3"
PEER_QPN, RQ_PSN = 0x000123, 100

names = [d.name.decode() for d in get_device_list()]
if not names:
    print("FAIL: no device (is the provider loaded?)")
    sys.exit(1)
ctx = Context(name=names[0])
gid = str(ctx.query_gid(1, 0))  # e.g. 0000:0000:0000:0000:0000:ffff:7f00:0001
words = gid.split(":")
dev_ip = socket.inet_ntoa(bytes.fromhex(words[-2] + words[-1]))
pd = PD(ctx)
cq = CQ(ctx, 8, None, None, 0)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
mr.write(b"\x5a" * 4096, 4096)
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
attr = QPAttr()
attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
attr.path_mtu = e.IBV_MTU_1024
attr.dest_qp_num = PEER_QPN
attr.rq_psn = RQ_PSN
attr.max_dest_rd_atomic = 1
attr.min_rnr_timer = 1
peer = socket.inet_aton(PEER).hex()
attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=GlobalRoute(dgid=GID(f"0000:0000:0000:0000:0000:ffff:{peer[:4]}:{peer[4:]}"), sgid_index=0))
qp.to_init(attr)
qp.to_rtr(attr)
print(f"device {names[0]} at {dev_ip}: RC QP 0x{qp.qp_num:06x} connected to {PEER} QP 0x{PEER_QPN:06x}, "
      f"expects PSN {RQ_PSN}; region 0x{mr.buf:x} R_Key 0x{mr.rkey:08x}")


def write_from(src, offset, fill):
    """One RDMA WRITE ONLY of 64 bytes of `fill` to offset `offset` of the region, from `src`."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF, identification 0
    s.bind((src, 0))
    sport = s.getsockname()[1]
    reth = struct.pack(">QII", mr.buf + offset, mr.rkey, 64)
    pkt = (IP(src=src, dst=dev_ip, flags="DF", id=0, ttl=64) / UDP(sport=sport, dport=4791) /
           BTH(opcode=RC_RDMA_WRITE_ONLY, dqpn=qp.qp_num, psn=RQ_PSN, ackreq=1) / Raw(reth + bytes([fill]) * 64))
    s.sendto(raw(pkt[BTH]), (dev_ip, 4791))
    s.close()
    time.sleep(0.5)  # the provider's progress thread takes it


before = mr.read(4096, 0)
write_from(OTHER, 128, 0xC3)
after_other = mr.read(4096, 0)
write_from(PEER, 256, 0xA1)
after_peer = mr.read(4096, 0)
ok = True
if after_other != before:
    changed = [i for i in range(4096) if after_other[i] != before[i]]
    print(f"FAIL: a WRITE from {OTHER} changed {len(changed)} bytes (first at offset {changed[0]})")
    ok = False
else:
    print(f"a WRITE from {OTHER}: nothing written")
want = before[:256] + bytes([0xA1]) * 64 + before[320:]
if after_peer != want:
    print(f"FAIL: the same WRITE from {PEER} did not write exactly its 64 bytes at offset 256")
    ok = False
else:
    print(f"the same WRITE from {PEER}: its 64 bytes at offset 256, nothing else")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
