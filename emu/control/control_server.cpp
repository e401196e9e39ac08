// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/control/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "emu/abi/client.h"
#include "emu/abi/runtime.h"
#include "emu/control/control_dispatch.h"

namespace uroce::emu {

struct ControlServer::Conn {
    explicit Conn(asio::io_context& io, int fd) : sd(io, fd) {}
    asio::posix::stream_descriptor sd;
    Session* session = nullptr;
    pid_t pid = 0;
};

namespace {
// Receives one message; keeps at most one passed fd (in *fd, else -1), closes others.
ssize_t recv_msg(int sock, void* buf, size_t len, int* fd) {
    iovec iov{buf, len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * abi::kMaxFds)];
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    *fd = -1;
    ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return n;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
            if (*fd < 0)
                *fd = f;
            else
                close(f);
        }
    }
    return n;
}

bool send_msg(int fd, const void* data, size_t len, const std::vector<int>& fds) {
    iovec iov{const_cast<void*>(data), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * abi::kMaxFds)];
    if (!fds.empty()) {
        msg.msg_control = cbuf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    return n == ssize_t(len);
}

// Starts or stops the capture on the engine thread, then records the new state in the
// device's info file (which this daemon owns) so `uroce list` shows it.
int run_capture(Device& dev, const abi::CaptureReq& r, uint64_t* packets) {
    const std::string path = r.path;
    const uint64_t max_bytes = r.max_bytes;
    if (!path.empty() && path[0] != '/') return EINVAL;  // the daemon's cwd means nothing
    int err = 0;
    dev.call([&] {
        *packets = dev.config().pcap.empty() ? 0 : dev.capture_packets();
        err = dev.set_capture(path, max_bytes);
    });
    // On failure the previous capture is closed too: the info file must say "off".
    abi::DeviceInfo info;
    if (abi::read_info(dev.config().name, &info) && info.pid == getpid()) {
        info.pcap = err ? std::string() : path;
        abi::write_info(info);
    }
    return err;
}

// Whether the client on `fd` may use the device: the kernel's word on who it is
// (SO_PEERCRED, into *cred) must be the device's own user or root. The socket's mode keeps
// others out already; this holds if the socket or the directory is opened up by mistake.
bool admit(int fd, ucred* cred) {
    socklen_t len = sizeof *cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0 || len != sizeof *cred) {
        std::fprintf(stderr, "uroced: refused a connection whose credentials cannot be read\n");
        return false;
    }
    if (abi::trusted_peer_uid(cred->uid)) return true;
    std::fprintf(stderr,
                 "uroced: refused a connection from uid %u (pid %d): only uid %u and root may "
                 "use this device\n",
                 unsigned(cred->uid), int(cred->pid), unsigned(geteuid()));
    return false;
}

}  // namespace

int ControlServer::listen(const std::string& path) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return errno;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) {
        close(fd);
        return ENAMETOOLONG;
    }
    std::strcpy(sa.sun_path, path.c_str());
    unlink(path.c_str());
    mode_t old = umask(0177);
    int r = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    umask(old);
    if (r != 0 || ::listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    listener_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    accept_next();
    return 0;
}

void ControlServer::accept_next() {
    listener_->async_wait(asio::posix::stream_descriptor::wait_read, [this](asio::error_code ec) {
        if (ec) return;
        for (;;) {
            int fd =
                accept4(listener_->native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;
            ucred cred{};
            if (!admit(fd, &cred)) {
                close(fd);
                continue;
            }
            auto c = std::make_shared<Conn>(io_, fd);
            c->pid = cred.pid;
            conns_.push_back(c.get());
            read_next(c);
        }
        accept_next();
    });
}

void ControlServer::read_next(std::shared_ptr<Conn> c) {
    c->sd.async_wait(asio::posix::stream_descriptor::wait_read, [this, c](asio::error_code ec) {
        bool keep = !ec && serve(*c);
        if (keep) return read_next(c);
        if (c->session) {
            Session* s = c->session;
            dev_.call([&] { dev_.close_session(s); });
            c->session = nullptr;
        }
        conns_.erase(std::find(conns_.begin(), conns_.end(), c.get()));
        asio::error_code ignored;
        c->sd.close(ignored);
    });
}

// Closes the sessions of processes that have exited but whose hang-up this thread has not
// handled yet. The kernel closes an exiting process's files before its parent learns of the
// exit, and with them its RDMA-CM ids; a server restarted on the same port right after must
// not meet its predecessor's listener (EADDRINUSE), nor `uroce res` show it.
void ControlServer::close_departed() {
    std::vector<pollfd> fds;
    std::vector<Conn*> which;
    for (Conn* c : conns_) {
        if (!c->session) continue;
        fds.push_back({c->sd.native_handle(), POLLRDHUP, 0});
        which.push_back(c);
    }
    if (fds.empty() || poll(fds.data(), fds.size(), 0) <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
        Session* s = which[i]->session;
        which[i]->session = nullptr;  // its read_next sees the hang-up and just closes
        dev_.call([&] { dev_.close_session(s); });
    }
}

bool ControlServer::serve(Conn& c) {
    ControlMsg msg;
    std::memset(&msg, 0, sizeof msg);
    int in_fd = -1;
    ssize_t n = recv_msg(c.sd.native_handle(), &msg, sizeof msg, &in_fd);
    // kOpenXrcd and CmOp::kChannel carry an fd; whoever keeps it makes a copy.
    struct FdCloser {
        int fd;
        ~FdCloser() {
            if (fd >= 0) close(fd);
        }
    } closer{in_fd};
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;  // the application went away
    if (size_t(n) >= offsetof(abi::Request, u)) {
        // The two requests that act on the daemon rather than the device.
        abi::Response resp{};
        switch (msg.req.op) {
        case abi::Op::kCapture:
            if (size_t(n) < offsetof(abi::CaptureReq, path) + 1 ||
                std::memchr(msg.capture.path, 0, size_t(n) - offsetof(abi::CaptureReq, path)) ==
                    nullptr)
                resp.err = EINVAL;  // truncated, or a path without its NUL
            else
                resp.err = run_capture(dev_, msg.capture, &resp.u.capture.packets);
            return send_msg(c.sd.native_handle(), &resp, sizeof resp, {});
        case abi::Op::kShutdown:
            shutdown_ = true;
            send_msg(c.sd.native_handle(), &resp, sizeof resp, {});
            io_.stop();
            return false;
        default: break;
        }
    }
    if (size_t(n) >= sizeof(abi::Op) &&
        (msg.req.op == abi::Op::kDump ||
         (msg.req.op == abi::Op::kCm && size_t(n) >= sizeof msg.cm &&
          msg.cm.cm_op == abi::CmOp::kBind)))
        close_departed();
    ControlConn cc{c.session, c.pid};
    ControlReply out;
    bool keep = dispatch_control(dev_, cc, msg, size_t(n), in_fd, &out);
    c.session = cc.session;
    if (!keep) return false;
    if (!out.log.empty()) std::fprintf(stderr, "%s\n", out.log.c_str());
    bool ok = send_msg(c.sd.native_handle(), out.bytes.data(), out.bytes.size(), out.fds);
    for (int fd : out.fds) close(fd);
    return ok;
}

}  // namespace uroce::emu
