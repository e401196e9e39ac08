// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Where librdmacm's events wait, as the kernel's ucma keeps them (docs/cm.md, "Event
// channels"): an id's unread events move with it on rdma_migrate_id (ucma_move_events), in
// order, and leave the old channel; rdma_destroy_id takes its unread events away
// (ucma_free_ctx), and a listener's unread connection requests are rejected; other ids'
// events stay where they are. A SEND posted right before rdma_disconnect reaches the peer.
// Built against the system's <rdma/rdma_cma.h>, run over the
// drop-in libraries on one device (rdmacm_test.sh events, 127.0.0.1).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/integration/cm_events.h"

namespace {

constexpr const char* kAddr = "127.0.0.1";
constexpr const char* kAddr2 = "127.0.0.2";  // a second device's (rdmacm_test.sh events)

sockaddr_in addr(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, kAddr, &a.sin_addr);
    return a;
}

using uroce::cmtest::readable;
rdma_cm_event* next(rdma_event_channel* ch, rdma_cm_event_type type, rdma_cm_id* id = nullptr) {
    return uroce::cmtest::next_event(ch, type, id);
}

void ack(rdma_cm_event* ev) {
    if (ev) rdma_ack_cm_event(ev);
}

// True when ch has no event: poll says so and a non-blocking read gives EAGAIN.
bool empty(rdma_event_channel* ch) {
    if (readable(ch, 200)) return false;
    int fl = fcntl(ch->fd, F_GETFL);
    fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
    rdma_cm_event* ev = nullptr;
    errno = 0;
    int r = rdma_get_cm_event(ch, &ev);
    int e = errno;
    fcntl(ch->fd, F_SETFL, fl);
    if (r == 0) {
        ADD_FAILURE() << "an event was there: " << rdma_event_str(ev->event);
        rdma_ack_cm_event(ev);
        return false;
    }
    return e == EAGAIN;
}

void make_qp(rdma_cm_id* id) {
    ibv_qp_init_attr a{};
    a.cap.max_send_wr = a.cap.max_recv_wr = 2;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.qp_type = IBV_QPT_RC;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &a), 0) << std::strerror(errno);
}

// A listener on its own channel and a client on another, connecting to it.
class MigrateEvents : public ::testing::Test {
protected:
    void SetUp() override {
        lch_ = rdma_create_event_channel();
        cch_ = rdma_create_event_channel();
        ASSERT_TRUE(lch_ && cch_);
        ASSERT_EQ(rdma_create_id(lch_, &listen_, nullptr, RDMA_PS_TCP), 0);
        sockaddr_in a = addr(0);
        ASSERT_EQ(rdma_bind_addr(listen_, reinterpret_cast<sockaddr*>(&a)), 0);
        port_ = ntohs(rdma_get_src_port(listen_));
        ASSERT_EQ(rdma_listen(listen_, 8), 0);
    }
    void TearDown() override {
        for (rdma_cm_id* id : ids_) rdma_destroy_id(id);
        if (listen_) rdma_destroy_id(listen_);
        for (rdma_event_channel* ch : {lch_, cch_, nch_})
            if (ch) rdma_destroy_event_channel(ch);
    }

