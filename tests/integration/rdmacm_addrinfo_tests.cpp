// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// rdma-core 60's RDMACM_1.4 over uroce, as its man pages (rdma_resolve_addrinfo(3),
// rdma_query_addrinfo(3), rdma_write_cm_event(3)) and its cma.c behave: the DNS
// resolution completes with RDMA_CM_EVENT_ADDRINFO_RESOLVED on the id's channel and its
// result is taken once; a user event carries its status and argument; what the calls
// refuse, they refuse before anything starts (no event follows). Declared here as
// rdma-core 60's headers declare them: the system's are older. Built into
// rdmacm_events_tests (rdmacm_test.sh events, a device on 127.0.0.1).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "tests/integration/cm_events.h"

extern "C" {
int rdma_resolve_addrinfo(rdma_cm_id* id, const char* node, const char* service,
                          const rdma_addrinfo* hints);
int rdma_query_addrinfo(rdma_cm_id* id, rdma_addrinfo** info);
int rdma_write_cm_event(rdma_cm_id* id, rdma_cm_event_type event, int status, uint64_t arg);
}

namespace {

constexpr auto kAddrinfoResolved = rdma_cm_event_type(16);
constexpr auto kUser = rdma_cm_event_type(18);
constexpr auto kInternal = rdma_cm_event_type(19);
constexpr int kRaiSa = 0x10, kRaiDns = 0x20;

// rdma-core 60's rdma_cm_event.param.arg: a uint64_t at the start of the union.
uint64_t arg_of(const rdma_cm_event* ev) {
    uint64_t a;
    std::memcpy(&a, &ev->param, sizeof a);
    return a;
}

// The call fails: -1 with errno e.
#define EXPECT_FAILS(call, e) \
    errno = 0;                \
    EXPECT_EQ((call), -1);    \
    EXPECT_EQ(errno, (e))

using uroce::cmtest::readable;

class Addrinfo : public ::testing::Test {
protected:
    void SetUp() override {
        ch_ = rdma_create_event_channel();
        ASSERT_TRUE(ch_);
        ASSERT_EQ(rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP), 0);
    }
    void TearDown() override {
        if (id_) rdma_destroy_id(id_);
        if (ch_) rdma_destroy_event_channel(ch_);
    }
    // The next event, which must be `type` for id_.
    rdma_cm_event* next(rdma_cm_event_type type) {
        return uroce::cmtest::next_event(ch_, type, id_);
    }
    // A request that starts, and its ADDRINFO_RESOLVED (status 0), read and acknowledged.
    void resolves(const char* node, const char* service, const rdma_addrinfo* h) {
        ASSERT_EQ(rdma_resolve_addrinfo(id_, node, service, h), 0) << std::strerror(errno);
        rdma_cm_event* ev = next(kAddrinfoResolved);
        ASSERT_TRUE(ev);
        EXPECT_EQ(ev->status, 0);
        rdma_ack_cm_event(ev);
    }
    rdma_event_channel* ch_ = nullptr;
    rdma_cm_id* id_ = nullptr;
};

rdma_addrinfo tcp_v4() {
    rdma_addrinfo h{};
    h.ai_family = AF_INET;
    h.ai_port_space = RDMA_PS_TCP;
    return h;
}

