// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// "Nobody else gets in" (docs/architecture.md, "Who may talk to whom"): the runtime
// directory must be the user's own, the library talks only to a device its own user (or
// root) runs and lets that process, as the kernel names it, read its memory, and the device
// serves only its own user and root. The tests that need a second user run as root and
// become `nobody` in a child; without root they are skipped.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <infiniband/verbs.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "emu/abi/client.h"
#include "emu/abi/doorbell.h"
#include "emu/abi/protocol.h"
#include "emu/abi/runtime.h"
#include "gtest/gtest.h"

// What the process last gave PR_SET_PTRACER. This definition comes before libc's in symbol
// lookup (the executable exports it: ENABLE_EXPORTS), so libibverbs' call lands here: the
// only way to see the pid it chose, as Yama has no getter and the host may have no Yama.
namespace {
std::atomic<long> g_ptracer{0};
std::atomic<int> g_ptracer_calls{0};
}  // namespace

extern "C" int prctl(int option, ...) noexcept {
    va_list ap;
    va_start(ap, option);
    unsigned long args[4];
    for (unsigned long& a : args) a = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_PTRACER) {
        g_ptracer = long(args[0]);
        ++g_ptracer_calls;
    }
    return int(syscall(SYS_prctl, option, args[0], args[1], args[2], args[3]));
}

namespace uroce::security_test {
namespace {

const std::string kBin = UROCE_BIN_DIR;

// Exit status and output (stdout and stderr) of a shell command.
struct Output {
    int status = -1;
    std::string text;
};

Output run(const std::string& cmd) {
    Output out;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return out;
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.text.append(buf, n);
    int st = pclose(p);
    out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The unprivileged user the tests become, or skip (GTEST_SKIP needs a void function).
bool second_user(uid_t* uid, gid_t* gid, std::string* why) {
    if (geteuid() != 0) {
        *why = "needs root (to make a directory or a process of a second user)";
        return false;
    }
    const passwd* pw = getpwnam("nobody");
    if (!pw || pw->pw_uid == 0) {
        *why = "needs the unprivileged user 'nobody'";
        return false;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return true;
}

// In a child: become `uid` for good. False if the kernel refused.
bool become(uid_t uid, gid_t gid) {
    return setgroups(0, nullptr) == 0 && setgid(gid) == 0 && setuid(uid) == 0 && getuid() == uid;
}

// A private runtime directory (as the integration tests' `mktemp -d`) in UROCE_RUNTIME_DIR,
// removed afterwards with whatever a test started in it.
class Security : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/uroce-security.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr) << std::strerror(errno);
        top_ = tmpl;
        use_dir(top_);
        setenv("UROCE_NO_AUTOSTART", "1", 1);
        unsetenv("XDG_RUNTIME_DIR");
    }

    void TearDown() override {
        for (pid_t p : children_) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
        }
        if (device_started_) {
            chmod(dir_.c_str(), 0700);  // a test may have opened it up
            run(kBin + "/uroce stop");
        }
        std::error_code ec;
        std::filesystem::remove_all(top_, ec);
    }

    void use_dir(const std::string& dir) {
        dir_ = dir;
        setenv("UROCE_RUNTIME_DIR", dir.c_str(), 1);
    }

    // Starts the real device `name` on 127.0.0.1 (UDP port: UROCE_UDP_PORT, set by ctest).
    void start_device(const std::string& name) {
        Output o = run(kBin + "/uroce start --name " + name);
        ASSERT_EQ(o.status, 0) << o.text;
        device_started_ = true;
    }

    std::string top_, dir_;
    std::vector<pid_t> children_;
    bool device_started_ = false;
};

// --- the runtime directory --------------------------------------------------------------

// Every entry point refuses `dir_` with a message naming it and containing `why`: the CLI's
// commands, the daemon, the checked function, and the library (no device, told once).
void expect_refused(const std::string& dir, const std::string& why) {
    std::string err = abi::check_runtime_dir(false);
    EXPECT_NE(err.find("runtime directory " + dir + " "), std::string::npos) << err;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
    EXPECT_NE(err.find("UROCE_RUNTIME_DIR"), std::string::npos) << "names the fix: " << err;
    EXPECT_EQ(abi::check_runtime_dir(true), err);

    for (const char* cmd :
         {"/uroce list", "/uroce start --name x", "/uroce stop", "/uroced --name x --port 1"}) {
        Output o = run(kBin + cmd);
        EXPECT_EQ(o.status, 1) << cmd << ": " << o.text;
        EXPECT_EQ(o.text, err + "\n") << cmd;
    }

    testing::internal::CaptureStderr();
    int n = -1, m = -1;
    ibv_device** l1 = ibv_get_device_list(&n);
    ibv_device** l2 = ibv_get_device_list(&m);
    std::string said = testing::internal::GetCapturedStderr();
    ASSERT_NE(l1, nullptr);
    ASSERT_NE(l2, nullptr);
    EXPECT_EQ(l1[0], nullptr);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(m, 0);
    ibv_free_device_list(l1);
    ibv_free_device_list(l2);
    EXPECT_EQ(said, err + "\n") << "the library says why, once";
}