    // A client id on `ch`, resolved, with a QP, its connect sent; from `src`'s device if
    // given (a port-0 address).
    rdma_cm_id* connect(rdma_event_channel* ch, sockaddr_in* src = nullptr) {
        rdma_cm_id* id = nullptr;
        EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
        ids_.push_back(id);
        sockaddr_in d = addr(port_);
        EXPECT_EQ(rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(src),
                                    reinterpret_cast<sockaddr*>(&d), 2000),
                  0);
        ack(next(ch, RDMA_CM_EVENT_ADDR_RESOLVED, id));
        EXPECT_EQ(rdma_resolve_route(id, 2000), 0);
        ack(next(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, id));
        make_qp(id);
        rdma_conn_param p{};
        p.retry_count = p.rnr_retry_count = 7;
        EXPECT_EQ(rdma_connect(id, &p), 0) << std::strerror(errno);
        return id;
    }

    // The listener's next request, accepted: the new id (its ESTABLISHED follows on lch_).
    rdma_cm_id* accept_next() {
        rdma_cm_event* ev = next(lch_, RDMA_CM_EVENT_CONNECT_REQUEST);
        if (!ev) return nullptr;
        rdma_cm_id* child = ev->id;
        ack(ev);
        ids_.push_back(child);
        make_qp(child);
        rdma_conn_param p{};
        EXPECT_EQ(rdma_accept(child, &p), 0) << std::strerror(errno);
        return child;
    }

    // A connection whose server side's ESTABLISHED waits unread on lch_: the client's id and
    // the server's.
    struct Established {
        rdma_cm_id* client;
        rdma_cm_id* child;  // the listener's side, null when the accept failed
    };
    Established established(sockaddr_in* src = nullptr) {
        rdma_cm_id* client = connect(cch_, src);
        rdma_cm_id* child = accept_next();
        ack(next(cch_, RDMA_CM_EVENT_ESTABLISHED, client));  // reading the REP sends the RTU
        EXPECT_TRUE(readable(lch_, 10000)) << "the server's ESTABLISHED never came";
        return {client, child};
    }

    // Moves `id` to a new channel, nch_.
    void migrate_to_new(rdma_cm_id* id) {
        nch_ = rdma_create_event_channel();
        ASSERT_TRUE(nch_);
        ASSERT_EQ(rdma_migrate_id(id, nch_), 0);
    }

    rdma_event_channel* lch_ = nullptr;  // the listener's
    rdma_event_channel* cch_ = nullptr;  // the clients'
    rdma_event_channel* nch_ = nullptr;  // where ids migrate to
    rdma_cm_id* listen_ = nullptr;
    uint16_t port_ = 0;
    std::vector<rdma_cm_id*> ids_;
};

// librpma's server: rdma_accept, then the new id moves to a channel of its own while its
// ESTABLISHED already waits on the listener's.
TEST_F(MigrateEvents, PassiveEstablishedMovesToTheNewChannel) {
    auto [client, child] = established();
    ASSERT_TRUE(child);
    ASSERT_NO_FATAL_FAILURE(migrate_to_new(child));
    EXPECT_EQ(child->channel, nch_);
    ack(next(nch_, RDMA_CM_EVENT_ESTABLISHED, child));
    EXPECT_TRUE(empty(lch_)) << "the event stayed on the listener's channel too";
    EXPECT_TRUE(empty(nch_));
}

// The active side: an event of the library's own (ADDR_RESOLVED) and one the device writes
// (the REP, delivered as ESTABLISHED) both follow the id.
TEST_F(MigrateEvents, ActiveEventsMoveToTheNewChannel) {
    nch_ = rdma_create_event_channel();
    ASSERT_TRUE(nch_);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(cch_, &id, nullptr, RDMA_PS_TCP), 0);
    ids_.push_back(id);
    sockaddr_in d = addr(port_);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&d), 2000), 0);
    ASSERT_TRUE(readable(cch_, 10000));
    ASSERT_EQ(rdma_migrate_id(id, nch_), 0);
    ack(next(nch_, RDMA_CM_EVENT_ADDR_RESOLVED, id));
    EXPECT_TRUE(empty(cch_));

    ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
    ack(next(nch_, RDMA_CM_EVENT_ROUTE_RESOLVED, id));
    make_qp(id);
    rdma_conn_param p{};
    p.retry_count = p.rnr_retry_count = 7;
    ASSERT_EQ(rdma_connect(id, &p), 0);
    rdma_cm_id* child = accept_next();
    ASSERT_TRUE(child);
    ASSERT_TRUE(readable(nch_, 10000)) << "the client's ESTABLISHED never came";
    ASSERT_EQ(rdma_migrate_id(id, cch_), 0);  // and back, with the event waiting
    ack(next(cch_, RDMA_CM_EVENT_ESTABLISHED, id));
    EXPECT_TRUE(empty(nch_));
    ack(next(lch_, RDMA_CM_EVENT_ESTABLISHED, child));
}

