// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, event channels and events: a channel is one pipe the devices and the
// library write event records into; rdma_get_cm_event turns a record into an rdma_cm_event
// (connection parameters, UD parameters, a new id for a connection request).
// docs/cm.md, "Event channels".
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

// ---- channels ------------------------------------------------------------------------------

// pipe_size: room for events nobody has read yet (best effort; the user's pipe quota may
// refuse it, then the pipe keeps the default 64 KiB).
Channel* new_channel(int pipe_size) {
    auto* c = new Channel();
    c->id = g_next_chan++;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        int e = errno;
        delete c;
        errno = e;
        return nullptr;
    }
    c->ch.fd = p[0];
    c->wr = p[1];
    c->rd = fcntl(p[0], F_DUPFD_CLOEXEC, 0);
    if (c->rd < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        delete c;
        errno = e;
        return nullptr;
    }
    fcntl(c->wr, F_SETFL, O_NONBLOCK);
    if (pipe_size > 0) fcntl(c->wr, F_SETPIPE_SZ, pipe_size);
    return c;
}

// The last kReleasedKept channels released, whose memory is freed only when that many newer
// ones follow. A thread can call rdma_get_cm_event on a channel another thread has just destroyed:
// rping before rdma-core 61 does, between acknowledging its last event and reading again while
// its main thread exits. The kernel closes the file under it (EBADF, and rping fails a good
// run, rdma-core commit f3ae6534a); a released channel here still answers, as if the call had
// come a moment earlier, while the thread's process exits.
// A plain array, not a container: static destructors run before LeakSanitizer looks, and
// what they freed would leave the kept channels unreachable.
namespace {
constexpr size_t kReleasedKept = 64;
std::mutex g_released_mu;
Channel* g_released[kReleasedKept];
size_t g_released_next = 0;  // the oldest, replaced next
}  // namespace

bool try_ref_channel(Channel* c) {
    int r = c->refs.load(std::memory_order_acquire);
    do {
        if (r <= 0) return false;
    } while (!c->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel,
                                            std::memory_order_acquire));
    return true;
}

void unref_channel(Channel* c) {
    if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    int fl = fcntl(c->rd, F_GETFL);
    c->was_nonblocking = fl >= 0 && (fl & O_NONBLOCK);
    close(c->rd);
    close(c->wr);
    c->rd = c->wr = -1;
    Channel* oldest;
    {
        std::lock_guard<std::mutex> g(g_released_mu);
        oldest = g_released[g_released_next];
        g_released[g_released_next] = c;
        g_released_next = (g_released_next + 1) % kReleasedKept;
    }
    delete oldest;
}

// The application's end of the channel: the devices drop their write ends and ch.fd closes.
// The Channel itself goes with its last reference (unref_channel).
void free_channel(Channel* c) {
    std::set<DevConn*> devs;
    {
        std::lock_guard<std::mutex> g(g_mu);
        devs.swap(c->devs);
    }
    for (DevConn* d : devs) {
        abi::CmReq r = cm_req(abi::CmOp::kChannelClose);
        r.channel = c->id;
        cm_call(*d, r);
    }
    close(c->ch.fd);
    unref_channel(c);
}

// Makes sure device d holds channel c's write end and stamps c's events with d's tag.
int ensure_channel(Channel* c, DevConn* d) {
    std::lock_guard<std::mutex> cg(g_chan_mu);
    {
        std::lock_guard<std::mutex> g(g_mu);
        if (c->devs.count(d)) return 0;
    }
    abi::CmReq r = cm_req(abi::CmOp::kChannel);
    r.channel = c->id;
    r.dev_tag = d->tag;
    if (int e = cm_call(*d, r, nullptr, c->wr)) return e;
    std::lock_guard<std::mutex> g(g_mu);
    c->devs.insert(d);
    return 0;
}

void write_local(Channel* c, const abi::CmEventRec& rec) {
    if (write(c->wr, &rec, sizeof rec) < 0) {
        // A full pipe: the application has left a megabyte of events unread.
    }
}

void post_local(Id* id, rdma_cm_event_type type, int status, uint64_t arg) {
    abi::CmEventRec rec{};
    rec.event = type;
    rec.status = status;
    rec.dev_tag = kLocalTag;
    rec.handle = id->lid;
    std::memcpy(rec.private_data, &arg, sizeof arg);  // RDMA_CM_EVENT_USER's param.arg
    write_local(id->chan, rec);
}

