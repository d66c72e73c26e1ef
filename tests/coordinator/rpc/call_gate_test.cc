#include "coordinator/rpc/call_gate.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

Authenticator MakeAuth() { return *Authenticator::Create({"w-token", "v-token", "c-token"}); }

TEST(CallGateTest, AddressOfDropsThePort) {
  struct Case {
    std::string peer;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"ipv4:10.0.0.7:41234", "ipv4:10.0.0.7"},
      {"ipv6:[::1]:5512", "ipv6:[::1]"},
      {"ipv6:[fe80::1%25eth0]:80", "ipv6:[fe80::1%25eth0]"},
      {"ipv6:[::1]", "ipv6:[::1]"},
      {"unix:/tmp/socket", "unix:/tmp/socket"},
      {"ipv4:", "ipv4:"},
      {"", ""},
  };
  for (const Case& c : cases) EXPECT_EQ(CallGate::AddressOf(c.peer), c.want) << c.peer;
}

// Each role has its own budget: operators, however many and from wherever, never take the
// workers' room; one address never takes every operator's room.
TEST(CallGateTest, BudgetsByRoleAndByAddress) {
  const Authenticator auth = MakeAuth();
  FakeClock clock;
  RefusalLog refusals(&clock, absl::Seconds(1), nullptr);
  CallBudgets budgets;
  budgets.worker_calls = 3;
  budgets.operator_calls = 5;
  budgets.operator_calls_per_address = 2;
  CallGate gate(&auth, &refusals, &clock, budgets);

  std::vector<GateTicket> held;
  auto admit = [&](Role role, const std::string& peer) {
    GateTicket t;
    absl::Status st = gate.Admit(role, peer, &t);
    if (st.ok()) held.push_back(t);
    return st;
  };
  // One neighbour's address: two operator calls, then refused, naming the per-address limit.
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.9:1000").ok());
  EXPECT_TRUE(admit(Role::kControl, "ipv4:10.0.0.9:1001").ok());
  absl::Status third = admit(Role::kView, "ipv4:10.0.0.9:1002");
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_NE(third.message().find("from ipv4:10.0.0.9, the limit per address"), std::string::npos)
      << third;
  // Other addresses fill the operators' budget, then every operator is refused ...
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.10:1").ok());
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.10:2").ok());
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.11:1").ok());
  absl::Status full = admit(Role::kView, "ipv4:10.0.0.12:1");
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("--max-operator-calls)"), std::string::npos) << full;
  EXPECT_EQ(gate.operator_in_flight(), 5u);
  // ... but the workers' budget is whole, from any address, the operators' included.
  EXPECT_TRUE(admit(Role::kWorker, "ipv4:10.0.0.9:2000").ok());
  EXPECT_TRUE(admit(Role::kWorker, "ipv4:10.0.0.9:2001").ok());
  EXPECT_TRUE(admit(Role::kWorker, "ipv4:10.0.0.9:2002").ok());
  absl::Status workers_full = admit(Role::kWorker, "ipv4:10.0.0.1:1");
  EXPECT_TRUE(absl::IsResourceExhausted(workers_full)) << workers_full;
  EXPECT_NE(workers_full.message().find("worker calls in flight"), std::string::npos);
  EXPECT_EQ(gate.worker_in_flight(), 3u);
  EXPECT_EQ(gate.in_flight(), 8u);

  // Leaving gives each slot back to its own budget, once.
  for (GateTicket& t : held) gate.Leave(&t);
  for (GateTicket& t : held) gate.Leave(&t);
  EXPECT_EQ(gate.in_flight(), 0u);
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.9:3000").ok());
  EXPECT_TRUE(admit(Role::kView, "ipv4:10.0.0.9:3001").ok());
  EXPECT_TRUE(admit(Role::kWorker, "ipv4:10.0.0.9:3002").ok());
  // A ticket never admitted leaves nothing.
  GateTicket refused;
  gate.Leave(&refused);
  EXPECT_EQ(gate.in_flight(), 3u);
}

// The fence (coordinator/epoch_lease.h) is passed before anything else: while it refuses, every
// call gets its status, whatever its token, takes no slot and is not counted as a refusal of
// its token; once it lets calls through, the token decides again.
TEST(CallGateTest, AFenceThatRefusesAnswersEveryCallFirst) {
  const Authenticator auth = MakeAuth();
  FakeClock clock;
  RefusalLog refusals(&clock, absl::Seconds(1), nullptr);
  CallBudgets budgets;
  budgets.worker_calls = 3;
  CallGate gate(&auth, &refusals, &clock, budgets);

  grpc::ServerContext no_token;  // no authorization header
  GateTicket ticket;
  absl::Status st = gate.Enter(no_token, "Heartbeat", kWorkerRoles, &ticket);
  EXPECT_TRUE(absl::IsUnauthenticated(st)) << st;
  EXPECT_EQ(refusals.total(), 1u);

  int checks = 0;
  bool serving = false;
  gate.SetFence([&]() -> absl::Status {
    ++checks;
    return serving ? absl::OkStatus() : absl::UnavailableError("epoch 0 was superseded (fenced)");
  });
  st = gate.Enter(no_token, "Heartbeat", kWorkerRoles, &ticket);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_EQ(st.message(), "epoch 0 was superseded (fenced)");
  EXPECT_FALSE(ticket.admitted);
  EXPECT_EQ(checks, 1);
  EXPECT_EQ(gate.in_flight(), 0u);
  EXPECT_EQ(refusals.total(), 1u);

  serving = true;
  st = gate.Enter(no_token, "Heartbeat", kWorkerRoles, &ticket);
  EXPECT_TRUE(absl::IsUnauthenticated(st)) << st;
  EXPECT_EQ(checks, 2);
  EXPECT_EQ(refusals.total(), 2u);
}

}  // namespace
}  // namespace ddp