TEST_F(Security, RuntimeDirOwnedByAnotherUserIsRefused) {
    uid_t uid;
    gid_t gid;
    std::string why;
    if (!second_user(&uid, &gid, &why)) GTEST_SKIP() << why;
    ASSERT_EQ(chown(dir_.c_str(), uid, gid), 0) << std::strerror(errno);
    expect_refused(dir_, "is owned by uid " + std::to_string(uid) + ", not you (uid 0)");
    // Nothing was written into it, not even the log `uroce start` keeps there.
    EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(Security, RuntimeDirWithGroupOrOtherPermissionsIsRefused) {
    for (mode_t mode : {0777, 0770, 0707, 0750, 0701}) {
        SCOPED_TRACE(mode);
        ASSERT_EQ(chmod(dir_.c_str(), mode), 0);
        char octal[8];
        std::snprintf(octal, sizeof octal, "%04o", unsigned(mode));
        expect_refused(dir_, std::string("has group or other permissions (mode ") + octal + ")");
        EXPECT_TRUE(std::filesystem::is_empty(dir_));
    }
}

TEST_F(Security, RuntimeDirThatIsASymlinkIsRefused) {
    std::string real = top_ + "/real", link = top_ + "/link";
    ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
    ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
    use_dir(link);
    expect_refused(link, "is a symbolic link");
    // A trailing slash would make lstat() follow it. (Another link: the library tells each
    // distinct complaint once per process.)
    std::string link2 = top_ + "/link2";
    ASSERT_EQ(symlink(real.c_str(), link2.c_str()), 0);
    use_dir(link2 + "/");
    expect_refused(link2, "is a symbolic link");
    EXPECT_TRUE(std::filesystem::is_empty(real));
}

TEST_F(Security, RuntimeDirThatIsAFileIsRefused) {
    std::string file = top_ + "/file";
    std::ofstream(file) << "x";
    use_dir(file);
    expect_refused(file, "is not a directory");
}

// mktemp -d (0700, the user's), a missing directory (made with its parents), and the
// default under XDG_RUNTIME_DIR are fine.
TEST_F(Security, OwnRuntimeDirsAreAccepted) {
    EXPECT_EQ(abi::check_runtime_dir(false), "");
    Output o = run(kBin + "/uroce list");
    EXPECT_EQ(o.status, 0) << o.text;

    std::string deep = top_ + "/a/b/c";
    use_dir(deep);
    EXPECT_EQ(abi::check_runtime_dir(false), "") << "missing: nothing runs there";
    EXPECT_FALSE(std::filesystem::exists(deep)) << "made only when asked";
    EXPECT_EQ(abi::check_runtime_dir(true), "");
    struct stat st;
    ASSERT_EQ(lstat(deep.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);

    unsetenv("UROCE_RUNTIME_DIR");
    setenv("XDG_RUNTIME_DIR", top_.c_str(), 1);
    EXPECT_EQ(abi::runtime_dir(), top_ + "/uroce");
    EXPECT_EQ(abi::check_runtime_dir(true), "");
    ASSERT_EQ(lstat((top_ + "/uroce").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    o = run(kBin + "/uroce list");
    EXPECT_EQ(o.status, 0) << o.text;
}

// A `net-INODE` directory for this process's network namespace (uroce cluster's hosts) is
// the runtime directory within the base; another namespace's, or another user's, is not.
TEST_F(Security, RuntimeDirOfThisNetworkNamespaceIsUsed) {
    struct stat ns;
    ASSERT_EQ(stat("/proc/self/ns/net", &ns), 0);
    const std::string own = dir_ + "/net-" + std::to_string(ns.st_ino);
    const std::string other = dir_ + "/net-" + std::to_string(ns.st_ino + 1);
    ASSERT_EQ(mkdir(other.c_str(), 0700), 0);
    EXPECT_EQ(abi::runtime_dir(), dir_);
    ASSERT_EQ(mkdir(own.c_str(), 0700), 0);
    EXPECT_EQ(abi::runtime_dir(), own);
    EXPECT_EQ(abi::runtime_base_dir(), dir_);
    EXPECT_EQ(abi::socket_path("d"), own + "/d.sock");
    EXPECT_EQ(abi::check_runtime_dir(false), "");
    uid_t uid;
    gid_t gid;
    std::string why;
    if (!second_user(&uid, &gid, &why)) GTEST_SKIP() << why;
    ASSERT_EQ(chown(own.c_str(), uid, gid), 0);
    EXPECT_EQ(abi::runtime_dir(), dir_) << "not ours: not used";
}

// `su` keeps the caller's XDG_RUNTIME_DIR: another user's is not used.
TEST_F(Security, AnotherUsersXdgRuntimeDirIsNotUsed) {
    uid_t uid;
    gid_t gid;
    std::string why;
    if (!second_user(&uid, &gid, &why)) GTEST_SKIP() << why;
    ASSERT_EQ(chown(top_.c_str(), uid, gid), 0);
    unsetenv("UROCE_RUNTIME_DIR");
    setenv("XDG_RUNTIME_DIR", top_.c_str(), 1);
    EXPECT_EQ(abi::runtime_dir(), "/tmp/uroce-" + std::to_string(geteuid()));
}

// --- device sockets -----------------------------------------------------------------

// Answers one kOpen as the device does, naming `claimed_pid` as the device's pid.
void answer_open(int conn, pid_t claimed_pid) {
    abi::Response resp{};
    resp.u.open.device_pid = claimed_pid;
    std::snprintf(resp.u.open.name, sizeof resp.u.open.name, "fake");
    resp.u.open.ipv4_be = htonl(0x7f000001);
    resp.u.open.udp_port = 4791;
    int pipefd[2];
    if (pipe(pipefd) != 0) _exit(3);
    int page = memfd_create("doorbell", MFD_CLOEXEC);
    if (page < 0 || ftruncate(page, off_t(abi::doorbell_page_bytes())) != 0) _exit(3);
    int fds[3] = {eventfd(0, EFD_CLOEXEC), pipefd[0], page};
    iovec iov{&resp, sizeof resp};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof fds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
    sendmsg(conn, &msg, MSG_NOSIGNAL);
    for (int f : fds) close(f);
    close(pipefd[1]);
}

// A process posing as device `name` in the runtime directory: NAME.sock and NAME.info
// naming itself, listening as `uid` (SO_PEERCRED reports the listener's credentials) and
// answering every kOpen with `claimed_pid` as the device's pid. Returns its pid once it
// listens, or -1.
pid_t start_fake_device(const std::string& name, uid_t uid, gid_t gid, pid_t claimed_pid) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    pid_t pid = fork();
    if (pid != 0) {
        close(ready[1]);
        char c = 0;
        bool ok = read(ready[0], &c, 1) == 1 && c == 'y';
        close(ready[0]);
        return pid < 0 || !ok ? -1 : pid;
    }
    close(ready[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // gone with the test, however it ends
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", abi::socket_path(name).c_str());
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    abi::DeviceInfo info;
    info.name = name;
    info.addr = "127.0.0.1";
    info.pid = getpid();
    // Bound and described while root could write the directory; then the other user.
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        !abi::write_info(info) || (uid != geteuid() && !become(uid, gid)) || listen(fd, 8) != 0)
        _exit(3);
    (void)!write(ready[1], "y", 1);
    for (;;) {
        int conn = accept(fd, nullptr, nullptr);
        if (conn < 0) continue;
        abi::Request req{};
        while (recv(conn, &req, sizeof req, 0) > 0)
            if (req.op == abi::Op::kOpen) answer_open(conn, claimed_pid);
        close(conn);
    }
}

ibv_device* find_device(ibv_device** list, const std::string& name) {
    for (int i = 0; list && list[i]; ++i)
        if (name == ibv_get_device_name(list[i])) return list[i];
    return nullptr;
}

TEST_F(Security, AnotherUsersDeviceIsRefused) {
    uid_t uid;
    gid_t gid;
    std::string why;
    if (!second_user(&uid, &gid, &why)) GTEST_SKIP() << why;
    // It answers kOpen naming pid 1 as the device: a library that believed it would let
    // init, and through the fake device its user, at our memory.
    pid_t fake = start_fake_device("fake", uid, gid, 1);
    ASSERT_GT(fake, 0);
    children_.push_back(fake);

    int fd = abi::connect_device("fake");
    if (fd >= 0) close(fd);  // (the fake serves one connection at a time)
    EXPECT_EQ(fd, -EACCES);

    int calls = g_ptracer_calls;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_device* dev = find_device(list, "fake");
    ASSERT_NE(dev, nullptr) << "its info file names a live process, so it is listed";
    testing::internal::CaptureStderr();
    errno = 0;
    ibv_context* ctx = ibv_open_device(dev);
    int err = errno;
    std::string said = testing::internal::GetCapturedStderr();
    if (ctx) ibv_close_device(ctx);
    ibv_free_device_list(list);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_EQ(err, EACCES);
    EXPECT_EQ(said, "uroce: refusing device fake: " + abi::socket_path("fake") +
                        " is served by uid " + std::to_string(uid) + " (pid " +
                        std::to_string(fake) + "), not by you (uid 0) or root\n");
    EXPECT_EQ(g_ptracer_calls, calls) << "PR_SET_PTRACER was called with " << g_ptracer;
}

// Opens and closes device `name` through the library, which calls PR_SET_PTRACER once
// (g_ptracer then holds the pid it named).
void open_once_setting_ptracer(const char* name) {
    g_ptracer = 0;
    int calls = g_ptracer_calls;
    ibv_device** list = ibv_get_device_list(nullptr);
    ibv_device* dev = find_device(list, name);
    ASSERT_NE(dev, nullptr);
    ibv_context* ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    ASSERT_NE(ctx, nullptr) << std::strerror(errno);
    ibv_close_device(ctx);
    EXPECT_EQ(g_ptracer_calls, calls + 1);
}

// A device of our own user whose answer names another pid: PR_SET_PTRACER gets the
// socket's peer (the fake device's pid), not the number in the message.
TEST_F(Security, PtracerIsTheSocketsPeerNotThePidInTheAnswer) {
    pid_t bogus = getppid();  // alive, not the device
    pid_t fake = start_fake_device("own", geteuid(), getegid(), bogus);
    ASSERT_GT(fake, 0);
    children_.push_back(fake);

    int sock = abi::connect_device("own");
    ASSERT_GE(sock, 0) << std::strerror(-sock);
    EXPECT_EQ(abi::allow_device_ptrace(sock), fake);
    close(sock);

    ASSERT_NO_FATAL_FAILURE(open_once_setting_ptracer("own"));
    EXPECT_EQ(g_ptracer, long(fake)) << "the answer named " << bogus;
}

TEST_F(Security, PtracerIsTheRealDevicesPid) {
    start_device("real");
    abi::DeviceInfo info;
    ASSERT_TRUE(abi::read_info("real", &info));
    ASSERT_NO_FATAL_FAILURE(open_once_setting_ptracer("real"));
    EXPECT_EQ(g_ptracer, long(info.pid));
    EXPECT_NE(info.pid, getpid());
}

// The device serves its own user and root only. Its socket (0600) and directory (0700) keep
// others out; here they are opened up, as by mistake, and the device still says no.
TEST_F(Security, DeviceRefusesAnotherUsersConnection) {
    uid_t uid;
    gid_t gid;
    std::string why;
    if (!second_user(&uid, &gid, &why)) GTEST_SKIP() << why;
    start_device("real");
    std::string sock = abi::socket_path("real");
    ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
    ASSERT_EQ(chmod(sock.c_str(), 0666), 0);

    // The child's exit status: 0 refused (hung up), 1 answered, 2 could not connect.
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (!become(uid, gid)) _exit(3);
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock.c_str());
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) _exit(2);
        abi::Request req{};
        req.op = abi::Op::kDump;
        send(fd, &req, sizeof req, MSG_NOSIGNAL);
        char buf[256];
        _exit(recv(fd, buf, sizeof buf, 0) > 0 ? 1 : 0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(child, &st, 0), child);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 0) << "1: the device answered uid " << uid << "; 2: no connect";
    std::string log = read_file(dir_ + "/real.log");
    EXPECT_NE(log.find("uroced: refused a connection from uid " + std::to_string(uid)),
              std::string::npos)
        << log;

    // Its own user still gets in.
    ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
    std::string dump;
    EXPECT_EQ(abi::simple_request("real", abi::Op::kDump, &dump), 0);
    EXPECT_FALSE(dump.empty());
}

}  // namespace
}  // namespace uroce::security_test
