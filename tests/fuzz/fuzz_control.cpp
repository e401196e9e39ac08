// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// libFuzzer target: the device's control plane (docs/fuzzing.md). Every input is a sequence
// of control messages from up to two application connections, decoded as described in
// tests/fuzz/control_ops.h, handed to emu::dispatch_control (what the daemon's
// ControlServer does with a message off its socket) on one Device that runs without an
// engine thread: the target runs the engine's turns itself, so a run is reproducible.
//
// Handles in requests are mostly ones the device returned earlier in the input, so the
// sequences reach deep states: QPs through INIT/RTR/RTS with work requests of random content
// posted into their rings and the doorbell rung, CQ rings and doorbell pages scribbled on,
// SRQs, XRC domains and TGT QPs, memory windows bound through send queues, multicast groups
// and CM ids. Registered memory is one heap arena of this process (the device copies with
// memcpy within its own process), so ASan catches an access outside it. Every destination
// address is a loopback one (the device's own, 127.0.0.254 where nobody listens) or a
// multicast group on the loopback interface: nothing leaves the host.
//
// Oracles besides the sanitizers: every answer is 0 or an errno with the descriptors its
// request promises, and once the connections have closed the device's object tables (PDs,
// MRs, MWs, channels, CQs, QPs, SRQs, XRCDs and their handles, multicast groups, CM ids,
// channels and ports, the engine's ready/timer/awake lists) are as before the input.
//
// Over 800 lines, and Clients over 40 member functions, on purpose: Clients interprets the
// input. Each op of control_ops.h is one short member, in control_ops.h's order, and every op
// draws on the same lists of handles the device returned (pick()); split across files or
// classes, an op would no longer read beside the input format it decodes and the state it
// shares with every other op.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/protocol.h"
#include "emu/abi/rings.h"
#include "emu/control/control_dispatch.h"
#include "emu/engine/device.h"
#include "tests/fuzz/control_ops.h"
#include "tests/fuzz/fuzz_support.h"

using namespace uroce;
using fuzz::CtlOp;

namespace {

constexpr size_t kArenaLen = 64 * 1024;
constexpr size_t kMaxOps = 256;
constexpr int kConns = 2;

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "fuzz_control: %s\n", what);
    __builtin_trap();
}

emu::Device* g_dev = nullptr;
bool g_verbose = false;      // FUZZ_CONTROL_VERBOSE set: every answer, and the device at the end
emu::DeviceObjects g_empty;  // what the device holds with no session
uint8_t* const g_arena = new uint8_t[kArenaLen];
int g_files[2] = {-1, -1};  // two files whose inodes name XRC domains
const uint32_t kSelf = inet_addr("127.0.0.1");
// Destinations, by selector: the device itself, a loopback address where nobody listens,
// two multicast groups (on the loopback interface), another loopback address.
const uint32_t kDests[] = {kSelf, inet_addr("127.0.0.254"), inet_addr("239.1.2.3"),
                           inet_addr("239.1.2.4"), inet_addr("127.0.0.2")};
uint32_t dest(uint8_t sel) { return kDests[sel % std::size(kDests)]; }
// An IPv4 address in the CM's 16-byte form (IPv4-mapped).
void mapped(uint32_t ip, uint8_t* out) {
    std::memset(out, 0, 16);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, &ip, 4);
}

// The input, read front to back; past its end every field reads as zero.
class Reader {
public:
    Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
    bool done() const { return at_ >= n_; }
    void bytes(void* out, size_t n) {
        auto* o = static_cast<uint8_t*>(out);
        for (size_t i = 0; i < n; ++i) o[i] = at_ < n_ ? d_[at_++] : 0;
    }
    template <typename T>
    T get() {
        T v{};
        bytes(&v, sizeof v);
        return v;
    }
    uint8_t u8() { return get<uint8_t>(); }
    uint16_t u16() { return get<uint16_t>(); }
    uint32_t u32() { return get<uint32_t>(); }
    uint64_t u64() { return get<uint64_t>(); }

private:
    const uint8_t* d_;
    size_t n_;
    size_t at_ = 0;
};

// A shared ring (or doorbell page) mapped the way the library maps it.
using Map = abi::RingMap;

struct MrRef {
    uint32_t lkey;
    uint64_t iova, length;
};
struct MwRef {
    uint32_t handle, rkey;
    uint64_t addr, length;  // as the last bind posted asked
};
struct QpRef {
    uint32_t qpn;
    Map sq, rq;  // empty for a QP opened with kOpenQp
};

