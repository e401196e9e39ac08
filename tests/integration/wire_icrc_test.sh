#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# uroce's packets as another receiver sees them (issue 26, acceptance 3, its ICRC half): two
# hosts (twohost_lib.sh: network namespaces joined by a veth pair, a device on each, offloads
# on), a 64 KiB ib_write_bw (unmodified perftest) from B to A, and tshark on host A's end of
# the veth (the interface, not the device's capture). scapy (tests/unit/icrc_scapy_check.py,
# scapy.contrib.roce's compute_icrc) recomputes every RoCEv2 packet's ICRC over the IPv4 and
# UDP headers as they were on the wire, with the IPv4 ID the kernel gave it: all must match.
#
# Where the capture is taken: the devices send UDP GSO trains (one sendmsg, many packets). On
# a veth that takes UDP GSO (the default, with transmit checksum offload on) a train crosses
# the link as one GSO datagram and a packet socket sees it whole, before any segment has an
# IPv4 header of its own: nothing on that "wire" is what a NIC would put on a real one. So the
# veth's transmit checksum offload is turned off on both ends (ethtool -K eth0 tx off): the
# kernel then cuts each train into datagrams in software before the link, numbering their
# IPv4 IDs 0, 1, 2, ... as a NIC's segmentation would, and the tap sees each packet with its
# real header. The devices still send trains (tx_trains > 0 is checked), and a train seen
# whole would fail the check (its last four bytes are no ICRC of the datagram).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohost_lib.sh"
need tshark
need ib_write_bw
need ethtool
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
    skip "/usr/bin/python3 with scapy (python3-scapy) is not installed"
SCAPY_CHECK="$(cd "$(dirname "$0")/../unit" && pwd)/icrc_scapy_check.py"
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}
PCAP_WIRE=$UROCE_RUNTIME_DIR/wire.pcap
twohost_setup
for ns in "$NS_A" "$NS_B"; do
    ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null || fail "ethtool -K eth0 tx off"
done

tap_start "$PCAP_WIRE" 128  # before the first packet (perftest's TCP setup comes first)
PAIR_TIMEOUT=60 PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ib_write_bw -s 65536 \
    -p "$PORT" -n 200 -- "${HOST_B[@]}" ib_write_bw -s 65536 -p "$PORT" -n 200 "$ADDR_A"
check_perftest_results ib_write_bw "$UROCE_RUNTIME_DIR/client.out"
tap_stop

trains=$("${HOST_B[@]}" "$UROCE" counters uroce0 | offload_field tx_trains)
echo "host B sent $trains GSO trains"
if [ "$("${HOST_B[@]}" "$UROCE" counters uroce0 | offload_field gso)" = "off (ENOPROTOOPT)" ]; then
    echo "note: this kernel has no UDP GSO: packets went one datagram each"
else
    [ "${trains:-0}" -gt 0 ] || fail "host B sent no GSO train"
fi
# The IPv4 IDs the kernel gave host B's packets: its trains' segments are numbered 0, 1, ...
ids=$(tshark -r "$PCAP_WIRE" -T fields -e ip.id -Y "ip.src == $ADDR_B" 2>/dev/null | sort -u | wc -l)
echo "host B's packets on the veth have $ids different IPv4 IDs"
[ "$ids" -gt 1 ] || fail "host B's packets all have one IPv4 ID: no train was cut"
out=$(/usr/bin/python3 "$SCAPY_CHECK" "$PCAP_WIRE" --port "$UDP" 2>&1) || fail "scapy ICRC check: $out"
echo "$out"
n=$(echo "$out" | awk '/^checked/ { print $2 }')
# Every frame the tap kept (a busy host's tap may drop some: not the devices' doing, and
# tshark says how many), and most of the run's 12,800 WRITE packets (200 messages of 64 at
# the 1024-byte MTU) and their ACKs.
frames=$(tshark -r "$PCAP_WIRE" -T fields -e frame.number 2>/dev/null | wc -l)
[ "${n:-0}" = "$frames" ] || fail "scapy checked ${n:-0} packets of the $frames captured"
[ "$frames" -ge 6400 ] || fail "the tap kept only $frames packets"
echo PASS
