#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Checks a `uroce ladder` SVG against the captures it was made of, as tshark reads them.

usage: ladder_check.py SVG --port P --capture FILE=ADDR [--capture FILE=ADDR] [--expect ...]

Each capture is named with its device's address, so a packet's sender's copy (ip.src ==
ADDR) is told from its receiver's. The expected packets are the senders' copies, in time
order, per ordered pair of lanes (sender address -> receiver address and QP). The SVG must
hold them all, and only them: every arrow is the next packet of its lane pair (opcode and
PSN equal, its time tshark's within a microsecond), every band the next data-n packets of
its lane pair, starting and ending at its PSNs; rows are in time order. Arrows that end
short must be exactly the packets the receiver's capture does not hold, and those it holds
with a bad ICRC (as many as --bad-icrc, the devices' drop counters, says).

--expect names what the picture must show: retx (a retransmission linked to an earlier
packet of the same PSN and opcode), rnr (an RNR NAK), nak, cm:REQ,REP,RTU (those CM messages
on CM lanes, in that order), xrc (XRC requests to a TGT QP, with an XRCETH SRQ number),
events (trace events on lanes), pids (lanes named with a process).
"""
import argparse
import collections
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = '{http://www.w3.org/2000/svg}'
CM_ATTR = {'REQ': 0x10, 'MRA': 0x11, 'REJ': 0x12, 'REP': 0x13, 'RTU': 0x14, 'DREQ': 0x15,
           'DREP': 0x16}


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def tshark(path, port):
    fields = ['frame.time_epoch', 'ip.src', 'ip.dst', 'infiniband.bth.opcode',
              'infiniband.bth.destqp', 'infiniband.bth.psn', 'infiniband.aeth.syndrome',
              'ipv6.src', 'ipv6.dst']
    cmd = ['tshark', '-r', path, '-d', 'udp.port==%d,infiniband' % port, '-T', 'fields',
           '-E', 'separator=\t', '-E', 'occurrence=f']
    for f in fields:
        cmd += ['-e', f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        t, src, dst, op, qp, psn, syn, src6, dst6 = (line.split('\t') + [''] * 9)[:9]
        if not op:
            continue
        src, dst = src or src6, dst or dst6
        rows.append({'t': t, 'src': src, 'dst': dst, 'op': int(op), 'qp': int(qp, 0),
                     'psn': int(psn), 'syn': int(syn) if syn else None})
    return rows


def us(t_epoch):
    sec, _, frac = t_epoch.partition('.')
    return int(sec) * 1000000 + int((frac + '000000')[:6])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('svg')
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--capture', action='append', required=True)
    ap.add_argument('--expect', action='append', default=[])
    ap.add_argument('--bad-icrc', type=int, default=0,
                    help='packets the receivers dropped for their ICRC (uroce counters)')
    a = ap.parse_args()

    sent, received = [], collections.Counter()
    t0 = None
    for spec in a.capture:
        path, _, addr = spec.rpartition('=')
        for r in tshark(path, a.port):
            r['us'] = us(r['t'])
            t0 = r['us'] if t0 is None else min(t0, r['us'])
            # By BTH: a corrupted copy keeps it (the fault injector flips a bit after it).
            key = (r['src'], r['dst'], r['qp'], r['op'], r['psn'])
            if r['src'] == addr:
                sent.append(r)
            if r['dst'] == addr:
                received[key] += 1
    if not sent:
        fail('the captures hold no packet')
    sent.sort(key=lambda r: r['us'])
    # Lost: sent more often than the receiver's capture (when given) holds it.
    receivers = {spec.rpartition('=')[2] for spec in a.capture}
    short_expected = 0
    seen = collections.Counter()
    for r in sent:
        key = (r['src'], r['dst'], r['qp'], r['op'], r['psn'])
        seen[key] += 1
        if r['dst'] in receivers and seen[key] > received[key]:
            short_expected += 1

    root = ET.parse(a.svg).getroot()
    lanes = {}
    for g in root.iter(NS + 'g'):
        if 'lane' in g.get('class', '').split():
            name = g.get('data-name')
            parts = name.split()
            qpn = 1 if parts[1] == 'CM' else int(parts[2], 16) if parts[1] == 'qp' else None
            lanes[g.get('data-lane')] = {'name': name, 'addr': parts[0], 'qpn': qpn,
                                         'pid': int(g.get('data-pid'))}
    pkts = [g for g in root.iter(NS + 'g') if 'pkt' in g.get('class', '').split()]
    events = [g for g in root.iter(NS + 'g') if 'ev' in g.get('class', '').split()]
    print('svg: %d lanes, %d packet rows (%d bands), %d events; captures: %d packets sent'
          % (len(lanes), len(pkts), sum('band' in g.get('class') for g in pkts), len(events),
             len(sent)))

    per_pair = collections.defaultdict(collections.deque)
    for r in sent:
        per_pair[(r['src'], r['dst'], r['qp'])].append(r)
    last_t = -1
    short_drawn = 0
    by_id = {}
    for g in pkts:
        by_id[g.get('id')] = g
        src, dst = lanes[g.get('data-from')], lanes[g.get('data-to')]
        pair = (src['addr'], dst['addr'], dst['qpn'])
        n = int(g.get('data-n'))
        t = int(g.get('data-t'))
        if t < last_t:
            fail('%s at +%d us drawn after a row at +%d us' % (g.get('id'), t, last_t))
        last_t = t
        q = per_pair[pair]
        if len(q) < n:
            fail('%s: %d packets from %s to %s, the captures have %d more' %
                 (g.get('id'), n, src['name'], dst['name'], len(q)))
        run = [q.popleft() for _ in range(n)]
        first, last = run[0], run[-1]
        if int(g.get('data-op'), 16) != first['op'] or int(g.get('data-psn'), 16) != first['psn']:
            fail('%s is opcode %s psn %s, the capture\'s next packet from %s to %s is '
                 'opcode %d psn 0x%x' % (g.get('id'), g.get('data-op'), g.get('data-psn'),
                                         src['name'], dst['name'], first['op'], first['psn']))
        if abs((first['us'] - t0) - t) > 1:
            fail('%s: drawn at +%d us, sent at +%d us' % (g.get('id'), t, first['us'] - t0))
        if n > 1 and int(g.get('data-last-psn'), 16) != last['psn']:
            fail('%s: band ends at psn %s, its %dth packet has psn 0x%x' %
                 (g.get('id'), g.get('data-last-psn'), n, last['psn']))
        if 'short' in g.get('class').split():
            short_drawn += n
    left = sum(len(q) for q in per_pair.values())
    if left:
        fail('%d packets of the captures are not drawn' % left)
    bad = sum(int(g.get('data-n')) for g in pkts if g.get('data-fate') == 'bad_icrc')
    if bad != a.bad_icrc:
        fail('%d arrows end short for a bad ICRC, the receivers dropped %d' % (bad, a.bad_icrc))
    if short_drawn != short_expected + a.bad_icrc:
        fail('%d arrows end short, %d packets never reached their receiver\'s capture and %d '
             'arrived with a bad ICRC' % (short_drawn, short_expected, a.bad_icrc))
    print('every packet drawn once, in order; %d short (as the captures say: %d lost, %d bad '
          'ICRC)' % (short_drawn, short_expected, bad))

    for g in pkts:
        orig = g.get('data-orig')
        if not orig:
            continue
        o = by_id.get(orig)
        if o is None:
            fail('%s is a retransmission of %s, which is not drawn' % (g.get('id'), orig))
        # The original may be drawn inside a band: then its PSN is in the band's range.
        psn, first = int(g.get('data-psn'), 16), int(o.get('data-psn'), 16)
        last = int(o.get('data-last-psn') or o.get('data-psn'), 16)
        in_range = (psn - first) % (1 << 24) <= (last - first) % (1 << 24)
        same_op = o.get('data-op') == g.get('data-op') or int(o.get('data-n')) > 1
        if not in_range or not same_op or int(o.get('data-t')) >= int(g.get('data-t')) or \
                (o.get('data-from'), o.get('data-to')) != (g.get('data-from'), g.get('data-to')):
            fail('%s (psn %s op %s) is linked to %s (psn %s op %s), not its original' %
                 (g.get('id'), g.get('data-psn'), g.get('data-op'), orig, o.get('data-psn'),
                  o.get('data-op')))
    for want in a.expect:
        if want == 'retx':
            retx = [g for g in pkts if 'retx' in g.get('class').split() and g.get('data-orig')]
            if not retx:
                fail('no retransmission drawn')
            print('%d retransmission rows, each linked to its original' % len(retx))
        elif want in ('rnr', 'nak'):
            t = 0x20 if want == 'rnr' else 0x60
            hits = [g for g in pkts if g.get('data-syn') and int(g.get('data-syn'), 16) & 0x60 == t]
            if not hits:
                fail('no %s drawn' % want)
            print('%d %s rows' % (len(hits), want))
        elif want.startswith('cm:'):
            names = want[3:].split(',')
            got = [int(g.get('data-mad'), 16) for g in pkts if g.get('data-mad')]
            it = iter(got)
            if not all(CM_ATTR[n] in it for n in names):
                fail('CM messages %s not in order in %s' % (names, [hex(x) for x in got]))
            for g in pkts:
                if g.get('data-mad') and (lanes[g.get('data-from')]['qpn'] != 1 or
                                          lanes[g.get('data-to')]['qpn'] != 1):
                    fail('%s, a CM MAD, is not between CM lanes' % g.get('id'))
            print('CM messages on CM lanes: ' + ' '.join(names))
        elif want == 'xrc':
            hits = [g for g in pkts if 0xa0 <= int(g.get('data-op'), 16) <= 0xbf and
                    int(g.get('data-op'), 16) != 0xb1 and g.get('data-srqn')]
            if not hits:
                fail('no XRC request with an SRQ number drawn')
            print('%d XRC request rows, SRQ %s' % (len(hits), hits[0].get('data-srqn')))
        elif want == 'events':
            if not events:
                fail('no trace event on a lane')
        elif want == 'pids':
            named = [l for l in lanes.values() if l['qpn'] not in (1, None)]
            if not named or any(l['pid'] < 0 for l in named):
                fail('a QP lane without its process: %s' % [l['name'] for l in named])
        else:
            fail('unknown --expect ' + want)
    print('PASS: ' + a.svg)


main()
