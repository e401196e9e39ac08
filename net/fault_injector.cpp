// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include "net/fault_injector.h"

#include <arpa/inet.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "net/headers.h"

namespace uroce::net {

namespace {

bool parse_probability(const std::string& key, const std::string& v, double* out,
                       std::string* err) {
    char* end = nullptr;
    errno = 0;
    double p = v.empty() ? NAN : std::strtod(v.c_str(), &end);
    if (v.empty() || *end != 0 || errno || !std::isfinite(p) || p < 0 || p > 1) {
        *err = key + ": '" + v + "' is not a probability in [0, 1]";
        return false;
    }
    *out = p;
    return true;
}

bool parse_unsigned(const std::string& key, const std::string& v, uint64_t max, uint64_t* out,
                    std::string* err) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = 0;
    bool ok = !v.empty() && v[0] >= '0' && v[0] <= '9';
    if (ok) n = std::strtoull(v.c_str(), &end, 0);
    if (!ok || *end != 0 || errno || n > max) {
        *err = key + ": '" + v + "' is not an integer in [0, " + std::to_string(max) + "]";
        return false;
    }
    *out = n;
    return true;
}

// Probability as a threshold on a uniform 64-bit draw.
uint64_t threshold(double p) {
    if (p <= 0) return 0;
    if (p >= 1) return ~uint64_t(0);
    return uint64_t(std::ldexp(p, 64));
}

uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

std::string number(double p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", p);
    return buf;
}

}  // namespace

bool parse_fault_spec(const std::string& text, FaultSpec* out, std::string* err) {
    FaultSpec s;
    if (text.empty() || text == "off" || text == "none") {
        *out = s;
        return true;
    }
    unsigned seen = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t comma = text.find(',', pos);
        if (comma == std::string::npos) comma = text.size();
        std::string item = text.substr(pos, comma - pos);
        pos = comma + 1;
        size_t eq = item.find('=');
        if (item.empty()) {
            *err = "empty item in '" + text + "'";
            return false;
        }
        if (eq == std::string::npos) {
            *err = "'" + item +
                   "' is not key=value (keys: loss, dup, reorder, delay, corrupt, "
                   "seed, dir, peer)";
            return false;
        }
        std::string key = item.substr(0, eq), val = item.substr(eq + 1);
        static const char* const kKeys[] = {"loss",    "dup",  "reorder", "delay",
                                            "corrupt", "seed", "dir",     "peer"};
        constexpr unsigned kNumKeys = sizeof kKeys / sizeof kKeys[0];
        unsigned k = 0;
        while (k < kNumKeys && key != kKeys[k]) ++k;
        if (k == kNumKeys) {
            *err = "unknown key '" + key +
                   "' (keys: loss, dup, reorder, delay, corrupt, seed, dir, peer)";
            return false;
        }
        if (seen & (1u << k)) {
            *err = "'" + key + "' given twice";
            return false;
        }
        seen |= 1u << k;
        uint64_t n = 0;
        bool ok = true;
        switch (k) {
        case 0: ok = parse_probability(key, val, &s.loss, err); break;
        case 1: ok = parse_probability(key, val, &s.dup, err); break;
        case 2: ok = parse_probability(key, val, &s.reorder, err); break;
        case 3:
            ok = parse_unsigned(key + " (microseconds)", val, 1000000, &n, err);
            s.delay_us = uint32_t(n);
            break;
        case 4: ok = parse_probability(key, val, &s.corrupt, err); break;
        case 5:
            ok = parse_unsigned(key, val, ~uint64_t(0), &s.seed, err);
            s.has_seed = true;
            break;
        case 6:
            if (val == "rx")
                s.dir = kFaultRx;
            else if (val == "tx")
                s.dir = kFaultTx;
            else if (val == "both")
                s.dir = kFaultBoth;
            else {
                *err = "dir: '" + val + "' is not rx, tx or both";
                ok = false;
            }
            break;
        case 7: {
            in_addr a{};
            ok = inet_pton(AF_INET, val.c_str(), &a) == 1 && a.s_addr != 0;
            if (!ok) *err = "peer: '" + val + "' is not an IPv4 address";
            s.peer_be = a.s_addr;
            break;
        }
        }
        if (!ok) return false;
        if (comma == text.size()) break;
    }
    *out = s;
    return true;
}

