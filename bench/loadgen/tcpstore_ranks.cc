#include "bench/loadgen/tcpstore_ranks.h"

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/host_limits.h"

namespace ddp::bench {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TcpStoreRanks::TcpStoreRanks(TcpStoreRanksOptions options) : options_(std::move(options)) {}

TcpStoreRanks::~TcpStoreRanks() {
  {
    absl::MutexLock lock(&mu_);
    stage_ = Stage::kQuit;
  }
  for (std::thread& t : threads_) t.join();  // each ends within the store's timeout
}

void TcpStoreRanks::Record(Tally* tally, int64_t start_ns, const std::string& error) {
  const int64_t now = MonotonicNanos();
  absl::MutexLock lock(&mu_);
  if (error.empty()) {
    tally->ms.push_back(static_cast<double>(now - start_ns) / 1e6);
  } else {
    ++tally->failed;
    if (tally->first_error.empty()) tally->first_error = error;
  }
  tally->last_ns = std::max(tally->last_ns, now);
  --tally->remaining;
}

PhaseReport TcpStoreRanks::Await(Tally* tally, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [tally]() { return tally->remaining == 0; };
  const bool all = mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  PhaseReport r;
  r.done_ns = tally->last_ns;
  r.failed = tally->failed + tally->remaining;
  r.latency = Summarize(&tally->ms);
  r.first_error = all ? tally->first_error : "phase timed out";
  return r;
}

void TcpStoreRanks::RankMain(int index) {
  const int global = options_.first + index;
  c10::intrusive_ptr<c10d::TCPStore> store;
  const int64_t start = MonotonicNanos();
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(options_.port);
    o.isServer = false;
    o.numWorkers = static_cast<size_t>(options_.world);  // as init_process_group passes it
    o.waitWorkers = true;
    o.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.timeout));
    store = c10::make_intrusive<c10d::TCPStore>(options_.host, o);
    Record(&connect_, start, "");
  } catch (const std::exception& e) {
    Record(&connect_, start, absl::StrCat("connect: ", e.what()));
    Record(&rendezvous_, start, "no connection");
    return;
  }
  int64_t gate = 0;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Stage* s) { return *s != Stage::kConnect; }, &stage_));
    if (stage_ == Stage::kQuit) return;
    gate = gate_ns_;
  }
  try {
    const int64_t rank = store->add("rank", 1) - 1;
    store->set(absl::StrCat("addr/", rank),
               Bytes(absl::StrCat("node", global / 8, ":", global % 8)));
    if (store->add("joined", 1) == options_.world) store->set("go", Bytes("1"));
    store->wait({"go"});
    store->get("shard_params");
    Record(&rendezvous_, gate, "");
  } catch (const std::exception& e) {
    Record(&rendezvous_, gate, absl::StrCat("rendezvous: ", e.what()));
  }
  absl::MutexLock lock(&mu_);  // keep the connection, as a rank keeps its store
  mu_.Await(absl::Condition(
      +[](Stage* s) { return *s == Stage::kQuit; }, &stage_));
}

PhaseReport TcpStoreRanks::Connect() {
  {
    absl::MutexLock lock(&mu_);
    connect_.remaining = options_.count;
    rendezvous_.remaining = options_.count;
  }
  for (int i = 0; i < options_.count; ++i) threads_.emplace_back([this, i] { RankMain(i); });
  return Await(&connect_, absl::Now() + options_.timeout + absl::Seconds(5));
}

PhaseReport TcpStoreRanks::Rendezvous() {
  {
    absl::MutexLock lock(&mu_);
    gate_ns_ = MonotonicNanos();
    stage_ = Stage::kRendezvous;
  }
  return Await(&rendezvous_, absl::Now() + options_.timeout + absl::Seconds(5));
}

}  // namespace ddp::bench
