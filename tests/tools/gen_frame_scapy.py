#!/usr/bin/python3
"""ctest "tools: pushwire-gen frame builds what scapy builds".

Frames given to `pushwire-gen frame` as keys must be byte for byte what scapy (python3-scapy,
scapy.contrib.roce, which computes the IPv4 checksum and the ICRC) builds for the same fields:
an RC RDMA WRITE ONLY (the RETH packed here by its IBTA layout, scapy has none), with and without
a pad, and a UD SEND ONLY (DETH likewise), plain and in a VLAN. Fields not given are pushwire's
documented defaults (IPv4 id 0, DF, TTL 64; UDP checksum 0), spelled out for scapy.
Exit status: 0 pass, 1 fail, 77 skip (scapy missing).

usage: gen_frame_scapy.py PATH/TO/pushwire-gen
"""
import struct
import subprocess
import sys

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import Dot1Q, Ether, IP, UDP, Raw, raw
    from scapy.contrib.roce import BTH, opcode
except ImportError as e:  # visible in the ctest log
    print(f"SKIP: python3-scapy is not available ({e}); install it with apt-get install python3-scapy")
    sys.exit(77)

gen = sys.argv[1]
failures = 0


def l3(src, dst, tos=0):
    return IP(src=src, dst=dst, id=0, flags="DF", ttl=64, tos=tos) / UDP(sport=49152, dport=4791, chksum=0)


def reth(va, r_key, dmalen):
    return struct.pack(">QII", va, r_key, dmalen)  # IBTA vol. 1 9.3.3: VA, R_Key, DMA length


def deth(q_key, srcqp):
    return struct.pack(">II", q_key, srcqp & 0xFFFFFF)  # Q_Key, reserved byte, source QP


def check(name, keys, packet):
    global failures
    want = raw(packet).hex()
    r = subprocess.run([gen, "frame", "--hex", *keys], capture_output=True, text=True)
    got = r.stdout.strip()
    if r.returncode != 0 or got != want:
        failures += 1
        print(f"FAIL {name}: {r.stderr.strip() or 'different bytes'}\n  scapy    {want}\n  pushwire {got}")
    else:
        print(f"ok   {name}: {len(want) // 2} bytes")


eth = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
common = ["eth.dst=02:00:00:00:00:02", "eth.src=02:00:00:00:00:01"]

# RC RDMA WRITE ONLY, 4 bytes (no pad): the example of `pushwire-gen --help`.
check("RC RDMA_WRITE_ONLY",
      common + ["ip.src=10.0.0.1", "ip.dst=10.0.0.2", "udp.srcport=49152", "infiniband.bth.opcode=10",
                "infiniband.bth.destqp=0x11", "infiniband.bth.psn=5", "infiniband.reth.va=0x1000",
                "infiniband.reth.r_key=0x2b8", "infiniband.reth.dmalen=4", "--payload", "01020304"],
      eth / l3("10.0.0.1", "10.0.0.2")
      / BTH(opcode=opcode("RC", "RDMA_WRITE_ONLY")[0], dqpn=0x11, psn=5, pkey=0xFFFF)
      / Raw(reth(0x1000, 0x2B8, 4) + bytes([1, 2, 3, 4])))

# The same with 5 bytes (pad 3), ack requested, solicited, a DSCP; by opcode name.
check("RC RDMA_WRITE_ONLY, pad 3",
      common + ["ip.src=192.168.1.10", "ip.dst=192.168.1.20", "ip.dsfield.dscp=26", "pushwire.opcode=RC_RDMA_WRITE_ONLY",
                "infiniband.bth.a=1", "infiniband.bth.se=1", "infiniband.bth.destqp=0xabcdef",
                "infiniband.bth.psn=0xfffffe", "infiniband.reth.va=0x7f0000001000", "infiniband.reth.r_key=0xcafe",
                "infiniband.reth.dmalen=5", "pushwire.payload=68656c6c6f"],
      eth / l3("192.168.1.10", "192.168.1.20", tos=26 << 2)
      / BTH(opcode=opcode("RC", "RDMA_WRITE_ONLY")[0], solicited=1, ackreq=1, padcount=3, dqpn=0xABCDEF,
            psn=0xFFFFFE, pkey=0xFFFF)
      / Raw(reth(0x7F0000001000, 0xCAFE, 5) + b"hello" + b"\0" * 3))

# UD SEND ONLY with a DETH, 6 bytes (pad 2), P_Key 0x8001.
check("UD SEND_ONLY",
      common + ["ip.src=10.0.0.1", "ip.dst=10.0.0.2", "pushwire.opcode=UD_SEND_ONLY", "infiniband.bth.p_key=0x8001",
                "infiniband.bth.destqp=1", "infiniband.bth.psn=7", "infiniband.deth.q_key=0x80010000",
                "infiniband.deth.srcqp=0x22", "--payload", "0a0b0c0d0e0f"],
      eth / l3("10.0.0.1", "10.0.0.2")
      / BTH(opcode=opcode("UD", "SEND_ONLY")[0], padcount=2, dqpn=1, psn=7, pkey=0x8001)
      / Raw(deth(0x80010000, 0x22) + bytes(range(10, 16)) + b"\0" * 2))

# The same in VLAN 100, priority 3.
check("UD SEND_ONLY in VLAN 100",
      common + ["vlan.priority=3", "vlan.id=100", "ip.src=10.0.0.1", "ip.dst=10.0.0.2", "pushwire.opcode=UD_SEND_ONLY",
                "infiniband.bth.p_key=0x8001", "infiniband.bth.destqp=1", "infiniband.bth.psn=7",
                "infiniband.deth.q_key=0x80010000", "infiniband.deth.srcqp=0x22", "--payload", "0a0b0c0d0e0f"],
      eth / Dot1Q(prio=3, vlan=100) / l3("10.0.0.1", "10.0.0.2")
      / BTH(opcode=opcode("UD", "SEND_ONLY")[0], padcount=2, dqpn=1, psn=7, pkey=0x8001)
      / Raw(deth(0x80010000, 0x22) + bytes(range(10, 16)) + b"\0" * 2))

print(f"{failures} failures")
sys.exit(1 if failures else 0)