std::string format_fault_spec(const FaultSpec& s) {
    if (!s.any()) return "off";
    std::string o;
    auto add = [&](const char* k, const std::string& v) {
        if (!o.empty()) o += ',';
        o += k;
        o += '=';
        o += v;
    };
    if (s.loss > 0) add("loss", number(s.loss));
    if (s.dup > 0) add("dup", number(s.dup));
    if (s.reorder > 0) add("reorder", number(s.reorder));
    if (s.delay_us > 0) add("delay", std::to_string(s.delay_us));
    if (s.corrupt > 0) add("corrupt", number(s.corrupt));
    if (s.has_seed) add("seed", std::to_string(s.seed));
    add("dir", s.dir == kFaultRx ? "rx" : s.dir == kFaultTx ? "tx" : "both");
    if (s.peer_be) {
        char a[INET_ADDRSTRLEN];
        in_addr in{s.peer_be};
        add("peer", inet_ntop(AF_INET, &in, a, sizeof a));
    }
    return o;
}

FaultInjector::FaultInjector() = default;
FaultInjector::~FaultInjector() = default;

uint64_t FaultInjector::configure(const FaultSpec& spec) {
    spec_ = spec;
    if (!spec_.has_seed) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
        spec_.seed = splitmix64(x) % 1000000000ull;  // short enough to type back in
        spec_.has_seed = true;
    }
    // Independent streams per direction: rx decisions do not depend on how many packets
    // were sent in between, and the reverse.
    rng_[0] = spec_.seed ^ 0x7278000000000000ull;  // "rx"
    rng_[1] = spec_.seed ^ 0x7478000000000000ull;  // "tx"
    thr_loss_ = threshold(spec_.loss);
    thr_dup_ = threshold(spec_.dup);
    thr_reorder_ = threshold(spec_.reorder);
    thr_corrupt_ = threshold(spec_.corrupt);
    delay_ns_ = uint64_t(spec_.delay_us) * 1000;
    bool on = spec_.any();
    if (on && (spec_.reorder > 0 || spec_.delay_us > 0) && !mem_) {
        mem_.reset(new uint8_t[size_t(kSlots) * kSlotBytes]);
        slots_.reset(new Slot[kSlots]);
        free_.reset(new uint32_t[kSlots]);
        pending_.reset(new uint32_t[kSlots]);
        due_.reset(new uint32_t[kSlots]);
        for (uint32_t i = 0; i < kSlots; ++i) free_[i] = kSlots - 1 - i;
        nfree_ = kSlots;
    }
    armed_[0] = on && (spec_.dir & kFaultRx);
    armed_[1] = on && (spec_.dir & kFaultTx);
    return spec_.seed;
}

uint64_t FaultInjector::draw(FaultDir d) { return splitmix64(rng_[d == kFaultTx]); }

FaultInjector::Verdict FaultInjector::decide(FaultDir d, uint8_t* data, size_t len,
                                             const Endpoint& peer, uint64_t now_ns,
                                             const Endpoint& local, IpMarks marks,
                                             uint16_t local_port) {
    // Another peer's packets are not this spec's (not even seen).
    if (spec_.peer_be && peer.v4_be() != spec_.peer_be) return Verdict::kPass;
    const int i = d == kFaultTx;
    FaultStats& st = stats_[i];
    ++st.seen;
    uint64_t seq = ++seq_[i];
    // Packets reordered earlier that this one (and those before it) have now overtaken.
    if (waiting_[i] && seq >= min_after_[i]) promote(uint32_t(i), now_ns);

    if (hit(d, thr_loss_)) {
        ++st.dropped;
        return Verdict::kDrop;
    }
    if (hit(d, thr_corrupt_)) {
        // One bit after the BTH (extension headers, payload, pad or the ICRC itself): the
        // packet still decodes, and the ICRC, which covers all of these, no longer matches.
        // One bit, not a random byte: the receiver solves the ICRC for the sender's unseen
        // IPv4 ID, which lets a random corruption through once in 65,536 but catches every
        // single-bit error (net/icrc_id.h), so "corrupted" always means "dropped bad_icrc".
        uint64_t r = draw(d);
        size_t from = len > kBthLen ? kBthLen : 0;
        if (len > from) {
            data[from + size_t(r % (len - from))] ^= uint8_t(1u << ((r >> 32) % 8));
            ++st.corrupted;
        }
    }
    uint8_t copies = 1;
    if (hit(d, thr_dup_)) {
        copies = 2;
        ++st.duplicated;
    }
    if (hit(d, thr_reorder_)) {
        uint64_t later = 1 + draw(d) % kReorderMaxLater;
        if (hold(d, data, len, peer, local, marks, local_port, now_ns + delay_ns_ + kReorderMaxNs,
                 seq + later, copies)) {
            ++st.reordered;
            return Verdict::kHeld;
        }
        ++st.overflow;
    } else if (delay_ns_) {
        if (hold(d, data, len, peer, local, marks, local_port, now_ns + delay_ns_, 0, copies)) {
            ++st.delayed;
            return Verdict::kHeld;
        }
        ++st.overflow;
    }
    return copies == 2 ? Verdict::kDup : Verdict::kPass;
}

