// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librpma (Debian's librpma-dev, used as its man pages describe) over the drop-in libibverbs
// and librdmacm: one program, run once as the server and once (or several times at once) as
// the client of a case, in separate processes (tests/integration/rpma_test.sh drives them).
//
// usage: rpma_tests server|client CASE ADDR PORT [ROUND] [CLIENTS]
//   ADDR, PORT  the server's address and port (the server listens there, the client connects)
//   ROUND       a number both sides are given; what they send each other is made from it, so
//               each checks that the other's bytes are this round's (default 0)
//   CLIENTS     srq: the server's is how many clients connect at once, each client's is its
//               own index among them (1..CLIENTS)
// Cases (each side checks what it received, byte for byte):
//   conn   private data both ways: the server checks the client's (from the request), the
//          client the server's (after ESTABLISHED); the client disconnects, both see CLOSED
//   rw     the server's MR descriptor travels in its private data; the client READs the
//          server's 64 KiB pattern, WRITEs its own into part of it and READs that back; the
//          server checks its memory after the client has gone
//   flush  WRITE then rpma_flush (VISIBILITY, then PERSISTENT once the server's peer
//          configuration is applied), then a message: on receiving it the server checks the
//          bytes are there; a flush type the MR's usage does not allow is refused
//   atomic rpma_atomic_write of 8-byte words (one word twice); read back and checked by both
//   msg    ping-pong over rpma_send/rpma_recv, messages checked
//   rcq    the same with a separate receive CQ (rpma_conn_cfg_set_rcq_size) on a completion
//          channel shared by both CQs: receives complete on the receive CQ only
//   srq    the server receives through an rpma_srq (its own receive CQ) from CLIENTS clients
//          at once and answers each on its own connection
//   imm    rpma_send_with_imm and rpma_write_with_imm: the receiver checks the immediate
//          values (and the written bytes)
//   multi  one client opens several connections at once to one endpoint; each writes its
//          slice of the server's memory and reads another's back
//   scch   librpma's example 12scch as written: rpma_conn_wait then one rpma_cq_get_wc per
//          completion on a shared channel, and the last message sent unsignaled right
//          before rpma_conn_disconnect, which the server must receive
// Prints "<role> <case> round <ROUND>: ok ..." and exits 0 when every check held; otherwise
// prints what differed and exits 1. "listening" on stdout tells the driver the server is up.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <librpma.h>
#include <poll.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

int g_failures = 0;
const char* g_role = "?";

[[noreturn]] void fatal(const char* fmt, ...) {
    std::va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "FATAL [%s] ", g_role);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::exit(1);
}

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::fprintf(stderr, "FAIL [%s] line %d: %s: ", g_role, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                        \
            std::fputc('\n', stderr);                                                 \
            ++g_failures;                                                             \
        }                                                                             \
    } while (0)

