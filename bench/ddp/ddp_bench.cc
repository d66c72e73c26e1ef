// Step time of our C++ DDP (Gloo, CPU) for bench/ddp.sh; bench/ddp/ddp_bench.py is the PyTorch
// side. Runs `--world` ranks as child processes of itself (fresh processes, c10d FileStore),
// each with one intra-op thread, trains `--warmup` steps, then `--rounds` timed rounds of
// `--steps` steps on synthetic data, and prints from rank 0 one line per round and a summary:
//   ROUND impl=cpp round=.. ms_per_step=..
//   RESULT impl=cpp model=.. world=.. bucket=.. ms_per_step=<median round> fwd=.. bwd=..
//   wait=.. opt=.. overlap=..
// `--handoff=IN,OUT` (two FIFOs) makes rank 0 wait for a byte on IN before the warm-up and
// before each round, and write one to OUT after each: bench/ddp.sh runs this binary and the
// Python side at the same time, taking turns round by round, so both meet the same machine.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <vector>

#include "bench/ddp/models.h"
#include "trainer/ddp/ddp.h"
#include "trainer/ddp/process_group.h"
#include "trainer/launcher/host_memory.h"
#include "trainer/models/model_factory.h"
#include "trainer/models/optimizer.h"

namespace {

std::map<std::string, std::string> ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"model", "mlp"},    {"world", "2"}, {"steps", "20"},     {"warmup", "5"}, {"batch", "64"},
      {"bucket_mb", "25"}, {"store", ""},  {"numel", "262144"}, {"rounds", "1"}, {"handoff", ""}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::fprintf(stderr,
                   "usage: ddp_bench --model=mlp|mlp-large|resnet18|tv-resnet18|allreduce "
                   "--world=N --steps=N "
                   "--warmup=N --rounds=N --batch=N --bucket_mb=MB|per-param --numel=N "
                   "--handoff=IN_FIFO,OUT_FIFO\n");
      std::exit(2);
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  return flags;
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// --handoff=IN,OUT: turn-taking with another benchmark through two FIFOs (rank 0 only).
class Turns {
 public:
  explicit Turns(const std::string& spec) {
    const auto comma = spec.find(',');
    if (spec.empty() || comma == std::string::npos) return;
    // O_RDWR: opening a FIFO this way never blocks, whichever side starts first.
    in_ = open(spec.substr(0, comma).c_str(), O_RDWR | O_CLOEXEC);
    out_ = open(spec.substr(comma + 1).c_str(), O_RDWR | O_CLOEXEC);
    if (in_ < 0 || out_ < 0) {
      std::fprintf(stderr, "ddp_bench: cannot open --handoff FIFOs %s: %s\n", spec.c_str(),
                   std::strerror(errno));
      std::exit(2);
    }
  }
  ~Turns() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
  }
  Turns(const Turns&) = delete;
  Turns& operator=(const Turns&) = delete;
  void Wait() const {
    char c;
    if (in_ >= 0 && read(in_, &c, 1) != 1) Fail("read");
  }
  void Pass() const {
    if (out_ >= 0 && write(out_, "x", 1) != 1) Fail("write");
  }

 private:
  [[noreturn]] static void Fail(const char* what) {
    std::fprintf(stderr, "ddp_bench: --handoff %s failed: %s\n", what, std::strerror(errno));
    std::exit(2);
  }
  int in_ = -1;
  int out_ = -1;
};

// Runs step(i, timed): --warmup untimed steps, then --rounds rounds of --steps steps, each
// timed from a barrier to a barrier. Rank 0 prints a ROUND line per round. Returns the median
// ms per step over the rounds, or -1 as soon as a step returns false.
double TimedSteps(const std::map<std::string, std::string>& f, c10d::Backend& pg, int rank,
                  const std::function<bool(int, bool)>& step) {
  const int warmup = std::stoi(f.at("warmup"));
  const int steps = std::stoi(f.at("steps"));
  const int rounds = std::max(1, std::stoi(f.at("rounds")));
  const Turns turns(rank == 0 ? f.at("handoff") : "");
  std::vector<double> per_round;
  int i = 0;
  for (int r = 0; r <= rounds; ++r) {  // round 0: the warm-up
    turns.Wait();
    pg.barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < (r == 0 ? warmup : steps); ++k, ++i) {
      if (!step(i, r > 0)) return -1;
    }
    pg.barrier()->wait();
    if (r > 0) {
      per_round.push_back(Ms(std::chrono::steady_clock::now() - start) / steps);
      if (rank == 0) {
        std::printf("ROUND impl=cpp round=%d ms_per_step=%.3f\n", r, per_round.back());
        std::fflush(stdout);
      }
    }
    turns.Pass();
  }
  std::sort(per_round.begin(), per_round.end());
  const size_t n = per_round.size();
  return n % 2 ? per_round[n / 2] : (per_round[n / 2 - 1] + per_round[n / 2]) / 2;
}

// --model=allreduce: the communication floor under every DDP step, one blocking SUM allreduce
// of --numel floats per step on the same process group.
int RunAllreduce(const std::map<std::string, std::string>& f, c10d::Backend& pg, int rank,
                 int world) {
  std::vector<at::Tensor> tensors = {torch::ones({std::stoll(f.at("numel"))})};
  const double ms = TimedSteps(f, pg, rank, [&](int, bool) {
    pg.allreduce(tensors)->wait();
    return true;
  });
  if (rank == 0) {
    std::printf("RESULT impl=cpp model=allreduce world=%d numel=%s ms_per_step=%.3f\n", world,
                f.at("numel").c_str(), ms);
  }
  return 0;
}

