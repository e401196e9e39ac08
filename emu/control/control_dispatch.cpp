// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "emu/control/control_dispatch.h"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace uroce::emu {

namespace {
template <typename T>
void reply(ControlReply* out, const T& v) {
    out->bytes.assign(reinterpret_cast<const char*>(&v), sizeof v);
}
}  // namespace

bool dispatch_control(Device& dev, ControlConn& c, const ControlMsg& msg, size_t n, int in_fd,
                      ControlReply* out) {
    if (n < offsetof(abi::Request, u)) return false;  // not our protocol
    const abi::Request& req = msg.req;
    abi::Response resp{};
    switch (req.op) {
    case abi::Op::kOpen: {
        if (c.session || req.u.open.version != abi::kProtocolVersion) {
            resp.err = EPROTO;
            break;
        }
        int f[3] = {-1, -1, -1};
        int err = 0;
        dev.refresh_port_mtu();  // a new application sees the interface's MTU of now
        dev.call([&] { c.session = dev.open_session(c.pid, f, &err); });
        resp.err = err;
        if (!err) {
            auto& o = resp.u.open;
            const DeviceConfig& cfg = dev.config();
            std::snprintf(o.name, sizeof o.name, "%s", cfg.name.c_str());
            o.ipv4_be = cfg.ipv4_be;
            const std::vector<net::Endpoint> t = cfg.gid_table();
            o.gid_count = uint32_t(t.size());
            for (size_t i = 0; i < t.size(); ++i) t[i].gid(o.gids[i]);
            o.ipv6_scope = cfg.ipv6_scope;
            o.udp_port = cfg.port;
            o.device_pid = getpid();
            o.guid_be = htobe64(dev.guid());
            o.session = c.session->id;
            out->fds = {f[0], f[1], f[2]};
        }
        break;
    }
    case abi::Op::kDump:
        dev.call([&] { out->bytes = dev.dump(); });
        if (out->bytes.size() > abi::kMaxDumpBytes) out->bytes.resize(abi::kMaxDumpBytes);
        return true;
    case abi::Op::kTrace: {
        uint64_t last = 0;
        dev.call([&] {
            last = dev.read_trace(req.u.trace.since, &out->bytes, abi::kMaxDumpBytes - 32);
        });
        out->bytes.insert(0, "last " + std::to_string(last) + "\n");
        return true;
    }
    case abi::Op::kFaults: {
        // Like kDump, no session; the spec is checked again here (the CLI checks it too).
        net::FaultSpec spec;
        std::string why;
        if (n < sizeof(abi::FaultsReq) ||
            std::memchr(msg.faults.spec, 0, sizeof msg.faults.spec) == nullptr ||
            !net::parse_fault_spec(msg.faults.spec, &spec, &why)) {
            resp.err = EINVAL;
            break;
        }
        std::string now;
        dev.call([&] {
            resp.u.faults.seed = dev.set_faults(spec);
            now = net::format_fault_spec(dev.config().faults);
        });
        out->log = "uroced: faults " + now;  // the log: how to replay
        break;
    }
    case abi::Op::kQueryPort:
        // Read again at each query (a few system calls, here on the control thread), so
        // the port follows the interface's MTU as rxe follows its netdev's.
        if (!c.session)
            resp.err = EPROTO;
        else
            resp.u.port.active_mtu = dev.refresh_port_mtu();
        break;
    case abi::Op::kCm: {
        // Connection manager (emu/cm/cm_agent.h): its own reply type.
        abi::CmResp cr{};
        if (!c.session || n != sizeof(abi::CmReq))
            cr.err = c.session ? EINVAL : EPROTO;
        else
            dev.call([&] { dev.cm().request(*c.session, msg.cm, cr, in_fd); });
        reply(out, cr);
        return true;
    }
    default:
        if (!c.session) {
            resp.err = EPROTO;
            break;
        }
        dev.call([&] { dev.handle(*c.session, req, resp, out->fds, in_fd); });
    }
    reply(out, resp);
    return true;
}

}  // namespace uroce::emu