// A host name resolves asynchronously: 0, then ADDRINFO_RESOLVED with status 0 on the id's
// channel, then rdma_query_addrinfo hands out the list once; its address is usable by
// rdma_resolve_addr (the kernel's ADDRINFO_RESOLVED -> ADDR_QUERY path).
TEST_F(Addrinfo, HostNameResolvesWithAnEventAndIsTakenOnce) {
    rdma_addrinfo h = tcp_v4();
    ASSERT_EQ(rdma_resolve_addrinfo(id_, "localhost", "7471", &h), 0) << std::strerror(errno);
    rdma_cm_event* ev = next(kAddrinfoResolved);
    ASSERT_TRUE(ev);
    EXPECT_EQ(ev->status, 0);
    rdma_ack_cm_event(ev);

    rdma_addrinfo* info = nullptr;
    ASSERT_EQ(rdma_query_addrinfo(id_, &info), 0) << std::strerror(errno);
    ASSERT_TRUE(info && info->ai_dst_addr);
    ASSERT_EQ(info->ai_dst_addr->sa_family, AF_INET);
    auto* sin = reinterpret_cast<sockaddr_in*>(info->ai_dst_addr);
    EXPECT_EQ(ntohs(sin->sin_port), 7471);
    EXPECT_EQ(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
    EXPECT_EQ(info->ai_port_space, RDMA_PS_TCP);
    EXPECT_EQ(info->ai_qp_type, IBV_QPT_RC);

    rdma_addrinfo* again = nullptr;
    EXPECT_FAILS(rdma_query_addrinfo(id_, &again), ENOENT) << "the result is handed out once";

    ASSERT_EQ(rdma_resolve_addr(id_, nullptr, info->ai_dst_addr, 2000), 0) << std::strerror(errno);
    rdma_cm_event* ar = next(RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_TRUE(ar);
    rdma_ack_cm_event(ar);
    rdma_freeaddrinfo(info);
}

// One resolution per id at a time: a second request before the first's result is taken is
// EBUSY; after rdma_query_addrinfo the id may resolve again.
TEST_F(Addrinfo, SecondRequestBeforeTheQueryIsBusy) {
    rdma_addrinfo h = tcp_v4();
    ASSERT_EQ(rdma_resolve_addrinfo(id_, "127.0.0.1", "7471", &h), 0);
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, "127.0.0.1", "7472", &h), EBUSY);
    rdma_cm_event* ev = next(kAddrinfoResolved);
    ASSERT_TRUE(ev);
    rdma_ack_cm_event(ev);
    EXPECT_FALSE(readable(ch_, 200)) << "the refused request made an event";
    rdma_addrinfo* info = nullptr;
    ASSERT_EQ(rdma_query_addrinfo(id_, &info), 0);
    EXPECT_EQ(ntohs(reinterpret_cast<sockaddr_in*>(info->ai_dst_addr)->sin_port), 7471);
    rdma_freeaddrinfo(info);
    resolves("127.0.0.1", "7472", &h);
    // Destroyed with its result not taken: the id frees it (ASan's leak check).
}

// A name that does not resolve fails the call (-1, getaddrinfo's code in errno, as
// rdma_getaddrinfo) and starts nothing: no event, and the id is not left busy.
TEST_F(Addrinfo, UnknownNameFailsAtOnceWithNoEvent) {
    rdma_addrinfo h = tcp_v4();
    h.ai_flags = RAI_NUMERICHOST;
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, "not-an-address", "7471", &h), EAI_NONAME);
    EXPECT_FALSE(readable(ch_, 200));
    rdma_addrinfo* info = nullptr;
    EXPECT_FAILS(rdma_query_addrinfo(id_, &info), ENOENT);
    resolves("127.0.0.1", "7471", &h);
}

