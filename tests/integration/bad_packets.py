#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Sends crafted, invalid RoCEv2 datagrams to a running uroce device.

usage: bad_packets.py ADDR PORT QPN[,QPN...] [--count N] [--gap-us US]

Each kind below is sent N times, interleaved (kind 1, kind 2, ..., kind 1, ...), the ones that
name a QP aimed at the given QPNs in turn. Every packet is one the device must drop and count
under the reason printed next to it; none may reach a transport engine. Packets that are only
wrong in one field carry a correct ICRC, so that the device's ICRC check passes and the field
itself is what gets them dropped: a device that miscomputed the ICRC would count them as
bad_icrc instead, and the exact counter check in bad_packets_test.sh fails.

The ICRC is computed here independently of uroce (zlib's CRC-32 over the masked pseudo header,
IBTA annex A17.3.3), over the IPv4/UDP header uroce assumes: ID 0, DF. The socket is unconnected
and uses IP_PMTUDISC_PROBE, so the kernel really sends ID 0 with DF (Linux gives unconnected
DF datagrams ID 0), i.e. the packets would verify on a real wire too.

Prints one line per kind: "sent KIND N expect REASON", then "zero_length N" (datagrams of 0
bytes: counted in rx_pkts and as too_short, but under no opcode), "rx_op NAME N" (datagrams
sent by first byte, named as `uroce counters` names opcodes) and "qp_drop QPN op_not_for_qp N".
"""
import argparse
import socket
import struct
import sys
import time
import zlib

IP_MTU_DISCOVER = 10
IP_PMTUDISC_PROBE = 3

RC_SEND_ONLY = 0x04
RC_WRITE_ONLY = 0x0A
RC_ACK = 0x11
RC_RESERVED = 0x1F  # no RC opcode 0x1f: unknown
UD_SEND_ONLY = 0x64
DEFAULT_PKEY = 0xFFFF
NO_SUCH_QPN = 0xABCDEF  # QPNs are handle-table indices, far below this


def bth(opcode, dqpn, psn=0, pad=0, tver=0, pkey=DEFAULT_PKEY, ackreq=False):
    return struct.pack(
        ">BBHB3sB3s",
        opcode,
        (pad & 3) << 4 | (tver & 0xF),
        pkey,
        0,
        dqpn.to_bytes(3, "big"),
        0x80 if ackreq else 0,
        psn.to_bytes(3, "big"),
    )


def icrc(src, dst, sport, dport, body):
    """RoCEv2 ICRC over IPv4/UDP for `body` (BTH ... pad, without the ICRC)."""
    udp_len = 8 + len(body) + 4
    ip = struct.pack(
        ">BBHHHBBH4s4s",
        0x45, 0xFF,                      # ToS masked
        20 + udp_len, 0, 0x4000,         # total length, ID 0, DF
        0xFF, 17, 0xFFFF,                # TTL and checksum masked
        socket.inet_aton(src), socket.inet_aton(dst),
    )
    udp = struct.pack(">HHHH", sport, dport, udp_len, 0xFFFF)  # checksum masked
    masked = bytearray(body)
    masked[4] = 0xFF  # BTH FECN, BECN, resv6
    crc = zlib.crc32(b"\xff" * 8 + ip + udp + bytes(masked)) & 0xFFFFFFFF
    return struct.pack("<I", crc)  # LSB first on the wire


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("qpns")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--gap-us", type=int, default=50)
    a = ap.parse_args()
    qpns = [int(q, 0) for q in a.qpns.split(",")]

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)
    s.bind(("127.0.0.1", 0))
    src, sport = s.getsockname()
    dst, dport = a.addr, a.port

    def sealed(body):
        return body + icrc(src, dst, sport, dport, body)

    payload8 = bytes(range(8))
    # kind -> (expected drop reason, builder(qpn, i) -> datagram)
    kinds = {
        # Wrong ICRC on an otherwise valid SEND to a live QP.
        "bad_icrc": ("bad_icrc", lambda q, i: (lambda p: p[:-4] + bytes(b ^ 0x5A for b in p[-4:]))(
            sealed(bth(RC_SEND_ONLY, q, psn=i) + payload8))),
        # Truncated: no room for a BTH + ICRC (0 and 8 bytes), or for the opcode's RETH.
        "empty": ("too_short", lambda q, i: b""),
        "shorter_than_bth": ("too_short", lambda q, i: bth(RC_SEND_ONLY, q)[:8]),
        "truncated_reth": ("too_short", lambda q, i: sealed(bth(RC_WRITE_ONLY, q) + b"\0" * 4)),
        # Pad count 3 on a SEND with no payload bytes at all.
        "pad_exceeds_payload": ("bad_pad", lambda q, i: sealed(bth(RC_SEND_ONLY, q, pad=3))),
        # A header-only opcode followed by stray bytes.
        "ack_with_payload": ("bad_length",
                             lambda q, i: sealed(bth(RC_ACK, q) + b"\0\0\0\0" + payload8)),
        "bad_tver": ("bad_version", lambda q, i: sealed(bth(RC_SEND_ONLY, q, tver=1) + payload8)),
        "unknown_opcode": ("unknown_opcode", lambda q, i: sealed(bth(RC_RESERVED, q) + payload8)),
        "wrong_pkey": ("bad_pkey",
                       lambda q, i: sealed(bth(RC_SEND_ONLY, q, pkey=0x1234) + payload8)),
        "no_such_qp": ("bad_qp", lambda q, i: sealed(bth(RC_SEND_ONLY, NO_SUCH_QPN) + payload8)),
        # A UD SEND (with its DETH: Q_Key, source QP) to an RC QP.
        "ud_to_rc_qp": ("op_not_for_qp", lambda q, i: sealed(
            bth(UD_SEND_ONLY, q) + struct.pack(">I", 0x11111111) + (0x42).to_bytes(4, "big")
            + payload8)),
    }
    gap = a.gap_us / 1e6
    per_qp = {q: 0 for q in qpns}  # op_not_for_qp drops each QP must count as its own
    names = {0x04: "RC_SEND_ONLY", 0x0A: "RC_RDMA_WRITE_ONLY", 0x11: "RC_ACKNOWLEDGE",
             0x1F: "opcode_0x1f", 0x64: "UD_SEND_ONLY"}
    by_op = {}  # `uroce counters` name of the first byte -> datagrams sent
    for i in range(a.count):
        for n, (kind, (reason, build)) in enumerate(kinds.items()):
            q = qpns[(i + n) % len(qpns)]
            d = build(q, i)
            s.sendto(d, (dst, dport))
            if d:
                by_op[names[d[0]]] = by_op.get(names[d[0]], 0) + 1
            if reason == "op_not_for_qp":
                per_qp[q] += 1
            if gap:
                time.sleep(gap)
    for kind, (reason, _) in kinds.items():
        print(f"sent {kind} {a.count} expect {reason}")
    print(f"zero_length {a.count}")
    for name, k in sorted(by_op.items()):
        print(f"rx_op {name} {k}")
    for q, k in per_qp.items():
        print(f"qp_drop {q:#x} op_not_for_qp {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
