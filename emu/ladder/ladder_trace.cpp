// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Trace lines onto the ladder's lanes (ladder_trace.h).
#include "emu/ladder/ladder_trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <unordered_map>

#include "net/opcodes.h"

namespace uroce::ladder {

namespace {

struct TraceQp {
    int32_t pid = -1;
    int64_t rq_psn = -1, sq_psn = -1;
    std::vector<LaneEvent> events;  // lane filled in once the device is placed
};

// "HH:MM:SS.uuuuuu" to microseconds of the day; -1 if it is not one.
int64_t time_of_day(const std::string& s) {
    unsigned h, m, sec, us;
    if (s.size() != 15 || std::sscanf(s.c_str(), "%2u:%2u:%2u.%6u", &h, &m, &sec, &us) != 4)
        return -1;
    return ((int64_t(h) * 60 + m) * 60 + sec) * 1000000 + us;
}

// The hex number after `key` in `text`, or -1.
int64_t field(const std::string& text, const char* key) {
    size_t at = text.find(key);
    if (at == std::string::npos) return -1;
    return std::strtoll(text.c_str() + at + std::strlen(key), nullptr, 16);
}

}  // namespace

void apply_trace_lines(const std::vector<std::string>& lines, Ladder* lad, TraceStats* st) {
    const int64_t kDay = 86400ll * 1000000;
    int64_t day0 = lad->t_first_us - lad->t_first_us % kDay;
    std::map<std::pair<std::string, uint32_t>, TraceQp> qps;
    for (const std::string& line : lines) {
        ++st->lines;
        size_t sp1 = line.find(' ');
        size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
        if (sp2 == std::string::npos) continue;
        int64_t tod = time_of_day(line.substr(0, sp1));
        if (tod < 0) continue;
        std::string dev = line.substr(sp1 + 1, sp2 - sp1 - 1);
        std::string text = line.substr(sp2 + 1);
        // The capture's day; a trace line of just before midnight belongs to the day before.
        int64_t t = day0 + tod;
        if (t - lad->t_first_us > kDay / 2) t -= kDay;
        if (lad->t_first_us - t > kDay / 2) t += kDay;
        int32_t pid = -1;
        std::string rest = text;
        if (std::sscanf(text.c_str(), "pid %d ", &pid) == 1)
            rest = text.substr(text.find(' ', 4) + 1);
        size_t q = rest.find("qp 0x");
        if (q == std::string::npos || rest.rfind("cm ", 0) == 0) continue;
        uint32_t qpn = uint32_t(std::strtoul(rest.c_str() + q + 5, nullptr, 16));
        TraceQp& tq = qps[{dev, qpn}];
        std::string what;
        bool error = false;
        if (rest.rfind("create_qp ", 0) == 0) {
            tq.pid = pid;
            size_t ty = rest.find(" type ");
            what = "created" + (ty == std::string::npos
                                    ? std::string()
                                    : " " + rest.substr(ty + 6, rest.find(' ', ty + 6) - ty - 6));
        } else if (rest.rfind("open_qp ", 0) == 0) {
            if (tq.pid < 0) tq.pid = pid;
            what = "opened by pid " + std::to_string(pid);
        } else if (rest.rfind("modify_qp ", 0) == 0) {
            size_t after = rest.find(' ', q + 5);
            std::string tail = after == std::string::npos ? "" : rest.substr(after + 1);
            if (tail.rfind("failed", 0) == 0) {
                what = "modify_qp " + tail;
                error = true;
            } else {
                what = tail.substr(0, tail.find(" mask"));
                if (int64_t v = field(tail, "rq_psn 0x"); v >= 0) tq.rq_psn = v;
                if (int64_t v = field(tail, "sq_psn 0x"); v >= 0) tq.sq_psn = v;
            }
        } else if (rest.rfind("qp 0x", 0) == 0 || rest.rfind("async ", 0) == 0) {
            // The device's own lines: state changes, error completions, refused requests.
            size_t after = rest.find(' ', q + 5);
            what = rest.rfind("async ", 0) == 0
                       ? rest
                       : (after == std::string::npos ? rest : rest.substr(after + 1));
            error = what.find("ERR") != std::string::npos ||
                    what.find("refused") != std::string::npos ||
                    what.find("completed with") != std::string::npos;
        } else {
            continue;
        }
        LaneEvent e;
        e.t_us = t;
        e.text = what;
        e.error = error;
        tq.events.push_back(e);
    }

    // Where each device is: the address whose lanes carry its QPs' first PSNs.
    std::unordered_map<uint64_t, uint32_t> lane_of;
    std::vector<int64_t> first_rx(lad->lanes.size(), -1), first_tx(lad->lanes.size(), -1);
    for (size_t i = 0; i < lad->lanes.size(); ++i)
        lane_of[uint64_t(lad->lanes[i].addr) << 32 | lad->lanes[i].qpn] = uint32_t(i);
    for (const Packet& p : lad->packets) {
        const net::OpInfo* info = net::op_info(p.s.opcode);
        if (!info || !(info->flags & net::kRequest)) continue;
        if (first_rx[p.to] < 0) first_rx[p.to] = p.s.psn;
        if (first_tx[p.from] < 0) first_tx[p.from] = p.s.psn;
    }
    std::map<std::string, std::map<uint32_t, int>> score;  // device -> address -> matches
    for (const auto& [key, tq] : qps) {
        score[key.first];
        for (size_t i = 0; i < lad->lanes.size(); ++i) {
            const Lane& l = lad->lanes[i];
            if (l.qpn != key.second) continue;
            if ((tq.rq_psn >= 0 && first_rx[i] == tq.rq_psn) ||
                (tq.sq_psn >= 0 && first_tx[i] == tq.sq_psn))
                ++score[key.first][l.addr];
        }
    }
    std::map<std::string, uint32_t> addr_of;
    for (const auto& [dev, by_addr] : score) {
        int best = 0;
        for (const auto& [addr, n] : by_addr)
            if (n > best) {
                best = n;
                addr_of[dev] = addr;
            }
        st->devices.push_back(dev + "=" + (best ? address_name(*lad, addr_of[dev]) : "?"));
    }
    for (auto& [key, tq] : qps) {
        auto a = addr_of.find(key.first);
        if (a == addr_of.end()) continue;
        auto l = lane_of.find(uint64_t(a->second) << 32 | key.second);
        if (l == lane_of.end()) continue;
        Lane& lane = lad->lanes[l->second];
        lane.device = key.first;
        if (tq.pid >= 0) lane.pid = tq.pid;
        for (LaneEvent& e : tq.events) {
            e.lane = l->second;
            lad->events.push_back(std::move(e));
            ++st->events;
        }
    }
}

bool apply_trace(const std::string& path, Ladder* lad, TraceStats* st, std::string* err) {
    std::ifstream in(path);
    if (!in) {
        *err = path + ": " + std::strerror(errno);
        return false;
    }
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    apply_trace_lines(lines, lad, st);
    return true;
}

}  // namespace uroce::ladder