// Reads one whole record from the pipe. Every writer writes whole records of at most
// PIPE_BUF bytes, which a pipe keeps whole.
static int read_record(Channel* c, abi::CmEventRec* rec) {
    for (;;) {
        ssize_t r = read(c->rd, rec, sizeof *rec);
        if (r == ssize_t(sizeof *rec)) return 0;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        return EPROTO;  // cannot happen while c->wr is open: no writer writes part of a record
    }
}

// Moves every record waiting in the pipe to the end of c->held (the marker is dropped on
// the way). Under c->read_mu. Reads only what FIONREAD counts, so it never blocks.
static int drain(Channel* c) {
    int avail = 0;
    if (ioctl(c->rd, FIONREAD, &avail) != 0) return errno;
    for (; avail >= int(sizeof(abi::CmEventRec)); avail -= int(sizeof(abi::CmEventRec))) {
        abi::CmEventRec rec;
        if (int e = read_record(c, &rec)) return e;
        if (rec.dev_tag == kMarkerTag)
            c->marker = false;
        else
            c->held.push_back(rec);
    }
    return 0;
}

// Keeps the invariant: a marker in the pipe exactly while c->held has records. Under
// c->read_mu, right after drain() (so a marker still in the pipe is never doubled).
static void sync_marker(Channel* c) {
    if (c->held.empty() || c->marker) return;
    abi::CmEventRec m{};
    m.dev_tag = kMarkerTag;
    // A full pipe (a megabyte of unread events) takes no marker: readers still find held's
    // records, but poll() no longer sees them until another event arrives.
    c->marker = write(c->wr, &m, sizeof m) == ssize_t(sizeof m);
}

// The channel's next record, oldest first: 0, or an errno (EAGAIN: non-blocking and empty).
// Several threads may read one channel; they wait outside read_mu, so rdma_migrate_id and
// rdma_destroy_id can take records out while a reader waits.
int next_record(Channel* c, abi::CmEventRec* rec) {
    for (;;) {
        {
            std::lock_guard<std::mutex> g(c->read_mu);
            if (int e = drain(c)) return e;
            if (!c->held.empty()) {
                *rec = c->held.front();
                c->held.pop_front();
                sync_marker(c);
                return 0;
            }
        }
        int fl = fcntl(c->rd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK)) return EAGAIN;
        pollfd p{c->rd, POLLIN, 0};
        if (poll(&p, 1, -1) < 0 && errno != EINTR) return errno;
    }
}

// The keys an id's events carry: its local number and its handle on each device.
std::vector<uint64_t> id_keys(const Id* id) {
    std::vector<uint64_t> keys{key(kLocalTag, id->lid)};
    if (id->dev && id->handle) keys.push_back(key(id->dev->tag, id->handle));
    for (auto& [d, h] : id->listens) keys.push_back(key(d->tag, h));
    return keys;
}

// Takes the records for `keys` out of c (under c->read_mu), oldest first.
static std::deque<abi::CmEventRec> take_records(Channel* c, const std::vector<uint64_t>& keys) {
    std::deque<abi::CmEventRec> taken, kept;
    drain(c);
    for (const abi::CmEventRec& r : c->held) {
        bool mine = std::find(keys.begin(), keys.end(), key(r.dev_tag, r.handle)) != keys.end();
        (mine ? taken : kept).push_back(r);
    }
    c->held.swap(kept);
    sync_marker(c);
    return taken;
}

// A connection request nobody will take (its listener is gone, or making its id failed):
// the device rejects it and forgets the new id.
static void refuse_request(const abi::CmEventRec& r) {
    if (DevConn* d = dev_by_tag(r.dev_tag)) {
        abi::CmReq q = cm_req(abi::CmOp::kDestroy, r.new_handle);
        cm_call(*d, q);
    }
}

// rdma_migrate_id: the id's unread events go along to channel `to`, in order and ahead of
// any the devices have written there since they moved the id (the kernel's ucma_move_events).
// Both channels' readers wait meanwhile, so an event is read once, from one of them.
void move_events(Id* id, Channel* from, Channel* to) {
    if (from == to || !try_ref_channel(from)) return;
    {
        std::scoped_lock g(from->read_mu, to->read_mu);
        std::deque<abi::CmEventRec> moved = take_records(from, id_keys(id));
        if (!moved.empty()) {
            drain(to);
            to->held.insert(to->held.begin(), moved.begin(), moved.end());
            sync_marker(to);
        }
    }
    unref_channel(from);
}