// Several unread events move in order, and another id's events on the old channel stay
// there (in order too).
TEST_F(MigrateEvents, EventsMoveInOrderAndOthersStay) {
    auto [c1, child] = established();
    ASSERT_TRUE(child);
    // The bytes one event takes in the channel's file (only child's ESTABLISHED waits).
    int one = 0;
    ASSERT_EQ(ioctl(lch_->fd, FIONREAD, &one), 0);
    ASSERT_GT(one, 0);
    // Then child's DISCONNECTED and a second client's request: three unread events.
    ASSERT_EQ(rdma_disconnect(c1), 0);
    ack(next(cch_, RDMA_CM_EVENT_DISCONNECTED, c1));
    rdma_cm_id* c2 = connect(cch_);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int avail = 0;
    while (avail < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        int n = 0;
        ioctl(lch_->fd, FIONREAD, &n);
        avail = n / one;
    }
    ASSERT_GE(avail, 3) << "the events did not all arrive";
    ASSERT_NO_FATAL_FAILURE(migrate_to_new(child));
    ack(next(nch_, RDMA_CM_EVENT_ESTABLISHED, child));
    ack(next(nch_, RDMA_CM_EVENT_DISCONNECTED, child));
    EXPECT_TRUE(empty(nch_));
    rdma_cm_id* child2 = accept_next();  // the second request stayed with the listener
    ASSERT_TRUE(child2);
    EXPECT_NE(child2, child);
    ack(next(cch_, RDMA_CM_EVENT_ESTABLISHED, c2));  // reading the REP sends the RTU
    ack(next(lch_, RDMA_CM_EVENT_ESTABLISHED, child2));
    EXPECT_TRUE(empty(lch_));
}

// rdma_destroy_id takes the id's unread events with it: the channel is no longer readable.
TEST_F(MigrateEvents, DestroyTakesUnreadEventsAlong) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(cch_, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in d = addr(port_);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&d), 2000), 0);
    ASSERT_TRUE(readable(cch_, 10000));
    ASSERT_EQ(rdma_destroy_id(id), 0);
    EXPECT_TRUE(empty(cch_));
}

// A listener destroyed with a request unread: the request goes with it and its client is
// rejected, as when the kernel destroys the request's id.
TEST_F(MigrateEvents, DestroyedListenerRejectsUnreadRequests) {
    rdma_cm_id* client = connect(cch_);
    ASSERT_TRUE(readable(lch_, 10000));
    ASSERT_EQ(rdma_destroy_id(listen_), 0);
    listen_ = nullptr;
    EXPECT_TRUE(empty(lch_));
    ack(next(cch_, RDMA_CM_EVENT_REJECTED, client));
}

