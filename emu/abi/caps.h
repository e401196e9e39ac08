// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// The device's limits, reported by ibv_query_device/ibv_query_port and enforced by
// the device. One place so the library and the device agree.
#pragma once

#include <cstdint>

namespace uroce::abi {

constexpr uint32_t kMaxQp = 65536;
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
constexpr uint32_t kMaxInline = 512;
constexpr uint32_t kMaxCq = 65536;
constexpr uint32_t kMaxCqe = (1 << 20) - 1;  // the largest cqe accepted (ring: 2^20 slots)
constexpr uint32_t kMaxMr = 1 << 16;
constexpr uint32_t kMaxMw = 1 << 16;
constexpr uint64_t kMaxMrSize = uint64_t(1) << 40;
constexpr uint32_t kMaxPd = 65536;
constexpr uint32_t kMaxQpRdAtom = 16;
constexpr uint32_t kMaxSrq = 65536;
constexpr uint32_t kMaxSrqWr = 16384;
constexpr uint32_t kMaxXrcd = 4096;
constexpr uint32_t kMaxAh = 1 << 20;  // AHs live in the library; this is only reported
constexpr uint32_t kMaxChannels = 4096;
// Multicast: each group a device has joined is a socket (docs/multicast.md); 56 QPs per
// group as rxe.
constexpr uint32_t kMaxMcastGrp = 1024;
constexpr uint32_t kMaxMcastQpAttach = 56;
constexpr uint32_t kMaxTotalMcastQpAttach = kMaxMcastGrp * kMaxMcastQpAttach;
constexpr uint32_t kMaxMsgSize = 1u << 31;
// An RDMA ATOMIC WRITE carries exactly 8 bytes; they travel in the send slot as inline data
// whatever the QP's max_inline_data (every slot's data area holds at least 64 bytes).
constexpr uint32_t kAtomicWriteLen = 8;
// ibv_device_attr_ex.device_cap_flags_ex: the kernel's IB_UVERBS_DEVICE_ATOMIC_WRITE
// (include/uapi/rdma/ib_user_verbs.h), which rdma-core's verbs.h does not name.
constexpr uint64_t kDeviceAtomicWrite = uint64_t(1) << 40;
// ibv_odp_caps' IBV_ODP_SUPPORT_FLUSH and IBV_ODP_SUPPORT_ATOMIC_WRITE (rdma-core 52's verbs.h).
constexpr uint32_t kOdpSupportFlush = 1u << 6;
constexpr uint32_t kOdpSupportAtomicWrite = 1u << 7;
constexpr uint32_t kVendorId = 0xffffff;    // no IEEE OUI; rxe reports the same
constexpr uint32_t kVendorPartId = 0x7572;  // "ur"
constexpr uint32_t kHwVer = 1;
constexpr const char* kFwVer = "0.1.0";
// GID table: entry 0 is the device's RoCEv2 GID; the others exist and are empty (zero), as
// unused entries of a hardware table are.
constexpr uint32_t kGidTblLen = 16;
constexpr uint32_t kFirstQpn = 0x11;  // 0 and 1 are the special QPs, as on hardware

}  // namespace uroce::abi
