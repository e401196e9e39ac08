#include "emu/engine/device.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "emu/abi/runtime.h"
#include "emu/abi/verbs_names.h"
#include "emu/engine/port_mtu.h"
#include "net/icrc.h"
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

Device::Device(DeviceConfig cfg) : cfg_(std::move(cfg)) {
    guid_ = abi::guid_for(cfg_.ipv4_be);
    self_.sin_family = AF_INET;
    self_.sin_addr.s_addr = cfg_.ipv4_be;
    self_.sin_port = htons(cfg_.port);
    ready_.reserve(1024);
    awake_.reserve(64);
    timers_.reserve(1024);
    // The engine flushes the capture once per loop turn (see loop()), not once per packet.
    pcap_.set_flush_each(false);
}

Device::~Device() { stop(); }

int Device::open_io() {
    int err = io_.open(cfg_.ipv4_be, cfg_.port);
    if (err) return err;
    port_mtu_ = port_mtu_for(cfg_.ipv4_be);
    port_mtu_bytes_ = mtu_bytes(port_mtu_);
    if (!cfg_.pcap.empty()) {
        std::string why;
        if (!pcap_.open(cfg_.pcap, cfg_.pcap_max, &why)) return errno ? errno : EIO;
    }
    if (cfg_.faults.any()) set_faults(cfg_.faults);
    // A 4 KiB datagram costs more than 8 KiB of receive buffer: its data sits in an 8 KiB
    // allocation, plus the skb (truesize about 8.8 KiB). 10 KiB a packet leaves some margin.
    self_budget_ = std::max(16, io_.rcvbuf() / 10240);
    cmd_fd_ = eventfd(0, EFD_CLOEXEC);
    if (cmd_fd_ < 0) return errno;
    io_.watch_eventfd(cmd_fd_, kCmdTag);
    return 0;
}

ibv_mtu Device::refresh_port_mtu() {
    ibv_mtu m = port_mtu_for(cfg_.ipv4_be);
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
        pcap_.close();
        return;
    }
    if (!running_) return;
    call([&] {
        stop_requested_ = true;
        close_all();
    });
    thread_.join();
    running_ = false;
    pcap_.close();
}

void Device::call(const std::function<void()>& fn) {
    if (!running_ || std::this_thread::get_id() == thread_.get_id()) {
        if (manual_) dma_flush();  // as run_commands: no control request finds writes pending
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
        dma_flush();  // no control request finds writes pending (dma_write_batch.cpp)
        fn();
    }
}

void Device::loop() {
    while (!stop_requested_) run_turn(true);
    pcap_.flush();
}

void Device::turn() { run_turn(false); }

