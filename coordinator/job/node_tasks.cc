#include "coordinator/job/node_tasks.h"

namespace ddp {

bool NodeTasks::Alive(int node, absl::Time now) const {
  const auto it = last_asked_.find(node);
  return it != last_asked_.end() && now - it->second <= alive_within_;
}

}  // namespace ddp
