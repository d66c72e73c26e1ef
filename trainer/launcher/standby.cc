#include "trainer/launcher/standby.h"

#include <utility>

namespace ddp {

int StandbyWatch::StandbyOf(int coordinator_node, int nodes) {
  if (nodes < 2 || coordinator_node < 0) return -1;
  return (coordinator_node + 1) % nodes;
}

StandbyWatch::Verdict StandbyWatch::Observe(absl::Time now, const CoordinatorSighting& s) {
  idle_for_good_ = s.job_ended || (s.file && StandbyOf(s.coordinator_node, nodes_) != node_);
  if (!s.file || s.job_ended || StandbyOf(s.coordinator_node, nodes_) != node_) {
    watching_ = false;
    return Verdict::kIdle;
  }
  const bool newer = std::make_pair(s.epoch, s.incarnation) > std::make_pair(epoch_, incarnation_);
  if (newer) {
    epoch_ = s.epoch;
    incarnation_ = s.incarnation;
    coordinator_node_ = s.coordinator_node;
    since_ = now;
  }
  // A takeover's coordinator (epoch > 0) is watched from its first sighting: the job runs.
  if (s.epoch > 0) watching_ = true;
  if (s.answered) {
    watching_ = true;
    since_ = now;
    last_answer_ = now;
    return Verdict::kHealthy;
  }
  if (!watching_) return Verdict::kIdle;
  return now - since_ >= failover_timeout_ ? Verdict::kTakeOver : Verdict::kSilent;
}

}  // namespace ddp
