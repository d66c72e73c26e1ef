// The dashboard's bytes are generated at build time from coordinator/ops/dashboard/ (see
// dashboard_page.h); the page renders the status JSON and decides nothing it says.
#include "coordinator/ops/dashboard_page.h"

namespace ddp {

// The inlined page, NUL-terminated (dashboard_page_data.cc in the build folder).
extern const unsigned char kDashboardHtmlBytes[];

const char* DashboardHtml() { return reinterpret_cast<const char*>(kDashboardHtmlBytes); }

}  // namespace ddp