// rdma_destroy_id: the id's unread events go with it (the kernel's ucma_free_ctx), and so do
// the connection requests a listener had not read: the device rejects them.
void drop_events(Id* id, Channel* c) {
    if (!try_ref_channel(c)) return;
    std::deque<abi::CmEventRec> dropped;
    {
        std::lock_guard<std::mutex> g(c->read_mu);
        dropped = take_records(c, id_keys(id));
    }
    unref_channel(c);
    for (const abi::CmEventRec& r : dropped)
        if (r.event == RDMA_CM_EVENT_CONNECT_REQUEST) refuse_request(r);
}

void fill_ud(Event* e, Id* id, const abi::CmEventRec& rec) {
    rdma_ud_param& u = e->ev.param.ud;
    u.private_data_len = rec.private_data_len;
    if (rec.private_data_len) {
        std::memcpy(e->private_data, rec.private_data, rec.private_data_len);
        u.private_data = e->private_data;
    }
    u.ah_attr.is_global = 1;
    std::memcpy(u.ah_attr.grh.dgid.raw, rec.remote_addr, 16);
    u.ah_attr.grh.sgid_index = sgid_index(id);
    u.ah_attr.grh.hop_limit = kHopLimit;
    u.ah_attr.grh.traffic_class = id->tos;
    u.ah_attr.port_num = 1;
    u.qp_num = rec.remote_qpn;
    u.qkey = rec.qkey;
}

void fill_conn(Event* e, const abi::CmEventRec& rec) {
    rdma_conn_param& c = e->ev.param.conn;
    c.private_data_len = rec.private_data_len;
    if (rec.private_data_len) {
        std::memcpy(e->private_data, rec.private_data, rec.private_data_len);
        c.private_data = e->private_data;
    }
    c.responder_resources = rec.responder_resources;
    c.initiator_depth = rec.initiator_depth;
    c.flow_control = rec.flow_control;
    c.retry_count = rec.retry_count;
    c.rnr_retry_count = rec.rnr_retry_count;
    c.srq = rec.srq;
    c.qp_num = rec.remote_qpn;
}

// A connection request: the new id, on the listener's channel (or a synchronous one of its
// own when the listener is synchronous, as rdma-core does).
Id* make_child(Id* l, const abi::CmEventRec& rec) {
    DevConn* d = dev_by_tag(rec.dev_tag);
    if (!d) return nullptr;
    Id* c = new_id(l->chan, l->id.context, l->id.ps, l->id.qp_type);
    if (!c) return nullptr;
    c->handle = rec.new_handle;
    c->bound = true;
    c->conn_req = true;
    c->have_conn = true;
    c->port = rec.local_port;
    // The request's addresses, of its IP version (the kernel's cma_save_ip_info): an IPv4
    // request to an IPv6 wildcard listener makes an id with IPv4 addresses.
    const net::Endpoint local = on_dev(rec.local_addr, d), remote = on_dev(rec.remote_addr, d);
    to_sockaddr(local, rec.local_port, &c->id.route.addr.src_storage);
    to_sockaddr(remote, rec.remote_port, &c->id.route.addr.dst_storage);
    c->id.pd = nullptr;
    attach(c, d);
    c->mtu = std::min<uint8_t>(rec.mtu ? rec.mtu : uint8_t(IBV_MTU_1024), d->mtu);
    set_gid(remote, &c->id.route.addr.addr.ibaddr.dgid);
    set_path(c, local, remote);
    c->remote = remote;
    c->remote_qpn = rec.remote_qpn;
    c->remote_psn = rec.remote_psn;
    // The passive side's path is the REQ's (the kernel's cma_ib_new_conn_id): its QP's
    // address vector gets the active side's TOS.
    c->tos = rec.tos;
    c->resp_res = rec.responder_resources;
    c->init_depth = rec.initiator_depth;
    c->retry_count = rec.retry_count;
    c->rnr_retry_count = rec.rnr_retry_count;
    c->addr_resolved = c->route_resolved = true;
    register_key(d->tag, c->handle, c);
    if (l->sync) {
        // rdma_migrate_id(child, NULL): its own synchronous channel.
        Channel* nc = new_channel(0);
        int e = nc ? ensure_channel(nc, d) : ENOMEM;
        if (!e) {
            abi::CmReq r = cm_req(abi::CmOp::kMigrate, c->handle);
            r.channel = nc->id;
            e = cm_call(*d, r);
        }
        if (e) {
            if (nc) free_channel(nc);
            rdma_destroy_id(&c->id);
            return nullptr;
        }
        c->chan = nc;
        c->id.channel = &nc->ch;
        c->sync = true;
    }
    return c;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
    if (!sync_devices()) {
        errno = ENODEV;
        return nullptr;
    }
    Channel* c = new_channel(kChannelPipeBytes);
    return c ? &c->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
    if (channel) free_channel(chan_of(channel));
}

