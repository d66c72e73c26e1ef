// A pre-flight check of a pickle program (the data.pkl of a checkpoint) before LibTorch's
// unpickler runs it. The unpickler sizes its buffers from the program's own length fields (a
// string of N bytes, memo slot K) before it finds the bytes missing, so one flipped bit in a
// length made a corrupt checkpoint allocate gigabytes and get the process OOM-killed on resume.
// This walks the opcodes (protocols 0-5) and refuses any length or memo index that the program
// cannot hold, an unknown opcode, and a program that does not end in STOP.
//
// Thread safety: a pure function.
#ifndef SLURM_DDP_TRAINER_CHECKPOINT_PICKLE_CHECK_H_
#define SLURM_DDP_TRAINER_CHECKPOINT_PICKLE_CHECK_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ddp {

// OK when every length and memo index in `pickle` fits in it; otherwise DATA_LOSS saying which
// opcode at which offset.
absl::Status CheckPickle(absl::string_view pickle);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_CHECKPOINT_PICKLE_CHECK_H_