// One input's clients: connections, what the device returned, what they mapped.
class Clients {
public:
    explicit Clients(Reader& r) : r_(r) {}
    ~Clients() {
        if (g_verbose) std::fprintf(stderr, "%s", g_dev->dump().c_str());
        for (auto& c : conns_) close_conn(c);
        for (int i = 0; i < 4; ++i) g_dev->turn();  // what the closes sent arrives
        for (const Map& m : maps_) munmap(m.base, m.bytes);
        for (int fd : fds_) close(fd);
        emu::DeviceObjects now = g_dev->objects();
        if (!(now == g_empty)) {
            // Not the dump: a leftover object's owner is gone, the dump would read it.
            std::fprintf(stderr,
                         "fuzz_control: the device kept objects: sessions %u pds %u mrs %u "
                         "mws %u channels %u cqs %u qps %u srqs %u xrcds %u xrcd_handles %u "
                         "mcast %zu ready %zu timers %zu awake %zu cm ids %zu stuck %zu "
                         "channels %zu ports %zu\n",
                         now.sessions, now.pds, now.mrs, now.mws, now.channels, now.cqs, now.qps,
                         now.srqs, now.xrcds, now.xrcd_handles, now.mcast_groups, now.ready,
                         now.timers, now.awake, now.cm.owned_ids, now.cm.stuck_ids, now.cm.channels,
                         now.cm.ports);
            die("objects left behind after every session closed");
        }
        if (faults_) g_dev->set_faults(net::FaultSpec{});
    }

    void run_op() {
        const uint8_t op = r_.u8() % fuzz::kCount;
        flags_ = r_.u8();
        conn_ = &conns_[flags_ & 1];
        if (g_verbose) std::fprintf(stderr, "[%u flags 0x%x]\n", unsigned(op), unsigned(flags_));
        switch (CtlOp(op)) {
        case fuzz::kOpen: open(); break;
        case fuzz::kAllocPd: simple(abi::Op::kAllocPd); break;
        case fuzz::kDeallocPd: handle_req(abi::Op::kDeallocPd, pick(pds_)); break;
        case fuzz::kRegMr: reg_mr(); break;
        case fuzz::kDeregMr: handle_req(abi::Op::kDeregMr, pick(mr_keys())); break;
        case fuzz::kCreateChannel: simple(abi::Op::kCreateCompChannel); break;
        case fuzz::kDestroyChannel:
            handle_req(abi::Op::kDestroyCompChannel, pick(channels_));
            break;
        case fuzz::kCreateCq: create_cq(); break;
        case fuzz::kDestroyCq: handle_req(abi::Op::kDestroyCq, pick(cq_handles())); break;
        case fuzz::kCreateQp: create_qp(); break;
        case fuzz::kModifyQp: modify_qp(); break;
        case fuzz::kToState: to_state(); break;
        case fuzz::kQueryQp: {
            abi::Request q = req(abi::Op::kQueryQp);
            q.u.query_qp.qpn = pick(qpns());
            q.u.query_qp.mask = r_.u32();
            send(q);
            break;
        }
        case fuzz::kDestroyQp: handle_req(abi::Op::kDestroyQp, pick(qpns())); break;
        case fuzz::kCreateSrq: create_srq(); break;
        case fuzz::kModifySrq: {
            abi::Request q = req(abi::Op::kModifySrq);
            q.u.modify_srq.handle = pick(srq_handles());
            q.u.modify_srq.mask = r_.u32();
            q.u.modify_srq.attr.max_wr = r_.u32();
            q.u.modify_srq.attr.srq_limit = r_.u32();
            send(q);
            break;
        }
        case fuzz::kQuerySrq: handle_req(abi::Op::kQuerySrq, pick(srq_handles())); break;
        case fuzz::kDestroySrq: handle_req(abi::Op::kDestroySrq, pick(srq_handles())); break;
        case fuzz::kOpenXrcd: open_xrcd(); break;
        case fuzz::kCloseXrcd: handle_req(abi::Op::kCloseXrcd, pick(xrcds_)); break;
        case fuzz::kOpenQp: open_qp(); break;
        case fuzz::kAttachMcast: mcast(abi::Op::kAttachMcast); break;
        case fuzz::kDetachMcast: mcast(abi::Op::kDetachMcast); break;
        case fuzz::kAllocMw: {
            abi::Request q = req(abi::Op::kAllocMw);
            q.u.mw.pd = pick(pds_);
            q.u.mw.type = r_.u8();
            abi::Response a;
            if (send(q, &a) == 0) mws_.push_back({a.u.mw.handle, a.u.mw.rkey, 0, 0});
            break;
        }
        case fuzz::kDeallocMw: handle_req(abi::Op::kDeallocMw, pick(mw_handles())); break;
        case fuzz::kPostSend: post_send(); break;
        case fuzz::kPostRecv: post_recv(); break;
        case fuzz::kRing: ring(); break;
        case fuzz::kTurns: turns(r_.u8()); break;
        case fuzz::kGarbage: garbage(); break;
        case fuzz::kArmCq:
            if (const Map* m = pick_map(cqs_, r_.u8()))
                m->hdr()->arm.store(r_.u8(), std::memory_order_release);
            break;
        case fuzz::kCm: cm(); break;
        case fuzz::kRaw: raw(); break;
        case fuzz::kDump: dump(); break;
        case fuzz::kFaults: fault_spec(); break;
        case fuzz::kClose: close_conn(*conn_); break;
        case fuzz::kResizeCq: resize_cq(); break;
        case fuzz::kReregMr: rereg_mr(); break;
        case fuzz::kAdviseMr: advise_mr(); break;
        case fuzz::kQueryPort: send(req(abi::Op::kQueryPort)); break;
        case fuzz::kQueryPd: {
            abi::Request q = req(abi::Op::kQueryPd);
            q.u.pd.pd = pick(pds_);
            send(q);
            break;
        }
        case fuzz::kQueryMr: handle_req(abi::Op::kQueryMr, pick(mr_keys())); break;
        case fuzz::kCount: break;
        }
    }

private:
    struct Conn {
        emu::ControlConn cc{nullptr, getpid()};
        abi::DoorbellPage* db = nullptr;
    };

