// The FileStore that the ranks of a RunRanks test rendezvous through (c10d, so Torch-only tests).
//
// It never removes its file: RunRanks unlinks it once every rank has ended. c10d's FileStore
// removes the file when as many instances have closed as the `numWorkers` it was given, and a
// rank that opens one instance per group (a new group per membership generation) reaches that
// count early. A later instance then re-creates the file, and an instance still open reads the
// new file from its old offset: c10d's reader loops at end of file holding the file's shared lock,
// and every rank waits on that lock (a test's three ranks hung until the harness killed them).
// A `numWorkers` of -1 turns that removal off.
#pragma once

#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include "tests/testing/multiprocess.h"

namespace ddp::testing {

inline c10::intrusive_ptr<c10d::FileStore> ChildFileStore() {
  return c10::make_intrusive<c10d::FileStore>(ChildStorePath(), /*numWorkers=*/-1);
}

}  // namespace ddp::testing
