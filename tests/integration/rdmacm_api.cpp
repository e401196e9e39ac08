// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The librdmacm API over uroce, checked against what rdma_cm(7) and the rdma_* man pages
// promise (built against the system's <rdma/rdma_cma.h>, linked to the drop-in library).
// One process plays server and client on one device, each with its own event channel:
//   - private data arrives intact and at the IB CM sizes (REQ 56, REP 196, REJ 148 bytes
//     after the RDMA CM header); one byte more is EINVAL;
//   - rdma_reject gives the client RDMA_CM_EVENT_REJECTED with status 28 (consumer reject);
//   - a server slower than the REQ retries (the device answers the repeated REQ with an MRA)
//     still connects;
//   - rdma_init_qp_attr reports what the CM negotiated; data moves over the connection;
//   - rdma_destroy_id blocks while an event of the id is not acknowledged;
//   - a REQ that arrives before the listener is taken by it (within 200 ms), one for a
//     port nobody listens on is rejected (reason 8) after that wait;
//   - an O_NONBLOCK channel gives EAGAIN; port 0 binds a free port; a port in use is
//     EADDRINUSE; DISCONNECTED and TIMEWAIT_EXIT follow rdma_disconnect;
//   - a channel's fd is one file that poll() reports readable when an event waits;
//     rdma_destroy_event_channel while another thread is blocked in rdma_get_cm_event on it
//     wakes nobody (as with the kernel: that thread stays blocked), and fds opened after it
//     are not disturbed; a thread that calls it just after the destroy is answered as if it
//     had called a moment earlier (rping's race);
//   - a loopback address no device has binds as a wildcard (no device, every device
//     listens); rdma_getaddrinfo fails with -1 and getaddrinfo's code in errno;
//   - librpma 1.3's native atomic write: device_cap_flags_ex has IB_UVERBS_DEVICE_ATOMIC_WRITE
//     (bit 40), rdma_create_qp_ex with IBV_QP_EX_WITH_ATOMIC_WRITE gives a QP whose
//     ibv_qp_to_qp_ex has wr_atomic_write, and ibv_wr_atomic_write over the connection lands.
//   - with a second device on ::1 (ADDR6): IPv6 ids; the path's and the AV's GIDs are the
//     IPv6 addresses; an IPv6 wildcard listener takes an IPv4 request (its id then has IPv4
//     addresses, as the kernel's cma_save_ip_info) unless RDMA_OPTION_ID_AFONLY, which is
//     EINVAL once listening; a link-local address without a scope is EINVAL; a source of the
//     other IP version than the destination is EINVAL.
// usage: rdmacm_api ADDR [ADDR6]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <thread>
#include <vector>

#include "emu/abi/flush.h"

