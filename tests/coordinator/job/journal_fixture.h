// Shared pieces of the journal tests (journal_test.cc, journal_record_test.cc): the worker
// identities and the header the test journals are written with.
#ifndef SLURM_DDP_TESTS_COORDINATOR_JOB_JOURNAL_FIXTURE_H_
#define SLURM_DDP_TESTS_COORDINATOR_JOB_JOURNAL_FIXTURE_H_

#include <string>

#include "common/coordinator_api.h"
#include "coordinator/job/journal_record.h"

namespace ddp::testing {

inline WorkerIdentity JournalWho(int node, int local, int pid) {
  WorkerIdentity w;
  w.host = "h" + std::to_string(node);
  w.node_rank = node;
  w.local_rank = local;
  w.local_world_size = 2;
  w.pid = pid;
  w.nonce = "nonce";
  return w;
}

inline JournalHeader JournalTestHeader() { return {"job-7", 2, "nonce", "tw", "tv", "tc", 4}; }

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_COORDINATOR_JOB_JOURNAL_FIXTURE_H_
