// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// `uroce` with no command, or a wrong one: what each command takes.

#include <cstdio>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/cli/cli.h"

namespace uroce::cli {

int usage() {
    std::fprintf(stderr,
                 "usage:\n"
                 "  uroce start [--name N] [--addr ADDR]... [--port P] [--pcap FILE] "
                 "[--pcap-max BYTES]\n"
                 "              [--faults SPEC] [--poll-us US] [--offload on|off]\n"
                 "              [--icrc-nodf on|off]\n"
                 "  uroce stop [NAME]          stop NAME, or every device\n"
                 "  uroce list\n"
                 "  uroce res [NAME] [xrcd|srq|qp|mr|mw]...\n"
                 "                             objects of a device (QPs, CQs, MRs, memory\n"
                 "                             windows, PDs, SRQs, XRC domains); kind words\n"
                 "                             keep only those lines\n"
                 "  uroce res --graph [NAME...] [--pid P] -o FILE.svg\n"
                 "                             XRC domains as a graph: handles and their\n"
                 "                             processes, XRC SRQs, TGT QPs and the INI QPs\n"
                 "                             sending to them; --pid: P's PDs, MRs, QPs, CQs\n"
                 "  uroce counters [NAME]      packets/bytes by opcode and QP, drops\n"
                 "  uroce trace [-f] [NAME]... what changed: objects, QP states, failed calls\n"
                 "                             and why, async events, error completions, CM\n"
                 "                             messages; -f keeps following\n"
                 "  uroce capture start FILE [--max-bytes N] [NAME]\n"
                 "                             record every packet sent and received to a pcap;\n"
                 "                             with --max-bytes, FILE rotates to FILE.1\n"
                 "  uroce capture stop [NAME]  close the capture of NAME, or of every device\n"
                 "  uroce faults SPEC [NAME]   inject faults on NAME (or every device), e.g.\n"
                 "                             loss=0.02,dup=0.02,reorder=0.02,delay=100,\n"
                 "                             corrupt=0.01,seed=N,dir=rx|tx|both\n"
                 "  uroce faults off [NAME]    stop injecting faults\n"
                 "  uroce ladder [--from CAPTURE...] [--trace FILE] [--qp QPN...]\n"
                 "               [--time T0..T1] -o FILE.svg|FILE.html\n"
                 "                             a ladder diagram of the captures: a lane per QP,\n"
                 "                             an arrow per packet, retransmissions, drops,\n"
                 "                             CM messages, the trace's QP events; long runs\n"
                 "                             as bands (docs/ladder.md)\n"
                 "  uroce run [--no-view] [--trace FILE] [start options] -- CMD [ARGS...]\n"
                 "                             run CMD over uroce (starting a device if none\n"
                 "                             runs) where /dev/infiniband and\n"
                 "                             /sys/class/infiniband show the devices\n"
                 "                             (docs/system-view.md); --no-view: without them.\n"
                 "                             A device it starts stops when CMD ends; the\n"
                 "                             exit status is CMD's; --trace: the devices'\n"
                 "                             trace, once CMD has ended, to FILE\n"
                 "  uroce env [--github]       the environment later shells or CI steps need:\n"
                 "                             eval \"$(uroce env)\"; --github: lines for\n"
                 "                             $GITHUB_ENV (docs/ci.md)\n"
                 "  uroce cluster up N|down|list|hosts|exec HOST -- CMD|agent ...\n"
                 "                             N RDMA hosts in network namespaces, a device\n"
                 "                             on each (docs/cluster.md; uroce cluster help)\n"
                 "environment: UROCE_RUNTIME_DIR (where devices live; default\n"
                 "  $XDG_RUNTIME_DIR/uroce, else /tmp/uroce-UID; a directory of yours, mode "
                 "0700),\n"
                 "  UROCE_UDP_PORT\n");
    return 2;
}

}  // namespace uroce::cli