namespace {

#define CHECK(c)                                                                                  \
    do {                                                                                          \
        if (!(c)) {                                                                               \
            std::fprintf(stderr, "FAIL %s:%d: %s (errno %d %s)\n", __FILE__, __LINE__, #c, errno, \
                         std::strerror(errno));                                                   \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

sockaddr_in g_addr;

// The next event on ch, which must be `type` (waits up to timeout_ms).
rdma_cm_event* expect(rdma_event_channel* ch, rdma_cm_event_type type, int timeout_ms = 10000) {
    pollfd p{ch->fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r != 1) {
        std::fprintf(stderr, "FAIL: no event within %d ms, expected %s\n", timeout_ms,
                     rdma_event_str(type));
        std::exit(1);
    }
    rdma_cm_event* ev = nullptr;
    CHECK(rdma_get_cm_event(ch, &ev) == 0);
    if (ev->event != type) {
        std::fprintf(stderr, "FAIL: got %s (status %d), expected %s\n", rdma_event_str(ev->event),
                     ev->status, rdma_event_str(type));
        std::exit(1);
    }
    std::printf("  %s status %d\n", rdma_event_str(ev->event), ev->status);
    return ev;
}

struct Server {
    rdma_event_channel* ch = nullptr;
    rdma_cm_id* listen = nullptr;
    uint16_t port = 0;
};

// An event channel, or the program ends.
rdma_event_channel* new_channel() {
    rdma_event_channel* ch = rdma_create_event_channel();
    CHECK(ch);
    return ch;
}

// The end of a test: its ids (the client, the accepted one) and the listener, each destroyed
// with 0, then the client's and the server's event channels.
void destroy_all(std::initializer_list<rdma_cm_id*> ids, Server& s, rdma_event_channel* cch) {
    for (rdma_cm_id* id : ids) CHECK(rdma_destroy_id(id) == 0);
    CHECK(rdma_destroy_id(s.listen) == 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(s.ch);
}

// A server's channel with a TCP id on it, not bound yet, and a client's channel.
struct Unbound {
    rdma_event_channel* sch;
    rdma_event_channel* cch;
    rdma_cm_id* l;
};
Unbound unbound_listener() {
    Unbound u{new_channel(), new_channel(), nullptr};
    CHECK(rdma_create_id(u.sch, &u.l, nullptr, RDMA_PS_TCP) == 0);
    return u;
}

Server listen_on_free_port() {
    Server s;
    s.ch = new_channel();
    CHECK(rdma_create_id(s.ch, &s.listen, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in a = g_addr;
    a.sin_port = 0;
    CHECK(rdma_bind_addr(s.listen, reinterpret_cast<sockaddr*>(&a)) == 0);
    s.port = ntohs(rdma_get_src_port(s.listen));
    CHECK(s.port != 0);
    CHECK(s.listen->verbs != nullptr);
    CHECK(rdma_listen(s.listen, 4) == 0);
    return s;
}

rdma_cm_id* resolved_client(rdma_event_channel* ch, uint16_t port) {
    rdma_cm_id* id;
    CHECK(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in d = g_addr;
    d.sin_port = htons(port);
    CHECK(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&d), 2000) == 0);
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    CHECK(rdma_resolve_route(id, 2000) == 0);
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    CHECK(id->verbs && id->pd && id->port_num == 1);
    CHECK(id->route.num_paths == 1 && id->route.path_rec);
    return id;
}

void make_qp(rdma_cm_id* id) {
    ibv_qp_init_attr a{};
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = 1;
    CHECK(rdma_create_qp(id, nullptr, &a) == 0);  // default PD, CQs made by the library
    CHECK(id->qp && id->send_cq && id->recv_cq && id->send_cq_channel && id->recv_cq_channel);
    CHECK(id->qp->state == IBV_QPS_INIT);
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed + i * 7);
}

bool same(const void* p, size_t n, uint8_t seed) {
    std::vector<uint8_t> want(n);
    fill(want.data(), n, seed);
    return std::memcmp(p, want.data(), n) == 0;
}

void test_private_data_and_data() {
    std::printf("private data, rdma_init_qp_attr, a SEND each way\n");
    Server s = listen_on_free_port();
    rdma_event_channel* cch = new_channel();
    rdma_cm_id* c = resolved_client(cch, s.port);
    make_qp(c);

    uint8_t req_pd[57], rep_pd[197];
    fill(req_pd, sizeof req_pd, 1);
    fill(rep_pd, sizeof rep_pd, 2);
    rdma_conn_param p{.private_data = req_pd,
                      .private_data_len = 57,
                      .responder_resources = 1,
                      .initiator_depth = 1,
                      .retry_count = 7,
                      .rnr_retry_count = 7};
    errno = 0;
    CHECK(rdma_connect(c, &p) == -1 && errno == EINVAL);  // one byte over the REQ's room
    p.private_data_len = 56;
    CHECK(rdma_connect(c, &p) == 0);

    rdma_cm_event* ev = expect(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    CHECK(ev->listen_id == s.listen);
    rdma_cm_id* child = ev->id;
    CHECK(child != s.listen && child->verbs == s.listen->verbs);
    CHECK(ev->param.conn.private_data_len == 56);
    CHECK(same(ev->param.conn.private_data, 56, 1));
    CHECK(ev->param.conn.qp_num == c->qp->qp_num);
    CHECK(ev->param.conn.initiator_depth == 1 && ev->param.conn.responder_resources == 1);
    auto* peer = reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(child));
    CHECK(peer->sin_family == AF_INET && peer->sin_port == rdma_get_src_port(c));
    CHECK(ntohs(rdma_get_src_port(child)) == s.port);
    rdma_ack_cm_event(ev);

    make_qp(child);
    // Receives first, on both sides.
    char cbuf[64] = {}, sbuf[64] = {};
    ibv_mr* cmr = rdma_reg_msgs(c, cbuf, sizeof cbuf);
    ibv_mr* smr = rdma_reg_msgs(child, sbuf, sizeof sbuf);
    CHECK(cmr && smr);
    CHECK(rdma_post_recv(c, nullptr, cbuf, 32, cmr) == 0);
    CHECK(rdma_post_recv(child, nullptr, sbuf, 32, smr) == 0);

    rdma_conn_param ap{};
    ap.private_data = rep_pd;
    ap.private_data_len = 197;
    ap.responder_resources = 1;
    ap.initiator_depth = 1;
    errno = 0;
    CHECK(rdma_accept(child, &ap) == -1 && errno == EINVAL);  // one byte over the REP's room
    ap.private_data_len = 196;
    CHECK(rdma_accept(child, &ap) == 0);
    CHECK(child->qp->state == IBV_QPS_RTS);

    ev = expect(cch, RDMA_CM_EVENT_ESTABLISHED);  // the REP, turned into RTR/RTS/RTU
    CHECK(ev->param.conn.private_data_len == 196);
    CHECK(same(ev->param.conn.private_data, 196, 2));
    rdma_ack_cm_event(ev);
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_ESTABLISHED));  // the RTU

    // What the CM negotiated, as rdma_init_qp_attr reports it and the QPs have it.
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_RTR;
    CHECK(rdma_init_qp_attr(c, &a, &mask) == 0);
    CHECK(mask & IBV_QP_DEST_QPN);
    CHECK(a.dest_qp_num == child->qp->qp_num);
    CHECK(a.ah_attr.is_global && a.ah_attr.grh.dgid.raw[10] == 0xff &&
          std::memcmp(&a.ah_attr.grh.dgid.raw[12], &g_addr.sin_addr, 4) == 0);
    ibv_qp_attr qa{}, qb{};
    ibv_qp_init_attr ia{};
    CHECK(ibv_query_qp(c->qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia) == 0);
    CHECK(ibv_query_qp(child->qp, &qb, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia) == 0);
    CHECK(qa.qp_state == IBV_QPS_RTS && qb.qp_state == IBV_QPS_RTS);
    CHECK(qa.sq_psn == qb.rq_psn && qb.sq_psn == qa.rq_psn);
    CHECK(qa.qp_access_flags & IBV_ACCESS_REMOTE_READ);

    std::strcpy(cbuf + 32, "client to server");
    std::strcpy(sbuf + 32, "server to client");
    CHECK(rdma_post_send(c, nullptr, cbuf + 32, 32, cmr, 0) == 0);
    CHECK(rdma_post_send(child, nullptr, sbuf + 32, 32, smr, 0) == 0);
    ibv_wc wc;
    CHECK(rdma_get_send_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    CHECK(rdma_get_recv_comp(child, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    CHECK(std::strcmp(sbuf, "client to server") == 0);
    CHECK(rdma_get_send_comp(child, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    CHECK(rdma_get_recv_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
    CHECK(std::strcmp(cbuf, "server to client") == 0);

    // Disconnect: the client's DREQ, the server's DREP; then TimeWait ends on both.
    CHECK(rdma_disconnect(c) == 0);
    CHECK(c->qp->state == IBV_QPS_ERR);
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_DISCONNECTED));
    CHECK(rdma_disconnect(child) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_TIMEWAIT_EXIT));
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_TIMEWAIT_EXIT));

    rdma_dereg_mr(cmr);
    rdma_dereg_mr(smr);
    rdma_destroy_qp(c);
    rdma_destroy_qp(child);
    destroy_all({c, child}, s, cch);
}

void test_reject_and_slow_accept() {
    std::printf("reject with private data; accept after the REQ retries ran out once\n");
    Server s = listen_on_free_port();
    rdma_event_channel* cch = new_channel();

    rdma_cm_id* c = resolved_client(cch, s.port);
    rdma_conn_param p{};
    p.qp_num = 0x123;  // no QP on the id: the parameters name one
    CHECK(rdma_connect(c, &p) == 0);
    rdma_cm_event* ev = expect(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child = ev->id;
    CHECK(ev->param.conn.qp_num == 0x123);
    rdma_ack_cm_event(ev);
    uint8_t rej[149];
    fill(rej, sizeof rej, 3);
    errno = 0;
    CHECK(rdma_reject(child, rej, 149) == -1 && errno == EINVAL);
    CHECK(rdma_reject(child, rej, 148) == 0);
    ev = expect(cch, RDMA_CM_EVENT_REJECTED);
    CHECK(ev->status == 28);
    CHECK(ev->param.conn.private_data_len == 148 && same(ev->param.conn.private_data, 148, 3));
    rdma_ack_cm_event(ev);
    CHECK(rdma_destroy_id(child) == 0);
    CHECK(rdma_destroy_id(c) == 0);

    // The server answers only after 3.5 s: longer than the REQ's 5 transmissions 500 ms
    // apart. The device answers the repeated REQ with an MRA, so the client waits.
    c = resolved_client(cch, s.port);
    make_qp(c);
    CHECK(rdma_connect(c, nullptr) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    ev = expect(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    child = ev->id;
    rdma_ack_cm_event(ev);
    make_qp(child);
    CHECK(rdma_accept(child, nullptr) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_ESTABLISHED));

    // rdma_destroy_id of the server side while its DISCONNECTED is not acknowledged: it
    // waits for the acknowledgement.
    CHECK(rdma_disconnect(c) == 0);
    ev = expect(s.ch, RDMA_CM_EVENT_DISCONNECTED);
    CHECK(ev->id == child);
    rdma_destroy_qp(child);
    std::atomic<bool> done{false};
    std::thread t([&] {
        CHECK(rdma_destroy_id(child) == 0);
        done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(!done);
    rdma_ack_cm_event(ev);
    t.join();
    CHECK(done);
    // The device answered the DREQ for the destroyed id.
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(c);
    destroy_all({c}, s, cch);
}

// A REQ for a port nobody listens on waits 200 ms for a listener (docs/cm.md): a listener
// that comes within that time takes it; otherwise the REJ (reason 8) follows.
void test_late_listener() {
    std::printf("a listener that comes after the REQ; a REQ for nobody\n");
    auto [sch, cch, l] = unbound_listener();
    sockaddr_in a = g_addr;
    a.sin_port = 0;
    CHECK(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&a)) == 0);  // bound, not listening
    uint16_t port = ntohs(rdma_get_src_port(l));
    rdma_cm_id* c = resolved_client(cch, port);
    make_qp(c);
    CHECK(rdma_connect(c, nullptr) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(rdma_listen(l, 1) == 0);
    rdma_cm_event* ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child = ev->id;
    rdma_ack_cm_event(ev);
    make_qp(child);
    CHECK(rdma_accept(child, nullptr) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_ESTABLISHED));
    CHECK(rdma_disconnect(c) == 0);
    rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(child);
    CHECK(rdma_destroy_id(child) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(c);
    CHECK(rdma_destroy_id(c) == 0);

    // The listener goes; a REQ for its port is rejected once the wait is over.
    CHECK(rdma_destroy_id(l) == 0);
    c = resolved_client(cch, port);
    make_qp(c);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(rdma_connect(c, nullptr) == 0);
    ev = expect(cch, RDMA_CM_EVENT_REJECTED);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("  rejected after %lld ms\n", static_cast<long long>(ms));
    CHECK(ev->status == 8);
    CHECK(ms >= 150 && ms < 2000);
    rdma_ack_cm_event(ev);
    rdma_destroy_qp(c);
    CHECK(rdma_destroy_id(c) == 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
}

void test_misc() {
    std::printf("non-blocking channel, ports, devices\n");
    rdma_event_channel* ch = new_channel();
    CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
    rdma_cm_event* ev;
    errno = 0;
    CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);

    rdma_cm_id *a, *b;
    CHECK(rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP) == 0);
    CHECK(rdma_create_id(ch, &b, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in addr = g_addr;
    addr.sin_port = 0;
    CHECK(rdma_bind_addr(a, reinterpret_cast<sockaddr*>(&addr)) == 0);
    addr.sin_port = rdma_get_src_port(a);
    errno = 0;
    CHECK(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&addr)) == -1 && errno == EADDRINUSE);
    CHECK(rdma_destroy_id(a) == 0);
    CHECK(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&addr)) == 0);  // free again
    CHECK(rdma_destroy_id(b) == 0);

    int n = 0;
    ibv_context** devs = rdma_get_devices(&n);
    CHECK(devs && n >= 1 && devs[0] && !devs[n]);
    rdma_free_devices(devs);
    CHECK(std::strcmp(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT") ==
          0);
    rdma_destroy_event_channel(ch);
}

// A detached thread that reads one event from ch and says how it returned: 1 an event, 2 an
// error; *out stays 0 while it waits.
void read_in_thread(rdma_event_channel* ch, std::atomic<int>* out) {
    std::thread([ch, out] {
        rdma_cm_event* e = nullptr;
        *out = rdma_get_cm_event(ch, &e) == 0 ? 1 : 2;
    }).detach();
}

void test_channel_fd() {
    std::printf("channel fd: poll, destroy under a blocked reader\n");
    rdma_event_channel* ch = new_channel();
    pollfd pfd{ch->fd, POLLIN, 0};
    CHECK(poll(&pfd, 1, 0) == 0);  // nothing yet
    rdma_cm_id* id;
    CHECK(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in dst = g_addr;
    dst.sin_port = htons(1);
    CHECK(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) == 0);
    CHECK(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN));
    rdma_cm_event* ev;
    CHECK(rdma_get_cm_event(ch, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(rdma_ack_cm_event(ev) == 0);
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK(rdma_destroy_id(id) == 0);
    rdma_destroy_event_channel(ch);

    // rping's shape: its CM thread waits in rdma_get_cm_event while main destroys the channel.
    // The channel has been registered with the device (a bound id), as rping's has.
    rdma_event_channel* blocked = new_channel();
    CHECK(rdma_create_id(blocked, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in any = g_addr;
    any.sin_port = 0;
    CHECK(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any)) == 0);
    static std::atomic<int> returned{0};
    read_in_thread(blocked, &returned);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(rdma_destroy_id(id) == 0);
    rdma_destroy_event_channel(blocked);
    // A new channel (likely reusing the destroyed fd's number) works undisturbed.
    rdma_event_channel* next = new_channel();
    CHECK(rdma_create_id(next, &id, nullptr, RDMA_PS_TCP) == 0);
    CHECK(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) == 0);
    CHECK(rdma_get_cm_event(next, &ev) == 0 && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(rdma_ack_cm_event(ev) == 0);
    CHECK(rdma_destroy_id(id) == 0);
    rdma_destroy_event_channel(next);
    // rping's race (rdma-core before 61): its CM thread acknowledges the last event and calls
    // rdma_get_cm_event again after main has destroyed the channel. It is answered as a call a
    // moment earlier would have been: blocked, or EAGAIN on an O_NONBLOCK channel.
    rdma_event_channel* late = new_channel();
    rdma_destroy_event_channel(late);
    static std::atomic<int> late_returned{0};
    read_in_thread(late, &late_returned);
    rdma_event_channel* late_nb = new_channel();
    CHECK(fcntl(late_nb->fd, F_SETFL, fcntl(late_nb->fd, F_GETFL) | O_NONBLOCK) == 0);
    rdma_destroy_event_channel(late_nb);
    errno = 0;
    CHECK(rdma_get_cm_event(late_nb, &ev) == -1 && errno == EAGAIN);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(returned == 0);  // still blocked: neither an event nor an error (EBADF) woke it
    CHECK(late_returned == 0);
}

// The kernel makes every loopback address a wildcard (cma_any_addr): libfabric binds
// "localhost" when given no address. A loopback address that no device has binds with no
// device and listens on every device; rdma_getaddrinfo fails as rdma-core's does.
// The connection request client c's REQ made on sch is rejected (c gets REJECTED on cch);
// then the request's id, c's QP and c go.
void reject_request(rdma_event_channel* sch, rdma_event_channel* cch, rdma_cm_id* c) {
    rdma_cm_event* ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child = ev->id;
    CHECK(child->verbs != nullptr);
    rdma_ack_cm_event(ev);
    CHECK(rdma_reject(child, nullptr, 0) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_REJECTED));
    CHECK(rdma_destroy_id(child) == 0);
    rdma_destroy_qp(c);
    CHECK(rdma_destroy_id(c) == 0);
}

void test_loopback_wildcard() {
    std::printf("loopback bind as a wildcard; rdma_getaddrinfo failure\n");
    auto [sch, cch, l] = unbound_listener();
    sockaddr_in lo{};
    lo.sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, "127.255.255.254", &lo.sin_addr) == 1);  // no device's
    CHECK(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&lo)) == 0);
    CHECK(l->verbs == nullptr);  // no device yet, as with INADDR_ANY
    uint16_t port = ntohs(rdma_get_src_port(l));
    CHECK(port != 0);
    CHECK(rdma_get_local_addr(l)->sa_family == AF_INET);
    CHECK(std::memcmp(&reinterpret_cast<sockaddr_in*>(rdma_get_local_addr(l))->sin_addr,
                      &lo.sin_addr, 4) == 0);
    CHECK(rdma_listen(l, 1) == 0);
    // A client of the device at ADDR reaches it: it listens there too.
    rdma_cm_id* c = resolved_client(cch, port);
    make_qp(c);
    CHECK(rdma_connect(c, nullptr) == 0);
    reject_request(sch, cch, c);
    CHECK(rdma_destroy_id(l) == 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);

