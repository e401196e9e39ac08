// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rsetsockopt / rgetsockopt (rsocket(7)) and keepalives. Buffer and queue sizes apply to
// the connection made after them (and to the connections a listener accepts); socket
// options with no meaning on an RDMA connection are remembered and reported back, as
// rdma-core does. SO_KEEPALIVE sends a zero-length RDMA WRITE every TCP_KEEPIDLE seconds:
// the peer never sees it, but a peer gone makes it fail, and the socket with it.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <thread>

#include "verbs_api/rdmacm/rsocket_internal.h"

namespace uroce::rsock {
namespace {

int scale_value(int v) {  // RDMA_IOMAPSIZE rounds to what the 8-bit scale can carry
    int s = v <= 128 ? v : 128 | (v >> 8);
    return s <= 128 ? s : (s & ~128) << 8;
}

// The keepalive thread: started with the first SO_KEEPALIVE, wakes once a second.
std::mutex g_ka_mu;
std::condition_variable g_ka_cv;
std::vector<std::pair<Rsocket*, uint64_t>>* g_ka;  // socket, next keepalive (s)

uint64_t now_s() {
    using namespace std::chrono;
    return uint64_t(duration_cast<seconds>(steady_clock::now().time_since_epoch()).count());
}

void send_keepalive(Rsocket* rs) {
    std::lock_guard<std::mutex> g(rs->cq_lock);
    if (rs->ctrl_seqno != rs->ctrl_max_seqno && (rs->state & kConnected)) {
        rs->ctrl_seqno++;
        post_write(rs, nullptr, 0, msg_set(kOpCtrl, kCtrlKeepalive), 0, 0, 0);
    }
}

void keepalive_thread() {
    std::unique_lock<std::mutex> g(g_ka_mu);
    for (;;) {
        g_ka_cv.wait_for(g, std::chrono::seconds(1));
        uint64_t now = now_s();
        for (auto& [rs, due] : *g_ka) {
            if (due > now) continue;
            send_keepalive(rs);
            poll_cq_once(rs);  // its completion: an error shows a peer gone
            if (rs->state & kError) signal(rs);
            due = now + rs->keepalive_time;
        }
    }
}

unsigned default_keepalive_time() {
    unsigned t = 7200;
    if (FILE* f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r")) {
        if (fscanf(f, "%u", &t) != 1) t = 7200;
        fclose(f);
    }
    return t;
}

void keepalive_start(Rsocket* rs) {
    std::lock_guard<std::mutex> g(g_ka_mu);
    if (!g_ka) {
        g_ka = new std::vector<std::pair<Rsocket*, uint64_t>>();
        std::thread(keepalive_thread).detach();
    }
    if (!rs->keepalive_time) rs->keepalive_time = default_keepalive_time();
    for (auto& e : *g_ka)
        if (e.first == rs) return;
    g_ka->push_back({rs, now_s() + rs->keepalive_time});
    rs->keepalive = true;
}

void keepalive_rearm(Rsocket* rs) {
    std::lock_guard<std::mutex> g(g_ka_mu);
    if (!g_ka) return;
    for (auto& e : *g_ka)
        if (e.first == rs) e.second = now_s() + rs->keepalive_time;
}

void set_bit(uint64_t* opts, int name, bool on) {
    if (on)
        *opts |= uint64_t(1) << name;
    else
        *opts &= ~(uint64_t(1) << name);
}

// A flag that is also the CM id's (rdma_set_option), remembered for rgetsockopt.
int id_flag(Rsocket* rs, int cm_opt, int on, uint64_t* opts, int name) {
    if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, cm_opt, &on, sizeof on) && errno != ENOSYS)
        return -1;
    set_bit(opts, name, on);
    return 0;
}

bool bit(uint64_t opts, int name) { return opts & (uint64_t(1) << name); }

int put_int(void* optval, socklen_t* optlen, int v) {
    if (*optlen < sizeof(int)) return fail(EINVAL);
    memcpy(optval, &v, sizeof v);
    *optlen = sizeof(int);
    return 0;
}

}  // namespace

void keepalive_stop(Rsocket* rs) {
    if (!rs->keepalive) return;
    std::lock_guard<std::mutex> g(g_ka_mu);
    std::erase_if(*g_ka, [rs](auto& e) { return e.first == rs; });
    rs->keepalive = false;
}

}  // namespace uroce::rsock

using namespace uroce::rsock;

