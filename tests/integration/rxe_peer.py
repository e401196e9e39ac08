#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""A scripted RC peer that behaves on the wire as kernel Soft-RoCE (rxe) does, against a uroce
device in another network namespace (rxe_peer_test.sh, ctest interop.rxe_peer).

usage: rxe_peer.py LOCAL_IPV4 REMOTE_IPV4 --seed N -- UROCE_PROGRAM...

Runs in its own namespace at LOCAL_IPV4. UROCE_PROGRAM (rxe_peer_verbs in the device's
namespace, started here with pipes to its standard input and output) owns one RC QP on the
device at REMOTE_IPV4; the two exchange QPN, PSN and the MR over those pipes, and each step is
checked on both sides: here what came over the wire, there (a command to the program) what the
verbs show.

The peer's packets, as rxe_net.c's prepare4 and rxe_req.c put them on the wire: built by scapy
(scapy.contrib.roce computes the ICRC over the real IPv4 header) and sent through a raw socket
with IP_HDRINCL, so the header stays as given: IPv4 IDs from one counter for the pair that
moves in random steps (the kernel's __ip_select_ident), DF, TTL 64, TOS 0, UDP source port
0xC000 + hash_32(qpn, 14) of the peer's own QP, destination port 4791, UDP checksum 0, P_Key
0xffff, an ACK request on the last packet of each message, path MTU 1024. As a responder it
answers as rxe_resp.c does: an ACK (AETH syndrome 0x1f, "credits not used", and the MSN) for
each packet that asks for one, READ responses with the AETH on FIRST/LAST/ONLY, the ATOMIC
ACKNOWLEDGE with the original value.

The device's packets are read from a raw UDP socket (it sees their IPv4 headers); a UDP
socket bound to LOCAL_IPV4:4791 keeps the kernel from answering them with ICMP port
unreachable. Every one must come from REMOTE_IPV4 to port 4791 (any source port), carry DF,
TTL 64 and TOS 0 (the program's GRH), UDP checksum 0 (the device runs with --offload off),
P_Key 0xffff, the peer's QPN, zero pad bytes, and an ICRC that scapy recomputes equal over the
IPv4 header as received.

The steps:
  1. SEND ONLY (301 bytes, pad 3) and a 3000-byte SEND (FIRST/MIDDLE/LAST) to the device:
     each ACKed at its last PSN with the next MSN; the program gets each receive completion
     with its byte_len and data.
  2. RDMA WRITE of 2500 bytes (FIRST/MIDDLE/LAST) and WRITE ONLY of 60 into the MR: ACKed;
     the program finds them in memory, the bytes around them untouched.
  3. RDMA READ of 2600 bytes (responses FIRST/MIDDLE/LAST) and of 100 (ONLY) from the MR the
     program filled: PSNs from the request's, AETH ACK with the MSN, data equal.
  4. FETCH_ADD: the ATOMIC ACKNOWLEDGE has the original value, the program finds the sum.
  5. Retransmitted SENDs: a SEND ONLY sent twice with one PSN (a new IPv4 ID the second time,
     as rxe's retransmission has), then a 3-packet SEND sent twice: the device ACKs every
     duplicate at the last PSN it took, with the MSN unchanged, and delivers each message
     once: one receive completion, the next receive still posted (the following message
     lands in it).
  6. The other direction: the program posts a 2500-byte SEND, a 77-byte SEND, a 2000-byte
     RDMA WRITE, a 1500-byte RDMA READ and a FETCH_ADD to the peer; the peer checks their
     PSNs, headers and data, answers, and the program gets IBV_WC_SUCCESS with the byte counts
     and the READ's data and the original value in its memory.
Prints "peer_sent N" (packets it sent, by opcode too) and "uroce_checked M" (the device's
packets, every ICRC verified); exits 0 when every check held.
"""
import argparse
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

from scapy.all import IP, UDP, Raw, raw
from scapy.contrib.roce import BTH

ROCE_PORT = 4791
MTU = 1024
WAIT_S = 3  # for each packet the device owes

SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
READ_REQ, READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY = 0x0C, 0x0D, 0x0E, 0x0F, 0x10
ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD = 0x11, 0x12, 0x13, 0x14
NAMES = {SEND_FIRST: "SEND_FIRST", SEND_MIDDLE: "SEND_MIDDLE", SEND_LAST: "SEND_LAST",
         SEND_ONLY: "SEND_ONLY", WRITE_FIRST: "RDMA_WRITE_FIRST", WRITE_MIDDLE: "RDMA_WRITE_MIDDLE",
         WRITE_LAST: "RDMA_WRITE_LAST", WRITE_ONLY: "RDMA_WRITE_ONLY",
         READ_REQ: "RDMA_READ_REQUEST", READ_FIRST: "RDMA_READ_RESPONSE_FIRST",
         READ_MIDDLE: "RDMA_READ_RESPONSE_MIDDLE", READ_LAST: "RDMA_READ_RESPONSE_LAST",
         READ_ONLY: "RDMA_READ_RESPONSE_ONLY", ACK: "ACKNOWLEDGE",
         ATOMIC_ACK: "ATOMIC_ACKNOWLEDGE", CMP_SWAP: "CMP_SWAP", FETCH_ADD: "FETCH_ADD"}
NAMES = {k: "RC_" + v for k, v in NAMES.items()}  # as `uroce counters` names them
RETH_OPS = (WRITE_FIRST, WRITE_ONLY, READ_REQ)
AETH_OPS = (ACK, ATOMIC_ACK, READ_FIRST, READ_LAST, READ_ONLY)
AETH_ACK_UNLIMITED = 0x1F  # rxe's ACK syndrome: "credits not used"

# The MR of rxe_peer_verbs (64 KiB, zeroed at start), as this script lays it out.
RECV_SLOT = 4096        # receive buffer i at i * RECV_SLOT, i < 6
WRITE_AT = 24 * 1024    # where the peer writes
READ_AT = 32 * 1024     # what the peer reads
ATOMIC_AT = 40 * 1024   # the peer's FETCH_ADD target
SEND_SRC = 44 * 1024    # the program's SEND / WRITE source
READ_DST = 52 * 1024    # where the program's READ lands
FADD_DST = 60 * 1024    # the original value of the program's FETCH_ADD


class Fail(Exception):
    pass


def psn_add(psn, n):
    return (psn + n) & 0xFFFFFF


def hash_32(val, bits):  # the kernel's hash_32_generic
    return ((val * 0x61C88647) & 0xFFFFFFFF) >> (32 - bits)


def rxe_sport(qpn):  # rxe_qp.c: RXE_ROCE_V2_SPORT + (hash_32(qpn, 14) & 0x3fff)
    return 0xC000 + (hash_32(qpn, 14) & 0x3FFF)


def icrc_verifies(datagram):
    """scapy's ICRC over this IPv4 datagram's own header equals the one it carries."""
    p = IP(datagram)
    if BTH not in p:
        return False
    stored = p[BTH].icrc
    del p[BTH].icrc
    return IP(raw(p))[BTH].icrc == stored


def chunks(data):
    return [data[i:i + MTU] for i in range(0, len(data), MTU)] or [b""]


def seq_ops(n, first, middle, last, only):
    return [only] if n == 1 else [first] + [middle] * (n - 2) + [last]


class Pkt:
    pass


class Wire:
    """The peer's raw sockets: what it sends and what it checks of what it receives."""

    def __init__(self, local, remote, rng):
        self.local, self.remote, self.rng = local, remote, rng
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.tx.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((local, ROCE_PORT))
        self.ip_id = rng.randint(1, 0xFFFF)
        self.sent, self.sent_ops, self.checked, self.checked_ops = 0, {}, 0, {}
        self.sports = set()

    def next_id(self):
        # __ip_select_ident: one counter per (source, destination, protocol), advanced by a
        # random amount that grows with the time since its last use. Never 0 here: with
        # IP_HDRINCL the kernel would choose one for an ID 0 itself.
        self.ip_id = (self.ip_id + 1 + self.rng.randint(0, 40)) & 0xFFFF or 1
        return self.ip_id

    def send(self, sport, op, dqpn, psn, body, pad, ackreq):
        d = raw(IP(src=self.local, dst=self.remote, id=self.next_id(), flags="DF", ttl=64) /
                UDP(sport=sport, dport=ROCE_PORT, chksum=0) /
                BTH(opcode=op, padcount=pad, pkey=0xFFFF, dqpn=dqpn, ackreq=int(ackreq),
                    psn=psn) /
                Raw(body))
        self.tx.sendto(d, (self.remote, 0))
        self.sent += 1
        self.sent_ops[NAMES[op]] = self.sent_ops.get(NAMES[op], 0) + 1

    def recv(self, timeout, my_qpn):
        """The device's next packet, checked and parsed, or None after `timeout` seconds."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.rx, self.udp], [], [], left)
            if self.udp in r:
                self.udp.recv(65536)  # the raw socket's copy is the one looked at
            if self.rx in r:
                p = self.parse(self.rx.recv(65536), my_qpn)
                if p:
                    return p

    def parse(self, d, my_qpn):
        ihl = (d[0] & 0xF) * 4
        if d[9] != socket.IPPROTO_UDP or socket.inet_ntoa(d[12:16]) != self.remote:
            return None
        sport, dport, ulen, csum = struct.unpack(">HHHH", d[ihl:ihl + 8])
        if dport != ROCE_PORT:
            return None
        p = Pkt()
        p.ip_id = struct.unpack(">H", d[4:6])[0]
        b = d[ihl + 8:]
        p.op = b[0]
        name = NAMES.get(p.op, "opcode 0x%02x" % p.op)
        what = "the device's %s (IPv4 ID 0x%04x)" % (name, p.ip_id)
        if not icrc_verifies(d):
            raise Fail("%s: its ICRC is not scapy's over the IPv4 header received" % what)
        if not d[6] & 0x40:
            raise Fail("%s: DF clear" % what)
        if d[8] != 64 or d[1] != 0:  # the program's GRH: hop limit 64, traffic class 0
            raise Fail("%s: TTL %d TOS 0x%02x, not 64 and 0" % (what, d[8], d[1]))
        if csum != 0:
            raise Fail("%s: UDP checksum 0x%04x, not 0 (--offload off)" % (what, csum))
        if ulen != len(d) - ihl:
            raise Fail("%s: UDP length %d of a %d-byte datagram" % (what, ulen, len(d) - ihl))
        p.pad = (b[1] >> 4) & 3
        pkey = struct.unpack(">H", b[2:4])[0]
        p.dqpn = struct.unpack(">I", b[4:8])[0] & 0xFFFFFF
        p.psn = struct.unpack(">I", b[8:12])[0] & 0xFFFFFF
        p.ackreq = bool(b[8] & 0x80)
        if b[1] & 0xF or pkey != 0xFFFF or p.dqpn != my_qpn:
            raise Fail("%s: BTH version %d, P_Key 0x%04x, QPN 0x%x (the peer's is 0x%x)" %
                       (what, b[1] & 0xF, pkey, p.dqpn, my_qpn))
        if p.op not in NAMES:
            raise Fail("%s: not an RC opcode the peer expects" % what)
        rest = b[12:-4]
        if p.op in RETH_OPS:
            p.va, p.rkey, p.dma_len = struct.unpack(">QII", rest[:16])
            rest = rest[16:]
        if p.op in (CMP_SWAP, FETCH_ADD):
            p.va, p.rkey, p.swap_add, p.compare = struct.unpack(">QIQQ", rest[:28])
            rest = rest[28:]
        if p.op in AETH_OPS:
            aeth = struct.unpack(">I", rest[:4])[0]
            p.syndrome, p.msn = aeth >> 24, aeth & 0xFFFFFF
            rest = rest[4:]
        if p.op == ATOMIC_ACK:
            p.orig = struct.unpack(">Q", rest[:8])[0]
            rest = rest[8:]
        if p.pad > len(rest) or any(rest[len(rest) - p.pad:]):
            raise Fail("%s: pad count %d over %d bytes, or pad bytes not 0" %
                       (what, p.pad, len(rest)))
        p.payload = rest[:len(rest) - p.pad]
        p.sport = sport
        p.name = name
        self.checked += 1
        self.checked_ops[name] = self.checked_ops.get(name, 0) + 1
        self.sports.add(sport)
        return p


class Program:
    """rxe_peer_verbs in the device's namespace, one command a line."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""

    def line(self, timeout=10):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            r, _, _ = select.select([self.p.stdout], [], [], max(left, 0))
            if not r:
                raise Fail("the uroce program said nothing in %d s" % timeout)
            more = os.read(self.p.stdout.fileno(), 65536)
            if not more:
                raise Fail("the uroce program ended (exit %s)" % self.p.wait())
            self.buf += more
        l, self.buf = self.buf.split(b"\n", 1)
        return l.decode().strip()

    def write(self, text):
        self.p.stdin.write((text + "\n").encode())
        self.p.stdin.flush()

    def cmd(self, *words):
        self.write(" ".join(w.hex() if isinstance(w, bytes) else str(w) for w in words))
        ans = self.line()
        if not ans.startswith("ok"):
            raise Fail("uroce program, %s: %s" % (words[0], ans))
        return ans


class Peer:
    def __init__(self, a, rng, prog):
        self.rng, self.prog = rng, prog
        self.wire = Wire(a.local, a.remote, rng)
        self.qpn = rng.randint(0x11, 0x3FF)  # rxe's QPNs start at 0x11
        self.sport = rxe_sport(self.qpn)
        self.sq_psn = rng.getrandbits(24)
        self.umsn = 0        # the device's responder MSN as it should be
        self.msn = 0         # this responder's MSN
        self.responses = {}  # PSN of a READ/ATOMIC request -> what answered it
        self.dups = 0        # retransmissions by the device (answered, counted)
        # The peer's own "memory" for the device's WRITE, READ and FETCH_ADD.
        self.va = 0x7F3A12300000 + (rng.getrandbits(12) << 12)
        self.rkey = rng.getrandbits(32)
        self.mem = bytearray(rng.getrandbits(8) for _ in range(16384))

    # --- as a requester -------------------------------------------------------------------
    def put(self, spec):
        op, psn, ext, payload, ackreq = spec
        pad = -len(payload) % 4
        self.wire.send(self.sport, op, self.uqpn, psn, ext + payload + b"\0" * pad, pad, ackreq)

    def message(self, kind, data, va=None):
        """The packets of one SEND or WRITE message, sent; returns them for a resend."""
        parts = chunks(data)
        ops = (seq_ops(len(parts), SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY) if kind == "send"
               else seq_ops(len(parts), WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY))
        specs = []
        for i, (op, part) in enumerate(zip(ops, parts)):
            ext = struct.pack(">QII", va, self.urkey, len(data)) if op in RETH_OPS else b""
            specs.append((op, psn_add(self.sq_psn, i), ext, part, i == len(parts) - 1))
        self.sq_psn = psn_add(self.sq_psn, len(parts))
        for s in specs:
            self.put(s)
        return specs

    def response(self, what):
        p = self.wire.recv(WAIT_S, self.qpn)
        if p is None:
            raise Fail("%s: nothing from the device in %d s" % (what, WAIT_S))
        return p

    def expect_ack(self, psn, msn, what):
        p = self.response(what)
        if p.op != ACK or p.syndrome >> 5 != 0 or p.psn != psn or p.msn != msn:
            raise Fail("%s: %s PSN 0x%x syndrome 0x%02x MSN %d, wanted ACK PSN 0x%x MSN %d" %
                       (what, p.name, p.psn, getattr(p, "syndrome", -1), getattr(p, "msn", -1),
                        psn, msn))
        return p

    def expect_quiet(self, secs, what):
        p = self.wire.recv(secs, self.qpn)
        if p is not None:
            raise Fail("%s: unexpected %s PSN 0x%x from the device" % (what, p.name, p.psn))

    def read_from_device(self, va, length, what):
        psn = self.sq_psn
        n = max(1, -(-length // MTU))
        self.put((READ_REQ, psn, struct.pack(">QII", va, self.urkey, length), b"", True))
        self.sq_psn = psn_add(psn, n)
        self.umsn += 1
        got = b""
        for i, op in enumerate(seq_ops(n, READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY)):
            p = self.response(what)
            if p.op != op or p.psn != psn_add(psn, i):
                raise Fail("%s: %s PSN 0x%x, wanted %s PSN 0x%x" %
                           (what, p.name, p.psn, NAMES[op], psn_add(psn, i)))
            if op in AETH_OPS and (p.syndrome >> 5 != 0 or p.msn != self.umsn):
                raise Fail("%s: %s AETH syndrome 0x%02x MSN %d, wanted an ACK with MSN %d" %
                           (what, p.name, p.syndrome, p.msn, self.umsn))
            got += p.payload
        return got

    # --- as a responder -------------------------------------------------------------------
    def ack(self, psn, syndrome=AETH_ACK_UNLIMITED):
        self.put((ACK, psn, struct.pack(">I", syndrome << 24 | self.msn), b"", False))

    def request(self, what):
        """The device's next new request packet; its retransmissions are answered again."""
        while True:
            p = self.response(what)
            d = (p.psn - self.epsn) & 0xFFFFFF
            if d == 0:
                return p
            if d < 0x800000:
                raise Fail("%s: %s PSN 0x%x, the peer expects 0x%x" %
                           (what, p.name, p.psn, self.epsn))
            self.dups += 1  # older: answered as rxe's duplicate_request does
            if p.psn in self.responses:
                for s in self.responses[p.psn]:
                    self.put(s)
            else:
                self.ack(psn_add(self.epsn, -1))

    def take_message(self, kind, length, what):
        """A SEND or WRITE message from the device: its payload (WRITE: its RETH checked)."""
        first, middle, last, only = ((SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY)
                                     if kind == "send" else
                                     (WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY))
        n = max(1, -(-length // MTU))
        data, reth = b"", None
        for i, op in enumerate(seq_ops(n, first, middle, last, only)):
            p = self.request(what)
            if p.op != op:
                raise Fail("%s: packet %d is %s, wanted %s" % (what, i, p.name, NAMES[op]))
            if op in RETH_OPS:
                reth = (p.va, p.rkey, p.dma_len)
            if len(p.payload) != (MTU if i < n - 1 else length - (n - 1) * MTU):
                raise Fail("%s: %s of %d bytes" % (what, p.name, len(p.payload)))
            data += p.payload
            self.epsn = psn_add(self.epsn, 1)
            if i == n - 1:
                self.msn = (self.msn + 1) & 0xFFFFFF
                if not p.ackreq:
                    raise Fail("%s: the last packet asks for no ACK" % what)
            if p.ackreq:
                self.ack(p.psn)
        return data, reth

    def take_read(self, va, length, what):
        p = self.request(what)
        if p.op != READ_REQ or (p.va, p.rkey, p.dma_len) != (va, self.rkey, length):
            raise Fail("%s: %s VA 0x%x R_Key 0x%x length %d, wanted a READ of %d at 0x%x, "
                       "R_Key 0x%x" % (what, p.name, getattr(p, "va", 0), getattr(p, "rkey", 0),
                                       getattr(p, "dma_len", 0), length, va, self.rkey))
        data = bytes(self.mem[va - self.va:va - self.va + length])
        parts = chunks(data)
        self.msn = (self.msn + 1) & 0xFFFFFF
        aeth = struct.pack(">I", AETH_ACK_UNLIMITED << 24 | self.msn)
        specs = []
        for i, (op, part) in enumerate(zip(seq_ops(len(parts), READ_FIRST, READ_MIDDLE,
                                                   READ_LAST, READ_ONLY), parts)):
            specs.append((op, psn_add(p.psn, i), aeth if op in AETH_OPS else b"", part, False))
        self.responses[p.psn] = specs
        self.epsn = psn_add(self.epsn, len(parts))
        for s in specs:
            self.put(s)
        return data

    def take_fetch_add(self, va, add, what):
        p = self.request(what)
        if p.op != FETCH_ADD or (p.va, p.rkey, p.swap_add) != (va, self.rkey, add):
            raise Fail("%s: %s, wanted FETCH_ADD of 0x%x at 0x%x R_Key 0x%x" %
                       (what, p.name, add, va, self.rkey))
        at = va - self.va
        orig = struct.unpack(">Q", self.mem[at:at + 8])[0]
        self.mem[at:at + 8] = struct.pack(">Q", (orig + add) & (2 ** 64 - 1))
        self.msn = (self.msn + 1) & 0xFFFFFF
        spec = (ATOMIC_ACK, p.psn, struct.pack(">IQ", AETH_ACK_UNLIMITED << 24 | self.msn, orig),
                b"", False)
        self.responses[p.psn] = [spec]
        self.epsn = psn_add(self.epsn, 1)
        self.put(spec)
        return orig

    # --- the script -----------------------------------------------------------------------
    def data(self, n):
        return bytes(self.rng.getrandbits(8) for _ in range(n))

    def run(self):
        pr = self.prog
        info = pr.line().split()
        if info[0] != "info":
            raise Fail("the uroce program began with %s" % " ".join(info))
        f = dict(zip(info[1::2], info[2::2]))
        self.uqpn, self.epsn = int(f["qpn"], 0), int(f["psn"], 0)
        self.uaddr, self.urkey = int(f["addr"], 0), int(f["rkey"], 0)
        if f["mtu"] != str(MTU):
            raise Fail("the device's port MTU is %s, not %d (a 1500-byte veth)" % (f["mtu"], MTU))
        pr.write("peer 0x%x 0x%x" % (self.qpn, self.sq_psn))
        if pr.line() != "ready":
            raise Fail("the uroce program did not reach RTS")
        print("peer QP 0x%x (UDP source port 0x%04x) PSN 0x%06x; device QP 0x%x PSN 0x%06x, "
              "IPv4-mapped GID index %s" % (self.qpn, self.sport, self.sq_psn, self.uqpn,
                                            self.epsn, f["gid_index"]))

        # 1. SENDs to the device.
        pr.cmd("post_recv", 1, 0 * RECV_SLOT, RECV_SLOT)
        pr.cmd("post_recv", 2, 1 * RECV_SLOT, RECV_SLOT)
        for wr, n in ((1, 301), (2, 3000)):
            d = self.data(n)
            specs = self.message("send", d)
            self.umsn += 1
            self.expect_ack(specs[-1][1], self.umsn, "SEND of %d" % n)
            pr.cmd("expect_recv", wr, n, d)
            print("1. SEND %d bytes (%s): ACK PSN 0x%06x MSN %d; received byte-exact" %
                  (n, "/".join(NAMES[s[0]] for s in specs), specs[-1][1], self.umsn))

        # 2. RDMA WRITEs into the MR.
        for off, n in ((WRITE_AT + 3, 2500), (WRITE_AT + 4096, 60)):
            d = self.data(n)
            specs = self.message("write", d, self.uaddr + off)
            self.umsn += 1
            self.expect_ack(specs[-1][1], self.umsn, "WRITE of %d" % n)
            pr.cmd("expect_mem", off - 3, b"\0" * 3 + d + b"\0" * 8)
            print("2. RDMA WRITE %d bytes (%s): ACK PSN 0x%06x MSN %d; in memory byte-exact" %
                  (n, "/".join(NAMES[s[0]] for s in specs), specs[-1][1], self.umsn))

        # 3. RDMA READs from the MR.
        src = self.data(4096)
        pr.cmd("fill", READ_AT, src)
        for off, n in ((0, 2600), (3000, 100)):
            psn = self.sq_psn
            got = self.read_from_device(self.uaddr + READ_AT + off, n, "READ of %d" % n)
            if got != src[off:off + n]:
                raise Fail("READ of %d: the responses' data is not the MR's" % n)
            print("3. RDMA READ %d bytes: %d responses from PSN 0x%06x, MSN %d, data byte-exact" %
                  (n, max(1, -(-n // MTU)), psn, self.umsn))

        # 4. FETCH_ADD.
        orig, add = self.rng.getrandbits(64), self.rng.getrandbits(40)
        pr.cmd("fill", ATOMIC_AT, struct.pack("<Q", orig))  # host order (x86: little-endian)
        psn = self.sq_psn
        self.put((FETCH_ADD, psn, struct.pack(">QIQQ", self.uaddr + ATOMIC_AT, self.urkey, add, 0),
                  b"", True))
        self.sq_psn = psn_add(psn, 1)
        self.umsn += 1
        p = self.response("FETCH_ADD")
        if p.op != ATOMIC_ACK or p.psn != psn or p.syndrome >> 5 != 0 or p.msn != self.umsn:
            raise Fail("FETCH_ADD: %s PSN 0x%x, wanted ATOMIC_ACKNOWLEDGE PSN 0x%x MSN %d" %
                       (p.name, p.psn, psn, self.umsn))
        if p.orig != orig:
            raise Fail("FETCH_ADD: original 0x%x, the MR held 0x%x" % (p.orig, orig))
        pr.cmd("expect_mem", ATOMIC_AT, struct.pack("<Q", (orig + add) & (2 ** 64 - 1)))
        print("4. FETCH_ADD 0x%x: ATOMIC_ACKNOWLEDGE PSN 0x%06x original 0x%016x; sum in memory" %
              (add, psn, orig))

        # 5. Retransmitted SENDs: each delivered once, every duplicate ACKed again.
        pr.cmd("post_recv", 3, 2 * RECV_SLOT, RECV_SLOT)
        pr.cmd("post_recv", 4, 3 * RECV_SLOT, RECV_SLOT)
        wr = 3
        for n in (200, 2100):
            d = self.data(n)
            specs = self.message("send", d)
            self.umsn += 1
            last = specs[-1][1]
            self.expect_ack(last, self.umsn, "SEND of %d" % n)
            for s in specs:  # as after a lost ACK: the same PSNs, new IPv4 IDs
                self.put(s)
            for s in specs:  # rxe's duplicate_request: one ACK per duplicate, at the last PSN
                self.expect_ack(last, self.umsn, "duplicate %s" % NAMES[s[0]])
            self.expect_quiet(0.2, "after the duplicates")
            pr.cmd("expect_recv", wr, n, d)
            pr.cmd("expect_no_recv", 300)
            print("5. SEND %d bytes sent twice (%d packets each, PSN to 0x%06x): %d ACKs of the "
                  "duplicate at PSN 0x%06x MSN %d; one receive completion" %
                  (n, len(specs), last, len(specs), last, self.umsn))
            wr += 1
            pr.cmd("post_recv", wr + 1, wr * RECV_SLOT, RECV_SLOT)  # wr_id i: slot i - 1
        # The receive posted after the first one is still there: a new SEND lands in it.
        d = self.data(64)
        specs = self.message("send", d)
        self.umsn += 1
        self.expect_ack(specs[-1][1], self.umsn, "SEND after the duplicates")
        pr.cmd("expect_recv", wr, 64, d)
        print("5. the next SEND took the next receive (wr_id %d)" % wr)

        # 6. The device as requester, the peer as responder.
        d = self.data(2500)
        pr.cmd("fill", SEND_SRC, d)
        for wr, n in ((11, 2500), (12, 77)):
            pr.cmd("post", "send", wr, SEND_SRC, n)
            got, _ = self.take_message("send", n, "the device's SEND of %d" % n)
            if got != d[:n]:
                raise Fail("the device's SEND of %d: data differs" % n)
            pr.cmd("expect_send", wr, "send", n)
            print("6. device SEND %d bytes: PSNs in order, data byte-exact; IBV_WC_SUCCESS" % n)
        va = self.va + 0x100
        pr.cmd("post", "write", 13, SEND_SRC, 2000, va, self.rkey)
        got, reth = self.take_message("write", 2000, "the device's WRITE")
        if reth != (va, self.rkey, 2000) or got != d[:2000]:
            raise Fail("the device's WRITE: RETH %s, data %s" %
                       (reth, "equal" if got == d[:2000] else "differs"))
        self.mem[0x100:0x100 + 2000] = got
        pr.cmd("expect_send", 13, "write", 2000)
        print("6. device RDMA WRITE 2000 bytes: RETH VA/R_Key/length right, data byte-exact; "
              "IBV_WC_SUCCESS")
        va = self.va + 0x1000
        pr.cmd("post", "read", 14, READ_DST, 1500, va, self.rkey)
        data = self.take_read(va, 1500, "the device's READ")
        pr.cmd("expect_send", 14, "read", 1500)
        pr.cmd("expect_mem", READ_DST, data + b"\0" * 8)
        print("6. device RDMA READ 1500 bytes: answered with 2 responses; IBV_WC_SUCCESS, "
              "data byte-exact in its memory")
        va, add = self.va + 0x3000, self.rng.getrandbits(32)
        pr.cmd("post", "fadd", 15, FADD_DST, 8, va, self.rkey, add)
        orig = self.take_fetch_add(va, add, "the device's FETCH_ADD")
        pr.cmd("expect_send", 15, "fadd", 8)
        pr.cmd("expect_mem", FADD_DST, struct.pack("<Q", orig))
        print("6. device FETCH_ADD: answered with original 0x%016x; IBV_WC_SUCCESS, the "
              "original in its memory" % orig)

        self.expect_quiet(0.3, "at the end")
        pr.write("quit")
        rc = pr.p.wait(timeout=10)
        if rc != 0:
            raise Fail("the uroce program exited %d" % rc)
        if self.dups:
            print("note: the device retransmitted %d packets (answered again)" % self.dups)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("local")
    ap.add_argument("remote")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("program", nargs="+")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    prog = Program(a.program)
    peer = None
    try:
        peer = Peer(a, rng, prog)
        peer.run()
    except (Fail, subprocess.TimeoutExpired) as e:
        print("FAIL: %s" % e)
        prog.p.kill()
        return 1
    except BaseException:
        prog.p.kill()
        raise
    finally:
        if peer:
            w = peer.wire
            print("peer_sent %d %s" % (w.sent, " ".join(
                "%s=%d" % kv for kv in sorted(w.sent_ops.items()))))
            print("uroce_checked %d %s" % (w.checked, " ".join(
                "%s=%d" % kv for kv in sorted(w.checked_ops.items()))))
            print("uroce_source_ports %s" % " ".join("0x%04x" % s for s in sorted(w.sports)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
