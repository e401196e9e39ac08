// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The control verbs on the device side: PDs, MRs, completion channels, CQs, QPs and SRQs
// created, modified, queried and destroyed on behalf of one application session, and the
// dispatch of a control request to them (and to the XRC, multicast and memory window
// verbs). Every argument is validated here; the library is not trusted. Engine thread only.
// It uses every part VerbsEnv names (emu/verbs/verbs_env.h): the object tables, the counters,
// trace, config, wire and schedule, the XRC, multicast and memory window verbs, and the
// completions, requester and responder stages.
#pragma once

#include <cstdint>
#include <vector>

#include "emu/abi/protocol.h"
#include "emu/verbs/objects.h"
#include "emu/verbs/verbs_env.h"

namespace uroce::emu {

class ControlVerbs {
public:
    explicit ControlVerbs(VerbsEnv& env) : env_(env) {}

    // `in_fd` is an fd that came with the request (or -1); the caller closes it. Fds for
    // the application are appended to `fds`.
    void handle(Session& s, const abi::Request& req, abi::Response& resp, std::vector<int>& fds,
                int in_fd);
    Mr* mr_for_key(uint32_t key) const;
    // Checks keys, PD, access and bounds of an SGE list and rewrites each address from the
    // MR's iova space to the owning process's address space.
    bool check_local_sges(const Session* owner, uint32_t pd, abi::Sge* sge, uint32_t n, bool write,
                          uint64_t* total) const;
    int destroy_srq(Session& s, uint32_t handle);
    void destroy_qp_now(uint32_t qpn);
    // The low byte of the next MR or MW key: bumped per registration, so that a stale key
    // of a reused table slot fails.
    uint8_t next_key_byte() { return key_gen_++; }

private:
    // PDs, MRs, channels and CQs (control_verbs.cpp).
    int alloc_pd(Session& s, uint32_t* pd);
    int dealloc_pd(Session& s, uint32_t pd);
    int reg_mr(Session& s, const abi::RegMrReq& r, abi::RegMrResp* out);
    int rereg_mr(Session& s, const abi::ReregMrReq& r, abi::RegMrResp* out);
    int dereg_mr(Session& s, uint32_t handle);
    // ibv_import_pd, ibv_import_mr: the session's object of that handle (ENOENT: none).
    int query_pd(Session& s, uint32_t pd, abi::PdResp* out);
    int query_mr(Session& s, uint32_t handle, abi::QueryMrResp* out);
    int advise_mr(Session& s, const abi::AdviseMrReq& r, abi::AdviseMrResp* out);
    int create_channel(Session& s, uint32_t* handle, int* fd);
    int destroy_channel(Session& s, uint32_t handle);
    int create_cq(Session& s, const abi::CreateCqReq& r, abi::CreateCqResp* out, int* fd);
    int destroy_cq(Session& s, uint32_t handle);
    int resize_cq(Session& s, const abi::ResizeCqReq& r, int fd,
                  abi::ResizeCqResp* out);  // cq_resize.cpp
    // QPs (qp_verbs.cpp).
    int create_qp(Session& s, const abi::CreateQpReq& r, abi::CreateQpResp* out, int fds[2]);
    int modify_qp(Session& s, const abi::ModifyQpReq& r);
    int query_qp(Session& s, const abi::QueryQpReq& r, abi::QueryQpResp* out);
    int destroy_qp(Session& s, uint32_t qpn, uint64_t cookie = 0);
    // The QP sends from UDP source port `port` from now (0: none, it is going).
    // `local`: the device's address it sends from (Wire::local_of_gid of its AV's sgid_index).
    void set_udp_sport(Qp& qp, uint16_t port, uint16_t local);
    // SRQs (srq.cpp).
    int create_srq(Session& s, const abi::CreateSrqReq& r, abi::CreateSrqResp* out, int* fd);
    int modify_srq(Session& s, const abi::ModifySrqReq& r);
    int query_srq(Session& s, uint32_t handle, abi::QuerySrqResp* out);
    // One trace line for a control call (emu/control/device_trace.cpp); `before`: the QP's
    // state before a kModifyQp.
    void trace_call(const Session& s, const abi::Request& req, const abi::Response& resp,
                    ibv_qp_state before);

    VerbsEnv& env_;
    uint8_t key_gen_ = 0;  // low byte of MR and MW keys, bumped per registration
};

}  // namespace uroce::emu
