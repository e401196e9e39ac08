#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce ladder` (docs/ladder.md) of real runs: Debian's unmodified programs, server and
# client as two processes on two devices, each device capturing. The SVG is checked against
# the captures as tshark reads them, packet for packet in time order, bands adding up
# (ladder_check.py), and rendered: the SVG by librsvg's rsvg-convert, the HTML by headless
# Chromium, whose script must have run. The pictures are kept in the build tree,
# $UROCE_BUILD/test-artifacts/ladder/MODE/.
#   usage: ladder_test.sh MODE
#   loss   ibv_rc_pingpong, the server's device losing 4% and corrupting 2% of its first 300
#          packets both ways (seeded): lost and bad-ICRC packets end short, retransmissions
#          link to their originals
#   rnr    ib_send_bw -r 1 -e (one receive posted at a time, the server sleeping on CQ events):
#          RNR NAKs, and the sends again
#   xsrq   ibv_xsrq_pingpong: XRC SENDs from the client's INI QP through the server's TGT QP
#          to its XRC SRQ; with `uroce trace`, the lanes name their processes
#   rping  rping -C 3: the CM exchange (REQ, REP, RTU, DREQ, DREP) on the CM lanes
#   perf   ib_write_bw -D 4 (hundreds of thousands of packets): the ladder is made, is
#          under 2 MB and holds every packet the devices sent (their counters) in its bands
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: ladder_test.sh MODE}
need tshark
art=$UROCE_BUILD/test-artifacts/ladder/$mode
rm -rf "$art"
mkdir -p "$art"
dir=$UROCE_RUNTIME_DIR
port=$(tcp_port)
check=(python3 "$(dirname "$0")/ladder_check.py" --port "$UROCE_UDP_PORT")

# Two devices per mode, on addresses no other test uses, each capturing.
case $mode in
loss) sa=127.0.0.16 ca=127.0.0.17 ;;
rnr) sa=127.0.0.18 ca=127.0.0.19 ;;
xsrq) sa=127.0.0.20 ca=127.0.0.21 ;;
rping) sa=127.0.0.22 ca=127.0.0.23 ;;
perf) sa=127.0.0.24 ca=127.0.0.25 ;;
*) fail "unknown mode $mode" ;;
esac
start_device server "$sa" --pcap "$dir/server.pcap"
start_device client "$ca" --pcap "$dir/client.pcap"
caps=(--capture "$dir/server.pcap=$sa" --capture "$dir/client.pcap=$ca")

case $mode in
loss)
    need ibv_rc_pingpong
    "$UROCE" faults loss=0.04,corrupt=0.02,seed=29 server >/dev/null || fail "uroce faults"
    # The faults end after the first 300 packets the server sees: a pingpong's last ACK lost
    # after its receiver has exited would be retried against a QP that is gone (drop bad_qp,
    # RETRY_EXC_ERR), as on hardware.
    faults_off_later() {
        for _ in $(seq 600); do
            n=$("$UROCE" counters server | awk '$1 == "counters" { print $5 }')
            [ "${n:-0}" -ge 300 ] && break
            kill -0 "$1" 2>/dev/null || break
            sleep 0.01
        done
        "$UROCE" faults off server >/dev/null
        tcp_port_ready "$port" "$1"
    }
    PAIR_READY=faults_off_later_bg
    faults_off_later_bg() {
        tcp_port_ready "$port" "$1"
        faults_off_later "$1" &
    }
    run_pair ibv_rc_pingpong -d server -g 0 -p "$port" -n 80 -s 4096 -- \
        ibv_rc_pingpong -d client -g 0 -p "$port" -n 80 -s 4096 127.0.0.1
    unset PAIR_READY
    wait
    # Corrupted packets reach the receiver, which drops them (drop bad_icrc).
    bad=0
    for d in server client; do
        n=$("$UROCE" counters "$d" | awk '$1 == "drop" && $2 == "bad_icrc" { print $3 }')
        bad=$((bad + n))
    done
    echo "packets dropped for their ICRC: $bad"
    [ "$bad" -gt 0 ] || fail "no corrupted packet arrived"
    expects=(--expect retx --bad-icrc "$bad")
    ;;
rnr)
    need ib_send_bw
    # The server sleeps on CQ events (-e): each repost of its one receive waits for a
    # wake-up, while the sends keep coming, so RNR NAKs follow. Polling, it kept up with an
    # ASan-built device now and then (no RNR NAK in 200 sends).
    run_pair ib_send_bw -d server -p "$port" -r 1 -n 200 -s 64 -e -- \
        ib_send_bw -d client -p "$port" -r 1 -n 200 -s 64 127.0.0.1
    rnr=$("$UROCE" counters client | awk '$1 == "counters_retx" { print $9 }')
    echo "RNR NAKs the client's device received: $rnr"
    [ "${rnr:-0}" -gt 0 ] || fail "no RNR NAK happened (counters_retx)"
    expects=(--expect rnr --expect retx)
    ;;
xsrq)
    need ibv_xsrq_pingpong
    run_pair ibv_xsrq_pingpong -d server -g 0 -p "$port" -c 1 -n 20 -- \
        ibv_xsrq_pingpong -d client -g 0 -p "$port" -n 20 127.0.0.1
    "$UROCE" trace >"$dir/trace.txt" || fail "uroce trace"
    expects=(--expect xrc --expect events --expect pids)
    ;;
rping)
    need rping
    PAIR_READY=wait_listener
    wait_listener() { cm_listening_on "$port" "$1"; }
    run_pair rping -s -a "$sa" -p "$port" -C 3 -v -- rping -c -I "$ca" -a "$sa" -p "$port" -C 3 -v
    unset PAIR_READY
    expects=(--expect cm:REQ,REP,RTU,DREQ,DREP)
    ;;
