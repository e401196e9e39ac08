// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Wildcard listeners wait for devices, as the kernel's (its listen-any list, cma_add_one):
// rdma_listen on a wildcard of a family no running device has succeeds, and a device
// started after rdma_listen takes the listeners already there (tgt's iSER target listens on
// 0.0.0.0 and then on :: with RDMA_OPTION_ID_AFONLY, with IPv4 devices only). Devices are
// started and stopped with the test's `uroce` (UROCE_BUILD/bin/uroce) in its runtime
// directory. Built into rdmacm_events_tests (rdmacm_test.sh events: uroce0 on 127.0.0.1
// and uroce1 on 127.0.0.2 run already).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/integration/cm_events.h"

namespace {

// `uroce ARGS` exits 0.
bool uroce(const std::string& args) {
    const char* build = std::getenv("UROCE_BUILD");
    if (!build) return false;
    std::string cmd = std::string(build) + "/bin/uroce " + args + " >/dev/null";
    return std::system(cmd.c_str()) == 0;
}

sockaddr_storage address(const char* ip, uint16_t port) {
    sockaddr_storage ss{};
    if (std::strchr(ip, ':')) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        inet_pton(AF_INET6, ip, &a->sin6_addr);
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, ip, &a->sin_addr);
    }
    return ss;
}

class WaitingListener : public ::testing::Test {
protected:
    void SetUp() override {
        ch_ = rdma_create_event_channel();
        ASSERT_TRUE(ch_);
    }
    void TearDown() override {
        for (rdma_cm_id* id : ids_) rdma_destroy_id(id);
        if (ch_) rdma_destroy_event_channel(ch_);
        for (const std::string& n : started_) uroce("stop " + n);
    }
    rdma_cm_id* new_id() {
        rdma_cm_id* id = nullptr;
        EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0) << std::strerror(errno);
        if (id) ids_.push_back(id);
        return id;
    }
    // A wildcard listener on `any` ("0.0.0.0" or "::"), port 0; its port.
    uint16_t listen(rdma_cm_id* l, const char* any, bool afonly = false) {
        if (afonly) {
            int on = 1;
            EXPECT_EQ(rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on), 0);
        }
        sockaddr_storage a = address(any, 0);
        EXPECT_EQ(rdma_bind_addr(l, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
        EXPECT_EQ(rdma_listen(l, 8), 0) << std::strerror(errno);
        return ntohs(rdma_get_src_port(l));
    }
    bool start(const std::string& name, const std::string& addr) {
        if (!uroce("start --name " + name + " --addr " + addr)) return false;
        started_.push_back(name);
        return true;
    }
    // The next event, of `type`.
    rdma_cm_event* next(rdma_cm_event_type type) { return uroce::cmtest::next_event(ch_, type); }
    // A client connects to dst:port; the listener l takes the request on the device that
    // has dst and the connection is established. Returns false (with failures) otherwise.
    void connects(rdma_cm_id* l, const char* dst, uint16_t port) {
        rdma_cm_id* c = new_id();
        ASSERT_TRUE(c);
        sockaddr_storage d = address(dst, port);
        ASSERT_EQ(rdma_resolve_addr(c, nullptr, reinterpret_cast<sockaddr*>(&d), 2000), 0);
        rdma_cm_event* ev = next(RDMA_CM_EVENT_ADDR_RESOLVED);
        ASSERT_TRUE(ev);
        rdma_ack_cm_event(ev);
        ASSERT_EQ(rdma_resolve_route(c, 2000), 0);
        ev = next(RDMA_CM_EVENT_ROUTE_RESOLVED);
        ASSERT_TRUE(ev);
        rdma_ack_cm_event(ev);
        rdma_conn_param p{};
        p.retry_count = p.rnr_retry_count = 7;
        p.qp_num = 0x123;  // no QP: the application would move its own
        ASSERT_EQ(rdma_connect(c, &p), 0) << std::strerror(errno);
        ev = next(RDMA_CM_EVENT_CONNECT_REQUEST);
        ASSERT_TRUE(ev);
        EXPECT_EQ(ev->listen_id, l);
        rdma_cm_id* child = ev->id;
        ids_.push_back(child);
        rdma_ack_cm_event(ev);
        // The request came through the device that has dst.
        sockaddr_storage want = address(dst, port);
        sockaddr* got = rdma_get_local_addr(child);
        ASSERT_EQ(got->sa_family, want.ss_family);
        if (want.ss_family == AF_INET)
            EXPECT_EQ(reinterpret_cast<sockaddr_in*>(got)->sin_addr.s_addr,
                      reinterpret_cast<sockaddr_in*>(&want)->sin_addr.s_addr);
        else
            EXPECT_EQ(std::memcmp(&reinterpret_cast<sockaddr_in6*>(got)->sin6_addr,
                                  &reinterpret_cast<sockaddr_in6*>(&want)->sin6_addr, 16),
                      0);
        rdma_conn_param a{};
        a.qp_num = 0x456;
        ASSERT_EQ(rdma_accept(child, &a), 0) << std::strerror(errno);
        ev = next(RDMA_CM_EVENT_CONNECT_RESPONSE);
        ASSERT_TRUE(ev);
        EXPECT_EQ(ev->id, c);
        rdma_ack_cm_event(ev);
    }
    rdma_event_channel* ch_ = nullptr;
    std::vector<rdma_cm_id*> ids_;
    std::vector<std::string> started_;
};

