#include "coordinator/job/time_account.h"

namespace ddp {

void TimeAccount::Add(TimeUse* t, TimeUseKind use, double seconds) {
  if (seconds <= 0) return;
  t->wall += seconds;
  switch (use) {
    case TimeUseKind::kStartup:
      t->startup += seconds;
      break;
    case TimeUseKind::kTraining:
      t->training += seconds;
      break;
    case TimeUseKind::kRecovery:
      t->recovery += seconds;
      break;
    case TimeUseKind::kStall:
      t->stall += seconds;
      break;
    case TimeUseKind::kCheckpoint:
      t->checkpoint += seconds;
      break;
    case TimeUseKind::kEvaluation:
      t->evaluation += seconds;
      break;
    case TimeUseKind::kOther:
      t->other += seconds;
      break;
  }
}

void TimeAccount::Charge(absl::Time now, TimeUseKind use) {
  if (stopped_) return;
  if (now > last_) {
    Add(&used_, use_, absl::ToDoubleSeconds(now - last_));
    last_ = now;
  }
  use_ = use;
}

void TimeAccount::Stop(absl::Time now) {
  if (stopped_) return;
  Charge(now, use_);
  stopped_ = true;
}

TimeUse TimeAccount::Read(absl::Time now) const {
  TimeUse t = used_;
  if (!stopped_ && now > last_) Add(&t, use_, absl::ToDoubleSeconds(now - last_));
  return t;
}

}  // namespace ddp
