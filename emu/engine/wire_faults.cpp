// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Fault injection (docs/faults.md): what the wire (emu/engine/wire.h) does with a packet
// the injector (net/fault_injector.h) drops, duplicates, corrupts or holds. The injector sits
// on the wire: a sent packet is faulted after the device counted and captured it, a received one
// before (so a capture shows what each side really sent and received).
#include <cstring>
#include <sstream>

#include "emu/engine/device.h"
#include "emu/engine/wire.h"

namespace uroce::emu {

using Verdict = net::FaultInjector::Verdict;

uint64_t Wire::set_faults(const net::FaultSpec& spec) {
    uint64_t seed = faults_.configure(spec);
    cfg_.faults = faults_.spec();
    return seed;
}

// Received packets: dropped or held ones go no further (a held one comes back with the
// address it was sent to, its TOS and TTL); a duplicate is processed twice.
bool Wire::fault_rx(const net::Endpoint& from, const net::Endpoint& to, uint8_t* data, size_t len,
                    uint16_t seg, net::IpMarks marks) {
    Verdict v = faults_.decide(net::kFaultRx, data, len, from, now_ns(), to, marks);
    if (v == Verdict::kDup)
        receive(from, to, data, len, false, seg, marks);  // buffer left as it was
    return v == Verdict::kPass || v == Verdict::kDup;
}

// Sent packets (ICRC already stored): a dropped or held one frees its buffer unsent; a
// duplicate goes out twice, the copy from a buffer of its own.
bool Wire::fault_tx(uint32_t slot, size_t len, const net::Endpoint& to, net::IpMarks marks,
                    net::TxSource src) {
    uint8_t* buf = io_.tx_buffer(slot);
    const uint32_t held = faults_.held_copies();
    // (A held sent packet keeps the device's address it leaves from as its `local`.)
    Verdict v = faults_.decide(net::kFaultTx, buf, len, to, now_ns(), io_.local(src.local), marks,
                               src.port);
    // Each copy held keeps its port's socket open until it leaves (release_faults).
    for (uint32_t k = held; k < faults_.held_copies(); ++k) sources_.acquire(src.port, src.local);
    if (v == Verdict::kDrop || v == Verdict::kHeld) {
        io_.tx_free(slot);
        return false;
    }
    uint32_t copy;
    if (v == Verdict::kDup) {
        if (uint8_t* b = io_.tx_alloc(&copy)) {
            std::memcpy(b, buf, len);
            wire_send(copy, len, to, marks, src);
        }
    }
    return true;
}

// Delivers the held packets that are due: received ones to the receive path, sent ones
// to the socket (if every transmit buffer is in flight, they wait for the next turn), from
// the port they were sent from, whose socket they kept open (fault_tx): a packet on the wire
// arrives even if its QP is gone by then (an ACK the last of a program's messages needed).
void Wire::release_faults(uint64_t now) {
    faults_.release(
        now, [this](net::FaultDir d, const uint8_t* data, size_t len, const net::Endpoint& peer,
                    const net::Endpoint& local, net::IpMarks marks, uint16_t local_port) {
            if (d == net::kFaultRx) {
                // receive takes a mutable buffer but only reads it; the held copy is ours.
                receive(peer, local, const_cast<uint8_t*>(data), len, false, 0, marks);
                return true;
            }
            net::TxSource src;
            const uint16_t l = addr_local(local);
            if (!sources_.lookup(local_port, l, &src)) {  // (it holds its port: not reached)
                sources_.release(local_port, l);
                return true;
            }
            uint32_t slot;
            uint8_t* b = io_.tx_alloc(&slot);
            if (!b) return false;
            std::memcpy(b, data, len);
            wire_send(slot, len, peer, marks, src);
            sources_.release(local_port, l);
            return true;
        });
}

std::string Wire::fault_lines() const {
    std::ostringstream o;
    o << "faults " << net::format_fault_spec(cfg_.faults) << "\n";
    for (net::FaultDir d : {net::kFaultRx, net::kFaultTx}) {
        const net::FaultStats& s = faults_.stats(d);
        o << "faults " << (d == net::kFaultRx ? "rx" : "tx") << " seen " << s.seen << " dropped "
          << s.dropped << " duplicated " << s.duplicated << " reordered " << s.reordered
          << " delayed " << s.delayed << " corrupted " << s.corrupted << " released " << s.released
          << " overflow " << s.overflow << "\n";
    }
    return o.str();
}

}  // namespace uroce::emu
