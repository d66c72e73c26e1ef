// CoordinatorStore: a c10d::Store whose keys live in the job's coordinator, reached through the
// plain CoordinatorApi (common/coordinator_api.h; over gRPC in production, in memory in tests).
// Process groups bootstrap through it, so a job needs no MASTER_ADDR/MASTER_PORT or shared file.
//
// Semantics are c10d's: get() and wait() block until the keys exist and throw
// StoreTimeoutError (dist_errors.h, a c10::DistStoreError) after the store's timeout (timeout_, set
// at construction or by setTimeout; wait() also takes an explicit one); add() is atomic;
// compareSet() follows c10d::HashStore. Other coordinator failures throw c10::DistStoreError naming
// the operation.
//
// A hook called after each successful set() (SetHook) lets end-to-end tests freeze a worker right
// after it published a key (trainer/worker/test_hold.h, "published").
//
// Thread safety: safe to use from several threads (the CoordinatorApi contract); clone() returns
// a store sharing the same client (and hook), which must outlive every clone.
#ifndef SLURM_DDP_TRAINER_DDP_GRPC_STORE_H_
#define SLURM_DDP_TRAINER_DDP_GRPC_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "common/coordinator_api.h"

namespace ddp {

class CoordinatorStore : public c10d::Store {
 public:
  // Called with the key as given to set() (without this store's prefix), on the setting thread.
  using SetHook = std::function<void(const std::string& key)>;

  // Every key is prefixed with `prefix` (e.g. "gen3/" to keep generations apart).
  explicit CoordinatorStore(CoordinatorApi& api, std::string prefix = "",
                            std::chrono::milliseconds timeout = c10d::Store::kDefaultTimeout,
                            SetHook after_set = nullptr);

  c10::intrusive_ptr<c10d::Store> clone() override;
  using c10d::Store::set;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  using c10d::Store::compareSet;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string Key(const std::string& key) const { return prefix_ + key; }
  std::vector<std::string> Keys(const std::vector<std::string>& keys) const;

  CoordinatorApi& api_;
  const std::string prefix_;
  const SetHook after_set_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_GRPC_STORE_H_