bool FaultInjector::hold(FaultDir d, const uint8_t* data, size_t len, const Endpoint& peer,
                         const Endpoint& local, IpMarks marks, uint16_t local_port, uint64_t due,
                         uint64_t after_seq, uint8_t copies) {
    if (!nfree_ || len > kSlotBytes) return false;
    uint32_t n = free_[--nfree_];
    Slot& s = slots_[n];
    std::memcpy(buffer(n), data, len);
    s.due_ns = due;
    s.order = next_order_++;
    s.after_seq = after_seq;
    s.peer = peer;
    s.local = local;
    s.marks = marks;
    s.local_port = local_port;
    s.len = uint32_t(len);
    s.dir = d;
    s.copies = copies;
    copies_held_ += copies;
    s.pending_pos = npending_;
    pending_[npending_++] = n;
    if (after_seq) {
        const int i = d == kFaultTx;
        if (!waiting_[i]++ || after_seq < min_after_[i]) min_after_[i] = after_seq;
    }
    return true;
}

// Reordered packets of direction i whose later packets have gone by become ordinary held
// packets: due after the configured delay, behind everything that went in before now.
void FaultInjector::promote(uint32_t i, uint64_t now_ns) {
    uint64_t seq = seq_[i], min_after = ~uint64_t(0);
    uint32_t left = 0;
    for (uint32_t k = 0; k < npending_; ++k) {
        Slot& s = slots_[pending_[k]];
        if (!s.after_seq || uint32_t(s.dir == kFaultTx) != i) continue;
        if (s.after_seq <= seq) {
            s.after_seq = 0;
            s.due_ns = std::min(s.due_ns, now_ns + delay_ns_);
            s.order = next_order_++;
        } else {
            ++left;
            min_after = std::min(min_after, s.after_seq);
        }
    }
    waiting_[i] = left;
    min_after_[i] = min_after;
}

uint64_t FaultInjector::next_release_in(uint64_t now_ns) const {
    uint64_t best = ~uint64_t(0);
    for (uint32_t k = 0; k < npending_; ++k) best = std::min(best, slots_[pending_[k]].due_ns);
    return best > now_ns ? best - now_ns : 0;
}

uint32_t FaultInjector::collect_due(uint64_t now_ns) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < npending_; ++k)
        if (slots_[pending_[k]].due_ns <= now_ns) due_[n++] = pending_[k];
    Slot* s = slots_.get();
    std::sort(due_.get(), due_.get() + n, [s](uint32_t a, uint32_t b) {
        return s[a].due_ns != s[b].due_ns ? s[a].due_ns < s[b].due_ns : s[a].order < s[b].order;
    });
    return n;
}

void FaultInjector::free_slot(uint32_t n) {
    Slot& s = slots_[n];
    if (s.after_seq) --waiting_[s.dir == kFaultTx];  // released at its deadline, not overtaken
    s.after_seq = 0;
    uint32_t pos = s.pending_pos;
    uint32_t last = pending_[--npending_];
    pending_[pos] = last;
    slots_[last].pending_pos = pos;
    free_[nfree_++] = n;
}

}  // namespace uroce::net