extern "C" {

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (!optval) return fail(EFAULT);
    // A datagram socket's options are its UDP socket's (as rdma-core); the buffer sizes
    // also size its rings.
    if (rs->dg && level != SOL_RDMA) {
        if (dgram_setsockopt(rs, level, optname, optval, optlen)) return -1;
        if (level == SOL_SOCKET && (optname == SO_RCVBUF || optname == SO_SNDBUF) &&
            optlen >= sizeof(int) && !rs->cm_id) {
            uint32_t v = std::max<uint32_t>(*static_cast<const uint32_t*>(optval) << 1, kSndLowat);
            (optname == SO_RCVBUF ? rs->rbuf_size : rs->sbuf_size) = v;
        }
        return 0;
    }
    int ival = 0;
    if (optlen >= sizeof(int)) memcpy(&ival, optval, sizeof ival);
    auto need_int = [&] { return optlen < sizeof(int) ? fail(EINVAL) : 0; };
    switch (level) {
    case SOL_SOCKET:
        if (optname == SO_LINGER) {
            if (optlen < sizeof(linger)) return fail(EINVAL);
            // Stored inverted, as rdma-core: the default (bit clear) is "on".
            set_bit(&rs->so_opts, SO_LINGER, !static_cast<const linger*>(optval)->l_onoff);
            return 0;
        }
        if (need_int()) return -1;
        switch (optname) {
        case SO_REUSEADDR:
            return id_flag(rs, RDMA_OPTION_ID_REUSEADDR, ival, &rs->so_opts, optname);
        case SO_RCVBUF:
            if (!rs->rbuf) rs->rbuf_size = std::max<uint32_t>(uint32_t(ival) << 1, kSndLowat << 1);
            return 0;
        case SO_SNDBUF:
            if (!rs->sbuf) rs->sbuf_size = std::max<uint32_t>(uint32_t(ival) << 1, kSndLowat << 1);
            return 0;
        case SO_KEEPALIVE:
            if (ival)
                keepalive_start(rs);
            else
                keepalive_stop(rs);
            set_bit(&rs->so_opts, optname, ival);
            return 0;
        case SO_OOBINLINE: set_bit(&rs->so_opts, optname, ival); return 0;
        default: return fail(ENOTSUP);
        }
    case IPPROTO_IP:
        if (optname != IP_TOS) return fail(ENOTSUP);
        if (need_int()) return -1;
        {
            uint8_t tos = uint8_t(ival);
            if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos))
                return -1;
        }
        rs->ipv4_tos = ival;
        return 0;
    case IPPROTO_TCP:
        if (need_int()) return -1;
        switch (optname) {
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
        case TCP_MAXSEG:
        case TCP_CONGESTION: return 0;  // nothing to tune on a reliable connection
        case TCP_KEEPIDLE:
            if (ival <= 0) return fail(EINVAL);
            rs->keepalive_time = unsigned(ival);
            if (rs->keepalive) keepalive_rearm(rs);
            return 0;
        case TCP_NODELAY: set_bit(&rs->tcp_opts, optname, ival); return 0;
        default: return fail(ENOTSUP);
        }
    case IPPROTO_IPV6:
        if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
        if (need_int()) return -1;
        return id_flag(rs, RDMA_OPTION_ID_AFONLY, ival, &rs->ipv6_opts, optname);
    case SOL_RDMA:
        if (rs->state >= kOpening) return fail(EINVAL);  // the QP exists (or is being made)
        if (optname == RDMA_ROUTE) {
            if (!optlen || optlen % sizeof(ibv_path_data)) return fail(EINVAL);
            auto* p = static_cast<const uint8_t*>(optval);
            rs->route.assign(p, p + optlen);
            return 0;
        }
        if (need_int()) return -1;
        switch (optname) {
        case RDMA_SQSIZE:
            rs->sq_size = uint16_t(std::min<uint32_t>(uint32_t(ival), kQpMax));
            return 0;
        case RDMA_RQSIZE:
            rs->rq_size = uint16_t(std::min<uint32_t>(uint32_t(ival), kQpMax));
            return 0;
        case RDMA_INLINE:
            rs->sq_inline = uint16_t(std::min<uint32_t>(uint32_t(ival), kQpMax));
            return 0;
        case RDMA_IOMAPSIZE: rs->target_iomap_size = uint16_t(scale_value(ival)); return 0;
        default: return fail(ENOTSUP);
        }
    default: return fail(ENOTSUP);
    }
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
    Rsocket* rs = lookup(socket);
    if (!rs) return fail(EBADF);
    if (!optval || !optlen) return fail(EFAULT);
    if (rs->dg && level != SOL_RDMA) return dgram_getsockopt(rs, level, optname, optval, optlen);
    switch (level) {
    case SOL_SOCKET:
        switch (optname) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE: return put_int(optval, optlen, bit(rs->so_opts, optname));
        case SO_RCVBUF: return put_int(optval, optlen, int(rs->rbuf_size));
        case SO_SNDBUF: return put_int(optval, optlen, int(rs->sbuf_size));
        case SO_LINGER: {
            if (*optlen < sizeof(linger)) return fail(EINVAL);
            linger l{!bit(rs->so_opts, SO_LINGER), 0};
            memcpy(optval, &l, sizeof l);
            *optlen = sizeof l;
            return 0;
        }
        case SO_ERROR: {
            int e = rs->err;
            if (put_int(optval, optlen, e)) return -1;
            rs->err = 0;
            return 0;
        }
        case SO_TYPE: return put_int(optval, optlen, rs->type);
        default: return fail(ENOTSUP);
        }
    case IPPROTO_IP:
        if (optname != IP_TOS) return fail(ENOTSUP);
        return put_int(optval, optlen, rs->ipv4_tos);
    case IPPROTO_TCP:
        switch (optname) {
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL: return put_int(optval, optlen, 1);
        case TCP_KEEPIDLE: return put_int(optval, optlen, int(rs->keepalive_time));
        case TCP_NODELAY: return put_int(optval, optlen, bit(rs->tcp_opts, optname));
        case TCP_MAXSEG:
            return put_int(optval, optlen,
                           rs->cm_id && rs->cm_id->route.num_paths
                               ? 1 << (7 + rs->cm_id->route.path_rec->mtu)
                               : 2048);
        default: return fail(ENOTSUP);
        }
    case IPPROTO_IPV6:
        if (optname != IPV6_V6ONLY) return fail(ENOTSUP);
        return put_int(optval, optlen, bit(rs->ipv6_opts, optname));
    case SOL_RDMA:
        switch (optname) {
        case RDMA_SQSIZE: return put_int(optval, optlen, rs->sq_size);
        case RDMA_RQSIZE: return put_int(optval, optlen, rs->rq_size);
        case RDMA_INLINE: return put_int(optval, optlen, rs->sq_inline);
        case RDMA_IOMAPSIZE: return put_int(optval, optlen, rs->target_iomap_size);
        case RDMA_ROUTE: {
            if (!rs->route.empty()) {
                if (*optlen < rs->route.size()) return fail(EINVAL);
                memcpy(optval, rs->route.data(), rs->route.size());
                *optlen = socklen_t(rs->route.size());
                return 0;
            }
            // The resolved path, as ibv_path_data (what RDMA_ROUTE takes).
            if (*optlen < sizeof(ibv_path_data)) return fail(EINVAL);
            socklen_t len = 0;
            auto* out = static_cast<uint8_t*>(optval);
            for (int i = 0; rs->cm_id && i < rs->cm_id->route.num_paths &&
                            len + sizeof(ibv_path_data) <= *optlen;
                 ++i) {
                const ibv_sa_path_rec& sa = rs->cm_id->route.path_rec[i];
                ibv_path_data pd{};
                pd.path.dgid = sa.dgid;
                pd.path.sgid = sa.sgid;
                pd.path.dlid = sa.dlid;
                pd.path.slid = sa.slid;
                pd.path.flowlabel_hoplimit = htobe32((be32toh(sa.flow_label) << 8) | sa.hop_limit);
                pd.path.tclass = sa.traffic_class;
                pd.path.reversible_numpath = uint8_t(sa.reversible << 7 | 1);
                pd.path.pkey = sa.pkey;
                pd.path.qosclass_sl = htobe16(sa.sl);
                pd.path.mtu = uint8_t(sa.mtu | 2 << 6);  // "exactly"
                pd.path.rate = uint8_t(sa.rate | 2 << 6);
                pd.path.packetlifetime = uint8_t(sa.packet_life_time | 2 << 6);
                pd.flags = sa.preference;
                memcpy(out + len, &pd, sizeof pd);
                len += sizeof pd;
            }
            *optlen = len;
            return 0;
        }
        default: return fail(ENOTSUP);
        }
    default: return fail(ENOTSUP);
    }
}

}  // extern "C"
