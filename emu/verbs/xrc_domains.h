// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// XRC on the device side (docs/xrc.md): domains shared through a file's inode and the
// handles processes hold on them, TGT QPs that several processes hold at once
// (ibv_open_qp), what happens when an XRC object goes, and the XRCETH check of a request
// at a TGT QP. Engine thread only. Of VerbsEnv (emu/verbs/verbs_env.h) it uses the XRC
// domain, handle, QP and SRQ tables, the counters and trace, the control verbs (to destroy a
// QP), the completions stage (async events) and the RC responder (a TGT QP's requests).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "emu/abi/protocol.h"
#include "emu/verbs/objects.h"
#include "emu/verbs/verbs_env.h"
#include "net/headers.h"

namespace uroce::emu {

class XrcDomains {
public:
    explicit XrcDomains(VerbsEnv& env) : env_(env) {}

    int open_xrcd(Session& s, int fd, int oflags, uint32_t* handle);
    int close_xrcd(Session& s, uint32_t handle);
    int open_qp(Session& s, const abi::OpenQpReq& r, abi::OpenQpResp* out);
    // Whether the session may use the QP: its owner, or for a TGT QP one of its holders.
    bool holds(const Session& s, const Qp* qp) const;
    const Qp::Holder* find_hold(const Session& s, const Qp& qp, uint64_t cookie) const;
    // A handle lets go (cookie 0: any of the session's); the last destroys the QP.
    void release_qp(Session& s, uint32_t qpn, uint64_t cookie = 0);
    void object_gone(uint32_t xrcd, uint32_t handle);
    void srq_gone(uint32_t srqn);  // TGT QPs drop a message in progress on it
    void receive(Qp& qp, const net::Packet& p);
    void post_qp_async(Qp& qp, ibv_event_type type);  // to every holder

private:
    VerbsEnv& env_;
};

}  // namespace uroce::emu
