// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
// Drawing the ladder (ladder_model.h) as SVG, or as one self-contained HTML page that holds
// the SVG and a small script for zoom and for hovering (no network, nothing external).
//
// What a reader (or a test, docs/ladder.md "Reading the SVG") finds in the SVG:
//   <g class="lane" data-lane="I" data-name="127.0.0.2 qp 0x11" data-pid="P">  one per lane
//   <g class="pkt ..." id="pN" data-n="COUNT" data-from="I" data-to="J" data-t="US"
//      data-op="0xNN" data-psn="0xNNNNNN" data-len="BYTES" data-fate="delivered|lost|...">
//      one per arrow (data-n 1) or band (class "band", data-n the packets in it, data-last-psn);
//      a retransmission has class "retx" and data-orig="pM", the id of its original
//   <g class="ev" data-lane="I" data-t="US">  a trace event on a lane
#pragma once

#include <string>

#include "emu/ladder/ladder_model.h"

namespace uroce::ladder {

std::string render_svg(const Ladder&);
std::string render_html(const Ladder&);

}  // namespace uroce::ladder
