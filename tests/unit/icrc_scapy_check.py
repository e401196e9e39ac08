#!/usr/bin/python3
"""Check the ICRC of every RoCEv2 packet in a pcap against scapy.contrib.roce.

Independent cross-check of net/icrc.cpp: scapy's BTH.compute_icrc() builds the masked
pseudo-packet (8 x 0xFF, IPv4 with ToS/TTL/checksum = 1s, UDP checksum = 1s, BTH FECN/BECN/resv6
= 1s) from the captured headers and runs zlib's CRC-32 over it.

usage: icrc_scapy_check.py FILE.pcap [--port 4791]
Prints the number of packets checked; exits 1 on any mismatch, 2 if none were found.
"""
import argparse
import sys

from scapy.all import IP, UDP, bind_layers, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pcap")
    ap.add_argument("--port", type=int, default=4791, help="RoCEv2 UDP destination port")
    args = ap.parse_args()
    if args.port != 4791:
        bind_layers(UDP, BTH, dport=args.port)

    checked = bad = 0
    for i, pkt in enumerate(rdpcap(args.pcap), start=1):
        if IP not in pkt or UDP not in pkt or pkt[UDP].dport != args.port:
            continue
        if BTH not in pkt:
            print(f"frame {i}: UDP/{args.port} but no BTH", file=sys.stderr)
            bad += 1
            continue
        wire = bytes(pkt[UDP].payload)[-4:]
        want = pkt[BTH].compute_icrc(None)
        checked += 1
        if wire != want:
            bad += 1
            print(f"frame {i}: opcode {pkt[BTH].opcode:#04x} ICRC {wire.hex()} != scapy {want.hex()}",
                  file=sys.stderr)

    print(f"checked {checked} packets, {bad} mismatches")
    if bad:
        return 1
    return 0 if checked else 2


if __name__ == "__main__":
    sys.exit(main())
