#pragma once
// Message tags, all in one place so that no two schedules that may share a communicator collide. Messages
// between one pair with one tag match in post order (transport/transport.hpp), so one tag per schedule
// family is enough.

namespace paro::tags {

constexpr int all_to_all = 0x41;        // algorithms/all_to_all.hpp
constexpr int broadcast = 0x42;         // algorithms/broadcast.hpp
constexpr int control = 0x43;           // transport/control.hpp: control all-gather, barrier
constexpr int direct = 0x44;            // algorithms/direct.hpp
constexpr int gather_scatter = 0x47;    // algorithms/rooted.hpp
constexpr int ring = 0x52;              // algorithms/ring.hpp
constexpr int tree = 0x54;              // algorithms/tree.hpp
constexpr int nccl_bootstrap = 0x1dcc;  // transport/nccl.hpp: the unique id over the host transport
constexpr int bench_trace = 0x7ace;     // paro-bench --trace: events to rank 0
constexpr int paced_setup = 0x7e57;     // transport/paced.hpp: placing ranks on the emulated links

// " (ring)" for a tag above, for error messages; "" for another.
inline const char* describe(int tag) {
  switch (tag) {
    case all_to_all: return " (all_to_all)";
    case broadcast: return " (broadcast)";
    case control: return " (control: barrier or all-gather)";
    case direct: return " (direct exchange)";
    case gather_scatter: return " (gather or scatter)";
    case ring: return " (ring)";
    case tree: return " (tree)";
    case nccl_bootstrap: return " (nccl bootstrap)";
    case bench_trace: return " (benchmark trace)";
    case paced_setup: return " (link emulation set-up)";
    default: return "";
  }
}

}  // namespace paro::tags
