#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Checks the UDP source ports of a capture against rxe's rule (net/udp_sport.h).

usage: udp_sport_check.py rc RES WIRE ADDR_A ADDR_B
       udp_sport_check.py ud WIRE ADDR_B
       udp_sport_check.py cm WIRE

RES: host B's `uroce res` qp lines taken while its RC QPs were in RTS. WIRE: tshark fields,
comma-separated: ip.src, udp.srcport, infiniband.bth.destqp, infiniband.deth.srcqp, udp.length.
  rc: each of B's QPs has the port rxe gives it after its address vector (flow label 0: the
      label rdma_calc_flow_label makes of the two QP numbers), and `uroce res` shows it; the
      ports differ per QP; on the wire, every packet either QP of a pair sends comes from that
      port (the label is symmetric, so both ends of a pair share it), and B sent GSO trains.
  ud: every UD packet B sent (a DETH) comes from 0xC000 + hash_32(source QP, 14).
  cm: every MAD (to QP 1) either side sent comes from QP1's port.
"""
import sys


def hash_32(v, bits):
    return ((v * 0x61C88647) & 0xFFFFFFFF) >> (32 - bits)


def sport_for_qpn(qpn):
    return 0xC000 + (hash_32(qpn, 14) & 0x3FFF)


def sport_for_path(fl, lqpn, rqpn):
    if not fl:
        v = lqpn * rqpn
        v ^= v >> 20
        v ^= v >> 40
        fl = v & 0xFFFFF
    low, high = fl & 0x3FFF, fl & 0xFC000
    return (low ^ (high >> 14)) | 0xC000


def num(x):
    return int(x, 0) if x else None


def wire(path):
    out = []
    for line in open(path):
        f = line.rstrip("\n").split(",")
        if len(f) < 5 or not f[2]:
            continue
        out.append((f[0], int(f[1]), num(f[2]), num(f[3]), int(f[4] or 0)))
    return out


def res(path):
    qps = []
    for line in open(path):
        w = line.split()
        kv = dict(zip(w[2::2], w[3::2]))
        qps.append((int(w[1], 16), int(kv["dest_qpn"], 16), int(kv["sport"])))
    return qps


def main():
    bad = []
    mode = sys.argv[1]
    if mode == "rc":
        qps, pkts, a, b = res(sys.argv[2]), wire(sys.argv[3]), sys.argv[4], sys.argv[5]
        port = {}
        for qpn, dest, sport in qps:
            want = sport_for_path(0, qpn, dest)
            print("host B QP 0x%x -> 0x%x: sport 0x%04x (rxe's 0x%04x)" % (qpn, dest, sport, want))
            if sport != want:
                bad.append("QP 0x%x: uroce res says sport 0x%04x, rxe's is 0x%04x" % (qpn, sport, want))
            port[(b, dest)] = want  # what B's QP sends to A's
            port[(a, qpn)] = want   # what A's QP sends to B's
        if len(qps) < 4 or len({p for _, _, p in qps}) != len(qps):
            bad.append("%d QPs, not 4 with a port each" % len(qps))
        seen, trains = {}, 0
        for src, sport, dqp, _, ulen in pkts:
            want = port.get((src, dqp))
            if want is None:
                bad.append("a packet from %s to QP 0x%x, no QP of the test" % (src, dqp))
                continue
            seen[(src, dqp)] = seen.get((src, dqp), 0) + 1
            if sport != want:
                bad.append("%s to QP 0x%x from port 0x%04x, not 0x%04x" % (src, dqp, sport, want))
            trains += src == b and ulen > 1200
        for k in sorted(port):
            print("%s to QP 0x%x: %d packets" % (k[0], k[1], seen.get(k, 0)))
            if not seen.get(k):
                bad.append("no packet from %s to QP 0x%x" % k)
        print("GSO trains from B: %d" % trains)
        if not trains:
            bad.append("host B sent no GSO train (one socket per port: a train is one sendmsg)")
    elif mode == "ud":
        pkts, b = wire(sys.argv[2]), sys.argv[3]
        n = 0
        for src, sport, dqp, srcqp, _ in pkts:
            if src != b or srcqp is None or dqp == 1:
                continue
            n += 1
            if sport != sport_for_qpn(srcqp):
                bad.append("UD QP 0x%x sent from 0x%04x, not 0x%04x" % (srcqp, sport, sport_for_qpn(srcqp)))
        print("UD packets from B: %d" % n)
        if not n:
            bad.append("no UD packet from B")
    elif mode == "cm":
        mads = [p for p in wire(sys.argv[2]) if p[2] == 1]
        srcs = {p[0] for p in mads}
        print("MADs: %d from %d hosts" % (len(mads), len(srcs)))
        for src, sport, _, _, _ in mads:
            if sport != sport_for_qpn(1):
                bad.append("a MAD from %s from port 0x%04x, not QP1's 0x%04x" % (src, sport, sport_for_qpn(1)))
        if len(srcs) < 2:
            bad.append("MADs from %d hosts, not both" % len(srcs))
    for line in bad[:10]:
        print("FAIL: " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
