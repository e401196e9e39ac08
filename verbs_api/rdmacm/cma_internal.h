// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// What the cma_*.cpp files of the drop-in librdmacm share: the tables of devices and ids, and
// the helpers more than one of them calls. The objects themselves are in internal.h.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "emu/abi/cm_protocol.h"
#include "verbs_api/rdmacm/cma_addr.h"
#include "verbs_api/rdmacm/internal.h"

namespace uroce::rdmacm {

constexpr uint32_t kLocalTag = 0xffffffff;   // dev_tag of events the library writes itself
constexpr uint32_t kMarkerTag = 0xfffffffe;  // dev_tag of a channel's marker (Channel::held)
constexpr uint8_t kHopLimit = 64;
constexpr uint8_t kPacketLifeTime = 16;  // as the kernel's RDMA CM reports for RoCE
constexpr uint8_t kRate = 16;            // 100 Gb/s (IB rate enum), what the port reports
// An application's event channel may collect many events before it reads (a listener's
// connection requests): room for about 3,000. A synchronous id's own channel holds its one
// pending event, so the default pipe does.
constexpr int kChannelPipeBytes = 1 << 20;
constexpr uint32_t kMcastQpn = 0xffffff;  // the QPN of a multicast group's UD parameters
// enum rdma_cm_event_type's values from rdma-core 60, newer than the build's header.
constexpr int kEventAddrinfoResolved = 16;
constexpr int kEventUser = 18;  // rdma_write_cm_event's; param.arg in the record's private_data

// The tables (cma_devices.cpp), guarded by g_mu: the devices, and the ids by
// (dev_tag, handle) (and by (kLocalTag, lid) for the events the library makes itself).
extern std::mutex g_mu;
extern std::vector<std::unique_ptr<DevConn>>& g_devs;
extern std::map<uint64_t, Id*>& g_ids;
extern uint32_t g_next_lid;
extern std::atomic<uint32_t> g_next_chan;
extern std::mutex g_chan_mu;  // ensure_channel

inline uint64_t key(uint32_t tag, uint32_t handle) { return (uint64_t(tag) << 32) | handle; }
inline bool is_ud(const Id* id) { return id->id.qp_type == IBV_QPT_UD; }
uint32_t random_psn();

// Devices (cma_devices.cpp).
DevConn* dev_by_tag(uint32_t tag);
DevConn* dev_by_addr(const net::Endpoint& a);
std::vector<DevConn*> all_devs();
int ensure_open(DevConn& d);
ibv_xrcd* dev_xrcd(DevConn& d);
int cm_call(DevConn& d, abi::CmReq& r, abi::CmResp* out = nullptr, int fd_in = -1);
abi::CmReq cm_req(abi::CmOp op, uint32_t handle = 0);

// Channels and events (cma_channels.cpp).
Channel* new_channel(int pipe_size);
bool try_ref_channel(Channel* c);
void unref_channel(Channel* c);
void free_channel(Channel* c);
int ensure_channel(Channel* c, DevConn* d);
void write_local(Channel* c, const abi::CmEventRec& rec);
// An event the library makes itself (arg: RDMA_CM_EVENT_USER's param.arg).
void post_local(Id* id, rdma_cm_event_type type, int status, uint64_t arg = 0);
int next_record(Channel* c, abi::CmEventRec* rec);
std::vector<uint64_t> id_keys(const Id* id);
void move_events(Id* id, Channel* from, Channel* to);
void drop_events(Id* id, Channel* c);
void fill_ud(Event* e, Id* id, const abi::CmEventRec& rec);
void fill_conn(Event* e, const abi::CmEventRec& rec);
Id* make_child(Id* l, const abi::CmEventRec& rec);

// Ids and addresses (cma_ids.cpp).
void register_key(uint32_t tag, uint32_t handle, Id* id);
Id* new_id(Channel* chan, void* context, rdma_port_space ps, ibv_qp_type qp_type);
uint16_t port_of(const sockaddr* sa);  // network order; 0 for a family we do not know
socklen_t addr_len(const sockaddr* sa);
void set_port(sockaddr_storage* ss, uint16_t port);
void set_gid(const net::Endpoint& a, ibv_gid* gid);
void v4_gid(uint32_t ip, ibv_gid* gid);  // ::ffff:ip (ip in network order)
uint8_t sgid_index(const Id* id);        // the GID-table index of the id's source GID
void attach(Id* id, DevConn* d);
void set_path(Id* id, const net::Endpoint& local, const net::Endpoint& remote);
int bind_request(Id* id, DevConn* d, const net::Endpoint* addr, uint16_t port, abi::CmResp* resp);
int bind_on(Id* id, DevConn* d, const net::Endpoint* addr, uint16_t port);
bool effective_afonly(const Id* id);
uint16_t random_port();
bool local_address(const net::Endpoint& a);
DevConn* route_dev(const net::Endpoint& dst, int* why);
bool default_source(sockaddr_storage* sa);
// A link-local address from the CM (no scope on the wire) on device d: d's interface.
net::Endpoint on_dev(const uint8_t* addr16, const DevConn* d);

// QP transitions (cma_qp.cpp).
int modify_to(Id* id, ibv_qp_state st, uint8_t resp_res, uint8_t init_depth);
int modify_rtr(Id* id, uint8_t resp_res);
int modify_rts(Id* id, uint8_t init_depth);
int modify_err(Id* id);
int init_ud_qp(Id* id, ibv_qp* qp);
int init_conn_qp(Id* id, ibv_qp* qp);
int complete(Id* id);

// Connections (cma_connect.cpp).
int establish(Id* id);
int listen_on_dev(Id* id, DevConn* d);

// Wildcard listeners and devices started after them (waiting_listeners.cpp). g_listen_mu
// guards every Id's listens and is taken before g_mu.
extern std::mutex g_listen_mu;
void watch_for_devices();  // from the first wildcard listener on

// Multicast (cma_mcast.cpp).
int join_multicast(Id* id, const sockaddr* addr, socklen_t len, uint16_t flags, void* context);
Mcast* take_mcast_event(Id* id, uint32_t serial);
void fill_mcast(Event* e, const Id* id, const Mcast& mc);

}  // namespace uroce::rdmacm