// What the man pages and cma.c refuse: no id or no result pointer (EINVAL), nothing
// resolved (ENOENT), RAI_SA with RAI_DNS or with a node (EOPNOTSUPP), RAI_SA without a
// service (EINVAL); RAI_SA on an id bound to no device is EINVAL and on a RoCE port, which
// has no subnet administrator, EOPNOTSUPP (the kernel's rdma_resolve_ib_service). None
// makes an event.
TEST_F(Addrinfo, RefusedRequestsMakeNoEvent) {
    rdma_addrinfo* info = nullptr;
    EXPECT_FAILS(rdma_resolve_addrinfo(nullptr, "localhost", "1", nullptr), EINVAL);
    EXPECT_FAILS(rdma_query_addrinfo(nullptr, &info), EINVAL);
    EXPECT_FAILS(rdma_query_addrinfo(id_, nullptr), EINVAL);
    EXPECT_FAILS(rdma_query_addrinfo(id_, &info), ENOENT);

    rdma_addrinfo h{};
    h.ai_flags = kRaiSa | kRaiDns;
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, nullptr, "1", &h), EOPNOTSUPP);
    h.ai_flags = kRaiSa;
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, "localhost", "1", &h), EOPNOTSUPP);
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, nullptr, nullptr, &h), EINVAL);
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, nullptr, "1", &h), EINVAL)
        << "an id bound to no device";
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ASSERT_EQ(rdma_bind_addr(id_, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
    EXPECT_FAILS(rdma_resolve_addrinfo(id_, nullptr, "1", &h), EOPNOTSUPP)
        << "a RoCE port has no SA";
    EXPECT_FALSE(readable(ch_, 200));
    // RAI_DNS alone is the DNS mode.
    h.ai_flags = kRaiDns;
    h.ai_family = AF_INET;
    resolves("127.0.0.1", "1", &h);
}

// An id made without a channel (synchronous) returns from rdma_resolve_addrinfo with the
// resolution done, as from rdma_resolve_addr.
TEST(AddrinfoSync, ReturnsResolved) {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
    rdma_addrinfo h = tcp_v4();
    EXPECT_EQ(rdma_resolve_addrinfo(id, "127.0.0.1", "7471", &h), 0) << std::strerror(errno);
    rdma_addrinfo* info = nullptr;
    EXPECT_EQ(rdma_query_addrinfo(id, &info), 0) << std::strerror(errno);
    if (info) rdma_freeaddrinfo(info);
    EXPECT_EQ(rdma_destroy_id(id), 0);
}

// rdma_write_cm_event: RDMA_CM_EVENT_USER arrives on the id's channel, in order, with the
// status and argument given; any other event type is EINVAL, the library's own INTERNAL
// included.
TEST_F(Addrinfo, UserEventsCarryStatusAndArgInOrder) {
    EXPECT_EQ(rdma_write_cm_event(id_, kUser, 5, 0x1122334455667788ull), 0);
    EXPECT_EQ(rdma_write_cm_event(id_, kUser, -3, 42), 0);
    rdma_cm_event* ev = next(kUser);
    ASSERT_TRUE(ev);
    EXPECT_EQ(ev->status, 5);
    EXPECT_EQ(arg_of(ev), 0x1122334455667788ull);
    EXPECT_EQ(ev->listen_id, nullptr);
    rdma_ack_cm_event(ev);
    ev = next(kUser);
    ASSERT_TRUE(ev);
    EXPECT_EQ(ev->status, -3);
    EXPECT_EQ(arg_of(ev), 42u);
    rdma_ack_cm_event(ev);

    for (rdma_cm_event_type t : {RDMA_CM_EVENT_ESTABLISHED, kAddrinfoResolved, kInternal}) {
        EXPECT_FAILS(rdma_write_cm_event(id_, t, 0, 1), EINVAL) << rdma_event_str(t);
    }
    EXPECT_FAILS(rdma_write_cm_event(nullptr, kUser, 0, 1), EINVAL);
    EXPECT_FALSE(readable(ch_, 200));
}

// The man page's use: waking a thread blocked in rdma_get_cm_event on the channel.
TEST_F(Addrinfo, UserEventWakesABlockedReader) {
    rdma_cm_event* got = nullptr;
    std::thread reader([&] { rdma_get_cm_event(ch_, &got); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(rdma_write_cm_event(id_, kUser, 0, 7), 0);
    reader.join();
    ASSERT_TRUE(got);
    EXPECT_EQ(got->event, kUser);
    EXPECT_EQ(arg_of(got), 7u);
    rdma_ack_cm_event(got);
}

// Unread user events go with the id: rdma_migrate_id moves them, rdma_destroy_id drops them.
TEST_F(Addrinfo, UserEventsMoveWithTheId) {
    rdma_event_channel* other = rdma_create_event_channel();
    ASSERT_TRUE(other);
    ASSERT_EQ(rdma_write_cm_event(id_, kUser, 1, 9), 0);
    ASSERT_EQ(rdma_migrate_id(id_, other), 0) << std::strerror(errno);
    EXPECT_FALSE(readable(ch_, 200));
    ASSERT_TRUE(readable(other, 2000));
    rdma_cm_event* ev = nullptr;
    ASSERT_EQ(rdma_get_cm_event(other, &ev), 0);
    EXPECT_EQ(ev->event, kUser);
    EXPECT_EQ(arg_of(ev), 9u);
    rdma_ack_cm_event(ev);
    ASSERT_EQ(rdma_write_cm_event(id_, kUser, 1, 10), 0);
    EXPECT_EQ(rdma_destroy_id(id_), 0);
    id_ = nullptr;
    EXPECT_FALSE(readable(other, 200)) << "a destroyed id's event stayed";
    rdma_destroy_event_channel(other);
}

}  // namespace
