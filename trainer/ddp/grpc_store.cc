#include "trainer/ddp/grpc_store.h"

#include <c10/util/Exception.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "trainer/ddp/dist_errors.h"

namespace ddp {
namespace {

// c10d::Store::kNoTimeout (0 ms) means "wait forever"; the coordinator needs a deadline.
absl::Duration ToDuration(std::chrono::milliseconds timeout) {
  return timeout.count() <= 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout.count());
}

[[noreturn]] void Throw(const absl::Status& status, const std::string& op,
                        const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    DDP_THROW(StoreTimeoutError,
              absl::StrCat("Timeout waiting for key(s) [", absl::StrJoin(keys, ", "),
                           "] in the coordinator store after ", timeout.count(), "ms (", op, ")"));
  }
  C10_THROW_ERROR(DistStoreError,
                  absl::StrCat("coordinator store ", op, " [", absl::StrJoin(keys, ", "),
                               "] failed: ", status.ToString()));
}

}  // namespace

CoordinatorStore::CoordinatorStore(CoordinatorApi& api, std::string prefix,
                                   std::chrono::milliseconds timeout, SetHook after_set)
    : c10d::Store(timeout),
      api_(api),
      prefix_(std::move(prefix)),
      after_set_(std::move(after_set)) {}

std::vector<std::string> CoordinatorStore::Keys(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(Key(k));
  return out;
}

c10::intrusive_ptr<c10d::Store> CoordinatorStore::clone() {
  return c10::make_intrusive<CoordinatorStore>(api_, prefix_, timeout_, after_set_);
}

void CoordinatorStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  absl::Status s = api_.StoreSet(Key(key), value);
  if (!s.ok()) Throw(s, "set", {key}, timeout_);
  if (after_set_) after_set_(key);
}

std::vector<uint8_t> CoordinatorStore::compareSet(const std::string& key,
                                                  const std::vector<uint8_t>& expected,
                                                  const std::vector<uint8_t>& desired) {
  auto r = api_.StoreCompareSet(Key(key), expected, desired);
  if (!r.ok()) Throw(r.status(), "compareSet", {key}, timeout_);
  return *std::move(r);
}

std::vector<uint8_t> CoordinatorStore::get(const std::string& key) {
  auto r = api_.StoreGet(Key(key), ToDuration(timeout_));
  if (!r.ok()) Throw(r.status(), "get", {key}, timeout_);
  return *std::move(r);
}

int64_t CoordinatorStore::add(const std::string& key, int64_t value) {
  auto r = api_.StoreAdd(Key(key), value);
  if (!r.ok()) Throw(r.status(), "add", {key}, timeout_);
  return *r;
}

bool CoordinatorStore::deleteKey(const std::string& key) {
  auto r = api_.StoreDelete(Key(key));
  if (!r.ok()) Throw(r.status(), "deleteKey", {key}, timeout_);
  return *r;
}

bool CoordinatorStore::check(const std::vector<std::string>& keys) {
  auto r = api_.StoreCheck(Keys(keys));
  if (!r.ok()) Throw(r.status(), "check", keys, timeout_);
  return *r;
}

int64_t CoordinatorStore::getNumKeys() {
  auto r = api_.StoreNumKeys();
  if (!r.ok()) Throw(r.status(), "getNumKeys", {}, timeout_);
  return *r;
}

void CoordinatorStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void CoordinatorStore::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  absl::Status s = api_.StoreWait(Keys(keys), ToDuration(timeout));
  if (!s.ok()) Throw(s, "wait", keys, timeout);
}

}  // namespace ddp