    // ---- handles ---------------------------------------------------------------------------
    // A handle as control_ops.h's "pick" describes it.
    uint32_t pick(const std::vector<uint32_t>& v) {
        uint8_t b = r_.u8();
        if (b >= 0xf0) return r_.u32();
        return v.empty() ? b : v[b % v.size()];
    }
    template <typename T>
    const T* pick_ref(const std::vector<T>& v, uint8_t b) {
        return v.empty() ? nullptr : &v[b % v.size()];
    }
    template <typename T>
    const Map* pick_map(const std::vector<std::pair<uint32_t, T>>& v, uint8_t b) {
        return v.empty() ? nullptr : &v[b % v.size()].second;
    }
    std::vector<uint32_t> mr_keys() const {
        std::vector<uint32_t> k;
        for (const MrRef& m : mrs_) k.push_back(m.lkey);
        return k;
    }
    std::vector<uint32_t> cq_handles() const { return firsts(cqs_); }
    std::vector<uint32_t> srq_handles() const { return firsts(srqs_); }
    std::vector<uint32_t> mw_handles() const {
        std::vector<uint32_t> k;
        for (const MwRef& m : mws_) k.push_back(m.handle);
        return k;
    }
    std::vector<uint32_t> qpns() const {
        std::vector<uint32_t> k;
        for (const QpRef& q : qps_) k.push_back(q.qpn);
        return k;
    }
    template <typename T>
    static std::vector<uint32_t> firsts(const std::vector<std::pair<uint32_t, T>>& v) {
        std::vector<uint32_t> k;
        for (const auto& [h, x] : v) k.push_back(h);
        return k;
    }
    std::vector<uint32_t> rkeys() const {
        std::vector<uint32_t> k = mr_keys();
        for (const MwRef& m : mws_) k.push_back(m.rkey);
        return k;
    }

    // ---- messages --------------------------------------------------------------------------
    static abi::Request req(abi::Op op) {
        abi::Request q{};
        q.op = op;
        return q;
    }

    // Sends n bytes of msg on the current connection; returns the reply's bytes and fds.
    emu::ControlReply exchange(const emu::ControlMsg& msg, size_t n, int in_fd = -1) {
        emu::ControlReply out;
        if (!emu::dispatch_control(*g_dev, conn_->cc, msg, n, in_fd, &out)) return out;
        // The fds go back to the client: it keeps them until the end of the input (the
        // device may write into the pipes until then).
        fds_.insert(fds_.end(), out.fds.begin(), out.fds.end());
        return out;
    }

    // A Request; checks the Response and its fds. Returns its errno.
    int send(const abi::Request& q, abi::Response* a = nullptr, std::vector<int>* fds = nullptr,
             int in_fd = -1) {
        emu::ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        msg.req = q;
        emu::ControlReply out = exchange(msg, sizeof q, in_fd);
        abi::Response resp{};
        if (out.bytes.size() != sizeof resp) die("a Request was not answered with a Response");
        std::memcpy(&resp, out.bytes.data(), sizeof resp);
        if (g_verbose) std::fprintf(stderr, "op %u: %s\n", unsigned(q.op), std::strerror(resp.err));
        if (resp.err < 0 || resp.err >= 4096) die("an answer that is no errno");
        if (resp.err && !out.fds.empty()) die("descriptors with an error");
        size_t want = 0;
        switch (q.op) {
        case abi::Op::kOpen: want = 3; break;
        case abi::Op::kCreateCompChannel:
        case abi::Op::kCreateCq:
        case abi::Op::kCreateSrq: want = 1; break;
        case abi::Op::kCreateQp: want = 2; break;
        default: break;
        }
        if (!resp.err && out.fds.size() != want) die("a success without its descriptors");
        if (a) *a = resp;
        if (fds) *fds = out.fds;
        return resp.err;
    }
    void simple(abi::Op op) {
        abi::Response a;
        if (send(req(op), &a) != 0) return;
        if (op == abi::Op::kAllocPd) pds_.push_back(a.u.pd.pd);
        if (op == abi::Op::kCreateCompChannel) channels_.push_back(a.u.channel.handle);
    }
    void handle_req(abi::Op op, uint32_t h) {
        abi::Request q = req(op);
        q.u.handle.handle = h;
        send(q);
    }

