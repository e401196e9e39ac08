#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Sends RoCEv2 packets nobody in uroce made, with their own IPv4 headers, through a raw socket.

usage: golden_packets.py DST_ADDR CX4_CNP_FILE --seed N [--stored FILE] (--good | --flipped | --nodf)
       golden_packets.py DST_ADDR CX4_CNP_FILE --seed N --dump

The packets:
  - the ConnectX-4 Lx CNP in CX4_CNP_FILE (tests/data/golden/connectx4lx_cnp.txt, its origin
    written there), sent as captured: IPv4 ID 0x718c, DF, 10.0.17.1 -> 10.0.18.1, UDP 0 -> 4791;
  - packets scapy (scapy.contrib.roce, which computes the ICRC over the real IPv4 header) builds
    as kernel Soft-RoCE sends them: a random IPv4 ID, DF, TTL 64, a UDP source port 0xC000 +
    14 random bits, UDP checksum 0, to DST_ADDR:4791: RC SEND ONLY, RDMA WRITE ONLY, RDMA READ
    REQUEST, ACKNOWLEDGE, FETCH_ADD, COMPARE_SWAP and CNP. scapy has no RETH / AtomicETH
    layer, so those headers are packed here; the ICRC is scapy's;
  - with --stored FILE, also the packets kept in FILE (tests/data/golden/scapy_rxe_like.txt:
    one IPv4 datagram in hex per line, made once by --dump, so that they stay the same whatever
    scapy version the host has).
--dump prints the scapy packets of the seed in that file's format instead of sending them.

--good sends each as made; --flipped sends each with one bit flipped (a random bit from BTH byte
5 on: the destination QP, PSN, extension headers, payload or ICRC; never the opcode, P_Key or
pad bits, which other checks look at first, nor the masked byte 4). The device must accept all
of the first (no bad_icrc) and drop all of the second as bad_icrc. --nodf sends the scapy
packets with the flags field 0 (DF clear; the ICRC covers it), without the CNP: accepted only
by a device started with --icrc-nodf on.

Sent with IP_HDRINCL, so the kernel keeps the IPv4 header as given (it fills in the checksum).
Prints "sent OPCODE_NAME ID" per packet and "total N".
"""
import argparse
import random
import socket
import struct
import sys

from scapy.all import IP, UDP, Raw, raw
from scapy.contrib.roce import BTH, AETH, CNPPadding, CNP_OPCODE

ROCE_PORT = 4791

# uroce's opcode names (net/opcodes.cpp), as `uroce counters` prints them.
NAMES = {0x04: "RC_SEND_ONLY", 0x0A: "RC_RDMA_WRITE_ONLY", 0x0C: "RC_RDMA_READ_REQUEST",
         0x11: "RC_ACKNOWLEDGE", 0x13: "RC_CMP_SWAP", 0x14: "RC_FETCH_ADD", 0x81: "CNP"}


def cx4_cnp(path):
    hexs = "".join(l.split("#")[0] for l in open(path) if not l.startswith("#"))
    return bytes.fromhex("".join(hexs.split()))


def stored(path):
    return [bytes.fromhex(l.strip()) for l in open(path) if l.strip() and not l.startswith("#")]


def reth(va, rkey, length):
    return struct.pack(">QII", va, rkey, length)


def atomic_eth(va, rkey, swap_add, compare):
    return struct.pack(">QIQQ", va, rkey, swap_add, compare)


def scapy_packets(rng, dst, df=True):
    """(opcode, bytes) for each kind, built by scapy as rxe would put them on the wire."""
    out = []

    def ip_udp():
        src = "10.0.17.%d" % rng.randint(2, 250)
        return (IP(src=src, dst=dst, id=rng.randint(1, 0xFFFF), flags="DF" if df else 0, ttl=64) /
                UDP(sport=0xC000 + rng.randint(0, 0x3FFF), dport=ROCE_PORT, chksum=0))

    def bth(op, pad=0, ackreq=0):
        return BTH(opcode=op, dqpn=rng.randint(0x11, 0xFFFF), psn=rng.randint(0, 0xFFFFFF),
                   padcount=pad, ackreq=ackreq)

    payload = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 1024)))
    pad = -len(payload) % 4
    out.append(ip_udp() / bth(0x04, pad, 1) / Raw(payload + b"\0" * pad))
    length = 1024
    out.append(ip_udp() / bth(0x0A, 0, 1) /
               Raw(reth(rng.getrandbits(64), rng.getrandbits(32), length) +
                   bytes(rng.randint(0, 255) for _ in range(length))))
    out.append(ip_udp() / bth(0x0C) / Raw(reth(rng.getrandbits(64), rng.getrandbits(32), 65536)))
    out.append(ip_udp() / bth(0x11) / AETH(syndrome=0x1F, msn=rng.randint(0, 0xFFFFFF)))
    out.append(ip_udp() / bth(0x14, 0, 1) /
               Raw(atomic_eth(rng.getrandbits(61) << 3, rng.getrandbits(32), 1, 0)))
    out.append(ip_udp() / bth(0x13, 0, 1) /
               Raw(atomic_eth(rng.getrandbits(61) << 3, rng.getrandbits(32),
                              rng.getrandbits(64), rng.getrandbits(64))))
    out.append(ip_udp() / BTH(opcode=CNP_OPCODE, becn=1, dqpn=rng.randint(0x11, 0xFFFF)) /
               CNPPadding())
    return [(bytes(raw(p))) for p in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dst")
    ap.add_argument("cnp_file")
    ap.add_argument("--seed", type=int, required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--good", action="store_true")
    g.add_argument("--flipped", action="store_true")
    g.add_argument("--nodf", action="store_true")
    g.add_argument("--dump", action="store_true")
    ap.add_argument("--stored")
    a = ap.parse_args()
    rng = random.Random(a.seed)

    if a.dump:
        for p in scapy_packets(rng, a.dst):
            print(p.hex())
        return 0
    if a.nodf:
        pkts = scapy_packets(rng, a.dst, df=False)
    else:
        pkts = [cx4_cnp(a.cnp_file)] + scapy_packets(rng, a.dst)
        if a.stored:
            pkts += stored(a.stored)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    for p in pkts:
        p = bytearray(p)
        ihl = (p[0] & 0xF) * 4
        udp = ihl + 8
        assert struct.unpack(">H", p[ihl + 2:ihl + 4])[0] == ROCE_PORT
        if a.flipped:
            at = rng.randrange(udp + 5, len(p))
            p[at] ^= 1 << rng.randrange(8)
        ident = struct.unpack(">H", p[4:6])[0]
        dst = socket.inet_ntoa(bytes(p[16:20]))
        s.sendto(bytes(p), (dst, 0))
        how = "flipped" if a.flipped else "DF clear" if a.nodf else "as made"
        print("sent %s 0x%04x %s" % (NAMES.get(p[udp], "opcode_0x%02x" % p[udp]), ident, how))
    print("total %d" % len(pkts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