int RunRank(const std::map<std::string, std::string>& f, int rank, int world) {
  ddp::TuneHostAllocator();  // as ddp-trainer's workers do
  torch::set_num_threads(1);
  auto store = c10::make_intrusive<c10d::FileStore>(f.at("store"), world);
  ddp::ProcessGroupOptions pg_options;
  pg_options.backend = ddp::BackendKind::kGloo;
  pg_options.gloo_hostname = "127.0.0.1";
  pg_options.gloo_threads = 2;  // ProcessGroupGloo's default, as Python
  pg_options.timeout = std::chrono::seconds(120);
  auto pg = ddp::CreateProcessGroup(store, rank, world, pg_options);
  if (!pg.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(pg.status().message()).c_str());
    return 1;
  }
  const std::string model_name = f.at("model");
  const int64_t batch = std::stoll(f.at("batch"));
  if (model_name == "allreduce") return RunAllreduce(f, **pg, rank, world);
  torch::manual_seed(0);
  std::shared_ptr<torch::nn::Module> module;
  std::unique_ptr<ddp::models::Model> trainer_model;  // --model=tv-resnet18
  std::function<at::Tensor(const at::Tensor&)> forward;
  at::Tensor x;
  if (model_name == "tv-resnet18") {  // ddp-trainer's --arch resnet18 (torchvision's layout)
    auto created = ddp::models::CreateModel("resnet18", 10, {3, 32, 32});
    if (!created.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, std::string(created.status().message()).c_str());
      return 1;
    }
    trainer_model = std::move(*created);
    forward = [m = trainer_model.get()](const at::Tensor& in) { return m->forward(in); };
    x = torch::randn({batch, 3, 32, 32});
  } else if (model_name == "resnet18") {
    auto net = ddp::bench::ResNet18(10);
    module = net.ptr();
    forward = [net](const at::Tensor& in) mutable { return net->forward(in); };
    x = torch::randn({batch, 3, 32, 32});
  } else {
    auto mlp = model_name == "mlp-large" ? ddp::bench::Mlp({784, 1024, 1024, 1024, 10})
                                         : ddp::bench::Mlp({784, 256, 128, 10});
    module = mlp.ptr();
    forward = [mlp](const at::Tensor& in) mutable { return mlp->forward(in); };
    x = torch::randn({batch, 784});
  }
  at::Tensor y = torch::randint(0, 10, {batch});
  ddp::DdpOptions options;
  if (f.at("bucket_mb") == "per-param") {
    options.reducer.bucket_bytes = -1;
  } else {
    options.reducer.bucket_bytes = static_cast<int64_t>(std::stod(f.at("bucket_mb")) * (1 << 20));
  }
  ddp::ModuleTensors tensors = trainer_model ? ddp::ModuleTensors{trainer_model->named_parameters(),
                                                                  trainer_model->named_buffers()}
                                             : ddp::TensorsOf(*module);
  std::vector<ddp::NamedTensor> named = tensors.parameters;  // for the optimizer
  auto created = ddp::DistributedDataParallel::Create(std::move(tensors), *pg, options);
  if (!created.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(created.status().message()).c_str());
    return 1;
  }
  auto& d = **created;
  // ddp-trainer's optimizer (the arithmetic of torch.optim.SGD, multi-tensor kernels).
  ddp::Sgd sgd(std::move(named), ddp::SgdOptions{0.9, 0.0, false});
  double fwd = 0, bwd = 0, wait = 0, opt = 0, overlap = 0;
  int timed_steps = 0;
  const double ms = TimedSteps(f, **pg, rank, [&](int, bool timed) {
    auto status = d.BeginStep();
    auto loss = torch::cross_entropy_loss(forward(x), y);
    if (status.ok()) status = d.Backward(loss);
    if (!status.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, std::string(status.message()).c_str());
      return false;
    }
    d.BeginOptimizer();
    sgd.Step(0.01);
    d.ZeroGrad();
    d.EndOptimizer();
    if (timed) {
      ++timed_steps;
      const auto t = d.timings();
      fwd += t.forward_ms, bwd += t.backward_ms, wait += t.comm_wait_ms;
      opt += t.optimizer_ms, overlap += t.overlap_share;
    }
    return true;
  });
  if (ms < 0) return 1;
  const int steps = std::max(1, timed_steps);
  if (rank == 0) {
    std::printf(
        "RESULT impl=cpp model=%s world=%d bucket=%s ms_per_step=%.3f fwd=%.3f bwd=%.3f "
        "wait=%.3f opt=%.3f overlap=%.2f buckets=%lld\n",
        model_name.c_str(), world, f.at("bucket_mb").c_str(), ms, fwd / steps, bwd / steps,
        wait / steps, opt / steps, overlap / steps,
        static_cast<long long>(d.reducer().bucket_assignment().size()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  const int world = std::stoi(flags["world"]);
  if (const char* rank = std::getenv("DDP_BENCH_RANK")) {
    return RunRank(flags, std::atoi(rank), world);
  }
  // Parent: no torch work here; start one fresh process per rank.
  char store[] = "/tmp/ddp_bench_store_XXXXXX";
  const int fd = mkstemp(store);
  if (fd < 0) return 1;
  close(fd);
  unlink(store);
  std::vector<std::string> args = {"/proc/self/exe"};
  for (const auto& [k, v] : flags) {
    if (k != "store") args.push_back("--" + k + "=" + v);
  }
  args.push_back(std::string("--store=") + store);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("DDP_BENCH_RANK", std::to_string(r).c_str(), 1);
      std::vector<char*> argv_c;
      for (auto& a : args) argv_c.push_back(a.data());
      argv_c.push_back(nullptr);
      execv("/proc/self/exe", argv_c.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  unlink(store);
  return rc;
}