// ---- events --------------------------------------------------------------------------------

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (!channel || !event) return fail(EINVAL);
    Channel* c = chan_of(channel);
    // Held while this thread uses the channel, so rdma_destroy_event_channel from another
    // thread leaves it blocked (as the kernel does) instead of freeing what it reads.
    if (!try_ref_channel(c)) {
        // Released already (unref_channel): what a read begun a moment earlier would do.
        if (c->was_nonblocking) return fail(EAGAIN);
        for (;;) pause();
    }
    struct Unref {
        Channel* c;
        ~Unref() { unref_channel(c); }
    } unref{c};
    for (;;) {
        abi::CmEventRec rec;
        if (int e = next_record(c, &rec)) return fail(e);
        Id* id = nullptr;
        {
            // Counted as handed out while the id is certainly alive, so an rdma_destroy_id
            // racing this read waits for the event instead of freeing the id under it.
            std::lock_guard<std::mutex> g(g_mu);
            auto it = g_ids.find(key(rec.dev_tag, rec.handle));
            if (it != g_ids.end()) {
                id = it->second;
                std::lock_guard<std::mutex> l(id->mu);
                ++id->reported;
            }
        }
        // An event dropped below counts as acknowledged at once.
        struct Dropped {
            Id* id;
            ~Dropped() {
                if (!id) return;
                std::lock_guard<std::mutex> l(id->mu);
                ++id->completed;
                id->cv.notify_all();  // under the lock: see rdma_ack_cm_event
            }
        } dropped{id};
        if (!id) {
            // The id is gone. A request for a listener that is gone must not linger.
            if (rec.event == RDMA_CM_EVENT_CONNECT_REQUEST) refuse_request(rec);
            continue;
        }
        // Migrated while this thread read the record (move_events took the rest along).
        if (id->chan != c) {
            write_local(id->chan, rec);
            continue;
        }
        auto ev = std::make_unique<Event>();
        std::memset(&ev->ev, 0, sizeof ev->ev);
        ev->owner = id;
        ev->ev.id = &id->id;
        ev->ev.event = rdma_cm_event_type(rec.event);
        ev->ev.status = rec.status;
        switch (rec.event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            Id* child = make_child(id, rec);
            if (!child) {
                refuse_request(rec);
                continue;
            }
            ev->ev.listen_id = &id->id;
            ev->ev.id = &child->id;
            if (is_ud(child))
                fill_ud(ev.get(), child, rec);
            else
                fill_conn(ev.get(), rec);
            break;
        }
        case RDMA_CM_EVENT_CONNECT_RESPONSE: {
            id->remote_qpn = rec.remote_qpn;
            id->remote_psn = rec.remote_psn;
            id->resp_res = rec.responder_resources;
            id->init_depth = rec.initiator_depth;
            id->rnr_retry_count = rec.rnr_retry_count;
            id->have_conn = true;
            fill_conn(ev.get(), rec);
            if (!id->id.qp) break;  // the application moves its QP, then rdma_establish
            int e = modify_rtr(id, RDMA_MAX_RESP_RES);
            if (!e) e = modify_rts(id, RDMA_MAX_INIT_DEPTH);
            if (!e) e = establish(id);
            if (!e) {
                ev->ev.event = RDMA_CM_EVENT_ESTABLISHED;
            } else {
                modify_err(id);
                ev->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
                ev->ev.status = -e;
                id->connect_error = true;
            }
            break;
        }
        case RDMA_CM_EVENT_ESTABLISHED:
            id->conn_req = false;
            if (is_ud(id)) {
                id->remote_qpn = rec.remote_qpn;
                id->qkey = rec.qkey;
                fill_ud(ev.get(), id, rec);
            } else {
                fill_conn(ev.get(), rec);
                ev->ev.param.conn.private_data_len = 0;
                ev->ev.param.conn.private_data = nullptr;
            }
            break;
        case RDMA_CM_EVENT_REJECTED:
            if (id->connect_error) continue;
            modify_err(id);
            fill_conn(ev.get(), rec);
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            if (id->connect_error) continue;
            fill_conn(ev.get(), rec);
            ev->ev.param.conn.private_data_len = 0;
            ev->ev.param.conn.private_data = nullptr;
            break;
        case RDMA_CM_EVENT_UNREACHABLE: modify_err(id); break;
        case RDMA_CM_EVENT_MULTICAST_JOIN: {
            Mcast* mc = take_mcast_event(id, rec.new_handle);
            if (!mc) continue;  // the id left the group before the event was read
            ev->mc = mc;
            fill_mcast(ev.get(), id, *mc);
            // A send-only member's QP is not attached (rdma-core's ucma_process_join).
            if (id->id.qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
                if (int e = ibv_attach_mcast(id->id.qp, &mc->mgid, mc->mlid)) {
                    errno = e;
                    ev->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
                    ev->ev.status = -1;  // rdma-core stores rdma_seterrno()'s -1 here
                }
            }
            break;
        }
        case kEventUser:
            // param.arg (rdma-core 60's union member) overlays the start of param.
            std::memcpy(&ev->ev.param, rec.private_data, sizeof(uint64_t));
            break;
        default: break;
        }
        dropped.id = nullptr;
        *event = &ev.release()->ev;
        return 0;
    }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
    if (!event) return fail(EINVAL);
    auto* ev = reinterpret_cast<Event*>(event);
    {
        std::lock_guard<std::mutex> g(ev->owner->mu);
        ++ev->owner->completed;
        if (ev->mc) ++ev->mc->completed;
        // Under the lock: the waiter (rdma_destroy_id) frees the id, cv and all, as soon as it
        // can see the count, which must not be before this call is done with the cv.
        ev->owner->cv.notify_all();
    }
    delete ev;
    return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: break;
    }
    // Events newer headers than the build's name (rdma-core 57 and later).
    switch (int(event)) {
    case 16: return "RDMA_CM_EVENT_ADDRINFO_RESOLVED";
    case 17: return "RDMA_CM_EVENT_ADDRINFO_ERROR";
    case 18: return "RDMA_CM_EVENT_USER";
    case 19: return "RDMA_CM_EVENT_INTERNAL";
    default: return "UNKNOWN EVENT";
    }
}