    rdma_addrinfo hints{};
    hints.ai_flags = RAI_NUMERICHOST;
    rdma_addrinfo* res = nullptr;
    errno = 0;
    CHECK(rdma_getaddrinfo("not-a-number", "7471", &hints, &res) == -1);
    CHECK(errno == EAI_NONAME);  // rdma-core leaves getaddrinfo's code in errno
}

// An RC QP as librpma 1.3 makes one where the device reports native atomic write
// (peer.c, rpma_peer_setup_qp): rdma_create_qp_ex with the send ops it posts through qp_ex,
// here FLUSH too (librpma's native flush, where the headers have ibv_wr_flush).
void make_qp_ex(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = a.recv_cq = cq;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = 8;
    a.qp_type = IBV_QPT_RC;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | uroce::abi::kQpExWithFlush;
    a.pd = pd;
    CHECK(rdma_create_qp_ex(id, &a) == 0);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(id->qp);
    CHECK(x && x->wr_atomic_write && static_cast<uroce::abi::QpEx*>(x)->wr_flush);
}

void test_native_atomic_write() {
    std::printf(
        "rdma_create_qp_ex with IBV_QP_EX_WITH_ATOMIC_WRITE and _FLUSH (librpma 1.3's "
        "path)\n");
    Server s = listen_on_free_port();
    ibv_device_attr_ex da{};
    CHECK(ibv_query_device_ex(s.listen->verbs, nullptr, &da) == 0);
    CHECK(da.device_cap_flags_ex & (uint64_t(1) << 40));  // IB_UVERBS_DEVICE_ATOMIC_WRITE
    rdma_event_channel* cch = new_channel();
    rdma_cm_id* c = resolved_client(cch, s.port);
    ibv_cq* ccq = ibv_create_cq(c->verbs, 8, nullptr, nullptr, 0);
    CHECK(ccq);
    make_qp_ex(c, c->pd, ccq);
    rdma_conn_param p{};
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = p.rnr_retry_count = 7;
    CHECK(rdma_connect(c, &p) == 0);
    rdma_cm_event* ev = expect(s.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child = ev->id;
    rdma_ack_cm_event(ev);
    ibv_pd* spd = ibv_alloc_pd(child->verbs);
    ibv_cq* scq = ibv_create_cq(child->verbs, 8, nullptr, nullptr, 0);
    CHECK(spd && scq);
    make_qp_ex(child, spd, scq);
    alignas(8) uint8_t mem[64];
    std::memset(mem, 0xe7, sizeof mem);
    ibv_mr* mr =
        ibv_reg_mr(spd, mem, sizeof mem,
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                       int(uroce::abi::kAccessFlushGlobal | uroce::abi::kAccessFlushPersistent));
    CHECK(mr);
    rdma_conn_param ap{};
    ap.responder_resources = ap.initiator_depth = 1;
    CHECK(rdma_accept(child, &ap) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_ESTABLISHED));

    const uint64_t v = 0x1122334455667788ull;
    ibv_qp_ex* x = ibv_qp_to_qp_ex(c->qp);
    ibv_wr_start(x);
    x->wr_id = 77;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_atomic_write(x, mr->rkey, uint64_t(uintptr_t(mem + 16)), &v);
    CHECK(ibv_wr_complete(x) == 0);
    ibv_wc wc{};
    int n = 0;
    for (int i = 0; i < 10000 && n == 0; ++i) {
        n = ibv_poll_cq(ccq, 1, &wc);
        if (n == 0) usleep(100);
    }
    CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77);
    CHECK(wc.opcode == IBV_WC_ATOMIC_WRITE);
    uint64_t got;
    std::memcpy(&got, mem + 16, 8);
    CHECK(got == v);
    for (size_t i = 0; i < sizeof mem; ++i)
        if (i < 16 || i >= 24) CHECK(mem[i] == 0xe7);
    // A persistent FLUSH of it: the QP rdma_accept set up allows FLUSH, as the kernel's CM
    // grants it with responder resources on a device that has it (cm_init_qp_init_attr).
    ibv_wr_start(x);
    x->wr_id = 78;
    x->wr_flags = IBV_SEND_SIGNALED;
    static_cast<uroce::abi::QpEx*>(x)->wr_flush(x, mr->rkey, uint64_t(uintptr_t(mem + 16)), 8,
                                                uroce::abi::kFlushPersistent,
                                                uroce::abi::kFlushRange);
    CHECK(ibv_wr_complete(x) == 0);
    n = 0;
    for (int i = 0; i < 10000 && n == 0; ++i) {
        n = ibv_poll_cq(ccq, 1, &wc);
        if (n == 0) usleep(100);
    }
    CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 78);
    CHECK(uint32_t(wc.opcode) == uroce::abi::kWcFlush);

    CHECK(rdma_disconnect(c) == 0);
    rdma_ack_cm_event(expect(s.ch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_destroy_qp(c);
    rdma_destroy_qp(child);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(ccq);
    ibv_destroy_cq(scq);
    ibv_dealloc_pd(spd);
    destroy_all({c, child}, s, cch);
}

}  // namespace

