// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Fault injection on the wire: loss, duplication, reordering, delay and corruption of the
// RoCEv2 datagrams a device receives and/or sends (docs/faults.md).
//
// Seeded: each direction draws from its own generator seeded from the spec's seed, so the
// same seed makes the same decisions for the same sequence of packets, and a failing run
// can be replayed. Nothing is allocated per packet: a held (delayed or reordered) packet is
// copied into a fixed pool of slots allocated once, by configure(). Not thread safe: the
// device calls it from its engine thread only.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "net/endpoint.h"
#include "net/ip_marks.h"

namespace uroce::net {

enum FaultDir : uint8_t { kFaultRx = 1, kFaultTx = 2, kFaultBoth = 3 };

struct FaultSpec {
    double loss = 0;        // probability a packet is dropped
    double dup = 0;         // ... delivered twice
    double reorder = 0;     // ... held back until 1-4 later packets overtook it (100 us at most)
    double corrupt = 0;     // ... has one bit after the BTH flipped (the ICRC check fails)
    uint32_t delay_us = 0;  // every packet is held this long (order kept)
    uint64_t seed = 0;
    bool has_seed = false;  // false: configure() picks a seed (see FaultInjector::spec())
    uint8_t dir = kFaultBoth;
    // Only packets to or from this IPv4 address (network order) are faulted; 0: all. A link
    // between two hosts of a cluster (docs/cluster.md) is each one's spec with the other's.
    uint32_t peer_be = 0;

    bool any() const { return loss > 0 || dup > 0 || reorder > 0 || corrupt > 0 || delay_us > 0; }
};

// Parses a comma-separated list of key=value: loss=P, dup=P, reorder=P, corrupt=P (P in
// [0, 1]), delay=US (integer microseconds, at most 1000000), seed=N (unsigned 64-bit),
// dir=rx|tx|both, peer=IPV4. "off" (or an empty string) means no faults. On error returns false and
// puts a one-line reason in *err; *out is then unchanged.
bool parse_fault_spec(const std::string& text, FaultSpec* out, std::string* err);

// Canonical form, parseable again: "loss=0.02,dup=0.02,seed=7,dir=both", or "off".
std::string format_fault_spec(const FaultSpec& s);

// What happened to the packets of one direction since the device started.
struct FaultStats {
    uint64_t seen = 0;  // packets the injector looked at
    uint64_t dropped = 0;
    uint64_t duplicated = 0;
    uint64_t reordered = 0;
    uint64_t delayed = 0;
    uint64_t corrupted = 0;
    uint64_t released = 0;  // held packets delivered later (each copy of a duplicate counts)
    uint64_t overflow = 0;  // would have been held, but every slot was taken: passed at once
};

class FaultInjector {
public:
    static constexpr size_t kSlotBytes = 4608;       // largest datagram (as UdpUring::kBufSize)
    static constexpr uint32_t kSlots = 1024;         // packets held at once, both directions
    static constexpr uint32_t kReorderMaxLater = 4;  // overtaken by 1..4 later packets
    static constexpr uint64_t kReorderMaxNs = 100 * 1000;  // or released after 100 us

    enum class Verdict : uint8_t {
        kPass,  // deliver it (its bytes may have been corrupted in place)
        kDrop,  // discard it
        kHeld,  // a copy is held and comes back through release(); discard the original
        kDup,   // deliver it twice
    };

    FaultInjector();
    ~FaultInjector();
    FaultInjector(const FaultInjector&) = delete;
    FaultInjector& operator=(const FaultInjector&) = delete;

    // Replaces the configuration and reseeds (a spec without a seed gets one from the
    // clock). Packets already held are still released on time. Returns the seed in use.
    uint64_t configure(const FaultSpec& spec);
    const FaultSpec& spec() const { return spec_; }  // has_seed is always true here
    const FaultStats& stats(FaultDir d) const { return stats_[d == kFaultTx]; }

    // The hot-path test: false (one predictable branch) when no fault applies to `d`.
    bool armed(FaultDir d) const { return armed_[d == kFaultTx]; }

