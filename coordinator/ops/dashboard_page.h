// The dashboard page served at / by the HTTP endpoint: one self-contained HTML document (inline
// JS and CSS, no external assets) that polls /api/status and /api/history. Its sources are files,
// coordinator/ops/dashboard/{index.html,dashboard.css,dashboard.js}; the build inlines the style
// and the script into the page and embeds the bytes (dashboard/embed.cmake), so the coordinator
// reads no file at run time.
//
// Thread safety: returns a constant.
#ifndef SLURM_DDP_COORDINATOR_OPS_DASHBOARD_PAGE_H_
#define SLURM_DDP_COORDINATOR_OPS_DASHBOARD_PAGE_H_

namespace ddp {

const char* DashboardHtml();

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_DASHBOARD_PAGE_H_
