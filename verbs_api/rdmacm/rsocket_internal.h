// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rsockets (rdma/rsocket.h) over uroce's own verbs and CM: the socket object and what its
// files share. The wire protocol is rdma-core's (librdmacm/rsocket.c), so a uroce host and a
// host with rdma-core's rsockets talk to each other; docs/rsockets.md describes it.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <vector>

#include "verbs_api/rdmacm/internal.h"

namespace uroce::rsock {

using rdmacm::fail;

// Sizes as rdma-core's defaults, so both ends start with the same windows.
constexpr uint32_t kOlapStart = 2048;  // first transfer of a large send; doubles from there
constexpr uint32_t kMaxTransfer = 65536;
constexpr uint32_t kSndLowat = 2048;  // room a send needs before it is posted
constexpr uint16_t kQpMin = 16, kQpMax = 0xfffe;
constexpr uint32_t kCtrlSize = 4;  // SQ slots kept for control messages (power of 2)
constexpr int kSglSize = 2;        // entries of the target SGL the peer writes into
constexpr uint16_t kDefInline = 64, kDefSqSize = 384, kDefRqSize = 384;
constexpr uint32_t kDefMem = 1 << 17, kDefWmem = 1 << 17;
constexpr int kWakeMs = 500;  // longest sleep before a waiter looks at the state again

// The immediate of every RDMA WRITE WITH IMMEDIATE: op in bits 31..29, data below.
enum Op : uint32_t {
    kOpData = 0,
    kOpWrite = 2,  // riowrite's plain RDMA WRITE: local bookkeeping only, never sent
    kOpSgl = 4,
    kOpIomapSgl = 6,
    kOpCtrl = 7,
};
enum Ctrl : uint32_t { kCtrlDisconnect = 0, kCtrlKeepalive = 1, kCtrlShutdown = 2 };
inline uint32_t msg_set(uint32_t op, uint32_t data) { return (op << 29) | data; }
inline uint32_t msg_op(uint32_t m) { return m >> 29; }
inline uint32_t msg_data(uint32_t m) { return m & 0x1fffffff; }
constexpr uint64_t kWrRecv = uint64_t(1) << 63;

// Wire structures, in rdma-core's layout.
struct Sge {
    uint64_t addr;
    uint32_t key;
    uint32_t length;
};
struct IomapEntry {
    uint64_t offset;
    Sge sge;
};
constexpr uint8_t kConnFlagNet = 1, kConnFlagIomap = 2;
// The private data of the REQ and the REP (struct rs_conn_data): big-endian except the
// SGE fields of a little-endian sender, which carry kConnFlagNet clear.
struct ConnData {
    uint8_t version;
    uint8_t flags;
    uint16_t credits;  // big-endian: the sender's receive queue size
    uint8_t reserved[3];
    uint8_t target_iomap_size;  // scaled (rs_value_to_scale, 8 bits)
    Sge target_sgl;             // where the peer writes new data buffer SGEs
    Sge data_buf;               // the first half of the sender's receive buffer
};
static_assert(sizeof(ConnData) == 40);

// States, ordered passive < connecting < connected < disconnected (rdma-core's values).
enum State : int {
    kInit = 0,
    kBound = 0x1,
    kListening = 0x2,
    kOpening = 0x4,
    kResolvingAddr = kOpening | 0x10,
    kResolvingRoute = kOpening | 0x20,
    kConnecting = kOpening | 0x40,
    kAccepting = kOpening | 0x80,
    kConnected = 0x100,
    kWritable = 0x200,
    kReadable = 0x400,
    kConnectRdwr = kConnected | kReadable | kWritable,
    kConnectError = 0x800,
    kDisconnected = 0x1000,
    kError = 0x2000,
};

struct Rsocket;
struct Dgram;  // rsocket_dgram.cpp

// A registered region a riomap made: the peer may RDMA WRITE into it (index >= 0: its slot
// in the peer's target iomap) or not (index -1, read-only local mapping).
struct IomapMr {
    uint64_t offset = 0;
    ibv_mr* mr = nullptr;
    int index = -1;
};

struct Rsocket {
    int fd = -1;  // an eventfd: the number the application holds, and the CM thread's doorbell
    int type = SOCK_STREAM;
    int domain = AF_INET;
    std::atomic<int> state{kInit};
    int err = 0;                       // SO_ERROR
    std::atomic<bool> cm_gone{false};  // DISCONNECTED seen: the peer's CM ended the connection
    std::atomic<bool> closing{false};

