// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/engine/device.h"

#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <future>

#include "emu/abi/runtime.h"
#include "emu/engine/port_mtu.h"
#include "net/opcodes.h"

#ifdef __SANITIZE_ADDRESS__
// The ASan runtime's: empties its quarantine and returns free memory to the kernel
// (<sanitizer/allocator_interface.h>, which GCC does not install).
extern "C" void __sanitizer_purge_allocator();
#endif

namespace uroce::emu {

namespace {
constexpr uint64_t kCmdTag = ~uint64_t(0);
constexpr uint64_t kStallRetryNs = 20000;  // when every transmit buffer is in flight
constexpr uint32_t kSelfDeliverAt = 64;    // packets to self that run_ready lets pile up
}  // namespace

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

CompChannel::~CompChannel() {
    if (write_fd >= 0) close(write_fd);
}

Session::~Session() {
    if (async_write_fd >= 0) close(async_write_fd);
}

std::vector<net::Endpoint> DeviceConfig::addresses() const {
    std::vector<net::Endpoint> v{endpoint()};
    for (net::Endpoint e : more) {
        e.set_port(port);
        v.push_back(e);
    }
    return v;
}

std::vector<net::Endpoint> DeviceConfig::gid_table() const {
    const std::vector<net::Endpoint> all = addresses();
    auto link_local = [](const net::Endpoint& e) {
        return e.is_v6() && e.addr6()[0] == 0xfe && (e.addr6()[1] & 0xc0) == 0x80;
    };
    std::vector<net::Endpoint> t;
    for (int pass = 0; pass < 3; ++pass)
        for (const net::Endpoint& e : all) {
            const int kind = link_local(e) ? 0 : e.is_v6() ? 2 : 1;
            bool dup = false;
            for (const net::Endpoint& x : t) dup |= x.same_addr(e);
            if (kind == pass && !dup && t.size() < abi::kGidTblLen) t.push_back(e);
        }
    return t;
}

Device::Device(DeviceConfig cfg) : cfg_(std::move(cfg)) {
    // (An IPv6 device's from the last four bytes of its address.)
    uint32_t low;
    std::memcpy(&low, cfg_.endpoint().v6.sin6_addr.s6_addr + 12, 4);
    guid_ = abi::guid_for(cfg_.is_ipv6() ? low : cfg_.ipv4_be);
    awake_.reserve(64);
}

Device::~Device() { stop(); }

int Device::open_io() {
    if (int err = wire_.open()) return err;
    port_mtu_ = port_mtu_for(cfg_.endpoint());
    port_mtu_bytes_ = mtu_bytes(port_mtu_);
    cmd_fd_ = eventfd(0, EFD_CLOEXEC);
    if (cmd_fd_ < 0) return errno;
    wire_.io().watch_eventfd(cmd_fd_, kCmdTag);
    return 0;
}

ibv_mtu Device::refresh_port_mtu() {
    ibv_mtu m = port_mtu_for(cfg_.endpoint());
    call([&] {
        port_mtu_ = m;
        port_mtu_bytes_ = mtu_bytes(m);
    });
    return m;
}

int Device::start() {
    if (int err = open_io()) return err;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
    return 0;
}

int Device::start_manual() {
    if (int err = open_io()) return err;
    manual_ = true;
    return 0;
}

void Device::stop() {
    // Destroy what is left, as if every application had gone away.
    auto close_all = [this] {
        std::vector<Session*> all;
        sessions_.for_each([&](uint32_t, Session& s) { all.push_back(&s); });
        for (Session* s : all) close_session(s);
    };
    if (manual_) {
        close_all();
        manual_ = false;
        wire_.close_capture();
        return;
    }
    if (!running_) return;
    call([&] {
        stop_requested_ = true;
        close_all();
    });
    thread_.join();
    running_ = false;
    wire_.close_capture();
}

void Device::call(const std::function<void()>& fn) {
    if (!running_ || std::this_thread::get_id() == thread_.get_id()) {
        if (manual_) {  // as run_commands
            serve_doorbells();
            dma_.flush();
        }
        fn();
        return;
    }
    std::promise<void> done;
    {
        std::lock_guard<std::mutex> g(cmd_mu_);
        cmds_.emplace_back([&] {
            fn();
            done.set_value();
        });
    }
    uint64_t one = 1;
    if (write(cmd_fd_, &one, sizeof one) < 0) {
        // eventfd writes only fail on overflow, which a counter of 2^64 cannot reach
    }
    done.get_future().wait();
}

void Device::run_commands() {
    for (;;) {
        std::function<void()> fn;
        {
            std::lock_guard<std::mutex> g(cmd_mu_);
            if (cmds_.empty()) return;
            fn = std::move(cmds_.front());
            cmds_.pop_front();
        }
        serve_doorbells();
        dma_.flush();  // no control request finds writes pending (emu/engine/dma.cpp)
        fn();
    }
}

// Program order between a process's data path and its control path: a WQE whose doorbell
// was rung before a control request was sent is taken before the request acts, as hardware
// fetches it within a microsecond of the doorbell and rxe runs it in ibv_post_send itself.
// The two travel apart (the doorbell page and its eventfd; the control socket, then the
// command queue), so without this a SEND posted right before rdma_disconnect could still be
// in its ring when the QP went to ERR, and be flushed instead of sent. Each session's page
// is read (one slot's exchange where nothing rang) and the QPs that rang make their progress
// now: their packets leave before anything the request sends.
void Device::serve_doorbells() {
    sessions_.for_each([this](uint32_t, Session& s) { take_doorbells(s); });
    run_ready();
}

void Device::loop() {
    while (!stop_requested_) run_turn(true);
    wire_.flush_capture();
}

void Device::turn() { run_turn(false); }

void Device::run_turn(bool may_sleep) {
    wire_.begin_turn();
    poll_doorbells();
    run_ready();
    // What the QPs, timers and injector sent to this device itself arrives now; the
    // ACKs among it (here or between QPs in run_ready) may let requesters go on at once.
    wire_.deliver_to_self();
    if (trim_pending_) release_idle_memory();
    uint64_t wait = sched_.ready_empty() ? next_timeout(now_ns())
                    : wire_.looped()     ? 0
                                         : kStallRetryNs;
    if (wait && may_sleep && keep_polling()) {
        // Awake sessions stay awake (their doorbells cost no system call); the yield gives
        // a CPU shared with busy-polling applications back to them between looks.
        wait = 0;
        sched_yield();
    } else if (wait && doze()) {
        wait = 0;
    }
    if (wire_.faults_holding()) wait = std::min(wait, wire_.next_release_in(now_ns()));
    if (!may_sleep) wait = 0;
    // Packets recorded during the last turn reach the file before the engine may sleep:
    // one write per turn at most, and an idle device's capture is always complete on disk.
    wire_.flush_capture();
    dma_.flush();  // received payloads reach the application before the engine may sleep
    wire_.run_once(wait);
    // Timers after what arrived: an engine descheduled past a deadline (a loaded host)
    // first reaps the answers waiting in its socket, then decides what is missing, instead
    // of spending a retry on responses it has not looked at yet.
    uint64_t now = now_ns();
    run_timers(now);
    cm_.run_timers(now);
    if (wire_.faults_holding()) wire_.release_faults(now);  // packets the fault injector held back
}

void Device::on_eventfd(uint64_t tag) {
    if (tag == kCmdTag) {
        run_commands();
        return;
    }
    Session* s = sessions_.get(uint32_t(tag));
    if (!s) return;
    if (!s->awake) {
        s->awake = true;
        awake_.push_back(s->id);
        // Seen late at worst: the library then writes the eventfd once more.
        s->db->awake.store(1, std::memory_order_relaxed);
    }
    take_doorbells(*s);
}

void Device::poll_doorbells() {
    for (uint32_t id : awake_)
        if (Session* s = sessions_.get(id)) take_doorbells(*s);
}

bool Device::doze() {
    if (awake_.empty()) return false;
    bool found = false;
    for (uint32_t id : awake_)
        if (Session* s = sessions_.get(id)) {
            s->awake = false;
            s->db->awake.store(0, std::memory_order_relaxed);
        }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (uint32_t id : awake_)
        if (Session* s = sessions_.get(id)) found |= take_doorbells(*s);
    awake_.clear();
    return found;
}

bool Device::keep_polling() {
    if (!cfg_.poll_us) return false;
    uint64_t now = now_ns();
    uint64_t work = counters_.rx_pkts + counters_.tx_pkts + rung_;
    if (work != work_seen_) {
        work_seen_ = work;
        last_work_ns_ = now;
    }
    return now - last_work_ns_ < uint64_t(cfg_.poll_us) * 1000;
}

// The QPs the session's doorbell page names (emu/abi/doorbell.h). An entry that
// names nothing of this session's is ignored, as is anything past kDoorbellSlots entries.
bool Device::take_doorbells(Session& s) {
    abi::DoorbellPage* p = s.db;
    const uint32_t first = s.db_head;
    uint32_t head = first;
    for (uint32_t n = 0; n < abi::kDoorbellSlots; ++n, ++head) {
        uint32_t e =
            p->slots[head & (abi::kDoorbellSlots - 1)].exchange(0, std::memory_order_acquire);
        if (!e) break;
        Qp* qp = qps_.get(e);
        if (!xrc_.holds(s, qp)) continue;
        // Cleared before the requester reads the producer index: a WQE posted after this
        // rings again (the library's side of this is ring_qp()).
        if (qp->sq) qp->sq->arm.store(0, std::memory_order_seq_cst);
        sched_.mark_ready(*qp);
    }
    if (head == first && !p->overflow.load(std::memory_order_acquire)) return false;
    ++rung_;
    s.db_head = head;
    p->head.store(head, std::memory_order_release);
    if (p->overflow.exchange(0, std::memory_order_acq_rel)) {
        // The page was full: look at everything, as if every QP had rung.
        for (uint32_t qpn : s.qps)
            if (Qp* qp = qps_.get(qpn)) {
                if (qp->sq) qp->sq->arm.store(0, std::memory_order_seq_cst);
                sched_.mark_ready(*qp);
            }
    }
    return true;
}

void Device::run_ready() {
    if (sched_.ready_empty()) return;
    // A scratch list that keeps its capacity, so no allocation happens here.
    static thread_local std::vector<Qp*> work;
    sched_.take_ready(work);
    for (Qp* qp : work) {
        responder_.send_owed(*qp);
        requester_.progress(*qp);
        // Between two QPs (never inside one's progress: its ACKs would re-enter it), what
        // it sent to this device goes through, while its buffers are still in the cache.
        if (wire_.self_backlog() >= kSelfDeliverAt) wire_.deliver_to_self();
    }
}

// With no session left, the memory the traffic made resident goes back to the kernel: every
// receive buffer (the kernel fills them in ring order, so a burst touches them all), the
// transmit buffers a burst had in flight, and the heap's free pages (glibc keeps what the
// QPs' shadow queues and the sessions' tables freed, below its trim threshold or between
// live chunks; ASan keeps freed memory in its quarantine). Without this a device that once
// served a burst holds its peak for the rest of its life (scripts/soak measures it).
void Device::release_idle_memory() {
    if (sessions_.count() != 0) {
        trim_pending_ = false;  // a process came back: its traffic would touch it all again
        return;
    }
    // A buffer the kernel may still read from (a send in flight) keeps its pages: next turn.
    if (!sched_.ready_empty() || !wire_.idle()) return;
    trim_pending_ = false;
    wire_.io().release_idle_buffers();
    malloc_trim(0);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_purge_allocator();
#endif
}

void Device::run_timers(uint64_t now) {
    sched_.expire(now, [this](Qp& qp) { completer_.retransmit_timeout(qp); });
}

uint64_t Device::next_timeout(uint64_t now) const {
    // Wake at least once a second.
    return std::min(sched_.next_deadline(now, 1000000000ull), cm_.next_timeout(now));
}

void Device::dispatch(const net::Packet& p, const net::Endpoint& from, const net::Endpoint& to,
                      size_t len) {
    // Only group sockets receive datagrams sent to another address than the device's own.
    if (to.multicast()) return mcast_.receive(p, from, to, len);  // mcast.cpp
    if (p.bth.dqpn == 1) return cm_.on_mad(from, p);              // the GSI QP: CM MADs (emu/cm/)
    Qp* qp = qps_.get(p.bth.dqpn);
    if (!qp || qp->owner->dead) return counters_.drop(net::DropReason::kBadQp);
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    bool rc = info->cls == net::QpClass::RC && qp->type == IBV_QPT_RC;
    bool uc = info->cls == net::QpClass::UC && qp->type == IBV_QPT_UC;
    bool ud = info->cls == net::QpClass::UD && qp->type == IBV_QPT_UD;
    // XRC: requests go to TGT QPs, responses to INI QPs.
    bool request = info->flags & net::kRequest;
    bool xrc = info->cls == net::QpClass::XRC && ((qp->type == IBV_QPT_XRC_RECV && request) ||
                                                  (qp->type == IBV_QPT_XRC_SEND && !request));
    if (!rc && !uc && !ud && !xrc) return counters_.drop(net::DropReason::kOpNotForQp, *qp);
    ++qp->rx_pkts;
    qp->rx_op.add(p.bth.opcode, len);
    if (xrc && request)
        xrc_.receive(*qp, p);
    else if (ud)
        ud_.receive(*qp, p, from, to);
    else if (uc)
        uc_responder_.receive(*qp, p);
    else if (info->flags & net::kRequest)
        responder_.receive(*qp, p);
    else
        completer_.receive(*qp, p);
}

Session* Device::open_session(pid_t pid, int fds_out[2], int* err) {
    auto s = std::make_unique<Session>();
    s->pid = pid;
    int db = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (db < 0) {
        *err = errno;
        return nullptr;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        *err = errno;
        close(db);
        return nullptr;
    }
    fcntl(pfd[1], F_SETFL, O_NONBLOCK);
    s->async_write_fd = pfd[1];
    if (int e = s->db_region.create("uroce-doorbell", abi::doorbell_page_bytes())) {
        *err = e;
        close(db);
        close(pfd[0]);
        return nullptr;
    }
    s->db = static_cast<abi::DoorbellPage*>(s->db_region.data());
    uint32_t id;
    Session* sp = sessions_.add(std::move(s), &id);
    if (!sp) {
        *err = EMFILE;
        close(db);
        close(pfd[0]);
        return nullptr;
    }
    sp->id = id;
    fds_out[0] = fcntl(db, F_DUPFD_CLOEXEC, 0);
    fds_out[1] = pfd[0];
    fds_out[2] = sp->db_region.take_fd();
    wire_.io().watch_eventfd(db, id);  // the ring owns db from here on
    trace_.add("pid %d attached (session %u)", int(pid), id);
    *err = 0;
    return sp;
}

void Device::close_session(Session* s) {
    if (s->qps.empty() && s->srqs.empty() && s->cqs.empty() && s->mrs.empty() && s->mws.empty() &&
        s->pds.empty() && s->xrcd_handles.empty() && s->channels.empty())
        trace_.add("pid %d detached, nothing left to release", int(s->pid));
    else
        trace_.add(
            "pid %d detached%s: releasing %zu QPs, %zu SRQs, %zu CQs, %zu MRs, %zu MWs, "
            "%zu PDs, %zu XRCD handles",
            int(s->pid), s->dead ? " (process gone)" : "", s->qps.size(), s->srqs.size(),
            s->cqs.size(), s->mrs.size(), s->mws.size(), s->pds.size(), s->xrcd_handles.size());
    cm_.close_session(*s);  // its connections end (DREQ/REJ) as rdma_destroy_id ends them
    // Children first, as the kernel's uverbs cleanup does.
    // A shared XRC TGT QP survives while other handles of it exist; s->qps names it once
    // per handle this session has, and each release_qp lets go of one.
    for (uint32_t qpn : std::vector<uint32_t>(s->qps)) xrc_.release_qp(*s, qpn);
    for (uint32_t h : std::vector<uint32_t>(s->srqs)) verbs_.destroy_srq(*s, h);
    // Every XRC object made or opened through its XRCD handles is gone by now (each TGT QP
    // handle released its pin, each SRQ its own), so each handle closes.
    for (uint32_t h : std::vector<uint32_t>(s->xrcd_handles)) xrc_.close_xrcd(*s, h);
    for (uint32_t h : s->cqs) cqs_.remove(h);
    for (uint32_t h : s->channels) channels_.remove(h);
    for (uint32_t h : s->mws) mws_.remove(h);  // before their MRs: nothing is left to unbind
    for (uint32_t h : s->mrs) mrs_.remove(h >> 8);
    for (uint32_t h : s->pds) pds_.remove(h);
    wire_.io().unwatch_eventfd(s->id);
    std::erase(awake_, s->id);
    sessions_.remove(s->id);
    if (sessions_.count() == 0) trim_pending_ = true;
}

}  // namespace uroce::emu