int rdma_migrate_id(rdma_cm_id* idp, rdma_event_channel* channel) {
    Id* id = id_of(idp);
    if (id->sync && !channel) return fail(EINVAL);
    Channel* nc = channel ? chan_of(channel) : new_channel(0);
    if (!nc) return -1;
    // A device started meanwhile adds a listen on the channel the id ends up on.
    std::unique_lock<std::mutex> lg(g_listen_mu);
    std::vector<std::pair<DevConn*, uint32_t>> handles = id->listens;
    if (id->dev && id->handle) handles.emplace_back(id->dev, id->handle);
    auto move = [](DevConn* d, uint32_t h, Channel* to) {
        int e = ensure_channel(to, d);
        if (e) return e;
        abi::CmReq r = cm_req(abi::CmOp::kMigrate, h);
        r.channel = to->id;
        return cm_call(*d, r);
    };
    for (size_t i = 0; i < handles.size(); ++i) {
        if (int e = move(handles[i].first, handles[i].second, nc)) {
            // Back where they were: closing nc would take the moved ones with it.
            for (size_t j = 0; j < i; ++j) move(handles[j].first, handles[j].second, id->chan);
            if (!channel) free_channel(nc);
            return fail(e);
        }
    }
    Channel* old = id->chan;
    bool old_sync = id->sync;
    {
        std::lock_guard<std::mutex> g(id->mu);
        id->chan = nc;
        idp->channel = &nc->ch;
        id->sync = channel == nullptr;
    }
    move_events(id, old, nc);
    lg.unlock();
    if (old_sync) {
        if (idp->event) {
            rdma_ack_cm_event(idp->event);
            idp->event = nullptr;
        }
        free_channel(old);
    }
    // Events already handed out on the old channel must be acknowledged first.
    std::unique_lock<std::mutex> lk(id->mu);
    id->cv.wait(lk, [&] { return id->completed >= id->reported; });
    return 0;
}

}  // extern "C"
