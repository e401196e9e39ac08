// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The drop-in librdmacm's own objects. Each public struct (rdma_cm_id, rdma_event_channel,
// rdma_cm_event) is the first member of ours, so the pointer an application holds converts
// back with a cast. docs/cm.md describes the design.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "net/endpoint.h"

namespace uroce::rdmacm {

// One uroce device as this process uses it for connections: its verbs context (shared by
// every id on it, like rdma-core's cma_device), a default PD, and a control connection of
// the library's own for CM requests.
struct DevConn {
    std::string name;
    net::Endpoint addr;  // the device's address (IPv4 or IPv6, a link-local one with its scope)
    uint32_t tag = 0;    // index in the device table; devices stamp it on their events
    ibv_device* ibdev = nullptr;
    ibv_context* verbs = nullptr;
    ibv_pd* pd = nullptr;
    ibv_xrcd* xrcd = nullptr;    // opened on first use by an XRC QP or SRQ (rdma-core's too)
    ibv_mtu mtu = IBV_MTU_1024;  // path MTU for connections from this device
    int sock = -1;
    int session_fds[2] = {-1, -1};  // what kOpen returned; kept for the connection's life
    bool open = false;
    std::atomic<bool> gone{false};  // the device went away (device_removal.cpp); for good
    std::mutex open_mu;             // ensure_open
    std::mutex mu;                  // one request at a time on sock
};

// An event channel is one pipe, as the kernel's is one file: ch.fd is its read end (what the
// application polls, and where it sets O_NONBLOCK), every device the channel is registered
// with holds a copy of the write end, and the library writes the events it makes itself into
// the same pipe. So all of a channel's events queue in the order they were written.
// rdma_migrate_id and rdma_destroy_id take an id's unread events out of the middle of that
// queue, as the kernel's ucma does with its event list: the records before them wait in
// `held`, which readers empty before they read the pipe again.
struct Channel {
    rdma_event_channel ch;  // first
    uint32_t id = 0;
    int rd = -1;  // a dup of ch.fd, read by rdma_get_cm_event, closed with the last reference
    int wr = -1;  // write end (O_NONBLOCK: a channel nobody reads never blocks a writer)
    std::set<DevConn*> devs;  // devices holding the write end; guarded by the global lock
    // The application's reference (dropped by rdma_destroy_event_channel) plus one per
    // thread inside rdma_get_cm_event. While a thread is blocked reading, the write end stays
    // open, so destroying the channel wakes nobody and frees nothing it uses (the kernel's
    // file stays open under a blocked read the same way). At zero the channel is released
    // for good: never referenced again (try_ref_channel), its memory kept a while.
    std::atomic<int> refs{1};
    bool was_nonblocking = false;  // O_NONBLOCK when released (what a late reader gets)
    // Records read out of the pipe and not handed out yet, oldest first. While there are any,
    // one marker record (dev_tag kMarkerTag) waits in the pipe, so the fd stays readable
    // exactly while an event waits, as the kernel's does. Both guarded by read_mu, which
    // every reader of the pipe holds.
    std::mutex read_mu;
    std::deque<abi::CmEventRec> held;
    bool marker = false;
};

// A multicast group an id joined (rdma_join_multicast): the address as the application gave
// it (rdma_leave_multicast finds it by those bytes), and the GID it maps to.
struct Mcast {
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    ibv_gid mgid{};
    uint16_t mlid = 0;
    uint16_t join_flags = 0;  // enum rdma_cm_mc_join_flags
    void* context = nullptr;
    uint32_t serial = 0;                   // names it in its event record (CmEventRec::new_handle)
    uint32_t reported = 0, completed = 0;  // its events handed out and acknowledged (Id::mu)
};

struct Id {
    rdma_cm_id id;     // first: applications hold &id
    uint32_t lid = 0;  // library-local number, the key of locally generated events
    Channel* chan = nullptr;
    bool sync = false;       // created with a NULL channel: calls wait for their event
    DevConn* dev = nullptr;  // the device the id is bound to (nullptr: none or wildcard)
    uint32_t handle = 0;     // the device's CM id (0: none yet)
    // A wildcard listener, per device; changed under g_listen_mu (a device started later
    // takes the listeners waiting, waiting_listeners.cpp).
    std::vector<std::pair<DevConn*, uint32_t>> listens;
    int backlog = 0;     // rdma_listen's, for devices started later
    bool bound = false;  // rdma_bind_addr (or an implicit bind) happened
    bool listening = false;
    bool addr_resolved = false, route_resolved = false;
    // Created by a connection request, not answered yet. Atomic: the CM thread's ESTABLISHED
    // and the thread in rdma_accept may both clear it.
    std::atomic<bool> conn_req{false};
    bool have_conn = false;  // the peer's parameters are known (REQ or REP seen)
    bool connect_error = false;
    bool srq_cq = false;    // id.recv_cq and its channel were made for the XRC SRQ
    uint16_t port = 0;      // bound port, network order
    bool any_port = false;  // a wildcard bind to port 0: rdma_listen may pick another port
    int bind_family = 0;    // a wildcard bind: the family it was given in (which devices it is on)
    int afonly = -1;        // RDMA_OPTION_ID_AFONLY (IPV6_V6ONLY); -1: the kernel's default
    // Connection parameters (docs/cm.md: which MAD field each comes from).
    uint32_t local_psn = 0, remote_qpn = 0, remote_psn = 0, qkey = 0;
    net::Endpoint remote;  // the peer's address (port not kept here)
    uint8_t resp_res = 0, init_depth = 0, retry_count = 7, rnr_retry_count = 7;
    uint8_t mtu = IBV_MTU_1024;
    uint8_t ack_timeout = 14;  // local ACK timeout for the QP (RDMA_OPTION_ID_ACK_TIMEOUT)
    uint8_t tos = 0;
    ibv_qp_init_attr* qp_init_attr = nullptr;  // rdma_create_ep on a passive id
    std::vector<uint8_t> connect_data;         // rdma_addrinfo ai_connect
    ibv_ece local_ece{};
    // Events handed out and acknowledged; rdma_destroy_id waits for them to match.
    std::mutex mu;
    std::condition_variable cv;
    uint32_t reported = 0, completed = 0;
    std::vector<std::unique_ptr<Mcast>> mcasts;  // guarded by mu
    uint32_t next_mcast = 1;
    // rdma_resolve_addrinfo (addrinfo_async.cpp), guarded by mu: a resolution is under way
    // until rdma_query_addrinfo takes its result.
    bool resolving_ai = false;
    rdma_addrinfo* resolved_ai = nullptr;
};

struct Event {
    rdma_cm_event ev;  // first
    uint8_t private_data[abi::kCmPrivateMax];
    Id* owner = nullptr;  // whose counter rdma_ack_cm_event advances
    Mcast* mc = nullptr;  // a multicast event: its group's counter advances too
};

// The -1-and-errno answer of librdmacm's calls and of the rsocket calls.
inline int fail(int e) {
    errno = e;
    return -1;
}

inline Id* id_of(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* chan_of(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

// Device table (cma_devices.cpp). Refreshes it from the running devices; false when there is none.
bool sync_devices();

// Has device_gone(d) (cma_devices.cpp) run once d's device has gone away (device_removal.cpp: on
// libibverbs' watcher thread, or at once if it is gone already). d->verbs must be open.
void watch_device(DevConn* d);
void device_gone(DevConn* d);

}  // namespace uroce::rdmacm
