#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Check the ICRC of every RoCEv2 packet in a pcap against scapy.contrib.roce.

Independent cross-check of net/icrc.cpp: scapy's BTH.compute_icrc() builds the masked
pseudo-packet (8 x 0xFF, IPv4 with ToS/TTL/checksum = 1s, UDP checksum = 1s, BTH FECN/BECN/resv6
= 1s) from the captured headers and runs zlib's CRC-32 over it.

Over IPv6, scapy's compute_icrc has none ("TODO support IPv6" in scapy.contrib.roce): this
script builds the pseudo-packet the same way from scapy's IPv6 layer, with traffic class, flow
label and hop limit set to 1s as the annex (A17.3.3) masks them, and runs the same CRC.

usage: icrc_scapy_check.py FILE.pcap [--port 4791]
Prints the number of packets checked; exits 1 on any mismatch, 2 if none were found.
"""
import argparse
import sys

from zlib import crc32

from scapy.all import IP, UDP, IPv6, Raw, bind_layers, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH


def icrc6(pkt):
    """The ICRC of a RoCEv2 packet over IPv6, as compute_icrc does it over IPv4."""
    pshdr = Raw(b"\xff" * 8) / pkt[IPv6].copy()
    pshdr[IPv6].tc = 0xff
    pshdr[IPv6].fl = 0xfffff
    pshdr[IPv6].hlim = 0xff
    pshdr[UDP].chksum = 0xffff
    pshdr[BTH].fecn = 1
    pshdr[BTH].becn = 1
    pshdr[BTH].resv6 = 0xff
    bth = pshdr[BTH].self_build()
    payload = raw(pshdr[BTH].payload)
    pshdr[UDP].payload = Raw(bth + payload + b"\xff\xff\xff\xff")
    return pkt[BTH].pack_icrc(crc32(raw(pshdr)[:-4]) & 0xffffffff)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--port", type=int, default=4791, help="RoCEv2 UDP destination port")
    args = ap.parse_args()
    if args.port != 4791:
        bind_layers(UDP, BTH, dport=args.port)

    checked = bad = checked6 = 0
    for i, pkt in enumerate(rdpcap(args.pcap), start=1):
        if (IP not in pkt and IPv6 not in pkt) or UDP not in pkt or pkt[UDP].dport != args.port:
            continue
        if BTH not in pkt:
            print(f"frame {i}: UDP/{args.port} but no BTH", file=sys.stderr)
            bad += 1
            continue
        wire = bytes(pkt[UDP].payload)[-4:]
        v6 = IPv6 in pkt and IP not in pkt
        want = icrc6(pkt) if v6 else pkt[BTH].compute_icrc(None)
        checked += 1
        checked6 += v6
        if wire != want:
            bad += 1
            print(f"frame {i}: opcode {pkt[BTH].opcode:#04x} ICRC {wire.hex()} != scapy {want.hex()}",
                  file=sys.stderr)

    over6 = f", {checked6} over IPv6" if checked6 else ""
    print(f"checked {checked} packets, {bad} mismatches{over6}")
    if bad:
        return 1
    return 0 if checked else 2


if __name__ == "__main__":
    sys.exit(main())