// A thread blocked reading the old channel while an id moves gets the old channel's next
// event, never the moved one; the moved one is read once, from the new channel.
TEST_F(MigrateEvents, ConcurrentReaderGetsNoMovedEvent) {
    auto [c1, child] = established();
    ASSERT_TRUE(child);
    ASSERT_NO_FATAL_FAILURE(migrate_to_new(child));
    rdma_cm_event* got = nullptr;
    std::thread reader([&] { rdma_get_cm_event(lch_, &got); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(got, nullptr);
    ack(next(nch_, RDMA_CM_EVENT_ESTABLISHED, child));
    connect(cch_);  // a second request wakes the reader
    reader.join();
    ASSERT_TRUE(got);
    EXPECT_EQ(got->event, RDMA_CM_EVENT_CONNECT_REQUEST);
    ids_.push_back(got->id);
    ack(got);
}

// rdma_destroy_event_channel with ids still on it: as the kernel's ucma_close, the ids go
// with it. The connected one disconnects its peer; the listener listens no more.
TEST_F(MigrateEvents, DestroyedChannelTakesItsIds) {
    auto [c1, child] = established();
    ASSERT_TRUE(child);
    rdma_destroy_event_channel(lch_);
    lch_ = nullptr;
    ack(next(cch_, RDMA_CM_EVENT_DISCONNECTED, c1));
    rdma_cm_id* c2 = connect(cch_);
    ack(next(cch_, RDMA_CM_EVENT_REJECTED, c2));
}

// librpma's last message (rpma_send of I_M_DONE, unsignaled, then rpma_conn_disconnect at
// once): the SEND posted right before rdma_disconnect reaches the peer, every time. The
// device takes a WQE whose doorbell rang before the control request that moves the QP to ERR
// (docs/behaviour.md, "Program order"); before, the SEND was flushed in most rounds and the
// peer's receive ended in a flush error.
using Disconnect = MigrateEvents;
TEST_F(Disconnect, SendPostedRightBeforeRdmaDisconnectArrives) {
    // 100 rounds with the client on the server's device, 100 from the second device
    // (kAddr2), where the SEND crosses the wire (the rounds that lost it before the fix).
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, kAddr2, &src.sin_addr);
    for (int r = 0; r < 200; ++r) {
        auto [client, child] = established(r < 100 ? nullptr : &src);
        ASSERT_TRUE(child);
        ack(next(lch_, RDMA_CM_EVENT_ESTABLISHED, child));
        ASSERT_TRUE(child->recv_cq && client->send_cq);
        char rbuf[64] = {}, sbuf[64] = {};
        int len = std::snprintf(sbuf, sizeof sbuf, "I_M_DONE %d", r) + 1;
        ibv_mr* rmr = rdma_reg_msgs(child, rbuf, sizeof rbuf);
        ibv_mr* smr = rdma_reg_msgs(client, sbuf, sizeof sbuf);
        ASSERT_TRUE(rmr && smr);
        // A few messages first, as the ping-pong before librpma's last one: the device is
        // busy with the connection when the last SEND and the disconnect come.
        for (int k = 0; k < 3; ++k) {
            ASSERT_EQ(rdma_post_recv(child, nullptr, rbuf, sizeof rbuf, rmr), 0);
            ASSERT_EQ(rdma_post_send(client, nullptr, sbuf, 8, smr, IBV_SEND_SIGNALED), 0);
            ibv_wc got{};
            ASSERT_EQ(rdma_get_recv_comp(child, &got), 1);
            ASSERT_EQ(rdma_get_send_comp(client, &got), 1);
        }
        ASSERT_EQ(rdma_post_recv(child, nullptr, rbuf, sizeof rbuf, rmr), 0);
        ibv_sge sge{reinterpret_cast<uint64_t>(sbuf), uint32_t(len), smr->lkey};
        ibv_send_wr w{};
        w.wr_id = 7;
        w.sg_list = &sge;
        w.num_sge = 1;
        w.opcode = IBV_WR_SEND;  // unsignaled
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(client->qp, &w, &bad), 0);
        ASSERT_EQ(rdma_disconnect(client), 0) << std::strerror(errno);

        ibv_wc wc{};
        int n = 0;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while ((n = ibv_poll_cq(child->recv_cq, 1, &wc)) == 0 &&
               std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        ASSERT_EQ(n, 1) << "round " << r << ": the server's receive never completed";
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS)
            << "round " << r << ": the last SEND was lost: " << ibv_wc_status_str(wc.status);
        EXPECT_EQ(wc.byte_len, uint32_t(len));
        EXPECT_STREQ(rbuf, sbuf);
        ack(next(lch_, RDMA_CM_EVENT_DISCONNECTED, child));
        EXPECT_EQ(rdma_disconnect(child), 0);  // the DREP, which the client's event waits for
        ack(next(cch_, RDMA_CM_EVENT_DISCONNECTED, client));
        rdma_dereg_mr(rmr);
        rdma_dereg_mr(smr);
        for (rdma_cm_id* id : {child, client}) {
            rdma_destroy_qp(id);
            EXPECT_EQ(rdma_destroy_id(id), 0);
            std::erase(ids_, id);
        }
    }
}

// rdma_event_str names the events newer rdma-core releases added (16-19), as theirs does, for
// a program built against newer headers; past them, rdma-core's "UNKNOWN EVENT".
TEST(EventStr, NamesNewerEvents) {
    EXPECT_STREQ(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
    EXPECT_STREQ(rdma_event_str(rdma_cm_event_type(16)), "RDMA_CM_EVENT_ADDRINFO_RESOLVED");
    EXPECT_STREQ(rdma_event_str(rdma_cm_event_type(17)), "RDMA_CM_EVENT_ADDRINFO_ERROR");
    EXPECT_STREQ(rdma_event_str(rdma_cm_event_type(18)), "RDMA_CM_EVENT_USER");
    EXPECT_STREQ(rdma_event_str(rdma_cm_event_type(19)), "RDMA_CM_EVENT_INTERNAL");
    EXPECT_STREQ(rdma_event_str(rdma_cm_event_type(20)), "UNKNOWN EVENT");
}

}  // namespace
