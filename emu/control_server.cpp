#include "emu/control_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "emu/abi/client.h"
#include "emu/abi/cm_protocol.h"
#include "emu/abi/runtime.h"

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
        asio::error_code ignored;
        c->sd.close(ignored);
    });
}

bool ControlServer::serve(Conn& c) {
    // Every message is a Request except kCapture's, which is larger.
    union {
        abi::Request req;
        abi::CaptureReq capture;
        abi::FaultsReq faults;
        abi::CmReq cm;
    } msg;
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
    if (n == 0) return false;                                 // the application went away
    if (size_t(n) < offsetof(abi::Request, u)) return false;  // not our protocol
    const abi::Request& req = msg.req;
    abi::Response resp{};
    std::vector<int> fds;
    switch (req.op) {
    case abi::Op::kOpen: {
        if (c.session || req.u.open.version != abi::kProtocolVersion) {
            resp.err = EPROTO;
            break;
        }
        int f[3] = {-1, -1, -1};
        int err = 0;
        dev_.call([&] { c.session = dev_.open_session(c.pid, f, &err); });
        resp.err = err;
        if (!err) {
            auto& o = resp.u.open;
            const DeviceConfig& cfg = dev_.config();
            std::snprintf(o.name, sizeof o.name, "%s", cfg.name.c_str());
            o.ipv4_be = cfg.ipv4_be;
            o.udp_port = cfg.port;
            o.device_pid = getpid();
            o.guid_be = htobe64(dev_.guid());
            o.session = c.session->id;
            fds = {f[0], f[1], f[2]};
        }
        break;
    }
    case abi::Op::kDump: {
        std::string text;
        dev_.call([&] { text = dev_.dump(); });
        if (text.size() > abi::kMaxDumpBytes) text.resize(abi::kMaxDumpBytes);
        return send_msg(c.sd.native_handle(), text.data(), text.size(), {});
    }
    case abi::Op::kTrace: {
        std::string text;
        uint64_t last = 0;
        dev_.call(
            [&] { last = dev_.read_trace(req.u.trace.since, &text, abi::kMaxDumpBytes - 32); });
        text.insert(0, "last " + std::to_string(last) + "\n");
        return send_msg(c.sd.native_handle(), text.data(), text.size(), {});
    }
    case abi::Op::kCapture: {
        if (size_t(n) < offsetof(abi::CaptureReq, path) + 1 ||
            std::memchr(msg.capture.path, 0, size_t(n) - offsetof(abi::CaptureReq, path)) ==
                nullptr) {
            resp.err = EINVAL;  // truncated, or a path without its NUL
            break;
        }
        resp.err = run_capture(dev_, msg.capture, &resp.u.capture.packets);
        break;
    }
    case abi::Op::kFaults: {
        // Like kDump, no session; the spec is checked again here (the CLI checks it too).
        net::FaultSpec spec;
        std::string why;
        if (size_t(n) < sizeof(abi::FaultsReq) ||
            std::memchr(msg.faults.spec, 0, sizeof msg.faults.spec) == nullptr ||
            !net::parse_fault_spec(msg.faults.spec, &spec, &why)) {
            resp.err = EINVAL;
            break;
        }
        std::string now;
        dev_.call([&] {
            resp.u.faults.seed = dev_.set_faults(spec);
            now = net::format_fault_spec(dev_.config().faults);
        });
        std::fprintf(stderr, "uroced: faults %s\n", now.c_str());  // the log: how to replay
        break;
    }
    case abi::Op::kCm: {
        // Connection manager (emu/cm_agent.h): its own reply type.
        abi::CmResp cr{};
        if (!c.session || size_t(n) != sizeof(abi::CmReq)) {
            cr.err = c.session ? EINVAL : EPROTO;
        } else {
            dev_.call([&] { dev_.cm().request(*c.session, msg.cm, cr, in_fd); });
        }
        return send_msg(c.sd.native_handle(), &cr, sizeof cr, {});
    }
    case abi::Op::kShutdown:
        shutdown_ = true;
        send_msg(c.sd.native_handle(), &resp, sizeof resp, {});
        io_.stop();
        return false;
    default:
        if (!c.session) {
            resp.err = EPROTO;
            break;
        }
        dev_.call([&] { dev_.handle(*c.session, req, resp, fds, in_fd); });
    }
    bool ok = send_msg(c.sd.native_handle(), &resp, sizeof resp, fds);
    for (int fd : fds) close(fd);
    return ok;
}

}  // namespace uroce::emu
