// Prints the dashboard page exactly as ddp-coordinator serves it at / (the bytes embedded at build
// time, coordinator/ops/dashboard_page.h), for tests that serve it beside a crafted status JSON.
#include <cstdio>

#include "coordinator/ops/dashboard_page.h"

int main() {
  std::fputs(ddp::DashboardHtml(), stdout);
  return 0;
}