// A client from the device on `dst` (IPv4 or IPv6) to `port` of it: REQ sent.
rdma_cm_id* connecting_client(rdma_event_channel* ch, const sockaddr* dst, uint16_t port) {
    rdma_cm_id* id;
    CHECK(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_storage d{};
    std::memcpy(&d, dst, dst->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    if (d.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&d)->sin6_port = htons(port);
    else
        reinterpret_cast<sockaddr_in*>(&d)->sin_port = htons(port);
    CHECK(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&d), 2000) == 0);
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    CHECK(rdma_resolve_route(id, 2000) == 0);
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    make_qp(id);
    CHECK(rdma_connect(id, nullptr) == 0);
    return id;
}

// An IPv6 wildcard listener on a free port; afonly -1: the default.
rdma_cm_id* v6_wildcard_listener(rdma_event_channel* ch, int afonly, uint16_t* port) {
    rdma_cm_id* l;
    CHECK(rdma_create_id(ch, &l, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in6 any{};
    any.sin6_family = AF_INET6;
    CHECK(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&any)) == 0);
    if (afonly >= 0)
        CHECK(rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly, sizeof afonly) ==
              0);
    CHECK(rdma_listen(l, 4) == 0);
    *port = ntohs(rdma_get_src_port(l));
    return l;
}

