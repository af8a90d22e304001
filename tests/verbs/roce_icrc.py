"""The ICRC of an IPv6 RoCEv2 packet, computed with scapy (scapy.contrib.roce computes IPv4's
only). IBTA vol. 1 annex A17: eight bytes of ones stand for the LRH; IPv6's traffic class, flow
label and hop limit, UDP's checksum, and BTH's FECN, BECN and reserved byte are masked to ones.
Shared by icrc_check.py and source_check.py."""
import zlib

from scapy.all import IPv6, Raw, UDP, raw
from scapy.contrib.roce import BTH


def icrc_v6(pkt):
    """The four ICRC bytes of `pkt` (a packet with IPv6, UDP and BTH layers)."""
    ps = Raw(b"\xff" * 8) / pkt[IPv6].copy()
    ps[IPv6].tc = 0xFF
    ps[IPv6].fl = 0xFFFFF
    ps[IPv6].hlim = 0xFF
    ps[UDP].chksum = 0xFFFF
    ps[BTH].fecn = 1
    ps[BTH].becn = 1
    ps[BTH].resv6 = 0xFF
    return BTH.pack_icrc(zlib.crc32(raw(ps)[:-4]) & 0xFFFFFFFF)