// A librpma call that must succeed.
#define RPMA(call)                                                                       \
    do {                                                                                 \
        int rpma_ret_ = (call);                                                          \
        if (rpma_ret_) fatal("%s: %s (%d)", #call, rpma_err_2str(rpma_ret_), rpma_ret_); \
    } while (0)

// librpma's own log to stderr, with the role (the default also writes to syslog).
void log_to_stderr(rpma_log_level level, const char* file, int line, const char* func,
                   const char* fmt, ...) {
    (void)file;
    (void)line;
    std::va_list ap;
    va_start(ap, fmt);
    char msg[512];
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = std::strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = 0;  // (librpma's messages end with one)
    static const char* const names[] = {"fatal", "error", "warning", "notice", "info", "debug"};
    const char* name = level >= 0 && level < 6 ? names[level] : "?";
    std::fprintf(stderr, "librpma[%s] %s: %s: %s\n", g_role, name, func, msg);
}

// The bytes of a region of `len` at `off` for (round, who): both sides compute them.
uint8_t pattern(uint32_t round, uint32_t who, size_t i) {
    uint32_t x = round * 2654435761u + who * 40503u + uint32_t(i) * 2246822519u;
    return uint8_t((x >> 13) ^ (x >> 24));
}
void fill(uint8_t* p, size_t len, uint32_t round, uint32_t who, size_t base = 0) {
    for (size_t i = 0; i < len; ++i) p[i] = pattern(round, who, base + i);
}
// The first index where p differs from the pattern, or len.
size_t first_diff(const uint8_t* p, size_t len, uint32_t round, uint32_t who, size_t base = 0) {
    for (size_t i = 0; i < len; ++i)
        if (p[i] != pattern(round, who, base + i)) return i;
    return len;
}

constexpr uint32_t kServer = 1, kClient = 2;  // "who" of pattern()

// Memory for an MR: page-aligned, freed with the object.
struct Buffer {
    uint8_t* p = nullptr;
    size_t len = 0;
    explicit Buffer(size_t n) : len(n) {
        void* q = nullptr;
        if (posix_memalign(&q, 4096, n)) fatal("posix_memalign %zu", n);
        p = static_cast<uint8_t*>(q);
        std::memset(p, 0, n);
    }
    ~Buffer() { std::free(p); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
};

struct Mr {
    Buffer buf;
    rpma_mr_local* mr = nullptr;
    Mr(rpma_peer* peer, size_t n, int usage) : buf(n) {
        RPMA(rpma_mr_reg(peer, buf.p, n, usage, &mr));
    }
    ~Mr() {
        if (mr) rpma_mr_dereg(&mr);
    }
};

// What the server tells the client in its private data (the REP's 196 bytes hold it).
constexpr size_t kDescMax = 48;
struct ServerHello {
    char magic[8];  // "rpmasrv"
    uint32_t round;
    uint32_t index;  // multi: the connection's index the client sent
    uint8_t mr_desc_len, mr2_desc_len, pcfg_desc_len;
    uint8_t mr_desc[kDescMax], mr2_desc[kDescMax], pcfg_desc[8];
    uint8_t tail[16];  // pattern(round, kServer, ...): the bytes after the descriptors
};
// What the client tells the server (the REQ has 56 bytes for it under the RDMA CM header).
struct ClientHello {
    char magic[8];  // "rpmacli"
    uint32_t round;
    uint32_t index;    // multi: which of the client's connections; srq: which client
    uint8_t tail[24];  // pattern(round, kClient, index...)
};
static_assert(sizeof(ServerHello) <= 196 && sizeof(ClientHello) <= 56);

ClientHello client_hello(uint32_t round, uint32_t index) {
    ClientHello h{};
    std::memcpy(h.magic, "rpmacli", 8);
    h.round = round;
    h.index = index;
    fill(h.tail, sizeof h.tail, round, kClient, 1000 + index);
    return h;
}

// Checks the client's private data of a request; returns its index.
uint32_t check_client_hello(const rpma_conn_private_data& pd, uint32_t round) {
    CHECK(pd.len >= sizeof(ClientHello), "client private data of %u bytes", unsigned(pd.len));
    if (pd.len < sizeof(ClientHello) || !pd.ptr) return 0;
    ClientHello h;
    std::memcpy(&h, pd.ptr, sizeof h);
    CHECK(std::memcmp(h.magic, "rpmacli", 8) == 0, "client magic %.8s", h.magic);
    CHECK(h.round == round, "client round %u, expected %u", h.round, round);
    CHECK(first_diff(h.tail, sizeof h.tail, round, kClient, 1000 + h.index) == sizeof h.tail,
          "client private data bytes differ (index %u)", h.index);
    return h.index;
}

void check_server_hello(const ServerHello& h, uint32_t round, uint32_t index) {
    CHECK(std::memcmp(h.magic, "rpmasrv", 8) == 0, "server magic %.8s", h.magic);
    CHECK(h.round == round, "server round %u, expected %u", h.round, round);
    CHECK(h.index == index, "server answered index %u, expected %u", h.index, index);
    CHECK(first_diff(h.tail, sizeof h.tail, round, kServer, 2000 + index) == sizeof h.tail,
          "server private data bytes differ");
}

struct Args {
    bool server = false;
    std::string kase, addr, port;
    uint32_t round = 0;
    uint32_t clients = 1;
};

struct Peer {
    ibv_context* ctx = nullptr;
    rpma_peer* peer = nullptr;
    Peer(const Args& a) {
        RPMA(rpma_utils_get_ibv_context(
            a.addr.c_str(), a.server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE,
            &ctx));
        RPMA(rpma_peer_new(ctx, &peer));
    }
    ~Peer() { rpma_peer_delete(&peer); }
};

void expect_event(rpma_conn* conn, rpma_conn_event want) {
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    RPMA(rpma_conn_next_event(conn, &ev));
    if (ev != want)
        fatal("connection event %s, expected %s", rpma_utils_conn_event_2str(ev),
              rpma_utils_conn_event_2str(want));
}

// The next completion of cq (one at a time: rpma_cq_wait when there is none).
ibv_wc next_wc(rpma_cq* cq) {
    for (;;) {
        ibv_wc wc{};
        int r = rpma_cq_get_wc(cq, 1, &wc, nullptr);
        if (r == 0) return wc;
        if (r != RPMA_E_NO_COMPLETION) fatal("rpma_cq_get_wc: %s", rpma_err_2str(r));
        r = rpma_cq_wait(cq);
        if (r && r != RPMA_E_NO_COMPLETION) fatal("rpma_cq_wait: %s", rpma_err_2str(r));
    }
}

// wc must be a success of `op` for `ctx`.
ibv_wc expected(const ibv_wc& wc, ibv_wc_opcode op, const void* ctx) {
    if (wc.status != IBV_WC_SUCCESS)
        fatal("completion status %s (wr_id %#llx)", ibv_wc_status_str(wc.status),
              (unsigned long long)wc.wr_id);
    CHECK(wc.opcode == op, "completion opcode %d, expected %d", int(wc.opcode), int(op));
    CHECK(wc.wr_id == uint64_t(uintptr_t(ctx)), "completion wr_id %#llx, expected %p",
          (unsigned long long)wc.wr_id, ctx);
    return wc;
}

// The next completion of cq, which must be a success of `op` for `ctx`.
ibv_wc expect_wc(rpma_cq* cq, ibv_wc_opcode op, const void* ctx) {
    return expected(next_wc(cq), op, ctx);
}

const void* tag(uintptr_t n) { return reinterpret_cast<const void*>(n); }
constexpr uintptr_t kRecvTag = 0x1000;  // the server's receives posted before accepting

// The client side's connection: request, private data, ESTABLISHED, the server's hello.
struct ClientConn {
    rpma_conn* conn = nullptr;
    ServerHello hello{};
    rpma_cq* cq = nullptr;
};

ClientConn client_connect(Peer& p, const Args& a, const rpma_conn_cfg* cfg, uint32_t index,
                          Mr* pre_recv = nullptr, size_t pre_len = 0) {
    rpma_conn_req* req = nullptr;
    RPMA(rpma_conn_req_new(p.peer, a.addr.c_str(), a.port.c_str(), cfg, &req));
    if (pre_recv) RPMA(rpma_conn_req_recv(req, pre_recv->mr, 0, pre_len, tag(0x51)));
    ClientHello h = client_hello(a.round, index);
    rpma_conn_private_data pd{&h, uint8_t(sizeof h)};
    ClientConn c;
    RPMA(rpma_conn_req_connect(&req, &pd, &c.conn));
    return c;
}

void client_established(ClientConn& c, const Args& a, uint32_t index) {
    expect_event(c.conn, RPMA_CONN_ESTABLISHED);
    rpma_conn_private_data pd{};
    RPMA(rpma_conn_get_private_data(c.conn, &pd));
    CHECK(pd.len >= sizeof(ServerHello), "server private data of %u bytes", unsigned(pd.len));
    if (pd.ptr && pd.len >= sizeof(ServerHello)) std::memcpy(&c.hello, pd.ptr, sizeof c.hello);
    check_server_hello(c.hello, a.round, index);
    RPMA(rpma_conn_get_cq(c.conn, &c.cq));
}

void client_close(ClientConn& c) {
    RPMA(rpma_conn_disconnect(c.conn));
    expect_event(c.conn, RPMA_CONN_CLOSED);
    RPMA(rpma_conn_delete(&c.conn));
}

rpma_mr_remote* remote_mr(const uint8_t* desc, uint8_t len) {
    rpma_mr_remote* r = nullptr;
    RPMA(rpma_mr_remote_from_descriptor(desc, len, &r));
    return r;
}

// The server side: one endpoint; each accepted connection has checked the client's hello.
struct ServerConn {
    rpma_conn* conn = nullptr;
    uint32_t index = 0;
    rpma_cq* cq = nullptr;
};

struct Server {
    const Args& a;
    Peer& p;
    rpma_ep* ep = nullptr;
    Server(const Args& args, Peer& peer) : a(args), p(peer) {
        RPMA(rpma_ep_listen(p.peer, a.addr.c_str(), a.port.c_str(), &ep));
        std::printf("listening\n");
        std::fflush(stdout);
    }
    ~Server() { rpma_ep_shutdown(&ep); }

    // The next request's hello; `hello` gets the server's answer (descriptors filled by the
    // caller beforehand). With recv, nrecv receives of recv_len are posted before the
    // connection is accepted, each its slot of recv, wr_id kRecvTag + slot.
    ServerConn accept(const rpma_conn_cfg* cfg, ServerHello hello, Mr* recv = nullptr,
                      size_t recv_len = 0, int nrecv = 1) {
        rpma_conn_req* req = nullptr;
        RPMA(rpma_ep_next_conn_req(ep, cfg, &req));
        rpma_conn_private_data pd{};
        RPMA(rpma_conn_req_get_private_data(req, &pd));
        ServerConn s;
        s.index = check_client_hello(pd, a.round);
        for (int i = 0; recv && i < nrecv; ++i)
            RPMA(rpma_conn_req_recv(req, recv->mr, i * recv_len, recv_len, tag(kRecvTag + i)));
        std::memcpy(hello.magic, "rpmasrv", 8);
        hello.round = a.round;
        hello.index = s.index;
        fill(hello.tail, sizeof hello.tail, a.round, kServer, 2000 + s.index);
        rpma_conn_private_data mine{&hello, uint8_t(sizeof hello)};
        RPMA(rpma_conn_req_connect(&req, &mine, &s.conn));
        return s;
    }
    static void established(ServerConn& s) {
        expect_event(s.conn, RPMA_CONN_ESTABLISHED);
        RPMA(rpma_conn_get_cq(s.conn, &s.cq));
    }
    // Waits for the client's disconnect.
    static void closed(ServerConn& s) {
        expect_event(s.conn, RPMA_CONN_CLOSED);
        RPMA(rpma_conn_disconnect(s.conn));
        RPMA(rpma_conn_delete(&s.conn));
    }
};

void put_desc(const rpma_mr_local* mr, uint8_t* out, uint8_t* len) {
    size_t n = 0;
    RPMA(rpma_mr_get_descriptor_size(mr, &n));
    if (n > kDescMax) fatal("MR descriptor of %zu bytes", n);
    RPMA(rpma_mr_get_descriptor(mr, out));
    *len = uint8_t(n);
}

void ok(const Args& a, const char* what) {
    if (g_failures) return;
    std::printf("%s %s round %u: ok%s%s\n", a.server ? "server" : "client", a.kase.c_str(), a.round,
                *what ? ", " : "", what);
}

// ---- conn ----

void server_conn(const Args& a, Peer& p) {
    Server s(a, p);
    ServerConn c = s.accept(nullptr, ServerHello{});
    CHECK(c.index == 7, "client index %u, expected 7", c.index);
    Server::established(c);
    Server::closed(c);
    ok(a, "private data checked both ways");
}

void client_conn(const Args& a, Peer& p) {
    ClientConn c = client_connect(p, a, nullptr, 7);
    client_established(c, a, 7);
    client_close(c);
    ok(a, "private data checked both ways");
}

// ---- rw, flush, atomic: the server's memory, written and read by the client ----

constexpr size_t kRegion = 64 * 1024;
constexpr size_t kWriteOff = 3000, kWriteLen = 40000;  // the client's write: several packets
constexpr size_t kFlushOff = 50000, kFlushLen = 5000;  // flush: written then flushed
constexpr size_t kAtomicOff = 8192, kAtomicWords = 16;

uint64_t atomic_word(uint32_t round, size_t i) {
    return 0x0123456789abcdefull * (round + 1) ^ (uint64_t(i) << 48 | i);
}

// What the server's memory holds after the client of `kase` is done.
void server_check_region(const Args& a, const uint8_t* mem) {
    for (size_t i = 0; i < kRegion;) {
        // The spans the client wrote, with the client's pattern; the rest is the server's.
        uint32_t who = kServer;
        size_t end = kRegion;
        if (a.kase == "rw" && i >= kWriteOff && i < kWriteOff + kWriteLen) {
            who = kClient;
            end = kWriteOff + kWriteLen;
        } else if (a.kase == "rw" && i < kWriteOff) {
            end = kWriteOff;
        } else if (a.kase == "flush" && i >= kFlushOff && i < kFlushOff + kFlushLen) {
            who = kClient;
            end = kFlushOff + kFlushLen;
        } else if (a.kase == "flush" && i < kFlushOff) {
            end = kFlushOff;
        } else if (a.kase == "atomic" && i >= kAtomicOff && i < kAtomicOff + 8 * kAtomicWords) {
            for (size_t w = 0; w < kAtomicWords; ++w) {
                uint64_t v;
                std::memcpy(&v, mem + kAtomicOff + 8 * w, 8);
                // Word 0 was written twice: the second value stays.
                uint64_t want = atomic_word(a.round, w == 0 ? kAtomicWords : w);
                CHECK(v == want, "atomic word %zu is %#llx, expected %#llx", w,
                      (unsigned long long)v, (unsigned long long)want);
            }
            i = kAtomicOff + 8 * kAtomicWords;
            continue;
        } else if (a.kase == "atomic" && i < kAtomicOff) {
            end = kAtomicOff;
        }
        size_t d = first_diff(mem + i, end - i, a.round, who, i);
        CHECK(d == end - i, "server memory at %zu: %#x, expected %s's %#x", i + d,
              unsigned(mem[i + d]), who == kClient ? "the client" : "its own",
              unsigned(pattern(a.round, who, i + d)));
        i = end;
    }
}

// The server of rw, flush and atomic: its region (its pattern) for the client to read,
// write and flush, with a second MR that allows no flush (flush: refused).
void server_memory(const Args& a, Peer& p) {
    Server s(a, p);
    int usage = RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST |
                RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
    Mr region(p.peer, kRegion, usage);
    fill(region.buf.p, kRegion, a.round, kServer);
    Mr noflush(p.peer, 4096, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
    ServerHello h{};
    put_desc(region.mr, h.mr_desc, &h.mr_desc_len);
    put_desc(noflush.mr, h.mr2_desc, &h.mr2_desc_len);
    // Flush to persistence needs the server to say its memory takes direct writes (here it
    // is DRAM: "persistent" is what uroce's verbs-support.md says it is).
    rpma_peer_cfg* pcfg = nullptr;
    RPMA(rpma_peer_cfg_new(&pcfg));
    RPMA(rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
    size_t n = 0;
    RPMA(rpma_peer_cfg_get_descriptor_size(pcfg, &n));
    if (n > sizeof h.pcfg_desc) fatal("peer cfg descriptor of %zu bytes", n);
    RPMA(rpma_peer_cfg_get_descriptor(pcfg, h.pcfg_desc));
    h.pcfg_desc_len = uint8_t(n);
    RPMA(rpma_peer_cfg_delete(&pcfg));

    // flush: the client's message after its flushes says "look now".
    Mr msg(p.peer, 64, RPMA_MR_USAGE_RECV);
    bool flush = a.kase == "flush";
    ServerConn c = s.accept(nullptr, h, flush ? &msg : nullptr, 64);
    Server::established(c);
    if (flush) {
        ibv_wc wc = expect_wc(c.cq, IBV_WC_RECV, tag(kRecvTag));
        CHECK(wc.byte_len == 8 && std::memcmp(msg.buf.p, "flushed", 8) == 0,
              "flush message of %u bytes: %.8s", wc.byte_len, (const char*)msg.buf.p);
        // The bytes are there while the connection is up (the flush completed before the
        // message was sent).
        size_t d = first_diff(region.buf.p + kFlushOff, kFlushLen, a.round, kClient, kFlushOff);
        CHECK(d == kFlushLen, "flushed bytes differ at %zu", kFlushOff + d);
    }
    Server::closed(c);
    server_check_region(a, region.buf.p);
    ok(a, "memory checked");
}

void client_rw(const Args& a, Peer& p, ClientConn& c, rpma_mr_remote* dst) {
    Mr local(p.peer, kRegion, RPMA_MR_USAGE_READ_DST);
    // READ all of the server's region: its pattern.
    RPMA(rpma_read(c.conn, local.mr, 0, dst, 0, kRegion, RPMA_F_COMPLETION_ALWAYS, tag(1)));
    expect_wc(c.cq, IBV_WC_RDMA_READ, tag(1));
    size_t d = first_diff(local.buf.p, kRegion, a.round, kServer);
    CHECK(d == kRegion, "read byte %zu is %#x, expected %#x", d, unsigned(local.buf.p[d]),
          unsigned(pattern(a.round, kServer, d)));
    // WRITE the client's pattern into part of it (unsignaled), READ that back (the READ
    // follows the WRITE on the QP).
    Mr src(p.peer, kRegion, RPMA_MR_USAGE_WRITE_SRC);
    fill(src.buf.p, kRegion, a.round, kClient);
    RPMA(rpma_write(c.conn, dst, kWriteOff, src.mr, kWriteOff, kWriteLen,
                    RPMA_F_COMPLETION_ON_ERROR, tag(2)));
    std::memset(local.buf.p, 0, kRegion);
    RPMA(rpma_read(c.conn, local.mr, 0, dst, 0, kRegion, RPMA_F_COMPLETION_ALWAYS, tag(3)));
    expect_wc(c.cq, IBV_WC_RDMA_READ, tag(3));
    d = first_diff(local.buf.p, kWriteOff, a.round, kServer);
    CHECK(d == kWriteOff, "read back: byte %zu is not the server's", d);
    d = first_diff(local.buf.p + kWriteOff, kWriteLen, a.round, kClient, kWriteOff);
    CHECK(d == kWriteLen, "read back: written byte %zu differs", kWriteOff + d);
    size_t rest = kRegion - kWriteOff - kWriteLen;
    d = first_diff(local.buf.p + kWriteOff + kWriteLen, rest, a.round, kServer,
                   kWriteOff + kWriteLen);
    CHECK(d == rest, "read back: byte %zu is not the server's", kWriteOff + kWriteLen + d);
}

void client_flush(const Args& a, Peer& p, ClientConn& c, rpma_mr_remote* dst,
                  rpma_mr_remote* noflush) {
    Mr local(p.peer, kRegion, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC);
    fill(local.buf.p, kRegion, a.round, kClient);
    int ft = 0;
    RPMA(rpma_mr_remote_get_flush_type(dst, &ft));
    CHECK(ft == (RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT),
          "remote MR flush types %#x", ft);
    // Refused by the MR's usage, and before the server's peer cfg is applied.
    CHECK(rpma_flush(c.conn, noflush, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS,
                     tag(9)) == RPMA_E_NOSUPP,
          "a flush to an MR without flush usage was not refused");
    CHECK(rpma_flush(c.conn, dst, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, RPMA_F_COMPLETION_ALWAYS,
                     tag(9)) == RPMA_E_NOSUPP,
          "a persistent flush before the server's peer cfg was not refused");
    // First half: write, flush to visibility. (Librpma 1.2 emulates a flush with an RDMA READ
    // after the write; 1.3 where the device has them sends a native FLUSH.)
    size_t half = kFlushLen / 2;
    RPMA(rpma_write(c.conn, dst, kFlushOff, local.mr, kFlushOff, half, RPMA_F_COMPLETION_ON_ERROR,
                    tag(2)));
    RPMA(rpma_flush(c.conn, dst, kFlushOff, half, RPMA_FLUSH_TYPE_VISIBILITY,
                    RPMA_F_COMPLETION_ALWAYS, tag(3)));
    ibv_wc wc = next_wc(c.cq);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 3, "visibility flush: %s wr_id %llu",
          ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
    // Second half: write, flush to persistence under the server's peer cfg.
    rpma_peer_cfg* pcfg = nullptr;
    RPMA(rpma_peer_cfg_from_descriptor(c.hello.pcfg_desc, c.hello.pcfg_desc_len, &pcfg));
    bool direct = false;
    RPMA(rpma_peer_cfg_get_direct_write_to_pmem(pcfg, &direct));
    CHECK(direct, "the server's peer cfg does not say direct write to pmem");
    RPMA(rpma_conn_apply_remote_peer_cfg(c.conn, pcfg));
    RPMA(rpma_peer_cfg_delete(&pcfg));
    RPMA(rpma_write(c.conn, dst, kFlushOff + half, local.mr, kFlushOff + half, kFlushLen - half,
                    RPMA_F_COMPLETION_ON_ERROR, tag(4)));
    RPMA(rpma_flush(c.conn, dst, kFlushOff + half, kFlushLen - half, RPMA_FLUSH_TYPE_PERSISTENT,
                    RPMA_F_COMPLETION_ALWAYS, tag(5)));
    wc = next_wc(c.cq);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 5, "persistent flush: %s wr_id %llu",
          ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
    // Read back what was flushed.
    Mr back(p.peer, kFlushLen, RPMA_MR_USAGE_READ_DST);
    RPMA(
        rpma_read(c.conn, back.mr, 0, dst, kFlushOff, kFlushLen, RPMA_F_COMPLETION_ALWAYS, tag(6)));
    expect_wc(c.cq, IBV_WC_RDMA_READ, tag(6));
    size_t d = first_diff(back.buf.p, kFlushLen, a.round, kClient, kFlushOff);
    CHECK(d == kFlushLen, "flushed byte %zu read back differs", kFlushOff + d);
    // Tell the server to look.
    Mr msg(p.peer, 8, RPMA_MR_USAGE_SEND);
    std::memcpy(msg.buf.p, "flushed", 8);
    RPMA(rpma_send(c.conn, msg.mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, tag(7)));
    expect_wc(c.cq, IBV_WC_SEND, tag(7));
}

void client_atomic(const Args& a, Peer& p, ClientConn& c, rpma_mr_remote* dst) {
    for (size_t w = 0; w < kAtomicWords; ++w) {
        uint64_t v = atomic_word(a.round, w);
        char src[8];
        std::memcpy(src, &v, 8);
        // (src is copied: librpma 1.2 sends it inline, a native ATOMIC WRITE carries it.)
        RPMA(rpma_atomic_write(c.conn, dst, kAtomicOff + 8 * w, src, RPMA_F_COMPLETION_ALWAYS,
                               tag(100 + w)));
        ibv_wc wc = next_wc(c.cq);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + w, "atomic write %zu: %s", w,
              ibv_wc_status_str(wc.status));
    }
    // Word 0 again, with another value.
    uint64_t v = atomic_word(a.round, kAtomicWords);
    char src[8];
    std::memcpy(src, &v, 8);
    RPMA(rpma_atomic_write(c.conn, dst, kAtomicOff, src, RPMA_F_COMPLETION_ON_ERROR, tag(99)));
    CHECK(rpma_atomic_write(c.conn, dst, kAtomicOff + 4, src, RPMA_F_COMPLETION_ALWAYS, tag(98)) ==
              RPMA_E_INVAL,
          "an atomic write at an unaligned offset was not refused");
    Mr back(p.peer, 8 * kAtomicWords, RPMA_MR_USAGE_READ_DST);
    RPMA(rpma_read(c.conn, back.mr, 0, dst, kAtomicOff, 8 * kAtomicWords, RPMA_F_COMPLETION_ALWAYS,
                   tag(6)));
    expect_wc(c.cq, IBV_WC_RDMA_READ, tag(6));
    for (size_t w = 0; w < kAtomicWords; ++w) {
        uint64_t got;
        std::memcpy(&got, back.buf.p + 8 * w, 8);
        uint64_t want = atomic_word(a.round, w == 0 ? kAtomicWords : w);
        CHECK(got == want, "read back word %zu: %#llx, expected %#llx", w, (unsigned long long)got,
              (unsigned long long)want);
    }
}

void client_memory(const Args& a, Peer& p) {
    ClientConn c = client_connect(p, a, nullptr, 0);
    client_established(c, a, 0);
    rpma_mr_remote* dst = remote_mr(c.hello.mr_desc, c.hello.mr_desc_len);
    rpma_mr_remote* noflush = remote_mr(c.hello.mr2_desc, c.hello.mr2_desc_len);
    size_t size = 0;
    RPMA(rpma_mr_remote_get_size(dst, &size));
    CHECK(size == kRegion, "remote MR of %zu bytes, expected %zu", size, kRegion);
    if (a.kase == "rw") client_rw(a, p, c, dst);
    if (a.kase == "flush") client_flush(a, p, c, dst, noflush);
    if (a.kase == "atomic") client_atomic(a, p, c, dst);
    RPMA(rpma_mr_remote_delete(&dst));
    RPMA(rpma_mr_remote_delete(&noflush));
    client_close(c);
    ok(a, "memory checked");
}

// ---- msg, rcq, srq, imm: messages ----

constexpr int kPings = 50;
constexpr size_t kMsg = 256;

void make_msg(uint8_t* p, const char* kind, uint32_t round, uint32_t client, int n) {
    std::memset(p, 0, kMsg);
    int k = std::snprintf(reinterpret_cast<char*>(p), kMsg, "%s round %u client %u #%d", kind,
                          round, client, n);
    fill(p + k + 1, kMsg - size_t(k) - 1, round + uint32_t(n), client, 0);
}
void check_msg(const uint8_t* p, uint32_t len, const char* kind, uint32_t round, uint32_t client,
               int n) {
    uint8_t want[kMsg];
    make_msg(want, kind, round, client, n);
    CHECK(len == kMsg && std::memcmp(p, want, kMsg) == 0, "message %d: %u bytes \"%.40s\"", n, len,
          reinterpret_cast<const char*>(p));
}

// The receive side's CQ of a connection (or the SRQ's): for the shared completion channel
// (rcq) it waits with rpma_conn_wait and checks each event came from the CQ it should.
struct Rx {
    rpma_conn* conn = nullptr;
    rpma_cq* cq = nullptr;           // where sends complete
    rpma_cq* rcq = nullptr;          // where receives complete (cq without a receive CQ)
    bool shared = false;             // one completion channel for both (rpma_conn_wait)
    std::vector<ibv_wc> pending[2];  // completions seen on [cq, rcq] not yet asked for

    ibv_wc next(bool recv) {
        rpma_cq* want = recv ? rcq : cq;
        auto& q = pending[recv && rcq != cq];
        for (;;) {
            if (!q.empty()) {
                ibv_wc wc = q.front();
                q.erase(q.begin());
                return wc;
            }
            if (!shared) {
                ibv_wc wc = next_wc(want);
                if (rcq != cq) {
                    bool is_recv = wc.opcode & IBV_WC_RECV;
                    CHECK(is_recv == recv, "opcode %d completed on the %s CQ", int(wc.opcode),
                          recv ? "receive" : "send");
                }
                return wc;
            }
            // Shared channel: poll both, then wait for the next event and see which CQ.
            bool got = false;
            for (int r = 0; r < 2; ++r) {
                ibv_wc wc{};
                int n = 0;
                int ret = rpma_cq_get_wc(r ? rcq : cq, 1, &wc, &n);
                if (ret == RPMA_E_NO_COMPLETION) continue;
                if (ret) fatal("rpma_cq_get_wc: %s", rpma_err_2str(ret));
                bool is_recv = wc.opcode & IBV_WC_RECV;
                CHECK(wc.status != IBV_WC_SUCCESS || is_recv == bool(r),
                      "opcode %d completed on the %s CQ", int(wc.opcode), r ? "receive" : "main");
                pending[r].push_back(wc);
                got = true;
            }
            if (got) continue;
            rpma_cq* which = nullptr;
            bool is_rcq = false;
            int fd = -1;
            RPMA(rpma_conn_get_compl_fd(conn, &fd));
            pollfd pf{fd, POLLIN, 0};
            if (poll(&pf, 1, 20000) != 1) fatal("no completion event in 20 s");
            int ret = rpma_conn_wait(conn, 0, &which, &is_rcq);
            if (ret == RPMA_E_NO_COMPLETION) continue;
            if (ret) fatal("rpma_conn_wait: %s", rpma_err_2str(ret));
            CHECK(which == (is_rcq ? rcq : cq), "rpma_conn_wait named the wrong CQ");
        }
    }
    ibv_wc expect(bool recv, ibv_wc_opcode op, const void* ctx) {
        return expected(next(recv), op, ctx);
    }
};

Rx make_rx(rpma_conn* conn, bool shared) {
    Rx r;
    r.conn = conn;
    r.shared = shared;
    RPMA(rpma_conn_get_cq(conn, &r.cq));
    RPMA(rpma_conn_get_rcq(conn, &r.rcq));
    if (!r.rcq) r.rcq = r.cq;
    return r;
}

rpma_conn_cfg* msg_cfg(const std::string& kase) {
    rpma_conn_cfg* cfg = nullptr;
    RPMA(rpma_conn_cfg_new(&cfg));
    if (kase == "rcq") {
        RPMA(rpma_conn_cfg_set_rcq_size(cfg, 8));
        RPMA(rpma_conn_cfg_set_compl_channel(cfg, true));
    }
    return cfg;
}

// msg, rcq: the server answers each ping with a pong; one receive posted ahead.
void server_msg(const Args& a, Peer& p) {
    Server s(a, p);
    rpma_conn_cfg* cfg = msg_cfg(a.kase);
    Mr rx(p.peer, kMsg, RPMA_MR_USAGE_RECV), tx(p.peer, kMsg, RPMA_MR_USAGE_SEND);
    ServerConn c = s.accept(cfg, ServerHello{}, &rx, kMsg);
    Server::established(c);
    Rx r = make_rx(c.conn, a.kase == "rcq");
    if (a.kase == "rcq") CHECK(r.rcq != r.cq, "the connection has no receive CQ");
    for (int n = 0; n < kPings; ++n) {
        ibv_wc wc = r.expect(true, IBV_WC_RECV, tag(n ? 0x60 : kRecvTag));
        check_msg(rx.buf.p, wc.byte_len, "ping", a.round, 0, n);
        RPMA(rpma_recv(c.conn, rx.mr, 0, kMsg, tag(0x60)));
        make_msg(tx.buf.p, "pong", a.round, 0, n);
        RPMA(rpma_send(c.conn, tx.mr, 0, kMsg, RPMA_F_COMPLETION_ALWAYS, tag(0x61)));
        r.expect(false, IBV_WC_SEND, tag(0x61));
    }
    Server::closed(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    ok(a, (std::to_string(kPings) + " pings answered").c_str());
}

void client_msg(const Args& a, Peer& p) {
    rpma_conn_cfg* cfg = msg_cfg(a.kase);
    Mr rx(p.peer, kMsg, RPMA_MR_USAGE_RECV), tx(p.peer, kMsg, RPMA_MR_USAGE_SEND);
    ClientConn c = client_connect(p, a, cfg, 0, &rx, kMsg);
    client_established(c, a, 0);
    Rx r = make_rx(c.conn, a.kase == "rcq");
    for (int n = 0; n < kPings; ++n) {
        make_msg(tx.buf.p, "ping", a.round, 0, n);
        RPMA(rpma_send(c.conn, tx.mr, 0, kMsg, RPMA_F_COMPLETION_ALWAYS, tag(0x71)));
        r.expect(false, IBV_WC_SEND, tag(0x71));
        ibv_wc wc = r.expect(true, IBV_WC_RECV, tag(n ? 0x70 : 0x51));
        check_msg(rx.buf.p, wc.byte_len, "pong", a.round, 0, n);
        if (n + 1 < kPings) RPMA(rpma_recv(c.conn, rx.mr, 0, kMsg, tag(0x70)));
    }
    client_close(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    ok(a, (std::to_string(kPings) + " pongs checked").c_str());
}

// scch: librpma's example 12scch-receive-completion-queue, step for step: a send CQ and a
// receive CQ on one shared completion channel; each wait is rpma_conn_wait (the event, its
// ack and the re-arm of that CQ, with the completion still unpolled) and then one
// rpma_cq_get_wc, which must find the completion the event announced; a counter goes back
// and forth, and the client's last message, I_M_DONE, is sent unsignaled right before
// rpma_conn_disconnect. The server must receive it: a stale event from the re-arm
// ("no completion") or a last SEND flushed by the disconnect fails the round.
constexpr uint64_t kDone = UINT64_MAX;  // the example's I_M_DONE
constexpr int kCounts = 20;

// The example's wait_and_validate_completion.
ibv_wc wait_and_validate(rpma_conn* conn, ibv_wc_opcode want) {
    rpma_cq* cq = nullptr;
    int ret = rpma_conn_wait(conn, 0, &cq, nullptr);
    if (ret) fatal("rpma_conn_wait: %s", rpma_err_2str(ret));
    ibv_wc wc{};
    ret = rpma_cq_get_wc(cq, 1, &wc, nullptr);
    if (ret) fatal("rpma_cq_get_wc after an event: %s", rpma_err_2str(ret));
    if (wc.status != IBV_WC_SUCCESS)
        fatal("%s completed with %s", want == IBV_WC_SEND ? "a send" : "a receive",
              ibv_wc_status_str(wc.status));
    if (wc.opcode != want) fatal("completion opcode %d, expected %d", int(wc.opcode), int(want));
    return wc;
}

rpma_conn_cfg* scch_cfg() {
    rpma_conn_cfg* cfg = nullptr;
    RPMA(rpma_conn_cfg_new(&cfg));
    RPMA(rpma_conn_cfg_set_rcq_size(cfg, 10));
    RPMA(rpma_conn_cfg_set_compl_channel(cfg, true));
    return cfg;
}

void server_scch(const Args& a, Peer& p) {
    Server s(a, p);
    rpma_conn_cfg* cfg = scch_cfg();
    Mr rx(p.peer, 8, RPMA_MR_USAGE_RECV), tx(p.peer, 8, RPMA_MR_USAGE_SEND);
    ServerConn c = s.accept(cfg, ServerHello{}, &rx, 8);
    Server::established(c);
    uint64_t value = 0, want = uint64_t(a.round) * 1000;
    int n = 0;
    for (;; ++n) {
        wait_and_validate(c.conn, IBV_WC_RECV);
        std::memcpy(&value, rx.buf.p, 8);
        if (value == kDone) break;
        CHECK(value == want, "value %llu, expected %llu", (unsigned long long)value,
              (unsigned long long)want);
        want = value + 1;  // what goes back, and what the client sends next
        std::memcpy(tx.buf.p, &want, 8);
        RPMA(rpma_recv(c.conn, rx.mr, 0, 8, nullptr));
        RPMA(rpma_send(c.conn, tx.mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr));
        wait_and_validate(c.conn, IBV_WC_SEND);
    }
    CHECK(n == kCounts, "I_M_DONE after %d values, expected %d", n, kCounts);
    Server::closed(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    ok(a, (std::to_string(n) + " values answered, I_M_DONE received").c_str());
}

void client_scch(const Args& a, Peer& p) {
    rpma_conn_cfg* cfg = scch_cfg();
    Mr rx(p.peer, 8, RPMA_MR_USAGE_RECV), tx(p.peer, 8, RPMA_MR_USAGE_SEND);
    ClientConn c = client_connect(p, a, cfg, 0);
    client_established(c, a, 0);
    uint64_t counter = uint64_t(a.round) * 1000;
    for (int n = 0; n < kCounts; ++n) {
        RPMA(rpma_recv(c.conn, rx.mr, 0, 8, nullptr));
        std::memcpy(tx.buf.p, &counter, 8);
        RPMA(rpma_send(c.conn, tx.mr, 0, 8, RPMA_F_COMPLETION_ALWAYS, nullptr));
        wait_and_validate(c.conn, IBV_WC_SEND);
        wait_and_validate(c.conn, IBV_WC_RECV);
        uint64_t got = 0;
        std::memcpy(&got, rx.buf.p, 8);
        CHECK(got == counter + 1, "value %llu, expected %llu", (unsigned long long)got,
              (unsigned long long)(counter + 1));
        counter = got;
    }
    std::memcpy(tx.buf.p, &kDone, 8);
    RPMA(rpma_send(c.conn, tx.mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, nullptr));
    client_close(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    ok(a, (std::to_string(kCounts) + " values, then I_M_DONE and the disconnect").c_str());
}

// srq: every client's pings arrive through one shared receive queue; the completion's QP
// number says whose it is, and the answer goes back on that connection.
void server_srq(const Args& a, Peer& p) {
    Server s(a, p);
    const uint32_t nc = a.clients;
    rpma_srq_cfg* scfg = nullptr;
    RPMA(rpma_srq_cfg_new(&scfg));
    RPMA(rpma_srq_cfg_set_rq_size(scfg, 2 * nc));
    RPMA(rpma_srq_cfg_set_rcq_size(scfg, 4 * nc));
    rpma_srq* srq = nullptr;
    RPMA(rpma_srq_new(p.peer, scfg, &srq));
    RPMA(rpma_srq_cfg_delete(&scfg));
    rpma_cq* srq_rcq = nullptr;
    RPMA(rpma_srq_get_rcq(srq, &srq_rcq));
    CHECK(srq_rcq != nullptr, "the SRQ has no receive CQ");
    rpma_conn_cfg* cfg = nullptr;
    RPMA(rpma_conn_cfg_new(&cfg));
    RPMA(rpma_conn_cfg_set_srq(cfg, srq));
    // One receive buffer per slot of the SRQ, its index the wr_id.
    Mr rx(p.peer, 2 * nc * kMsg, RPMA_MR_USAGE_RECV);
    for (uint32_t i = 0; i < 2 * nc; ++i)
        RPMA(rpma_srq_recv(srq, rx.mr, i * kMsg, kMsg, tag(1000 + i)));
    Mr tx(p.peer, nc * kMsg, RPMA_MR_USAGE_SEND);

    std::vector<ServerConn> conns;
    std::map<uint32_t, size_t> by_qpn;  // QP number -> conns[]
    std::vector<int> next_ping(nc + 1, 0);
    for (uint32_t k = 0; k < nc; ++k) {
        conns.push_back(s.accept(cfg, ServerHello{}));
        Server::established(conns.back());
        rpma_cq* rcq = nullptr;
        RPMA(rpma_conn_get_rcq(conns.back().conn, &rcq));
        CHECK(rcq == nullptr, "a connection on the SRQ has a receive CQ of its own");
        uint32_t qpn = 0;
        RPMA(rpma_conn_get_qp_num(conns.back().conn, &qpn));
        by_qpn[qpn] = conns.size() - 1;
        if (conns.back().index < 1 || conns.back().index > nc)
            fatal("client index %u of %u clients", conns.back().index, nc);
    }
    std::vector<bool> seen(nc + 1, false);
    for (auto& c : conns) {
        CHECK(!seen[c.index], "two clients with index %u", c.index);
        seen[c.index] = true;
    }
    for (uint32_t done = 0; done < nc * kPings;) {
        ibv_wc wc = next_wc(srq_rcq);
        if (wc.status != IBV_WC_SUCCESS) fatal("SRQ receive: %s", ibv_wc_status_str(wc.status));
        CHECK(wc.opcode == IBV_WC_RECV, "SRQ completion opcode %d", int(wc.opcode));
        uint32_t slot = uint32_t(wc.wr_id - 1000);
        if (slot >= 2 * nc || !by_qpn.count(wc.qp_num))
            fatal("SRQ completion wr_id %llu qp %u", (unsigned long long)wc.wr_id, wc.qp_num);
        ServerConn& c = conns[by_qpn[wc.qp_num]];
        uint32_t who = c.index;
        check_msg(rx.buf.p + slot * kMsg, wc.byte_len, "ping", a.round, who, next_ping[who]);
        RPMA(rpma_srq_recv(srq, rx.mr, slot * kMsg, kMsg, tag(1000 + slot)));
        uint8_t* out = tx.buf.p + (who - 1) * kMsg;
        make_msg(out, "pong", a.round, who, next_ping[who]++);
        RPMA(rpma_send(c.conn, tx.mr, (who - 1) * kMsg, kMsg, RPMA_F_COMPLETION_ALWAYS, tag(0x61)));
        expect_wc(c.cq, IBV_WC_SEND, tag(0x61));
        ++done;
    }
    for (auto& c : conns) Server::closed(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    RPMA(rpma_srq_delete(&srq));
    ok(a, (std::to_string(nc) + " clients, " + std::to_string(kPings) + " pings each").c_str());
}

void client_srq(const Args& a, Peer& p) {
    uint32_t me = a.clients;  // a client's CLIENTS is its own index, 1..the server's CLIENTS
    Mr rx(p.peer, kMsg, RPMA_MR_USAGE_RECV), tx(p.peer, kMsg, RPMA_MR_USAGE_SEND);
    ClientConn c = client_connect(p, a, nullptr, me, &rx, kMsg);
    client_established(c, a, me);
    for (int n = 0; n < kPings; ++n) {
        make_msg(tx.buf.p, "ping", a.round, me, n);
        RPMA(rpma_send(c.conn, tx.mr, 0, kMsg, RPMA_F_COMPLETION_ALWAYS, tag(0x71)));
        // Send and receive complete on the one CQ, in either order.
        bool sent = false, got = false;
        while (!sent || !got) {
            ibv_wc wc = next_wc(c.cq);
            if (wc.status != IBV_WC_SUCCESS) fatal("completion %s", ibv_wc_status_str(wc.status));
            if (wc.opcode == IBV_WC_SEND) {
                sent = true;
                continue;
            }
            CHECK(wc.opcode == IBV_WC_RECV, "opcode %d", int(wc.opcode));
            check_msg(rx.buf.p, wc.byte_len, "pong", a.round, me, n);
            got = true;
            if (n + 1 < kPings) RPMA(rpma_recv(c.conn, rx.mr, 0, kMsg, tag(0x70)));
        }
    }
    client_close(c);
    ok(a, (std::to_string(kPings) + " pongs checked").c_str());
}

// imm: sends with immediate data, then RDMA WRITEs with immediate data into the server's MR.
constexpr int kImms = 20;
uint32_t imm_of(uint32_t round, int n) { return 0x9e3779b9u * (round + 1) + uint32_t(n) * 7919u; }
constexpr size_t kImmWrite = 3000;  // bytes per write with immediate

void server_imm(const Args& a, Peer& p) {
    Server s(a, p);
    // Every receive posted before the client may send (no RNR NAK waits: rdma_cm's RC QPs
    // have the minimum RNR timer 0, 655 ms, as the kernel's), one slot each; the writes with
    // immediate consume receives too, after the sends.
    constexpr int kRecvs = 2 * kImms;
    rpma_conn_cfg* cfg = nullptr;
    RPMA(rpma_conn_cfg_new(&cfg));
    RPMA(rpma_conn_cfg_set_rq_size(cfg, kRecvs));
    RPMA(rpma_conn_cfg_set_cq_size(cfg, kRecvs + 4));
    Mr rx(p.peer, kRecvs * kMsg, RPMA_MR_USAGE_RECV);
    Mr region(p.peer, kImms * kImmWrite, RPMA_MR_USAGE_WRITE_DST);
    ServerHello h{};
    put_desc(region.mr, h.mr_desc, &h.mr_desc_len);
    ServerConn c = s.accept(cfg, h, &rx, kMsg, kRecvs);
    Server::established(c);
    for (int n = 0; n < kImms; ++n) {
        ibv_wc wc = expect_wc(c.cq, IBV_WC_RECV, tag(kRecvTag + n));
        CHECK(wc.wc_flags & IBV_WC_WITH_IMM, "send %d arrived without immediate data", n);
        CHECK(ntohl(wc.imm_data) == imm_of(a.round, n), "send %d: immediate %#x, expected %#x", n,
              ntohl(wc.imm_data), imm_of(a.round, n));
        check_msg(rx.buf.p + n * kMsg, wc.byte_len, "imm", a.round, 0, n);
    }
    for (int n = 0; n < kImms; ++n) {
        ibv_wc wc = expect_wc(c.cq, IBV_WC_RECV_RDMA_WITH_IMM, tag(kRecvTag + kImms + n));
        CHECK(wc.wc_flags & IBV_WC_WITH_IMM, "write %d without immediate data", n);
        CHECK(ntohl(wc.imm_data) == imm_of(a.round + 1, n), "write %d: immediate %#x, expected %#x",
              n, ntohl(wc.imm_data), imm_of(a.round + 1, n));
        CHECK(wc.byte_len == kImmWrite, "write %d: byte_len %u", n, wc.byte_len);
        // The bytes are there when the completion is.
        size_t d =
            first_diff(region.buf.p + n * kImmWrite, kImmWrite, a.round, kClient, n * kImmWrite);
        CHECK(d == kImmWrite, "write %d: byte %zu differs", n, d);
    }
    Server::closed(c);
    RPMA(rpma_conn_cfg_delete(&cfg));
    ok(a, "immediates and bytes checked");
}

void client_imm(const Args& a, Peer& p) {
    ClientConn c = client_connect(p, a, nullptr, 0);
    client_established(c, a, 0);
    rpma_mr_remote* dst = remote_mr(c.hello.mr_desc, c.hello.mr_desc_len);
    Mr tx(p.peer, kMsg, RPMA_MR_USAGE_SEND);
    for (int n = 0; n < kImms; ++n) {
        make_msg(tx.buf.p, "imm", a.round, 0, n);
        RPMA(rpma_send_with_imm(c.conn, tx.mr, 0, kMsg, RPMA_F_COMPLETION_ALWAYS,
                                imm_of(a.round, n), tag(0x81)));
        expect_wc(c.cq, IBV_WC_SEND, tag(0x81));
    }
    Mr src(p.peer, kImms * kImmWrite, RPMA_MR_USAGE_WRITE_SRC);
    fill(src.buf.p, kImms * kImmWrite, a.round, kClient);
    for (int n = 0; n < kImms; ++n) {
        RPMA(rpma_write_with_imm(c.conn, dst, n * kImmWrite, src.mr, n * kImmWrite, kImmWrite,
                                 RPMA_F_COMPLETION_ALWAYS, imm_of(a.round + 1, n), tag(0x82)));
        expect_wc(c.cq, IBV_WC_RDMA_WRITE, tag(0x82));
    }
    RPMA(rpma_mr_remote_delete(&dst));
    client_close(c);
    ok(a, "sent and written with immediates");
}

// multi: kConns connections at once from one client to one endpoint.
constexpr uint32_t kConns = 4;
constexpr size_t kSlice = 8192;

void server_multi(const Args& a, Peer& p) {
    Server s(a, p);
    Mr region(p.peer, kConns * kSlice, RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC);
    ServerHello h{};
    put_desc(region.mr, h.mr_desc, &h.mr_desc_len);
    std::vector<ServerConn> conns;
    std::vector<bool> seen(kConns, false);
    for (uint32_t k = 0; k < kConns; ++k) {
        conns.push_back(s.accept(nullptr, h));
        uint32_t i = conns.back().index;
        CHECK(i < kConns && !seen[i], "connection index %u twice or out of range", i);
        if (i < kConns) seen[i] = true;
    }
    for (auto& c : conns) Server::established(c);
    for (auto& c : conns) Server::closed(c);
    for (uint32_t i = 0; i < kConns; ++i) {
        size_t d = first_diff(region.buf.p + i * kSlice, kSlice, a.round, kClient + 10 * i, 0);
        CHECK(d == kSlice, "slice %u: byte %zu differs", i, d);
    }
    ok(a, (std::to_string(kConns) + " connections, slices checked").c_str());
}

void client_multi(const Args& a, Peer& p) {
    // All requests first, then every connection's ESTABLISHED: the endpoint has several
    // requests and connections in flight at once.
    std::vector<ClientConn> cs;
    for (uint32_t i = 0; i < kConns; ++i) cs.push_back(client_connect(p, a, nullptr, i));
    for (uint32_t i = 0; i < kConns; ++i) client_established(cs[i], a, i);
    std::vector<rpma_mr_remote*> dst(kConns);
    for (uint32_t i = 0; i < kConns; ++i)
        dst[i] = remote_mr(cs[i].hello.mr_desc, cs[i].hello.mr_desc_len);
    Mr src(p.peer, kConns * kSlice, RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST);
    for (uint32_t i = 0; i < kConns; ++i)
        fill(src.buf.p + i * kSlice, kSlice, a.round, kClient + 10 * i, 0);
    // Each connection writes its slice; all are in flight together.
    for (uint32_t i = 0; i < kConns; ++i)
        RPMA(rpma_write(cs[i].conn, dst[i], i * kSlice, src.mr, i * kSlice, kSlice,
                        RPMA_F_COMPLETION_ALWAYS, tag(0x90 + i)));
    for (uint32_t i = 0; i < kConns; ++i) expect_wc(cs[i].cq, IBV_WC_RDMA_WRITE, tag(0x90 + i));
    // Each reads the next one's slice back (through its own QP).
    Mr back(p.peer, kConns * kSlice, RPMA_MR_USAGE_READ_DST);
    for (uint32_t i = 0; i < kConns; ++i) {
        uint32_t j = (i + 1) % kConns;
        RPMA(rpma_read(cs[i].conn, back.mr, j * kSlice, dst[i], j * kSlice, kSlice,
                       RPMA_F_COMPLETION_ALWAYS, tag(0xa0 + i)));
    }
    for (uint32_t i = 0; i < kConns; ++i) expect_wc(cs[i].cq, IBV_WC_RDMA_READ, tag(0xa0 + i));
    for (uint32_t j = 0; j < kConns; ++j) {
        size_t d = first_diff(back.buf.p + j * kSlice, kSlice, a.round, kClient + 10 * j, 0);
        CHECK(d == kSlice, "slice %u read back: byte %zu differs", j, d);
    }
    for (auto* d : dst) RPMA(rpma_mr_remote_delete(&d));
    for (auto& c : cs) client_close(c);
    ok(a, (std::to_string(kConns) + " connections").c_str());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s server|client CASE ADDR PORT [ROUND] [CLIENTS]\n", argv[0]);
        return 2;
    }
    Args a;
    a.server = std::strcmp(argv[1], "server") == 0;
    g_role = a.server ? "server" : "client";
    a.kase = argv[2];
    a.addr = argv[3];
    a.port = argv[4];
    if (argc > 5) a.round = uint32_t(std::strtoul(argv[5], nullptr, 0));
    if (argc > 6) a.clients = uint32_t(std::strtoul(argv[6], nullptr, 0));
    rpma_log_set_function(log_to_stderr);
    // Notices and warnings (and the info lines of librpma's choices, such as the one on
    // native atomic write) in the output.
    rpma_log_set_threshold(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_INFO);

    Peer p(a);
    using Fn = void (*)(const Args&, Peer&);
    struct Case {
        const char* name;
        Fn server, client;
    };
    static const Case cases[] = {
        {"conn", server_conn, client_conn},      {"rw", server_memory, client_memory},
        {"flush", server_memory, client_memory}, {"atomic", server_memory, client_memory},
        {"msg", server_msg, client_msg},         {"rcq", server_msg, client_msg},
        {"srq", server_srq, client_srq},         {"imm", server_imm, client_imm},
        {"multi", server_multi, client_multi},   {"scch", server_scch, client_scch},
    };
    for (const Case& c : cases) {
        if (a.kase != c.name) continue;
        (a.server ? c.server : c.client)(a, p);
        return g_failures ? 1 : 0;
    }
    std::fprintf(stderr, "unknown case %s\n", a.kase.c_str());
    return 2;
}
