// Which sanitizer a test binary was built with (common/sanitizers.h), for tests that must skip,
// with a printed reason, where one changes what they measure.
#ifndef SLURM_DDP_TESTS_TESTING_SANITIZERS_H_
#define SLURM_DDP_TESTS_TESTING_SANITIZERS_H_

#include "common/sanitizers.h"

namespace ddp::testing {

using ::ddp::kUnderAsan;
using ::ddp::kUnderSanitizer;
using ::ddp::kUnderTsan;

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TESTING_SANITIZERS_H_