// tgt's order: 0.0.0.0, then :: with AFONLY while only IPv4 devices run. Both listen; an
// IPv6 device started afterwards takes the second, and connections to it arrive there.
TEST_F(WaitingListener, Ipv6OnlyWildcardWaitsForAnIpv6Device) {
    rdma_cm_id* l4 = new_id();
    rdma_cm_id* l6 = new_id();
    ASSERT_TRUE(l4 && l6);
    uint16_t p4 = listen(l4, "0.0.0.0");
    uint16_t p6 = listen(l6, "::", true);
    ASSERT_TRUE(p4 && p6);
    ASSERT_TRUE(start("uroce6", "::1"));
    connects(l6, "::1", p6);
}

// An IPv4 wildcard listener takes a device started after it (and one started again after
// it stopped: a new device to the library).
TEST_F(WaitingListener, Ipv4WildcardTakesDevicesStartedLater) {
    rdma_cm_id* l = new_id();
    ASSERT_TRUE(l);
    uint16_t port = listen(l, "0.0.0.0");
    ASSERT_TRUE(start("uroce7", "127.0.0.7"));
    connects(l, "127.0.0.7", port);
    ASSERT_TRUE(uroce("stop uroce7"));
    // The ids on the stopped device get DEVICE_REMOVAL; the listener goes on.
    for (int i = 0; i < 2; ++i) {
        rdma_cm_event* ev = next(RDMA_CM_EVENT_DEVICE_REMOVAL);
        ASSERT_TRUE(ev);
        rdma_ack_cm_event(ev);
    }
    ASSERT_TRUE(start("uroce7", "127.0.0.7"));
    connects(l, "127.0.0.7", port);
}

// A listener destroyed before the device starts is not attached to it: the request is
// rejected (no one listens), and nothing of the destroyed id is touched.
TEST_F(WaitingListener, DestroyedListenerIsNotAttached) {
    rdma_cm_id* l = new_id();
    ASSERT_TRUE(l);
    uint16_t port = listen(l, "::", true);
    ASSERT_EQ(rdma_destroy_id(l), 0);
    ids_.erase(ids_.begin());
    ASSERT_TRUE(start("uroce6", "::1"));
    rdma_cm_id* c = new_id();
    sockaddr_storage d = address("::1", port);
    ASSERT_EQ(rdma_resolve_addr(c, nullptr, reinterpret_cast<sockaddr*>(&d), 2000), 0);
    rdma_ack_cm_event(next(RDMA_CM_EVENT_ADDR_RESOLVED));
    ASSERT_EQ(rdma_resolve_route(c, 2000), 0);
    rdma_ack_cm_event(next(RDMA_CM_EVENT_ROUTE_RESOLVED));
    rdma_conn_param p{};
    p.qp_num = 0x123;
    ASSERT_EQ(rdma_connect(c, &p), 0);
    rdma_cm_event* ev = next(RDMA_CM_EVENT_REJECTED);
    ASSERT_TRUE(ev);
    rdma_ack_cm_event(ev);
}

}  // namespace
