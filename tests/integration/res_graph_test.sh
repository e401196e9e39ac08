#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce res --graph` (docs/xrc.md, "The graph") of unmodified ibv_xsrq_pingpong: a server
# with -c 3 on one device, three clients on another. Taken while every QP is connected (the
# programs stopped with SIGSTOP once both devices show them in RTS), the server device's graph
# must show the one domain with the server's handle, its XRC SRQ and its CQ, the three TGT
# QPs with the handles that opened them, and each client's INI QP on the other device
# (its process, its QP number the TGT QP's peer) sending to one of them; --pid of a client
# shows its PD with its MR, QPs and SRQ, and the CQs they complete on. Rendered by
# rsvg-convert; the pictures are kept in $UROCE_BUILD/test-artifacts/res_graph/.
. "$(dirname "$0")/lib.sh"
need ibv_xsrq_pingpong
art=$UROCE_BUILD/test-artifacts/res_graph
rm -rf "$art"
mkdir -p "$art"
start_device server 127.0.0.26
start_device client 127.0.0.27
port=$(tcp_port)
"${VERBS_ENV[@]}" ibv_xsrq_pingpong -d server -g 0 -p "$port" -c 3 -n 4096 >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
spid=$! # env execs the program: this is its pid
stop_all() { kill -KILL "$spid" "${cpids[@]}" 2>/dev/null; wait 2>/dev/null; }
tcp_port_ready "$port" $spid
cpids=()
for i in 1 2 3; do
    "${VERBS_ENV[@]}" ibv_xsrq_pingpong -d client -g 0 -p "$port" -n 4096 127.0.0.1 \
        >"$UROCE_RUNTIME_DIR/client$i.out" 2>&1 &
    cpids+=($!)
done
ready=0
for _ in $(seq 1500); do
    t=$("$UROCE" res server qp | grep -c ' type XRC_TGT state RTS ')
    n=$("$UROCE" res client qp | grep -c ' type XRC_INI state RTS ')
    if [ "$t" = 3 ] && [ "$n" = 3 ]; then ready=1; break; fi
    kill -0 $spid 2>/dev/null || break
    sleep 0.02
done
kill -STOP $spid "${cpids[@]}" 2>/dev/null
if [ $ready != 1 ]; then
    stop_all
    cat "$UROCE_RUNTIME_DIR"/*.out
    fail "the three connections never were all in RTS (TGT $t, INI $n)"
fi
"$UROCE" res server | grep -E '^(xrcd|srq|qp) '
"$UROCE" res --graph server -o "$art/server.svg" || { stop_all; fail "uroce res --graph server"; }
"$UROCE" res --graph client --pid "${cpids[0]}" -o "$art/client-pid.svg" ||
    { stop_all; fail "uroce res --graph --pid"; }
stop_all

python3 - "$art/server.svg" "$art/client-pid.svg" "${cpids[*]}" "$spid" <<'PY' || fail "the graph is not the run's"
import sys, xml.etree.ElementTree as ET
NS = '{http://www.w3.org/2000/svg}'
def graph(path):
    nodes, edges = {}, []
    for g in ET.parse(path).iter(NS + 'g'):
        cls = g.get('class', '').split()
        if cls and cls[0] == 'node':
            nodes[g.get('id')] = (cls[1], g.attrib)
        elif cls and cls[0] == 'edge':
            edges.append((cls[1], g.get('data-from'), g.get('data-to')))
    return nodes, edges
def fail(msg):
    print('FAIL: ' + msg); sys.exit(1)
clients, server = set(sys.argv[3].split()), sys.argv[4]
nodes, edges = graph(sys.argv[1])
of = lambda c: {i: a for i, (k, a) in nodes.items() if k == c}
xrcd, srq, tgt, ini, proc = of('xrcd'), of('srq'), of('tgt'), of('ini'), of('proc')
print('server graph: %d domains, %d SRQs, %d TGT QPs, %d INI QPs, %d processes, %d edges'
      % (len(xrcd), len(srq), len(tgt), len(ini), len(proc), len(edges)))
if len(xrcd) != 1: fail('%d domains, the server has one' % len(xrcd))
(xid, x), = xrcd.items()
if not srq or any(a['data-pid'] != server for a in srq.values()):
    fail('the domain\'s SRQ is missing or not the server\'s: %s' % list(srq.values()))
if any(a['data-cq'] in ('', '0') for a in srq.values()): fail('an XRC SRQ without its CQ')
if [a['data-pid'] for a in proc.values()] != [server]: fail('handle holders: %s' % list(proc.values()))
if ('holds', 'server/pid/' + server, xid) not in edges: fail('no edge from the server to its domain')
if len(tgt) != 3: fail('%d TGT QPs, the server has 3' % len(tgt))
for t, a in tgt.items():
    if ('tgt', xid, t) not in edges: fail('%s is not drawn in the domain' % t)
    if not a['data-holders'].startswith(server + '/'): fail('%s opened by %s' % (t, a['data-holders']))
    if ('opened', 'server/pid/' + server, t) not in edges: fail('no handle edge to ' + t)
if len(ini) != 3: fail('%d INI QPs, one per client expected' % len(ini))
if {a['data-pid'] for a in ini.values()} != clients:
    fail('INI QPs of pids %s, the clients are %s' % ({a['data-pid'] for a in ini.values()}, clients))
for i, a in ini.items():
    if a['data-dev'] != 'client': fail('%s is not on the client device' % i)
    to = [t for k, f, t in edges if k == 'sends' and f == i]
    if len(to) != 1 or to[0] not in tgt: fail('%s sends to %s' % (i, to))
    if tgt[to[0]]['data-peer-qpn'] != a['data-qpn'] or a['data-dest-qpn'] != tgt[to[0]]['data-qpn']:
        fail('%s and %s do not name each other' % (i, to[0]))
nodes, edges = graph(sys.argv[2])
kinds = {}
for k, a in nodes.values(): kinds[k] = kinds.get(k, 0) + 1
print('client --pid graph: %s, %d edges' % (kinds, len(edges)))
for k in ('pd', 'mr', 'qp', 'cq', 'xrcd'):
    if not kinds.get(k): fail('no %s in the --pid graph' % k)
if not any(k == 'pd' for k, f, t in edges) or not any(k == 'cq' for k, f, t in edges):
    fail('no PD -> object or QP -> CQ edge in the --pid graph')
print('PASS: the graph is the run\'s')
PY
if command -v rsvg-convert >/dev/null; then
    for f in server client-pid; do
        rsvg-convert -o "$art/$f.png" "$art/$f.svg" 2>"$UROCE_RUNTIME_DIR/rsvg.err" &&
            [ ! -s "$UROCE_RUNTIME_DIR/rsvg.err" ] || fail "rsvg-convert $f.svg: $(cat "$UROCE_RUNTIME_DIR/rsvg.err")"
        echo "rendered: $art/$f.png"
    done
else
    echo "SKIPPED rendering: rsvg-convert is not installed (librsvg2-bin; scripts/setup.sh)"
fi
echo PASS