    std::mutex slock, rlock;           // one sender, one receiver at a time
    std::mutex cq_lock, cq_wait_lock;  // polling the CQ; waiting for its event
    std::mutex map_lock;               // iomaps
    std::mutex cm_mu;                  // connection setup (CM thread and the application)

    rdma_cm_id* cm_id = nullptr;
    Rsocket* listener = nullptr;    // an accepted socket before raccept took it
    std::deque<Rsocket*> accept_q;  // a listener's established connections (cm_mu)
    std::list<Rsocket*> pending;    // a listener's connections being accepted (cm_mu)

    // Options (rsetsockopt), taken over by accepted sockets from their listener.
    uint32_t sbuf_size = kDefWmem, rbuf_size = kDefMem;
    uint16_t sq_size = kDefSqSize, rq_size = kDefRqSize, sq_inline = kDefInline;
    uint16_t target_iomap_size = 0;
    int fs_flags = 0, fd_flags = 0;
    uint64_t so_opts = 0, tcp_opts = 0, ipv6_opts = 0;
    int ipv4_tos = 0;
    unsigned keepalive_time = 0;
    bool keepalive = false;
    std::vector<uint8_t> route;  // RDMA_ROUTE: an ibv_path_data for the connection

    // The stream: names as in rdma-core's struct rsocket, so the protocol reads alike.
    uint32_t ctrl_seqno = 0, ctrl_max_seqno = kCtrlSize;
    // The sender's counters that completions (polled by whichever call holds cq_lock) give
    // back are atomic: rsend and rrecv may run in two threads.
    uint16_t sseq_no = 0, rseq_no = 0, rseq_comp = 0;
    std::atomic<uint16_t> sseq_comp{0};
    int remote_sge = 0;
    Sge remote_sgl{}, remote_iomap{};
    bool swap_sgl = false;  // the peer's byte order differs
    ibv_mr* target_mr = nullptr;
    int target_sge = 0;
    uint8_t* target_buffer_list = nullptr;
    volatile Sge* target_sgl = nullptr;  // written by the peer's RDMA WRITEs
    volatile IomapEntry* target_iomap = nullptr;

    uint32_t rbuf_bytes_avail = 0, rbuf_free_offset = 0, rbuf_offset = 0;
    ibv_mr* rmr = nullptr;
    uint8_t* rbuf = nullptr;
    std::atomic<uint32_t> sbuf_bytes_avail{0};
    ibv_mr* smr = nullptr;
    uint8_t* sbuf = nullptr;
    ibv_sge ssgl[2]{};

    std::atomic<int> sqe_avail{0};
    int rmsg_head = 0, rmsg_tail = 0;
    struct Rmsg {
        uint32_t op, data;
    };
    Rmsg* rmsg = nullptr;  // rq_size + 1 entries
    bool cq_armed = false;
    int unack_cqe = 0;

    std::vector<IomapMr> remote_iomappings;       // slots of the peer's target iomap
    std::list<IomapMr*> iomap_list, iomap_queue;  // sent / waiting to be sent to the peer
    std::list<IomapMr> local_iomaps;              // read-only mappings (no slot)
    std::atomic<bool> iomap_pending{false};

