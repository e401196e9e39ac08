// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/abi/client.h"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu/abi/runtime.h"

namespace uroce::abi {

namespace {

int peer_credentials(int sock, ucred* cred) {
    socklen_t len = sizeof *cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0) return errno;
    return len == sizeof *cred ? 0 : EPROTO;
}

}  // namespace

bool trusted_peer_uid(uid_t peer_uid) { return peer_uid == geteuid() || peer_uid == 0; }

int connect_device(const std::string& name) {
    std::string path = socket_path(name);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return -ENAMETOOLONG;
    std::strcpy(sa.sun_path, path.c_str());
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    ucred cred{};
    int e = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ? errno : 0;
    if (!e) e = peer_credentials(fd, &cred);
    if (!e && !trusted_peer_uid(cred.uid)) {
        report_once("uroce: refusing device " + name + ": " + path + " is served by uid " +
                    std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) +
                    "), not by you (uid " + std::to_string(geteuid()) + ") or root");
        e = EACCES;
    }
    if (e) {
        close(fd);
        return -e;
    }
    return fd;
}

pid_t allow_device_ptrace(int sock) {
    ucred cred{};
    if (int e = peer_credentials(sock, &cred)) return -e;
    // connect_device refused other users' devices already; this takes any socket, though.
    if (!trusted_peer_uid(cred.uid)) return -EACCES;
    // Best effort, as before: without Yama the call fails (EINVAL) and nothing needs allowing.
    prctl(PR_SET_PTRACER, static_cast<unsigned long>(cred.pid), 0, 0, 0);
    return cred.pid;
}

static ssize_t recv_with_fds(int fd, void* buf, size_t len, int* fds, int* nfds) {
    iovec iov{buf, len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    int got = 0;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        int k = int((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
            if (fds && got < kMaxFds)
                fds[got++] = f;
            else
                close(f);
        }
    }
    if (nfds) *nfds = got;
    return n;
}

ssize_t send_message(int sock, const void* data, size_t len, int send_fd) {
    iovec iov{const_cast<void*>(data), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
    if (send_fd >= 0) {
        msg.msg_control = cbuf;
        msg.msg_controllen = sizeof cbuf;
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cm), &send_fd, sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

int transact(int fd, const Request& req, Response* resp, int* fds, int* nfds, int send_fd) {
    ssize_t n = send_message(fd, &req, sizeof req, send_fd);
    if (n != ssize_t(sizeof req)) return n < 0 ? errno : EPROTO;
    std::memset(resp, 0, sizeof *resp);
    n = recv_with_fds(fd, resp, sizeof *resp, fds, nfds);
    if (n < 0) return errno;
    if (n < ssize_t(offsetof(Response, u))) return ENODEV;  // the device went away
    return 0;
}

int simple_request(const std::string& name, Op op, std::string* reply) {
    Request req{};
    req.op = op;
    return simple_request(name, req, reply);
}

int simple_request(const std::string& name, const Request& req, std::string* reply) {
    int fd = connect_device(name);
    if (fd < 0) return -fd;
    ssize_t n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
    if (n != ssize_t(sizeof req)) {
        close(fd);
        return EPROTO;
    }
    std::string buf(kMaxDumpBytes + 4096, '\0');
    n = recv_with_fds(fd, buf.data(), buf.size(), nullptr, nullptr);
    close(fd);
    if (n < 0) return errno;
    buf.resize(size_t(n));
    if (reply) *reply = buf;
    return 0;
}

}  // namespace uroce::abi
