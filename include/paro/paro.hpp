#pragma once
// Umbrella header: the core, the public verbs and the threads backend. Backends with dependencies are
// included on their own: paro/transport/mpi.hpp (component paro::mpi).

#include "paro/communicator/communicator.hpp"
#include "paro/core/dtype.hpp"
#include "paro/core/error.hpp"
#include "paro/core/half.hpp"
#include "paro/core/reduce_op.hpp"
#include "paro/transport/threads.hpp"