void test_ipv6(const char* addr6) {
    std::printf("IPv6: GIDs, wildcard listeners and afonly, link-local, one IP version\n");
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    CHECK(inet_pton(AF_INET6, addr6, &a6.sin6_addr) == 1);
    rdma_event_channel* sch = new_channel();
    rdma_event_channel* cch = new_channel();

    // IPv6 wildcard, IPV6_V6ONLY off: an IPv6 and an IPv4 request, each with its addresses.
    uint16_t port;
    rdma_cm_id* l = v6_wildcard_listener(sch, 0, &port);
    rdma_cm_id* c6 = connecting_client(cch, reinterpret_cast<sockaddr*>(&a6), port);
    CHECK(c6->route.path_rec && std::memcmp(c6->route.path_rec->dgid.raw, &a6.sin6_addr, 16) == 0 &&
          std::memcmp(c6->route.path_rec->sgid.raw, &a6.sin6_addr, 16) == 0);
    rdma_cm_event* ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child = ev->id;
    CHECK(rdma_get_local_addr(child)->sa_family == AF_INET6);
    CHECK(rdma_get_peer_addr(child)->sa_family == AF_INET6);
    CHECK(std::memcmp(&reinterpret_cast<sockaddr_in6*>(rdma_get_peer_addr(child))->sin6_addr,
                      &a6.sin6_addr, 16) == 0);
    rdma_ack_cm_event(ev);
    make_qp(child);
    CHECK(rdma_accept(child, nullptr) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_ESTABLISHED));
    ibv_qp_attr qa{};
    int mask = 0;
    qa.qp_state = IBV_QPS_RTR;
    CHECK(rdma_init_qp_attr(c6, &qa, &mask) == 0);
    CHECK(std::memcmp(qa.ah_attr.grh.dgid.raw, &a6.sin6_addr, 16) == 0);  // the AV's DGID
    rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_ESTABLISHED));
    rdma_cm_id* c4 = connecting_client(cch, reinterpret_cast<sockaddr*>(&g_addr), port);
    ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    rdma_cm_id* child4 = ev->id;
    CHECK(rdma_get_local_addr(child4)->sa_family == AF_INET);
    CHECK(rdma_get_peer_addr(child4)->sa_family == AF_INET);
    rdma_ack_cm_event(ev);
    CHECK(rdma_reject(child4, nullptr, 0) == 0);
    rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_REJECTED));
    int one = 1;
    errno = 0;
    CHECK(rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof one) == -1 &&
          errno == EINVAL);  // too late once listening (the kernel's rdma_set_afonly)
    for (rdma_cm_id* id : {child4, c4}) {
        if (id->qp) rdma_destroy_qp(id);
        CHECK(rdma_destroy_id(id) == 0);
    }
    CHECK(rdma_destroy_id(l) == 0);  // (c6 and its peer stay connected until the end)

    // afonly: the IPv4 device has no listener, its request is refused (reason 8 after the
    // wait for a listener); the IPv6 one is taken.
    l = v6_wildcard_listener(sch, 1, &port);
    c4 = connecting_client(cch, reinterpret_cast<sockaddr*>(&g_addr), port);
    ev = expect(cch, RDMA_CM_EVENT_REJECTED);
    CHECK(ev->status == 8);
    rdma_ack_cm_event(ev);
    rdma_destroy_qp(c4);
    CHECK(rdma_destroy_id(c4) == 0);
    reject_request(sch, cch, connecting_client(cch, reinterpret_cast<sockaddr*>(&a6), port));
    CHECK(rdma_destroy_id(l) == 0);

    // A link-local address names its interface; without a scope it is EINVAL.
    rdma_cm_id* id;
    CHECK(rdma_create_id(sch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in6 ll{};
    ll.sin6_family = AF_INET6;
    CHECK(inet_pton(AF_INET6, "fe80::1", &ll.sin6_addr) == 1);
    errno = 0;
    CHECK(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ll)) == -1 && errno == EINVAL);
    // Bound to the IPv6 device, an IPv4 destination is EINVAL.
    CHECK(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a6)) == 0);
    CHECK(rdma_get_local_addr(id)->sa_family == AF_INET6);
    errno = 0;
    CHECK(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&g_addr), 2000) == -1 &&
          errno == EINVAL);
    CHECK(rdma_destroy_id(id) == 0);
    rdma_destroy_event_channel(cch);
    rdma_destroy_event_channel(sch);
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc != 2 && argc != 3) {
        std::fprintf(stderr, "usage: rdmacm_api ADDR [ADDR6]\n");
        return 2;
    }
    g_addr.sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, argv[1], &g_addr.sin_addr) == 1);
    test_misc();
    test_channel_fd();
    test_loopback_wildcard();
    test_private_data_and_data();
    test_reject_and_slow_accept();
    test_late_listener();
    test_native_atomic_write();
    if (argc == 3) test_ipv6(argv[2]);
    std::printf("PASS\n");
    return 0;
}