perf)
    need ib_write_bw
    # -F: perftest's report calibrates the TSC against gettimeofday over 200 busy-waits
    # (get_cpu_mhz) and exits "Can't produce a report" when a loaded 2-core host preempts it
    # (CI: "Correlation coefficient r^2: 0.79 < 0.9"); with -F it reports anyway. This test
    # reads the devices' counters and captures, never perftest's figures.
    run_pair ib_write_bw -d server -p "$port" -D 4 -F -- \
        ib_write_bw -d client -p "$port" -D 4 -F 127.0.0.1
    ;;
esac
for d in server client; do "$UROCE" capture stop "$d" >/dev/null; done
trace=()
[ -f "$dir/trace.txt" ] && trace=(--trace "$dir/trace.txt") && cp "$dir/trace.txt" "$art/"

svg=$art/ladder.svg html=$art/ladder.html
start=$(date +%s%N)
"$UROCE" ladder --from "$dir/server.pcap" "$dir/client.pcap" "${trace[@]}" -o "$svg" ||
    fail "uroce ladder -o $svg"
end=$(date +%s%N)
"$UROCE" ladder --from "$dir/server.pcap" "$dir/client.pcap" "${trace[@]}" -o "$html" ||
    fail "uroce ladder -o $html"
size=$(stat -c %s "$svg")
echo "ladder of $(stat -c %s "$dir/server.pcap") + $(stat -c %s "$dir/client.pcap") bytes of" \
    "capture: $(( (end - start) / 1000000 )) ms, $size bytes of SVG"

if [ "$mode" = perf ]; then
    # Too many packets for tshark in the time a test has: the devices' own counts instead.
    sent=0
    for d in server client; do
        n=$("$UROCE" counters "$d" | awk '$1 == "counters" { print $3 }')
        sent=$((sent + n))
    done
    drawn=$(python3 -c '
import sys, xml.etree.ElementTree as ET
g = [e for e in ET.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}g")
     if "pkt" in e.get("class", "").split()]
print(sum(int(e.get("data-n")) for e in g), len(g))' "$svg")
    echo "devices sent $sent packets; the SVG's rows (packets, rows): $drawn"
    [ "${drawn% *}" = "$sent" ] || fail "the SVG draws ${drawn% *} packets, the devices sent $sent"
    # (An ASan build sends fewer in its 4 s; the normal one some 400,000, docs/ladder.md.)
    [ "$sent" -gt 20000 ] || fail "only $sent packets in 4 s"
    [ "$size" -lt 2000000 ] || fail "the SVG is $size bytes (2 MB at most)"
else
    "${check[@]}" "$svg" "${caps[@]}" "${expects[@]}" || fail "the SVG does not match the captures"
fi

# Rendered by real renderers, with no error.
if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$art/ladder.png" "$svg" 2>"$dir/rsvg.err" || fail "rsvg-convert: $(cat "$dir/rsvg.err")"
    [ -s "$dir/rsvg.err" ] && fail "rsvg-convert: $(cat "$dir/rsvg.err")"
    echo "rendered: $art/ladder.png ($(stat -c %s "$art/ladder.png") bytes)"
else
    echo "SKIPPED rendering the SVG: rsvg-convert is not installed (librsvg2-bin; scripts/setup.sh)"
fi
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$chrome" ]; then
    # The page's script marks the body once it has set up zoom and hovering: the DOM after
    # it ran must say so. Root needs --no-sandbox.
    flags=(--headless --no-sandbox --disable-gpu --user-data-dir="$dir/chromium" --window-size=1400,1000)
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$html" >"$dir/dom.html" 2>"$dir/chromium.err" ||
        fail "chromium --dump-dom: $(tail -5 "$dir/chromium.err")"
    grep -q 'data-ladder="ready"' "$dir/dom.html" ||
        fail "the HTML's script did not run: $(grep -i 'uncaught\|error' "$dir/chromium.err" | tail -5)"
    # What hovering the first arrow shows: its lanes, opcode and PSN, as the SVG has them.
    python3 - "$dir/dom.html" "$svg" <<'PY' || fail "the HTML's hover text is not the packet's"
import html, re, sys, xml.etree.ElementTree as ET
dom = open(sys.argv[1]).read()
tip = html.unescape(re.search(r'data-first-tip="([^"]*)"', dom).group(1))
ns = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[2]).getroot()
lanes = {g.get('data-lane'): g.get('data-name') for g in root.iter(ns + 'g')
         if g.get('class') == 'lane'}
g = next(g for g in root.iter(ns + 'g') if 'pkt' in g.get('class', '').split())
want = ['from ' + lanes[g.get('data-from')], 'to   ' + lanes[g.get('data-to')],
        'opcode ' + g.get('data-op'), 'psn ' + g.get('data-psn'), 'fate ' + g.get('data-fate')]
missing = [w for w in want if w not in tip]
print('hover text of the first arrow:\n' + tip)
sys.exit(1 if missing else 0)
PY
    timeout 120 "$chrome" "${flags[@]}" --screenshot="$art/ladder-html.png" "file://$html" \
        >/dev/null 2>>"$dir/chromium.err" || fail "chromium --screenshot: $(tail -5 "$dir/chromium.err")"
    [ -s "$art/ladder-html.png" ] || fail "chromium wrote no screenshot"
    echo "rendered: $art/ladder-html.png ($(stat -c %s "$art/ladder-html.png") bytes)"
else
    echo "SKIPPED rendering the HTML: chromium is not installed (scripts/setup.sh)"
fi
echo PASS