    Map map(int fd, size_t bytes, uint32_t slots = 0, uint32_t stride = 0) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) die("mmap of a descriptor the device returned");
        Map m{static_cast<uint8_t*>(p), bytes, slots ? slots - 1 : 0, stride};
        maps_.push_back(m);
        return m;
    }

    // ---- verbs -----------------------------------------------------------------------------
    void open() {
        abi::Request q = req(abi::Op::kOpen);
        q.u.open.version = (flags_ & 2) ? r_.u32() : abi::kProtocolVersion;
        q.u.open.pid = getpid();
        std::vector<int> fds;
        if (send(q, nullptr, &fds) != 0) return;
        conn_->db =
            reinterpret_cast<abi::DoorbellPage*>(map(fds[2], abi::doorbell_page_bytes()).base);
        doorbells_.push_back(conn_->db);
    }

    void close_conn(Conn& c) {
        if (!c.cc.session) return;
        emu::Session* s = c.cc.session;
        g_dev->call([&] { g_dev->close_session(s); });  // as ControlServer::read_next
        c.cc.session = nullptr;
        c.db = nullptr;
    }

    void reg_mr() {
        abi::Request q = req(abi::Op::kRegMr);
        auto& m = q.u.reg_mr;
        m.pd = pick(pds_);
        m.access = r_.u32();
        size_t off = r_.u16() % kArenaLen;
        m.addr = reinterpret_cast<uint64_t>(g_arena + off);
        m.length = r_.u16() % (kArenaLen - off + 1);
        m.iova = (flags_ & 2) ? r_.u64() : m.addr;
        // Only lengths the device must refuse may pass the arena's end.
        if (flags_ & 4) {
            uint64_t len = r_.u64();
            if (len == 0 || len > abi::kMaxMrSize) m.length = len;
        }
        abi::Response a;
        if (send(q, &a) == 0) mrs_.push_back({a.u.reg_mr.lkey, m.iova, m.length});
    }

    void create_cq() {
        abi::Request q = req(abi::Op::kCreateCq);
        q.u.create_cq.cqe = r_.u32();
        q.u.create_cq.channel = int32_t(pick(channels_));
        if (flags_ & 2) q.u.create_cq.channel = -1;
        q.u.create_cq.cookie = 0xc0000 + cqs_.size();
        abi::Response a;
        std::vector<int> fds;
        if (send(q, &a, &fds) != 0) return;
        const auto& o = a.u.create_cq;
        if (o.slots == 0 || (o.slots & (o.slots - 1)) || o.cqe > o.slots) die("odd CQ ring");
        cqs_.push_back({o.handle, map(fds[0], abi::ring_bytes(o.slots, sizeof(abi::Cqe)), o.slots,
                                      sizeof(abi::Cqe))});
    }

    // The library's ibv_resize_cq makes a sealed memfd of the size the cqe asks for; the
    // input may send none, or one of another size and unsealed.
    void resize_cq() {
        abi::Request q = req(abi::Op::kResizeCq);
        auto& c = q.u.resize_cq;
        c.handle = pick(cq_handles());
        c.cqe = r_.u32();
        c.slots = abi::cq_slots(std::min<uint32_t>(std::max<uint32_t>(c.cqe, 1), abi::kMaxCqe));
        const bool raw = (flags_ & 4) != 0;
        if (raw) c.slots = r_.u32();
        int fd = -1;
        if (!(flags_ & 2)) {
            // A raw size is kept small: the memfd is made for real.
            const size_t bytes = abi::ring_bytes(raw ? c.slots % 4096 : c.slots, sizeof(abi::Cqe));
            fd = memfd_create("fuzz-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) die("memfd for resize_cq");
            if (!raw && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) die("seal for resize_cq");
        }
        abi::Response a;
        int err = send(q, &a, nullptr, fd);
        if (err == 0) {
            if (fd < 0) die("resize_cq succeeded without a ring");
            for (auto& [h, m] : cqs_)
                if (h == c.handle)
                    m = map(fd, abi::ring_bytes(c.slots, sizeof(abi::Cqe)), c.slots,
                            sizeof(abi::Cqe));
        }
        if (fd >= 0) close(fd);
    }

    void rereg_mr() {
        abi::Request q = req(abi::Op::kReregMr);
        auto& m = q.u.rereg_mr;
        m.handle = pick(mr_keys());
        m.flags = r_.u32();
        m.pd = pick(pds_);
        m.access = r_.u32();
        if (flags_ & 2) {
            m.addr = r_.u64();
            m.length = r_.u64();
        } else {
            size_t off = r_.u16() % kArenaLen;
            m.addr = reinterpret_cast<uint64_t>(g_arena + off);
            m.length = r_.u16() % (kArenaLen - off + 1);
        }
        abi::Response a;
        if (send(q, &a) != 0 || !(m.flags & IBV_REREG_MR_CHANGE_TRANSLATION)) return;
        for (MrRef& r : mrs_)  // a new translation: the MR's iova is the new address
            if (r.lkey == m.handle) r = {r.lkey, m.addr, m.length};
    }

    void advise_mr() {
        abi::Request q = req(abi::Op::kAdviseMr);
        auto& m = q.u.advise_mr;
        m.pd = pick(pds_);
        uint8_t b = r_.u8();
        const MrRef* mr = pick_ref(mrs_, b);
        m.lkey = mr ? mr->lkey : b;
        if (flags_ & 2) {
            m.addr = r_.u64();
            m.length = r_.u64();
        } else {
            m.addr = (mr ? mr->iova : 0) + r_.u16();
            m.length = r_.u16();
        }
        send(q);
    }

    void create_qp() {
        abi::Request q = req(abi::Op::kCreateQp);
        auto& c = q.u.create_qp;
        static const uint32_t kTypes[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_SEND,
                                          IBV_QPT_XRC_RECV};
        uint8_t t = r_.u8();
        c.qp_type = t < std::size(kTypes) ? kTypes[t] : t;
        c.pd = pick(pds_);
        c.send_cq = pick(cq_handles());
        c.recv_cq = pick(cq_handles());
        c.srq = pick(srq_handles());
        if (flags_ & 2) c.srq = 0;
        c.xrcd = pick(xrcds_);
        c.cap.max_send_wr = r_.u8();
        c.cap.max_recv_wr = r_.u8();
        c.cap.max_send_sge = r_.u8();
        c.cap.max_recv_sge = r_.u8();
        c.cap.max_inline_data = r_.u16();
        c.sq_sig_all = (flags_ & 4) != 0;
        c.cookie = 0x90000 + qps_.size();
        abi::Response a;
        std::vector<int> fds;
        if (send(q, &a, &fds) != 0) return;
        const auto& o = a.u.create_qp;
        QpRef ref{o.qpn, {}, {}};
        ref.sq = map(fds[0], abi::ring_bytes(o.sq_slots, o.sq_stride), o.sq_slots, o.sq_stride);
        ref.rq = map(fds[1], abi::ring_bytes(o.rq_slots, o.rq_stride), o.rq_slots, o.rq_stride);
        qps_.push_back(ref);
    }

    // The IPv4 part of an IPv4-mapped GID always names a loopback or multicast address.
    static void set_dgid(ibv_ah_attr& ah, uint8_t sel) {
        uint32_t ip = dest(sel);
        std::memcpy(&ah.grh.dgid.raw[12], &ip, 4);
    }

    void modify_qp() {
        abi::Request q = req(abi::Op::kModifyQp);
        q.u.modify_qp.qpn = pick(qpns());
        q.u.modify_qp.mask = r_.u32();
        r_.bytes(&q.u.modify_qp.attr, sizeof q.u.modify_qp.attr);
        set_dgid(q.u.modify_qp.attr.ah_attr, q.u.modify_qp.attr.ah_attr.grh.dgid.raw[12]);
        set_dgid(q.u.modify_qp.attr.alt_ah_attr, 0);
        send(q);
    }

    void to_state() {
        abi::Request q = req(abi::Op::kModifyQp);
        auto& m = q.u.modify_qp;
        m.qpn = pick(qpns());
        ibv_qp_attr& a = m.attr;
        a.qp_state = ibv_qp_state(r_.u8() % 7);
        const uint8_t profile = r_.u8();
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
        set_dgid(a.ah_attr, r_.u8());
        a.dest_qp_num = pick(qpns()) & 0xffffff;
        a.rq_psn = r_.u32() & 0xffffff;
        a.sq_psn = r_.u32() & 0xffffff;
        a.path_mtu = ibv_mtu(1 + r_.u8() % 5);
        a.timeout = r_.u8() % 32;
        a.retry_cnt = r_.u8() % 8;
        a.rnr_retry = r_.u8() % 8;
        a.max_rd_atomic = a.max_dest_rd_atomic = r_.u8() % 17;
        a.min_rnr_timer = a.timeout;
        a.qkey = r_.u32();
        a.port_num = 1;
        a.qp_access_flags = r_.u8() & 0xf;
        m.mask = IBV_QP_STATE | required_attrs(profile, a.qp_state);
        if (flags_ & 2) m.mask |= r_.u32();  // and whatever else
        send(q);
    }

    // What a transition into `st` needs for a QP type (0 RC, 1 UC, 2 UD, 3 XRC_SEND,
    // 4 XRC_RECV; emu/verbs/qp_state.cpp has the whole table): a type given another's attributes
    // is refused, which is worth trying too.
    static uint64_t required_attrs(uint8_t type, ibv_qp_state st) {
        type %= 5;
        bool ud = type == 2, uc = type == 1, ini = type == 3, tgt = type == 4;
        switch (st) {
        case IBV_QPS_INIT:
            return IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
        case IBV_QPS_RTR:
            if (ud) return 0;
            return IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   (uc || ini ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        case IBV_QPS_RTS:
            if (ud || uc) return IBV_QP_SQ_PSN;
            if (tgt) return IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
            return IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                   IBV_QP_MAX_QP_RD_ATOMIC;
        default: return 0;
        }
    }

    void create_srq() {
        abi::Request q = req(abi::Op::kCreateSrq);
        auto& c = q.u.create_srq;
        c.pd = pick(pds_);
        c.max_wr = r_.u16();
        c.max_sge = r_.u8();
        c.srq_limit = r_.u16();
        c.cookie = 0x5000 + srqs_.size();
        c.srq_type = IBV_SRQT_BASIC;
        if (flags_ & 2) {
            c.srq_type = IBV_SRQT_XRC;
            c.xrcd = pick(xrcds_);
            c.cq = pick(cq_handles());
        }
        if (flags_ & 4) c.srq_type = r_.u32();
        abi::Response a;
        std::vector<int> fds;
        if (send(q, &a, &fds) != 0) return;
        const auto& o = a.u.create_srq;
        srqs_.push_back(
            {o.handle, map(fds[0], abi::ring_bytes(o.slots, o.stride), o.slots, o.stride)});
    }

    void open_xrcd() {
        abi::Request q = req(abi::Op::kOpenXrcd);
        uint8_t f = r_.u8() % 4;
        q.u.open_xrcd.has_fd = f != 0;
        q.u.open_xrcd.oflags = int32_t(r_.u32());
        abi::Response a;
        if (send(q, &a, nullptr, f == 1 || f == 2 ? g_files[f - 1] : -1) == 0)
            xrcds_.push_back(a.u.xrcd.handle);
    }

    void open_qp() {
        abi::Request q = req(abi::Op::kOpenQp);
        q.u.open_qp.xrcd = pick(xrcds_);
        q.u.open_qp.qpn = pick(qpns());
        uint8_t t = r_.u8();
        q.u.open_qp.qp_type = (flags_ & 2) ? t : IBV_QPT_XRC_RECV;
        q.u.open_qp.cookie = 0x7000;
        abi::Response a;
        if (send(q, &a) == 0) qps_.push_back({a.u.open_qp.qpn, {}, {}});
    }

    void mcast(abi::Op op) {
        abi::Request q = req(op);
        auto& m = q.u.mcast;
        m.qpn = pick(qpns());
        m.lid = r_.u16();
        uint8_t g = r_.u8();
        if (g < 4) {
            m.gid[10] = m.gid[11] = 0xff;
            uint32_t ip = dest(2 + g % 2);
            std::memcpy(&m.gid[12], &ip, 4);
        } else if (g == 4) {
            m.gid[0] = 0xff;
            m.gid[1] = 0x0e;
            m.gid[15] = 1;
        } else {
            r_.bytes(m.gid, sizeof m.gid);
            // A mapped IPv4 group joins a real socket: keep it on the loopback groups.
            if (m.gid[10] == 0xff && m.gid[11] == 0xff) {
                uint32_t ip = dest(2 + g % 2);
                std::memcpy(&m.gid[12], &ip, 4);
            }
        }
        send(q);
    }

    // ---- rings -----------------------------------------------------------------------------
    // An SGE from the input: in a registered MR (as the library would send), or raw.
    abi::Sge sge() {
        abi::Sge s{};
        const MrRef* m = pick_ref(mrs_, r_.u8());
        uint16_t off = r_.u16(), len = r_.u16();
        if (m) {
            s.lkey = m->lkey;
            s.addr = m->iova + (m->length ? off % m->length : off);
            s.length = len;
        } else {
            s.addr = off;
            s.length = len;
            s.lkey = uint32_t(off) << 8;
        }
        return s;
    }

    void post_send() {
        const QpRef* qp = pick_ref(qps_, r_.u8());
        uint32_t n = r_.u8() % 17;
        for (uint32_t k = 0; k < n; ++k) {
            abi::SendWqe w{};
            w.wr_id = k;
            uint8_t op = r_.u8();
            w.opcode = op < 0xf0 ? op % 12 : op;  // IBV_WR_RDMA_WRITE .. IBV_WR_DRIVER1, or raw
            w.send_flags = r_.u8() & 0x1f;
            w.num_sge = r_.u8() % 34;
            const size_t data = qp && qp->sq.base ? qp->sq.stride - sizeof w : 0;
            uint8_t area[512 + 64] = {};
            size_t used = 0;
            for (uint32_t i = 0; i < std::min<size_t>(w.num_sge, data / sizeof(abi::Sge)); ++i) {
                abi::Sge s = sge();
                std::memcpy(area + used, &s, sizeof s);
                used += sizeof s;
            }
            std::vector<uint32_t> keys = rkeys();
            w.rkey = pick(keys);
            uint16_t roff = r_.u16();
            w.remote_addr = roff;
            for (const MrRef& m : mrs_)
                if (m.lkey == w.rkey && m.length) w.remote_addr = m.iova + roff % m.length;
            for (const MwRef& m : mws_)
                if (m.rkey == w.rkey && m.length) w.remote_addr = m.addr + roff % m.length;
            w.imm_data = r_.u32();
            // What LOCAL_INV and SEND_WITH_INV invalidate: mostly a key the device gave out.
            bool inv = w.opcode == IBV_WR_LOCAL_INV || w.opcode == IBV_WR_SEND_WITH_INV;
            if (inv && !keys.empty() && (w.imm_data >> 24) != 0xff)
                w.imm_data = keys[w.imm_data % keys.size()];
            w.compare_add = r_.u8();
            w.swap = r_.u8();
            w.ah = dest(r_.u8());
            w.remote_qpn = pick(qpns());
            w.remote_qkey = r_.u32();
            w.remote_srqn = pick(srq_handles());
            if (w.send_flags & IBV_SEND_INLINE) {
                w.inline_len = r_.u8() * 3;
                size_t have = std::min<size_t>({w.inline_len, data, sizeof area});
                r_.bytes(area, have);
                used = std::max(used, have);
            }
            if (w.opcode == IBV_WR_BIND_MW) {
                abi::MwBind b{};
                b.mw = pick(mw_handles());
                b.rkey = r_.u8();
                const MrRef* m = pick_ref(mrs_, r_.u8());
                b.mr_lkey = m ? m->lkey : 0;
                b.access = r_.u32();
                uint16_t off = r_.u16(), len = r_.u16();
                b.addr = m ? m->iova + off : off;
                b.length = len;
                // The window's key and range after the bind, if it succeeds.
                for (MwRef& mw : mws_)
                    if (mw.handle == b.mw)
                        mw = {mw.handle, (mw.rkey & ~0xffu) | b.rkey, b.addr, len};
                std::memcpy(area, &b, sizeof b);
                used = std::max(used, sizeof b);
            }
            if (!qp || !qp->sq.base) continue;
            abi::RingHeader* h = qp->sq.hdr();
            uint32_t prod = h->prod.load(std::memory_order_relaxed);
            uint8_t* slot = qp->sq.slot(prod);
            std::memcpy(slot, &w, sizeof w);
            std::memcpy(slot + sizeof w, area, std::min(used, data));
            h->prod.store(prod + 1, std::memory_order_release);
        }
    }

    void post_recv() {
        const Map* ring = nullptr;
        if (flags_ & 2) {
            ring = pick_map(srqs_, r_.u8());
        } else if (const QpRef* qp = pick_ref(qps_, r_.u8()); qp && qp->rq.base) {
            ring = &qp->rq;
        }
        uint32_t n = r_.u8() % 17;
        for (uint32_t k = 0; k < n; ++k) {
            abi::RecvWqe w{k, uint32_t(r_.u8() % 34), 0};
            uint8_t area[abi::kMaxSge * sizeof(abi::Sge)] = {};
            size_t data = ring ? ring->stride - sizeof w : 0;
            size_t used = 0;
            for (uint32_t i = 0; i < std::min<size_t>(w.num_sge, data / sizeof(abi::Sge)); ++i) {
                abi::Sge s = sge();
                std::memcpy(area + used, &s, sizeof s);
                used += sizeof s;
            }
            if (!ring) continue;
            abi::RingHeader* h = ring->hdr();
            uint32_t prod = h->prod.load(std::memory_order_relaxed);
            std::memcpy(ring->slot(prod), &w, sizeof w);
            std::memcpy(ring->slot(prod) + sizeof w, area, used);
            h->prod.store(prod + 1, std::memory_order_release);
        }
    }

    // The library's doorbell (emu/abi/doorbell.h): entries on the page, then the eventfd,
    // whose read the engine's io_uring would complete; here the target calls the handler.
    void ring() {
        uint32_t n = r_.u8() % 9;
        std::vector<uint32_t> entries;
        for (uint32_t k = 0; k < n; ++k) {
            uint8_t kind = r_.u8();
            if (kind == 0) {
                uint8_t b = r_.u8();
                const QpRef* qp = pick_ref(qps_, b);
                if (qp && qp->sq.base) qp->sq.hdr()->arm.store(1);
                entries.push_back(qp ? qp->qpn : b);
            } else if (kind == 1) {
                entries.push_back(pick(cq_handles()) | 0x80000000u);  // an older library's CQ entry
            } else {
                entries.push_back(r_.u32());
            }
        }
        uint8_t t = r_.u8();
        if (!conn_->db) return;
        for (uint32_t e : entries)
            if (e) abi::doorbell_push(conn_->db, e);
        if (flags_ & 2) conn_->db->overflow.store(1);
        g_dev->wire().on_eventfd(conn_->cc.session->id);  // as the ring reports it
        turns(t);
    }

    void turns(uint8_t n) {
        for (int i = 0; i < 1 + n % 16; ++i) g_dev->turn();
    }

    void garbage() {
        uint8_t kind = r_.u8() % 5, which = r_.u8();
        uint16_t off = r_.u16();
        uint8_t n = r_.u8();
        uint8_t b[256];
        r_.bytes(b, n);
        Map m;
        if (kind == 0 || kind == 3) {
            const Map* p = kind == 0 ? pick_map(cqs_, which) : pick_map(srqs_, which);
            if (!p) return;
            m = *p;
        } else if (kind == 1 || kind == 2) {
            const QpRef* qp = pick_ref(qps_, which);
            if (!qp || !qp->sq.base) return;
            m = kind == 1 ? qp->sq : qp->rq;
        } else {
            if (doorbells_.empty()) return;
            m.base = reinterpret_cast<uint8_t*>(doorbells_[which % doorbells_.size()]);
            m.bytes = abi::doorbell_page_bytes();
        }
        size_t at = off % m.bytes;
        std::memcpy(m.base + at, b, std::min<size_t>(n, m.bytes - at));
    }

    // ---- CM --------------------------------------------------------------------------------
    void cm() {
        emu::ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        abi::CmReq& c = msg.cm;
        c.op = abi::Op::kCm;
        c.cm_op = abi::CmOp(r_.u8() % 14);
        c.handle = pick(cm_ids_);
        c.channel = r_.u8() % 4;
        c.dev_tag = 0x100 + c.channel;
        static const uint32_t kPs[] = {0x0106, 0x0111, 0x013f, 0x0002};
        uint8_t ps = r_.u8();
        c.ps = ps < std::size(kPs) ? kPs[ps] : ps;
        c.qp_type = r_.u8();
        c.backlog = int8_t(r_.u8());
        uint8_t l = r_.u8();
        if (l != 1) mapped(l == 0 ? kSelf : dest(l), c.local_addr);  // 1: the wildcard
        mapped(dest(r_.u8()), c.remote_addr);
        c.family = l & 0x40 ? AF_INET6 : AF_INET;  // (from bits of l: the inputs read as before)
        c.afonly = (l >> 7) & 1;
        c.local_port = htons(r_.u8() % 4 * 1000);
        c.remote_port = htons(r_.u8() % 4 * 1000);
        c.qpn = pick(qpns());
        c.psn = r_.u32();
        c.qkey = r_.u32();
        c.event = r_.u32();
        r_.bytes(&c.responder_resources, 7);
        c.private_data_len = r_.u8();
        r_.bytes(c.private_data, std::min<size_t>(c.private_data_len, sizeof c.private_data));
        size_t n = sizeof c - ((flags_ & 2) ? 1 : 0);
        // kChannel carries the write end of the channel's pipe, as the library sends it; we
        // keep the read end (with the other fds, closed at the end of the input).
        int p[2] = {-1, -1};
        if (c.cm_op == abi::CmOp::kChannel && pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
            fds_.push_back(p[0]);
            cm_pipes_.push_back(p[0]);
        }
        emu::ControlReply out = exchange(msg, n, p[1]);
        if (p[1] >= 0) close(p[1]);
        abi::CmResp resp{};
        if (out.bytes.size() != sizeof resp) die("a CmReq was not answered with a CmResp");
        std::memcpy(&resp, out.bytes.data(), sizeof resp);
        if (g_verbose)
            std::fprintf(stderr, "cm op %u: %s\n", unsigned(c.cm_op), std::strerror(resp.err));
        if (resp.err < 0 || resp.err >= 4096) die("a CM answer that is no errno");
        if (!out.fds.empty()) die("descriptors with a CmResp");
        if (resp.err) return;
        if (c.cm_op == abi::CmOp::kBind) cm_ids_.push_back(resp.handle);
    }

    // The CM events that arrived: connection requests name new ids.
    void cm_events() {
        for (int fd : cm_pipes_) {
            abi::CmEventRec ev;
            while (read(fd, &ev, sizeof ev) == ssize_t(sizeof ev))
                if (ev.new_handle) cm_ids_.push_back(ev.new_handle);
        }
    }

    // ---- the rest --------------------------------------------------------------------------
    void raw() {
        emu::ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        size_t n = r_.u16() % (sizeof msg + 1);
        r_.bytes(&msg, n);
        emu::ControlReply out = exchange(msg, n);
        if (n >= sizeof(abi::Response) && out.bytes.size() == sizeof(abi::Response)) {
            abi::Response resp;
            std::memcpy(&resp, out.bytes.data(), sizeof resp);
            if (resp.err < 0 || resp.err >= 4096) die("an answer that is no errno");
        }
    }

    void dump() {
        // A dump walks every table slot (hundreds of thousands): once per input is enough.
        if (dumped_) return;
        dumped_ = true;
        emu::ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        msg.req.op = (flags_ & 2) ? abi::Op::kTrace : abi::Op::kDump;
        if (flags_ & 2) msg.req.u.trace.since = r_.u8();
        exchange(msg, sizeof msg.req);
    }

    void fault_spec() {
        emu::ControlMsg msg;
        std::memset(&msg, 0, sizeof msg);
        msg.faults.op = abi::Op::kFaults;
        r_.bytes(msg.faults.spec, r_.u8() % 64);
        faults_ = true;
        exchange(msg, sizeof msg.faults);
    }

public:
    void after_op() { cm_events(); }

private:
    Reader& r_;
    Conn conns_[kConns];
    Conn* conn_ = &conns_[0];
    uint8_t flags_ = 0;
    bool faults_ = false;
    bool dumped_ = false;
    std::vector<uint32_t> pds_, channels_, xrcds_, cm_ids_;
    std::vector<MrRef> mrs_;
    std::vector<std::pair<uint32_t, Map>> cqs_, srqs_;
    std::vector<MwRef> mws_;
    std::vector<QpRef> qps_;
    std::vector<abi::DoorbellPage*> doorbells_;
    std::vector<Map> maps_;
    std::vector<int> fds_, cm_pipes_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    signal(SIGPIPE, SIG_IGN);
    g_verbose = std::getenv("FUZZ_CONTROL_VERBOSE") !=
                nullptr;  // as uroced: the device writes into pipes clients may close
    for (int i = 0; i < 2; ++i) {
        g_files[i] = memfd_create(i ? "xrcd-b" : "xrcd-a", MFD_CLOEXEC);
        if (g_files[i] < 0) die("memfd_create");
    }
    emu::DeviceConfig cfg;
    cfg.name = "fuzzctl0";
    cfg.ipv4_be = kSelf;
    g_dev = fuzz::start_on_free_port(cfg, 47500, 48500,
                                     [](emu::Device& d) { return d.start_manual(); });
    if (!g_dev) die("no free UDP port in 47500..48499");
    g_empty = g_dev->objects();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
    std::memset(g_arena, 0, kArenaLen);
    Reader r(data, len);
    Clients c(r);
    for (size_t i = 0; i < kMaxOps && !r.done(); ++i) {
        c.run_op();
        c.after_op();
    }
    return 0;
}
