// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What Device::dump() and Device::objects() report: every object the device holds, its
// counters and its fault injection (`uroce dump`, docs/trace.md), and how many objects of
// each kind there are (the tests and the control fuzzer check that none are left behind).
#include <arpa/inet.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <sstream>

#include "emu/engine/device.h"
#include "emu/verbs/qp_state.h"

namespace uroce::emu {

// One line per direction and opcode with a non-zero count:
// "<head> tx|rx <OPCODE_NAME> pkts N bytes M" (an opcode uroce does not define: opcode_0xNN).
static void dump_op(std::ostringstream& o, const char* head, const char* dir, unsigned op,
                    uint64_t pkts, uint64_t bytes) {
    if (!pkts) return;
    o << head << " " << dir << " ";
    if (const net::OpInfo* info = net::op_info(uint8_t(op)))
        o << info->name;
    else
        o << "opcode_0x" << std::hex << op << std::dec;
    o << " pkts " << pkts << " bytes " << bytes << "\n";
}

static void dump_ops(std::ostringstream& o, const char* head, const char* dir,
                     const OpCounters& c) {
    for (unsigned op = 0; op < 256; ++op) dump_op(o, head, dir, op, c.pkts[op], c.bytes[op]);
}

static void dump_ops(std::ostringstream& o, const char* head, const char* dir, uint8_t transport,
                     const QpOpCounters& c) {
    for (unsigned i = 0; i < 32; ++i) dump_op(o, head, dir, transport | i, c.pkts[i], c.bytes[i]);
}

DeviceObjects Device::objects() const {
    DeviceObjects o;
    o.sessions = sessions_.count();
    o.pds = pds_.count();
    o.mrs = mrs_.count();
    o.mws = mws_.count();
    o.channels = channels_.count();
    o.cqs = cqs_.count();
    o.qps = qps_.count();
    o.srqs = srqs_.count();
    o.xrcds = xrcds_.count();
    o.xrcd_handles = xrcd_handles_.count();
    o.mcast_groups = mcast_.count();
    o.ready = sched_.ready_size();
    o.timers = sched_.timers_size();
    o.awake = awake_.size();
    o.cm = cm_.objects();
    return o;
}

std::string Device::dump() const {
    std::ostringstream o;
    std::string addrs;  // every address, the first first
    for (const net::Endpoint& e : cfg_.addresses())
        addrs += (addrs.empty() ? "" : ",") + e.addr_str();
    o << "device " << cfg_.name << " addr " << addrs << " port " << cfg_.port << " pcap "
      << (cfg_.pcap.empty() ? "-" : cfg_.pcap) << "\n";
    o << "counts sessions " << sessions_.count() << " pds " << pds_.count() << " mrs "
      << mrs_.count() << " cqs " << cqs_.count() << " qps " << qps_.count() << " channels "
      << channels_.count() << " srqs " << srqs_.count() << " mws " << mws_.count() << "\n";
    sessions_.for_each([&](uint32_t id, const Session& s) {
        o << "session " << id << " pid " << s.pid << " pds " << s.pds.size() << " mrs "
          << s.mrs.size() << " cqs " << s.cqs.size() << " qps " << s.qps.size() << "\n";
    });
    pds_.for_each([&](uint32_t h, const Pd& pd) {
        o << "pd " << h << " pid " << pd.owner->pid << " users " << pd.users << " ctx "
          << pd.owner->id << "\n";
    });
    mrs_.for_each([&](uint32_t h, const Mr& mr) {
        o << "mr lkey 0x" << std::hex << mr.lkey << " addr 0x" << mr.addr << std::dec << " length "
          << mr.length << " pd " << mr.pd << " access 0x" << std::hex << mr.access << std::dec
          << " pid " << mr.owner->pid << " windows " << mr.windows << " mrn " << h << " rkey 0x"
          << std::hex << mr.rkey << " iova 0x" << mr.iova << std::dec << "\n";
    });
    mws_.for_each([&](uint32_t h, const Mw& mw) {
        o << "mw " << h << " type " << mw.type << " rkey 0x" << std::hex << mw.rkey << std::dec
          << " pd " << mw.pd << " pid " << mw.owner->pid;
        if (mw.bound)
            o << " mr 0x" << std::hex << mw.mr << " addr 0x" << mw.addr << std::dec << " length "
              << mw.length << " access 0x" << std::hex << mw.access << " qpn 0x" << mw.qpn
              << std::dec;
        else
            o << " unbound";
        o << "\n";
    });
    cqs_.for_each([&](uint32_t h, const Cq& cq) {
        o << "cq " << h << " cqe " << cq.cqe << " pid " << cq.owner->pid << " users " << cq.users
          << " ctx " << cq.owner->id << "\n";
    });
    qps_.for_each([&](uint32_t qpn, const Qp& qp) {
        o << "qp 0x" << std::hex << qpn << std::dec << " type " << qp_type_name(qp.type)
          << " state " << qp_state_name(qp.state) << " pid " << qp.owner->pid << " dest_qpn 0x"
          << std::hex << qp.attr.dest_qp_num << " sq_psn 0x" << qp.next_psn << " una 0x"
          << qp.una_psn << " epsn 0x" << qp.epsn << std::dec << " tx " << qp.tx_pkts << " rx "
          << qp.rx_pkts << " retx " << qp.retransmits << " sport " << qp.tx.port;
        // What `uroce res --graph` draws: the objects the QP uses, the peer it sends to, the
        // XRCD handle each holder of a TGT QP came through (before "holders", which ends the
        // line: its readers take every word after it).
        bool peer = qp.dest.is_v6() || qp.dest.v4_be() != 0;
        o << " pd " << qp.pd << " send_cq " << qp.send_cq << " recv_cq " << qp.recv_cq << " srq "
          << qp.srq << " dest " << (peer ? qp.dest.addr_str() : "-");
        if (qp.type == IBV_QPT_XRC_RECV) {
            o << " holder_handles";
            for (const auto& h : qp.holders) o << " " << h.session->pid << "/" << h.xrcd_handle;
            o << " xrcd " << qp.xrcd << " holders";
            for (const auto& h : qp.holders) o << " " << h.session->pid;
        }
        o << "\n";
    });
    srqs_.for_each([&](uint32_t h, const Srq& q) {
        o << "srq " << h << (q.xrc ? " type XRC xrcd " + std::to_string(q.xrcd) : " type BASIC")
          << " max_wr " << q.max_wr << " limit " << q.limit << " qps " << q.users << " pid "
          << q.owner->pid << " pd " << q.pd << " cq " << q.cq << "\n";
    });
    xrcds_.for_each([&](uint32_t h, const Xrcd& x) {
        o << "xrcd " << h << " inode ";
        if (x.has_inode)
            o << major(x.dev) << ":" << minor(x.dev) << ":" << x.ino;
        else
            o << "-";
        o << " handles " << x.handles << " objects " << x.objects << " pids";
        xrcd_handles_.for_each([&](uint32_t, const XrcdHandle& hh) {
            if (hh.xrcd == h) o << " " << hh.owner->pid;
        });
        o << " handle_ids";  // HANDLE/PID, each handle's process
        xrcd_handles_.for_each([&](uint32_t id, const XrcdHandle& hh) {
            if (hh.xrcd == h) o << " " << id << "/" << hh.owner->pid;
        });
        o << "\n";
    });
    o << cm_.dump();      // connection manager ids (emu/cm/)
    o << mcast_.lines();  // multicast groups and their counters (mcast.cpp)
    o << "counters tx_pkts " << counters_.tx_pkts << " rx_pkts " << counters_.rx_pkts
      << " tx_bytes " << counters_.tx_bytes << " rx_bytes " << counters_.rx_bytes << " retransmits "
      << counters_.retransmits << " tx_stalls " << counters_.tx_stalls << " xrc_bad_srqn "
      << counters_.xrc_bad_srqn << "\n";
    o << "counters_retx seq_nak " << counters_.retx_seq_nak << " timeout " << counters_.retx_timeout
      << " read_gap " << counters_.retx_read_gap << " rnr_nak " << counters_.rnr_naks << "\n";
    o << wire_.offload_line();
    o << wire_.icrc_line();
    o << wire_.sport_line();
    for (size_t i = 1; i < size_t(net::DropReason::kCount); ++i)
        o << "drop " << net::drop_reason_name(net::DropReason(i)) << " " << counters_.drops[i]
          << "\n";
    o << wire_.fault_lines();  // docs/faults.md
    dump_ops(o, "counters_op", "tx", counters_.tx_op);
    dump_ops(o, "counters_op", "rx", counters_.rx_op);
    qps_.for_each([&](uint32_t qpn, const Qp& qp) {
        char head[32];
        std::snprintf(head, sizeof head, "qp_counters 0x%x", qpn);
        dump_ops(o, head, "tx", qp.transport, qp.tx_op);
        dump_ops(o, head, "rx", qp.transport, qp.rx_op);
        for (size_t i = 1; i < size_t(net::DropReason::kCount); ++i)
            if (qp.drops[i])
                o << head << " drop " << net::drop_reason_name(net::DropReason(i)) << " "
                  << qp.drops[i] << "\n";
    });
    return o.str();
}

}  // namespace uroce::emu