    // Decides the fate of one datagram (BTH ... ICRC) travelling in direction d to or from
    // `peer`; `local` (received packets) is the address it was sent to, the device's own
    // or a multicast group's, `marks` the IPv4 TOS and TTL it was sent or received with, and
    // `local_port` (sent packets) the UDP port it leaves from: all are handed back with a held
    // packet. Call only when armed(d).
    Verdict decide(FaultDir d, uint8_t* data, size_t len, const Endpoint& peer, uint64_t now_ns,
                   const Endpoint& local = {}, IpMarks marks = {}, uint16_t local_port = 0);

    bool holding() const { return npending_ != 0; }
    uint32_t held_copies() const { return copies_held_; }  // a held duplicate is two
    // Nanoseconds until the next held packet is due; 0 if one is due now. Only when holding().
    uint64_t next_release_in(uint64_t now_ns) const;

    // Hands every due packet to fn(dir, data, len, peer) (or fn(dir, data, len, peer, local,
    // marks, local_port) if fn takes them), earliest due first (a duplicated one twice). fn returns
    // false when it cannot take the packet now (no transmit buffer): the packet stays held and the
    // pass ends. fn may call decide() (a released request that makes the device answer), so the
    // pass works on a snapshot of the due packets.
    template <typename Fn>
    void release(uint64_t now_ns, Fn&& fn) {
        uint32_t n = collect_due(now_ns);
        for (uint32_t i = 0; i < n; ++i) {
            Slot& s = slots_[due_[i]];
            while (s.copies) {
                bool taken;
                if constexpr (std::is_invocable_v<Fn&, FaultDir, const uint8_t*, size_t,
                                                  const Endpoint&, const Endpoint&, IpMarks,
                                                  uint16_t>)
                    taken = fn(FaultDir(s.dir), buffer(due_[i]), size_t(s.len), s.peer, s.local,
                               s.marks, s.local_port);
                else
                    taken = fn(FaultDir(s.dir), buffer(due_[i]), size_t(s.len), s.peer);
                if (!taken) return;
                --s.copies;
                --copies_held_;
                ++stats_[s.dir == kFaultTx].released;
            }
            free_slot(due_[i]);
        }
    }

private:
    struct Slot {
        uint64_t due_ns = 0;     // when it may go (a reordered packet: at the latest)
        uint64_t order = 0;      // tie-break among packets due at once: the order they went in
        uint64_t after_seq = 0;  // reordered: goes once its direction saw this many packets
        Endpoint peer;
        Endpoint local;
        IpMarks marks{};
        uint16_t local_port = 0;
        uint32_t len = 0;
        uint32_t pending_pos = 0;
        uint8_t dir = 0;
        uint8_t copies = 0;
    };

    uint8_t* buffer(uint32_t slot) { return mem_.get() + size_t(slot) * kSlotBytes; }
    bool hold(FaultDir d, const uint8_t* data, size_t len, const Endpoint& peer,
              const Endpoint& local, IpMarks marks, uint16_t local_port, uint64_t due,
              uint64_t after_seq, uint8_t copies);
    void promote(uint32_t di, uint64_t now_ns);
    uint32_t collect_due(uint64_t now_ns);
    void free_slot(uint32_t slot);
    uint64_t draw(FaultDir d);
    bool hit(FaultDir d, uint64_t threshold) { return threshold && draw(d) < threshold; }

    FaultSpec spec_;
    bool armed_[2] = {false, false};  // [0] rx, [1] tx
    uint64_t rng_[2] = {0, 0};
    uint64_t thr_loss_ = 0, thr_dup_ = 0, thr_reorder_ = 0, thr_corrupt_ = 0;
    uint64_t delay_ns_ = 0;
    FaultStats stats_[2];
    uint64_t seq_[2] = {0, 0};  // packets seen per direction
    uint64_t next_order_ = 0;
    uint32_t waiting_[2] = {0, 0};    // reordered packets waiting to be overtaken
    uint64_t min_after_[2] = {0, 0};  // smallest after_seq among them

    // Preallocated by the first configure() that can hold packets.
    std::unique_ptr<uint8_t[]> mem_;
    std::unique_ptr<Slot[]> slots_;
    std::unique_ptr<uint32_t[]> free_;  // stack of free slot numbers
    uint32_t nfree_ = 0;
    std::unique_ptr<uint32_t[]> pending_;  // held slot numbers, unordered
    uint32_t npending_ = 0;
    uint32_t copies_held_ = 0;         // what release() will still hand out
    std::unique_ptr<uint32_t[]> due_;  // scratch for release()
};

}  // namespace uroce::net