void Device::run_turn(bool may_sleep) {
    ++turn_;
    looped_ = false;
    poll_doorbells();
    run_ready();
    // What the QPs, timers and injector sent to this device itself arrives now; the
    // ACKs among it (here or between QPs in run_ready) may let requesters go on at once.
    deliver_to_self();
    if (trim_pending_) release_idle_memory();
    uint64_t wait = ready_.empty() ? next_timeout(now_ns()) : looped_ ? 0 : kStallRetryNs;
    if (wait && may_sleep && keep_polling()) {
        // Awake sessions stay awake (their doorbells cost no system call); the yield gives
        // a CPU shared with busy-polling applications back to them between looks.
        wait = 0;
        sched_yield();
    } else if (wait && doze()) {
        wait = 0;
    }
    if (faults_.holding()) wait = std::min(wait, faults_.next_release_in(now_ns()));
    if (!may_sleep) wait = 0;
    // Packets recorded during the last turn reach the file before the engine may sleep:
    // one write per turn at most, and an idle device's capture is always complete on disk.
    pcap_.flush();
    dma_flush();  // received payloads reach the application before the engine may sleep
    io_.run_once(wait, *this);
    // Timers after what arrived: an engine descheduled past a deadline (a loaded host)
    // first reaps the answers waiting in its socket, then decides what is missing, instead
    // of spending a retry on responses it has not looked at yet.
    uint64_t now = now_ns();
    run_timers(now);
    cm_.run_timers(now);
    if (faults_.holding()) release_faults(now);  // packets the fault injector held back
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

// The QPs and CQs the session's doorbell page names (emu/abi/doorbell.h). An entry that
// names nothing of this session's is ignored, as is anything past kDoorbellSlots entries.
bool Device::take_doorbells(Session& s) {
    abi::DoorbellPage* p = s.db;
    const uint32_t first = s.db_head;
    uint32_t head = first;
    for (uint32_t n = 0; n < abi::kDoorbellSlots; ++n, ++head) {
        uint32_t e =
            p->slots[head & (abi::kDoorbellSlots - 1)].exchange(0, std::memory_order_acquire);
        if (!e) break;
        if (e & abi::kDoorbellCq) {
            Cq* cq = cqs_.get(e & ~abi::kDoorbellCq);
            if (owned(s, cq)) notify_if_pending(*cq);
            continue;
        }
        Qp* qp = qps_.get(e);
        if (!holds(s, qp)) continue;
        // Cleared before the requester reads the producer index: a WQE posted after this
        // rings again (the library's side of this is ring_qp()).
        if (qp->sq) qp->sq->arm.store(0, std::memory_order_seq_cst);
        mark_ready(*qp);
    }
    if (head == first && !p->overflow.load(std::memory_order_acquire)) return false;
    ++rung_;
    s.db_head = head;
    p->head.store(head, std::memory_order_release);
    if (p->overflow.exchange(0, std::memory_order_acq_rel)) {
        // The page was full: look at everything, as if every QP and CQ had rung.
        for (uint32_t qpn : s.qps)
            if (Qp* qp = qps_.get(qpn)) {
                if (qp->sq) qp->sq->arm.store(0, std::memory_order_seq_cst);
                mark_ready(*qp);
            }
        for (uint32_t h : s.cqs)
            if (Cq* cq = cqs_.get(h)) notify_if_pending(*cq);
    }
    return true;
}

void Device::mark_ready(Qp& qp) {
    if (qp.on_ready_list) return;
    qp.on_ready_list = true;
    ready_.push_back(&qp);
}

void Device::run_ready() {
    if (ready_.empty()) return;
    // Swap into a scratch list that keeps its capacity, so no allocation happens here.
    static thread_local std::vector<Qp*> work;
    work.clear();
    work.swap(ready_);
    for (Qp* qp : work) qp->on_ready_list = false;
    for (Qp* qp : work) {
        requester_progress(*qp);
        // Between two QPs (never inside one's progress: its ACKs would re-enter it), what
        // it sent to this device goes through, while its buffers are still in the cache.
        if (self_link_.size() >= kSelfDeliverAt) deliver_to_self();
    }
}

void Device::deliver_to_self() {
    if (self_link_.empty()) return;
    looped_ = true;
    while (!self_link_.empty()) {
        SelfLink::Pkt k = self_link_.pop();
        uint8_t* buf = io_.tx_buffer(k.slot);
        if (!k.icrc && packets_observed()) {
            // A capture or the injector started since it was sent.
            net::icrc_store(cfg_.ipv4_be, cfg_.ipv4_be, cfg_.port, cfg_.port, buf, k.len);
            k.icrc = true;
        }
        if (k.icrc)
            arrive(self_, cfg_.ipv4_be, buf, k.len);
        else
            receive(self_, cfg_.ipv4_be, buf, k.len, true);
        io_.tx_free(k.slot);
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
    if (!ready_.empty() || !self_link_.empty() || io_.tx_free_count() != io_.kTxBufs) return;
    trim_pending_ = false;
    io_.release_idle_buffers();
    malloc_trim(0);
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_purge_allocator();
#endif
}

void Device::arm_timer(Qp& qp, uint64_t deadline) {
    qp.deadline_ns = deadline;
    qp.rx_at_arm = qp.resp_rx;
    if (deadline && !qp.on_timer_list) {
        qp.on_timer_list = true;
        timers_.push_back(&qp);
    }
}

void Device::run_timers(uint64_t now) {
    for (size_t i = 0; i < timers_.size();) {
        Qp* qp = timers_[i];
        if (qp->deadline_ns == 0) {
            qp->on_timer_list = false;
            timers_[i] = timers_.back();
            timers_.pop_back();
            continue;
        }
        if (qp->deadline_ns <= now) {
            qp->deadline_ns = 0;
            retransmit_timeout(*qp);
        }
        ++i;
    }
}

uint64_t Device::next_timeout(uint64_t now) const {
    uint64_t best = 1000000000ull;  // wake at least once a second
    for (const Qp* qp : timers_)
        if (qp->deadline_ns)
            best = std::min(best, qp->deadline_ns > now ? qp->deadline_ns - now : 1);
    best = std::min(best, cm_.next_timeout(now));
    return best;
}

uint8_t* Device::tx_begin(uint32_t* slot) {
    uint8_t* buf = io_.tx_alloc(slot);
    if (!buf) ++counters_.tx_stalls;
    return buf;
}

void Device::transmit(uint32_t slot, size_t len_no_icrc, const sockaddr_in& to, Qp* qp) {
    dma_flush();  // nothing leaves before the data it may acknowledge (dma_write_batch.cpp)
    uint8_t* buf = io_.tx_buffer(slot);
    size_t len = len_no_icrc + net::kIcrcLen;
    // A packet to this device itself that nobody can see needs no ICRC: it is never on a
    // wire, and receive() skips the check for it (docs/behaviour.md, "Loopback").
    bool icrc = !to_self(to) || packets_observed();
    if (icrc)
        net::icrc_store(cfg_.ipv4_be, to.sin_addr.s_addr, cfg_.port, ntohs(to.sin_port), buf, len);
    if (pcap_.is_open()) {
        timeval tv;
        gettimeofday(&tv, nullptr);
        pcap_.record(cfg_.ipv4_be, cfg_.port, to.sin_addr.s_addr, ntohs(to.sin_port), buf, len, tv);
    }
    ++counters_.tx_pkts;
    counters_.tx_bytes += len;
    if (net::is_ipv4_multicast(to.sin_addr.s_addr)) ++counters_.mcast_tx_pkts;
    counters_.tx_op.add(buf[0], len);
    if (qp) qp->tx_op.add(buf[0], len);
    if (faults_.armed(net::kFaultTx) && !fault_tx(slot, len, to)) return;  // docs/faults.md
    wire_send(slot, len, to, icrc);
}

void Device::wire_send(uint32_t slot, size_t len, const sockaddr_in& to, bool icrc) {
    if (to_self(to)) return self_link_.push(slot, uint32_t(len), icrc);
    if (loops_back(to)) ++self_inflight_;
    io_.tx_send(slot, len, to);
}

// What the socket delivered: loopback pacing counts it here, once.
void Device::on_packet(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len) {
    if (from.sin_addr.s_addr == cfg_.ipv4_be && from.sin_port == self_.sin_port) {
        if (self_inflight_) --self_inflight_;
        last_self_rx_ns_ = now_ns();
        self_rx_turn_ = turn_;
    }
    arrive(from, to_be, data, len);
}

// The fault injector (which may drop, hold or duplicate the packet), then the receive path.
void Device::arrive(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len) {
    if (faults_.armed(net::kFaultRx) && !fault_rx(from, to_be, data, len))
        return;  // docs/faults.md
    receive(from, to_be, data, len);
}

void Device::receive(const sockaddr_in& from, uint32_t to_be, uint8_t* data, size_t len,
                     bool icrc_unset) {
    ++counters_.rx_pkts;
    counters_.rx_bytes += len;
    if (len) counters_.rx_op.add(data[0], len);
    if (pcap_.is_open()) {
        timeval tv;
        gettimeofday(&tv, nullptr);
        pcap_.record(from.sin_addr.s_addr, ntohs(from.sin_port), to_be, cfg_.port, data, len, tv);
    }
    net::Packet p;
    net::DropReason why = net::decode(data, len, p);
    if (why != net::DropReason::kNone) return count_drop(why);
    if (!icrc_unset &&
        !net::icrc_check(from.sin_addr.s_addr, to_be, ntohs(from.sin_port), cfg_.port, data, len))
        return count_drop(net::DropReason::kBadIcrc);
    if ((p.bth.pkey & 0x7fff) != (net::kDefaultPkey & 0x7fff))
        return count_drop(net::DropReason::kBadPkey);
    // Only group sockets receive datagrams sent to another address than the device's own.
    if (to_be != cfg_.ipv4_be) return mcast_receive(p, from, to_be, len);  // mcast.cpp
    if (p.bth.dqpn == 1) return cm_.on_mad(from, p);  // the GSI QP: CM MADs (emu/cm/)
    Qp* qp = qps_.get(p.bth.dqpn);
    if (!qp || qp->owner->dead) return count_drop(net::DropReason::kBadQp);
    const net::OpInfo* info = net::op_info(p.bth.opcode);
    bool rc = info->cls == net::QpClass::RC && qp->type == IBV_QPT_RC;
    bool uc = info->cls == net::QpClass::UC && qp->type == IBV_QPT_UC;
    bool ud = info->cls == net::QpClass::UD && qp->type == IBV_QPT_UD;
    // XRC: requests go to TGT QPs, responses to INI QPs.
    bool request = info->flags & net::kRequest;
    bool xrc = info->cls == net::QpClass::XRC && ((qp->type == IBV_QPT_XRC_RECV && request) ||
                                                  (qp->type == IBV_QPT_XRC_SEND && !request));
    if (!rc && !uc && !ud && !xrc) return count_drop(net::DropReason::kOpNotForQp, *qp);
    ++qp->rx_pkts;
    qp->rx_op.add(p.bth.opcode, len);
    if (xrc && request)
        xrc_receive(*qp, p);
    else if (ud)
        ud_receive(*qp, p, from, to_be);
    else if (uc)
        uc_responder_.receive(*qp, p);
    else if (info->flags & net::kRequest)
        responder_.receive(*qp, p);
    else
        completer_receive(*qp, p);
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
    io_.watch_eventfd(db, id);  // the ring owns db from here on
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
    for (uint32_t qpn : std::vector<uint32_t>(s->qps)) release_qp(*s, qpn);
    for (uint32_t h : std::vector<uint32_t>(s->srqs)) destroy_srq(*s, h);
    // Every XRC object made or opened through its XRCD handles is gone by now (each TGT QP
    // handle released its pin, each SRQ its own), so each handle closes.
    for (uint32_t h : std::vector<uint32_t>(s->xrcd_handles)) close_xrcd(*s, h);
    for (uint32_t h : s->cqs) cqs_.remove(h);
    for (uint32_t h : s->channels) channels_.remove(h);
    for (uint32_t h : s->mws) mws_.remove(h);  // before their MRs: nothing is left to unbind
    for (uint32_t h : s->mrs) mrs_.remove(h >> 8);
    for (uint32_t h : s->pds) pds_.remove(h);
    io_.unwatch_eventfd(s->id);
    std::erase(awake_, s->id);
    sessions_.remove(s->id);
    if (sessions_.count() == 0) trim_pending_ = true;
}

void Device::post_async(Session* s, ibv_event_type type, uint64_t cookie, const char* what,
                        uint32_t id) {
    if (!s || s->async_write_fd < 0) return;
    if (what && std::strcmp(what, "qp") == 0)
        trace_.add("async %s qp 0x%x -> pid %d", abi::event_id(type), id, int(s->pid));
    else if (what)
        trace_.add("async %s %s %u -> pid %d", abi::event_id(type), what, id, int(s->pid));
    else
        trace_.add("async %s -> pid %d", abi::event_id(type), int(s->pid));
    abi::AsyncEvent ev{uint32_t(type), 0, cookie};
    if (write(s->async_write_fd, &ev, sizeof ev) < 0) {
        // The application is not reading its events; like a full EQ, this one is lost.
    }
}

int Device::set_capture(const std::string& path, uint64_t max_bytes) {
    pcap_.close();  // flushes what the current capture still buffers
    cfg_.pcap.clear();
    cfg_.pcap_max = 0;
    if (path.empty()) return 0;
    std::string why;
    if (!pcap_.open(path, max_bytes, &why)) return errno ? errno : EIO;
    cfg_.pcap = path;
    cfg_.pcap_max = max_bytes;
    return 0;
}

uint64_t Device::capture_packets() const { return pcap_.packets(); }

}  // namespace uroce::emu