    Dgram* dg = nullptr;  // SOCK_DGRAM: the UDP side channel and destinations
};

// rsocket_table.cpp: fd -> socket.
Rsocket* lookup(int fd);
void table_insert(Rsocket* rs);
void table_remove(Rsocket* rs);
Rsocket* alloc_socket(const Rsocket* inherit, int type, int domain);
void free_socket(Rsocket* rs);
void signal(Rsocket* rs);  // wake whoever waits on rs->fd
void drain(Rsocket* rs);
inline bool nonblocking(const Rsocket* rs, int flags) {
    return (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

// rsocket_cm.cpp: connection setup on the CM thread.
rdma_event_channel* cm_channel();                // the process's channel for every rsocket id
int create_ep(Rsocket* rs);                      // QP, CQ, buffers, receives posted
int wait_connected(Rsocket* rs, bool nonblock);  // 0 connected; -1 EINPROGRESS/EAGAIN/error
void release_cm(Rsocket* rs);                    // detach from the CM thread before freeing
bool accept_ready(Rsocket* l);                   // a listener has a connection for raccept

// rsocket_stream.cpp: the data path.
int io_ready(Rsocket* rs, int flags);  // 0: connected (or was); -1 with errno
using Test = bool (*)(Rsocket*);
int process_cq(Rsocket* rs, bool nonblock, Test test);
int get_comp(Rsocket* rs, bool nonblock, Test test);
void poll_cq_once(Rsocket* rs);  // poll and credit, no waiting
bool can_send(Rsocket* rs);
bool conn_can_send(Rsocket* rs);
bool have_rdata(Rsocket* rs);
bool conn_have_rdata(Rsocket* rs);
void arm_cq(Rsocket* rs);
void take_cq_event(Rsocket* rs);  // a completion event the channel has (nonblocking)
// One step towards sleeping on the CQ, with cq_lock held (g) after a poll found nothing:
// arms the CQ, or drains the socket's doorbell (true: poll again first), or sleeps until a
// completion event or the doorbell, at most kWakeMs (false).
bool wait_step(Rsocket* rs, std::unique_lock<std::mutex>& g, bool* drained);
int post_write(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t wr_data, int flags, uint64_t addr,
               uint32_t rkey);
int post_write_msg(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t msg, int flags, uint64_t addr,
                   uint32_t rkey);
// Copies len bytes into the send ring; fills sg (1 or 2 SGEs, the ring wraps); returns how many.
int stage_copy(Rsocket* rs, const void* src, uint32_t len, ibv_sge* sg);
// The next transfer's size: small first, doubling up to kMaxTransfer, within the ring's
// free bytes and room (the peer's buffer or mapping).
uint32_t next_xfer(Rsocket* rs, size_t left, uint32_t* olen, uint32_t room);

// rsocket_iomap.cpp
int send_iomaps(Rsocket* rs, int flags);
void free_iomaps(Rsocket* rs);

// rsocket_dgram.cpp: SOCK_DGRAM sockets.
int dgram_open(Rsocket* rs);
void dgram_close(Rsocket* rs);
int dgram_bind(Rsocket* rs, const sockaddr* addr, socklen_t len);
int dgram_connect(Rsocket* rs, const sockaddr* addr, socklen_t len);
ssize_t dgram_send(Rsocket* rs, const void* buf, size_t len, int flags, const sockaddr* to,
                   socklen_t tolen);
ssize_t dgram_recv(Rsocket* rs, void* buf, size_t len, int flags, sockaddr* from,
                   socklen_t* fromlen);
short dgram_revents(Rsocket* rs, short events);
int dgram_name(Rsocket* rs, bool peer, sockaddr* addr, socklen_t* len);
int dgram_setsockopt(Rsocket* rs, int level, int name, const void* val, socklen_t len);
int dgram_getsockopt(Rsocket* rs, int level, int name, void* val, socklen_t* len);
ssize_t dgram_sendv(Rsocket* rs, const iovec* iov, int iovcnt, int flags, const sockaddr* to,
                    socklen_t tolen);

// rsocket_options.cpp
void keepalive_stop(Rsocket* rs);

}  // namespace uroce::rsock
