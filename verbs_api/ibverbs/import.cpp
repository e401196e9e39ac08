// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Sharing a context's objects (ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3)).
// A context's cmd_fd is its control socket to the device, one session there: a dup of it
// names that session as a dup of a uverbs fd names the kernel's file. ibv_import_device
// makes a second context on the same connection (its Conn: the socket's lock, the doorbell
// page), so both see one set of objects, which pd and mr handles name. Only within the
// process that opened the device: the device reaches the memory of the session's process,
// so a context imported in another process could not use its own buffers (EOPNOTSUPP).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "emu/abi/runtime.h"
#include "verbs_api/ibverbs/internal.h"

using namespace uroce;
using namespace uroce::verbs;

namespace {

using SockId = std::pair<dev_t, ino_t>;  // a socket, whichever fd refers to it

std::mutex g_conns_mu;
// Never destroyed, like device.cpp's device list: usable from other exit handlers.
std::map<SockId, std::weak_ptr<Conn>>& g_conns = *new std::map<SockId, std::weak_ptr<Conn>>;

bool sock_id(int fd, SockId* id, bool* is_socket) {
    struct stat st;
    if (fstat(fd, &st) != 0) return false;
    *is_socket = S_ISSOCK(st.st_mode);
    *id = {st.st_dev, st.st_ino};
    return true;
}

// Whether fd is connected to a device's control socket.
bool is_device_socket(int fd) {
    sockaddr_un peer{};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 ||
        peer.sun_family != AF_UNIX)
        return false;
    for (const auto& info : abi::list_devices())
        if (abi::socket_path(info.name) == peer.sun_path) return true;
    return false;
}

}  // namespace

namespace uroce::verbs {

void share_conn(const std::shared_ptr<Conn>& conn, int sock) {
    SockId id;
    bool is_socket;
    if (!sock_id(sock, &id, &is_socket)) return;
    std::lock_guard<std::mutex> g(g_conns_mu);
    for (auto it = g_conns.begin(); it != g_conns.end();)  // connections closed since
        it = it->second.expired() ? g_conns.erase(it) : std::next(it);
    g_conns[id] = conn;
}

}  // namespace uroce::verbs

extern "C" {

ibv_context* ibv_import_device(int cmd_fd) {
    SockId id;
    bool is_socket;
    if (!sock_id(cmd_fd, &id, &is_socket) || !is_socket) {
        errno = EINVAL;  // rdma-core's answer for an fd that is no uverbs file
        return nullptr;
    }
    std::shared_ptr<Conn> conn;
    {
        std::lock_guard<std::mutex> g(g_conns_mu);
        if (auto it = g_conns.find(id); it != g_conns.end()) conn = it->second.lock();
    }
    if (!conn || conn->pid != getpid()) {
        // Another process's context (passed with SCM_RIGHTS, or inherited over fork), or
        // no device's at all (rdma-core: ENODEV, no device has that file).
        errno = conn || is_device_socket(cmd_fd) ? EOPNOTSUPP : ENODEV;
        return nullptr;
    }
    ibv_context* c = make_context(conn, cmd_fd, -1);  // as rdma-core's: no async fd of its own
    if (!c) return nullptr;
    // The device must still be there, as the kernel's import asks it (QUERY_CONTEXT).
    abi::Request req{};
    req.op = abi::Op::kQueryPort;
    abi::Response resp{};
    if (int e = request(ctx_of(c), req, resp)) {
        ibv_close_device(c);
        errno = e;
        return nullptr;
    }
    return c;
}

ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
    abi::Request req{};
    req.op = abi::Op::kQueryPd;
    req.u.pd.pd = pd_handle;
    return pd_for(context, req);
}

// The PD stays on the device: ibv_dealloc_pd of this or another handle destroys it.
void ibv_unimport_pd(ibv_pd* pd) { delete pd_of(pd); }

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
    abi::Request req{};
    req.op = abi::Op::kQueryMr;
    req.u.handle.handle = mr_handle;
    abi::Response resp{};
    if (int e = request(ctx_of(pd->context), req, resp)) {
        errno = e;
        return nullptr;
    }
    const auto& r = resp.u.query_mr;
    auto* mr = new Mr();
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = nullptr;  // as rdma-core's: the importer learns keys and length only
    mr->mr.length = r.length;
    mr->mr.handle = mr_handle;
    mr->mr.lkey = r.lkey;
    mr->mr.rkey = r.rkey;
    return &mr->mr;
}

void ibv_unimport_mr(ibv_mr* mr) { delete reinterpret_cast<Mr*>(mr); }

}  // extern "C"
