// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// librdmacm over uroce, the devices: the table of running uroce devices this process uses
// for connections (each with its verbs context, default PD and a control connection of the
// library's own for CM requests), requests to them, and rdma_get_devices. docs/cm.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "emu/abi/c_list.h"
#include "emu/abi/caps.h"
#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "verbs_api/rdmacm/cma_internal.h"

namespace uroce::rdmacm {

// The tables live as long as the process (never destroyed, so no exit-time destruction
// races a thread still in the library): devices keep their verbs context, PD and control
// connection open until the process ends, as rdma-core keeps its cma_devices.
std::mutex g_mu;
std::vector<std::unique_ptr<DevConn>>& g_devs = *new std::vector<std::unique_ptr<DevConn>>();
std::map<uint64_t, Id*>& g_ids = *new std::map<uint64_t, Id*>();
uint32_t g_next_lid = 1;
std::atomic<uint32_t> g_next_chan{1};
std::mutex g_chan_mu;

uint32_t random_psn() {
    static std::mutex mu;
    static std::mt19937 rng{std::random_device{}()};
    std::lock_guard<std::mutex> g(mu);
    return rng() & 0xffffff;
}

// ---- devices -------------------------------------------------------------------------------

DevConn* dev_by_tag(uint32_t tag) {
    std::lock_guard<std::mutex> g(g_mu);
    return tag < g_devs.size() ? g_devs[tag].get() : nullptr;
}

// A device entry ids can be placed on: running, as far as we know.
bool usable(const DevConn& d) { return d.ibdev && !d.gone; }

DevConn* dev_by_addr(const net::Endpoint& a) {
    std::lock_guard<std::mutex> g(g_mu);
    for (auto& d : g_devs)
        if (device_has(d->addr, a) && usable(*d)) return d.get();
    return nullptr;
}

std::vector<DevConn*> all_devs() {
    std::lock_guard<std::mutex> g(g_mu);
    std::vector<DevConn*> v;
    for (auto& d : g_devs)
        if (usable(*d)) v.push_back(d.get());
    return v;
}

int ensure_open(DevConn& d) {
    std::lock_guard<std::mutex> g(d.open_mu);
    if (d.gone) return ENODEV;
    if (d.open) return 0;
    if (!d.verbs) {
        d.verbs = ibv_open_device(d.ibdev);
        if (!d.verbs) return errno ? errno : ENODEV;
    }
    if (!d.pd) {
        d.pd = ibv_alloc_pd(d.verbs);
        if (!d.pd) return errno ? errno : ENOMEM;
    }
    int sock = abi::connect_device(d.name);
    if (sock < 0) return -sock == ENOENT || -sock == ECONNREFUSED ? ENODEV : -sock;
    abi::Request req{};
    req.op = abi::Op::kOpen;
    req.u.open.version = abi::kProtocolVersion;
    req.u.open.pid = getpid();
    abi::Response resp{};
    int fds[abi::kMaxFds], nfds = 0;
    int err = abi::transact(sock, req, &resp, fds, &nfds);
    if (!err) err = resp.err;
    if (err) {
        for (int i = 0; i < nfds; ++i) close(fds[i]);
        close(sock);
        return err;
    }
    // The session's doorbell and async pipe stay open (and unused) while we are connected.
    for (int i = 0; i < nfds && i < 2; ++i) d.session_fds[i] = fds[i];
    for (int i = 2; i < nfds; ++i) close(fds[i]);
    // Paths from this device get the port's active MTU (the kernel's cma takes the
    // netdev's, iboe_get_mtu), which the device derives from its interface.
    ibv_port_attr pa{};
    d.mtu = ibv_query_port(d.verbs, 1, &pa) == 0 ? pa.active_mtu : IBV_MTU_1024;
    d.sock = sock;
    d.open = true;
    watch_device(&d);
    return 0;
}

// The device's XRC domain for XRC QPs and SRQs made through the CM (rdma-core's
// ucma_get_xrcd): one per device, private (no file), open for the life of the process.
ibv_xrcd* dev_xrcd(DevConn& d) {
    std::lock_guard<std::mutex> g(d.open_mu);
    if (!d.xrcd && d.verbs) {
        ibv_xrcd_init_attr a{};
        a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        a.fd = -1;
        a.oflags = O_CREAT;
        d.xrcd = ibv_open_xrcd(d.verbs, &a);
    } else if (!d.verbs) {
        errno = ENODEV;
    }
    return d.xrcd;
}

// One CM request on the device's control connection. Returns 0 or a positive errno.
// fd_in (>= 0) travels with the request (kChannel's write end). Returns 0 or a positive errno.
int cm_call(DevConn& d, abi::CmReq& r, abi::CmResp* out, int fd_in) {
    if (int e = ensure_open(d)) return e;
    r.op = abi::Op::kCm;
    std::lock_guard<std::mutex> g(d.mu);
    ssize_t n = abi::send_message(d.sock, &r, sizeof r, fd_in);
    if (n != ssize_t(sizeof r)) return n < 0 ? errno : EPROTO;
    abi::CmResp resp{};
    do {
        n = recv(d.sock, &resp, sizeof resp, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    if (n < ssize_t(sizeof resp)) return ENODEV;  // the device went away
    if (out) *out = resp;
    return resp.err;
}

abi::CmReq cm_req(abi::CmOp op, uint32_t handle) {
    abi::CmReq r{};
    r.cm_op = op;
    r.handle = handle;
    return r;
}

bool sync_devices() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);  // starts the default device if none runs
    auto infos = abi::list_devices();
    std::lock_guard<std::mutex> g(g_mu);
    for (auto& info : infos) {
        ibv_device* dev = nullptr;
        for (int i = 0; list && i < n; ++i)
            if (info.name == ibv_get_device_name(list[i])) dev = list[i];
        DevConn* known = nullptr;  // a device that went away is not the one running now
        for (auto& d : g_devs)
            if (d->name == info.name && !d->gone) known = d.get();
        if (known) {
            if (!known->ibdev) known->ibdev = dev;
            continue;
        }
        auto d = std::make_unique<DevConn>();
        d->name = info.name;
        // The device's first address ("10.0.0.1", "fd77::1", "fe80::1%eth0", or an
        // interface's first), as `uroce start --addr` took it.
        std::vector<net::Endpoint> addrs = net::address_list(info.addr, 0);
        if (!addrs.empty()) d->addr = addrs[0];
        d->ibdev = dev;
        d->tag = uint32_t(g_devs.size());
        g_devs.push_back(std::move(d));
    }
    // Our libibverbs keeps every ibv_device for the life of the process, so the pointers
    // stay valid after the list is freed.
    if (list) ibv_free_device_list(list);
    for (auto& d : g_devs)
        if (usable(*d)) return true;
    return false;
}

// Every id on d gets RDMA_CM_EVENT_DEVICE_REMOVAL, as the kernel's RDMA CM sends when a
// device is removed; the application then destroys them (which still succeeds). A wildcard
// listener is not told: it goes on listening on the other devices, as the kernel's does.
void device_gone(DevConn* d) {
    std::lock_guard<std::mutex> g(g_mu);  // no id is destroyed while we post to it
    d->gone = true;
    for (auto& [k, id] : g_ids) {
        if ((k >> 32) != kLocalTag || id->dev != d) continue;
        std::lock_guard<std::mutex> l(id->mu);  // rdma_migrate_id may be moving it
        post_local(id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
    }
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

ibv_context** rdma_get_devices(int* num_devices) {
    if (num_devices) *num_devices = 0;
    sync_devices();
    std::vector<ibv_context*> ctxs;
    for (DevConn* d : all_devs())
        if (!ensure_open(*d)) ctxs.push_back(d->verbs);
    return abi::c_list(ctxs, num_devices);
}

void rdma_free_devices(ibv_context** list) { free(list); }

}  // extern "C"
