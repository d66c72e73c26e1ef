#include "coordinator/kv_store.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kFar = absl::InfiniteFuture();

TEST(KvStoreTest, SetGetCheckDeleteNumKeys) {
  KvStore s;
  ASSERT_TRUE(s.Set("a", "1").ok());
  std::string got;
  s.Get("a", kFar, [&](absl::StatusOr<std::string> v) { got = *v; });
  EXPECT_EQ(got, "1");
  EXPECT_TRUE(s.Check({"a"}));
  EXPECT_FALSE(s.Check({"a", "b"}));
  EXPECT_EQ(s.NumKeys(), 1);
  EXPECT_TRUE(s.Delete("a"));
  EXPECT_FALSE(s.Delete("a"));
  EXPECT_EQ(s.NumKeys(), 0);
}

TEST(KvStoreTest, GetWaitsUntilSet) {
  KvStore s;
  absl::StatusOr<std::string> got = absl::UnknownError("not yet");
  s.Get("k", kFar, [&](absl::StatusOr<std::string> v) { got = v; });
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(s.NumWaiters(), 1u);
  ASSERT_TRUE(s.Set("k", "v").ok());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "v");
  EXPECT_EQ(s.NumWaiters(), 0u);
}

TEST(KvStoreTest, WaitNeedsEveryKeyAndTimesOutNamingTheMissingOnes) {
  KvStore s;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  absl::Status done = absl::UnknownError("pending");
  s.Wait({"x", "y"}, t0 + absl::Seconds(1), [&](absl::Status st) { done = st; });
  ASSERT_TRUE(s.Set("x", "1").ok());
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0);
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown);
  s.ExpireWaiters(t0 + absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(done)) << done;
  EXPECT_NE(done.message().find("y"), absl::string_view::npos);
  EXPECT_EQ(done.message().find("x,"), absl::string_view::npos);

  absl::Status ok = absl::UnknownError("pending");
  s.Wait({"x", "z"}, kFar, [&](absl::Status st) { ok = st; });
  ASSERT_TRUE(s.Set("z", "").ok());
  EXPECT_TRUE(ok.ok());
}

TEST(KvStoreTest, AddCreatesAndSumsAndRejectsNonIntegers) {
  KvStore s;
  EXPECT_EQ(*s.Add("n", 5), 5);
  EXPECT_EQ(*s.Add("n", -2), 3);
  ASSERT_TRUE(s.Set("text", "abc").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.Add("text", 1).status()));
  // Overflow is refused and changes nothing.
  ASSERT_TRUE(s.Set("big", absl::StrCat(INT64_MAX)).ok());
  absl::StatusOr<int64_t> over = s.Add("big", 1);
  EXPECT_TRUE(absl::IsInvalidArgument(over.status())) << over.status();
  EXPECT_EQ(*s.Add("big", 0), INT64_MAX);
  EXPECT_TRUE(absl::IsInvalidArgument(s.Add("big", 0, std::string(65, 'r')).status()));
}

TEST(KvStoreTest, AddWithTheSameRequestIdAddsOnce) {
  KvStore store;
  ASSERT_EQ(*store.Add("n", 1, "client-a:0"), 1);
  EXPECT_EQ(*store.Add("n", 1, "client-a:0"), 1);  // the retry of a call whose reply was lost
  EXPECT_EQ(*store.Add("n", 1, "client-a:1"), 2);
  EXPECT_EQ(*store.Add("n", 1, "client-b:0"), 3);
  EXPECT_EQ(*store.Add("n", 1), 4);  // no id: never deduplicated
  EXPECT_EQ(*store.Add("n", 1), 5);
  // Only the most recent kRememberedAdds ids are remembered.
  for (size_t i = 0; i < KvStore::kRememberedAdds; ++i) {
    ASSERT_TRUE(store.Add("other", 1, absl::StrCat("bulk:", i)).ok());
  }
  EXPECT_EQ(*store.Add("n", 1, "client-a:0"), 6);
  EXPECT_EQ(*store.Add("other", 0, absl::StrCat("bulk:", KvStore::kRememberedAdds - 1)),
            static_cast<int64_t>(KvStore::kRememberedAdds));
}

TEST(KvStoreTest, AddWakesWaiters) {
  KvStore s;
  bool woke = false;
  s.Wait({"n"}, kFar, [&](absl::Status st) { woke = st.ok(); });
  ASSERT_TRUE(s.Add("n", 1).ok());
  EXPECT_TRUE(woke);
}

TEST(KvStoreTest, CompareSetFollowsC10dSemantics) {
  KvStore s;
  EXPECT_EQ(*s.CompareSet("k", "x", "y"), "x");  // absent + non-empty expected: unchanged
  EXPECT_FALSE(s.Check({"k"}));
  EXPECT_EQ(*s.CompareSet("k", "", "first"), "first");  // absent + empty expected: set
  EXPECT_EQ(*s.CompareSet("k", "wrong", "z"), "first");
  EXPECT_EQ(*s.CompareSet("k", "first", "second"), "second");
}

TEST(KvStoreTest, ConcurrentAddsAreAtomic) {
  KvStore s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(s.Add("counter", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*s.Add("counter", 0), 8000);
}

TEST(KvStoreTest, CancelAllFailsEveryWaiter) {
  KvStore s;
  int cancelled = 0;
  for (int i = 0; i < 5; ++i) {
    s.Get("never", kFar, [&](absl::StatusOr<std::string> v) {
      if (absl::IsUnavailable(v.status())) ++cancelled;
    });
  }
  s.CancelAll(absl::UnavailableError("bye"));
  EXPECT_EQ(cancelled, 5);
  EXPECT_EQ(s.NumWaiters(), 0u);
}

// Each limit, hit for real: the error names the limit and the store is unchanged.
TEST(KvStoreTest, LimitsRefuseWithErrorsNamingTheLimit) {
  KvLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_keys = 3;
  limits.max_total_bytes = 40;
  limits.max_waiters = 2;
  KvStore s(limits);
  struct Case {
    const char* what;
    absl::Status status;
    absl::StatusCode code;
    const char* names;
  };
  ASSERT_TRUE(s.Set("a", std::string(16, 'x')).ok());  // 17 bytes held
  ASSERT_TRUE(s.Set("b", std::string(16, 'x')).ok());  // 34
  const Case cases[] = {
      {"empty key", s.Set("", "v"), absl::StatusCode::kInvalidArgument, "max_key_bytes"},
      {"long key", s.Set("123456789", "v"), absl::StatusCode::kInvalidArgument, "max_key_bytes"},
      {"big value", s.Set("c", std::string(17, 'x')), absl::StatusCode::kInvalidArgument,
       "max_value_bytes"},
      {"total bytes", s.Set("c", std::string(6, 'x')), absl::StatusCode::kResourceExhausted,
       "max_total_bytes"},
      {"compare-set total", s.CompareSet("c", "", std::string(6, 'x')).status(),
       absl::StatusCode::kResourceExhausted, "max_total_bytes"},
      {"add long key", s.Add("123456789", 1).status(), absl::StatusCode::kInvalidArgument,
       "max_key_bytes"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.what << ": " << c.status;
    EXPECT_NE(c.status.message().find(c.names), absl::string_view::npos)
        << c.what << ": " << c.status;
  }
  EXPECT_EQ(s.NumKeys(), 2);
  EXPECT_EQ(s.TotalBytes(), 34u);
  // Replacing a value counts only the difference; a third key fits, a fourth does not.
  ASSERT_TRUE(s.Set("a", "").ok());   // 18 held
  ASSERT_TRUE(s.Set("c", "1").ok());  // 20
  absl::Status fourth = s.Set("d", "");
  EXPECT_TRUE(absl::IsResourceExhausted(fourth)) << fourth;
  EXPECT_NE(fourth.message().find("max_keys"), absl::string_view::npos) << fourth;
  EXPECT_TRUE(s.Delete("c"));
  EXPECT_EQ(s.TotalBytes(), 18u);
  ASSERT_TRUE(s.Set("d", "").ok());

  // Waiters: two park, the third is refused at once.
  absl::Status third = absl::UnknownError("pending");
  s.Get("never1", kFar, [](absl::StatusOr<std::string>) {});
  s.Wait({"never2"}, kFar, [](absl::Status) {});
  s.Wait({"never3"}, kFar, [&](absl::Status st) { third = st; });
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_NE(third.message().find("max_waiters"), absl::string_view::npos) << third;
  EXPECT_EQ(s.NumWaiters(), 2u);
  s.CancelAll(absl::CancelledError("done"));
}

// Waiters that time out leave no per-key bookkeeping behind (no growth under repeated polls).
TEST(KvStoreTest, ExpiredWaitersLeaveNothingBehind) {
  KvLimits limits;
  limits.max_waiters = 4;
  KvStore s(limits);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  for (int i = 0; i < 100; ++i) {
    absl::Status got = absl::UnknownError("pending");
    s.Wait({absl::StrCat("missing", i % 3), "other"}, t0, [&](absl::Status st) { got = st; });
    s.ExpireWaiters(t0);
    ASSERT_TRUE(absl::IsDeadlineExceeded(got)) << i << ": " << got;
  }
  EXPECT_EQ(s.NumWaiters(), 0u);
  // A later Set of a key many expired waiters once waited on wakes only the live one.
  int woke = 0;
  s.Get("missing1", kFar, [&](absl::StatusOr<std::string> v) { woke += v.ok() ? 1 : 0; });
  ASSERT_TRUE(s.Set("missing1", "v").ok());
  EXPECT_EQ(woke, 1);
}

// Waiters' keys cost memory for as long as they wait: one call's keys and all waiters' keys
// together are bounded, the errors name the limits, and the bytes come back when waiters end.
TEST(KvStoreTest, WaiterKeyBytesCountAgainstLimits) {
  KvLimits limits;
  limits.max_wait_key_bytes = 100;
  limits.max_waiter_key_bytes = 250;
  KvStore s(limits);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  auto keys = [](int n, char c) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(absl::StrCat(std::string(9, c), i));  // 10 bytes
    return out;
  };
  // One call over the per-call bound: refused, nothing parked.
  absl::Status big = absl::UnknownError("pending");
  EXPECT_EQ(s.Wait(keys(11, 'a'), t0, [&](absl::Status st) { big = st; }), KvStore::kNotParked);
  EXPECT_TRUE(absl::IsInvalidArgument(big)) << big;
  EXPECT_NE(big.message().find("max_wait_key_bytes"), absl::string_view::npos) << big;
  EXPECT_EQ(s.NumWaiters(), 0u);
  // Two calls of 100 bytes park; a third of 100 would pass 250 in all.
  EXPECT_NE(s.Wait(keys(10, 'b'), t0, [](absl::Status) {}), KvStore::kNotParked);
  EXPECT_NE(s.Wait(keys(10, 'c'), t0 + absl::Seconds(1), [](absl::Status) {}), KvStore::kNotParked);
  EXPECT_EQ(s.WaiterKeyBytes(), 200u);
  absl::Status third = absl::UnknownError("pending");
  s.Wait(keys(10, 'd'), t0, [&](absl::Status st) { third = st; });
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_NE(third.message().find("max_waiter_key_bytes"), absl::string_view::npos) << third;
  // A Get's key counts the same way; keys that exist already cost nothing (answered at once).
  absl::Status get = absl::UnknownError("pending");
  s.Get(std::string(51, 'g'), t0, [&](absl::StatusOr<std::string> v) { get = v.status(); });
  EXPECT_TRUE(absl::IsResourceExhausted(get)) << get;
  s.Get(std::string(50, 'g'), t0, [](absl::StatusOr<std::string>) {});
  EXPECT_EQ(s.WaiterKeyBytes(), 250u);
  for (const std::string& k : keys(10, 'd')) ASSERT_TRUE(s.Set(k, "").ok());
  bool at_once = false;
  EXPECT_EQ(s.Wait(keys(10, 'd'), t0, [&](absl::Status st) { at_once = st.ok(); }),
            KvStore::kNotParked);
  EXPECT_TRUE(at_once);
  // Expiry gives the bytes back.
  s.ExpireWaiters(t0);
  EXPECT_EQ(s.WaiterKeyBytes(), 100u);
  s.ExpireWaiters(t0 + absl::Seconds(1));
  EXPECT_EQ(s.WaiterKeyBytes(), 0u);
  EXPECT_EQ(s.NumWaiters(), 0u);
}

// A parked call whose client went away is ended at once, and only once.
TEST(KvStoreTest, CancelEndsAParkedWaiterAtOnce) {
  KvStore s;
  absl::StatusOr<std::string> got = absl::UnknownError("pending");
  const KvStore::WaiterId get = s.Get("k", kFar, [&](absl::StatusOr<std::string> v) { got = v; });
  absl::Status waited = absl::UnknownError("pending");
  const KvStore::WaiterId wait = s.Wait({"k", "j"}, kFar, [&](absl::Status st) { waited = st; });
  ASSERT_NE(get, KvStore::kNotParked);
  ASSERT_NE(wait, KvStore::kNotParked);
  EXPECT_NE(get, wait);
  EXPECT_TRUE(s.Cancel(get, absl::CancelledError("gone")));
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  EXPECT_FALSE(s.Cancel(get, absl::CancelledError("gone")));  // already ended
  EXPECT_EQ(s.NumWaiters(), 1u);
  EXPECT_TRUE(s.Cancel(wait, absl::CancelledError("gone")));
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  EXPECT_EQ(s.NumWaiters(), 0u);
  EXPECT_EQ(s.WaiterKeyBytes(), 0u);
  // Nothing is left indexed: the keys appear and nobody is woken twice.
  ASSERT_TRUE(s.Set("k", "v").ok());
  ASSERT_TRUE(s.Set("j", "v").ok());
  EXPECT_TRUE(absl::IsCancelled(waited));
  // A call answered at once has no waiter to cancel.
  EXPECT_EQ(s.Get("k", kFar, [](absl::StatusOr<std::string>) {}), KvStore::kNotParked);
}

// A generation's group that can no longer form: its waiters end at once (a Get, and a Wait
// that misses a key under the prefix), later ones that would park end too; other generations'
// waiters, keys that exist and prefixes that only share a beginning ("gen0/m1" and
// "gen0/m10/") are left alone.
TEST(KvStoreTest, ClosingAPrefixEndsItsWaitersNowAndLater) {
  KvStore s;
  const absl::Status closed = absl::AbortedError("generation 1 superseded");
  ASSERT_TRUE(s.Set("gen0/m1/rank_0", "addr0").ok());
  absl::StatusOr<std::string> got = absl::UnknownError("pending");
  s.Get("gen0/m1/rank_2", kFar, [&](absl::StatusOr<std::string> v) { got = v; });
  absl::Status waited = absl::UnknownError("pending");
  s.Wait({"gen0/m1/rank_0", "gen0/m1/rank_3"}, kFar, [&](absl::Status st) { waited = st; });
  absl::StatusOr<std::string> other = absl::UnknownError("pending");
  s.Get("gen0/m10/rank_2", kFar, [&](absl::StatusOr<std::string> v) { other = v; });
  absl::Status next = absl::UnknownError("pending");
  s.Wait({"gen0/m2/rank_1"}, kFar, [&](absl::Status st) { next = st; });
  ASSERT_EQ(s.NumWaiters(), 4u);

  EXPECT_EQ(s.ClosePrefix("gen0/m1/", closed), 2u);
  EXPECT_TRUE(absl::IsAborted(got.status())) << got.status();
  EXPECT_EQ(got.status().message(), "generation 1 superseded");
  EXPECT_TRUE(absl::IsAborted(waited)) << waited;
  EXPECT_EQ(s.NumWaiters(), 2u) << "gen0/m10/ and gen0/m2/ still wait";
  EXPECT_EQ(absl::StatusCode::kUnknown, other.status().code());
  EXPECT_EQ(absl::StatusCode::kUnknown, next.code());
  EXPECT_EQ(s.ClosePrefix("gen0/m1/", closed), 0u) << "closing again changes nothing";
  EXPECT_EQ(s.ClosePrefix("", closed), 0u) << "an empty prefix closes nothing";

  // Later calls: a missing key under the prefix ends at once, an existing one is answered.
  absl::StatusOr<std::string> late = absl::UnknownError("pending");
  EXPECT_EQ(s.Get("gen0/m1/rank_1", kFar, [&](absl::StatusOr<std::string> v) { late = v; }),
            KvStore::kNotParked);
  EXPECT_TRUE(absl::IsAborted(late.status())) << late.status();
  absl::Status late_wait = absl::UnknownError("pending");
  EXPECT_EQ(s.Wait({"gen0/m2/x", "gen0/m1/rank_1"}, kFar, [&](absl::Status st) { late_wait = st; }),
            KvStore::kNotParked);
  EXPECT_TRUE(absl::IsAborted(late_wait)) << late_wait;
  s.Get("gen0/m1/rank_0", kFar, [&](absl::StatusOr<std::string> v) { late = v; });
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "addr0");
  absl::Status present = absl::UnknownError("pending");
  s.Wait({"gen0/m1/rank_0"}, kFar, [&](absl::Status st) { present = st; });
  EXPECT_TRUE(present.ok()) << present;
  // Keys can still be set under it; the ended waiters are not woken again.
  ASSERT_TRUE(s.Set("gen0/m1/rank_2", "addr2").ok());
  ASSERT_TRUE(s.Set("gen0/m1/rank_3", "addr3").ok());
  EXPECT_TRUE(absl::IsAborted(got.status()));
  EXPECT_EQ(s.NumWaiters(), 2u);
  ASSERT_TRUE(s.Set("gen0/m2/rank_1", "addr").ok());
  EXPECT_TRUE(next.ok()) << next;

  // Only the last kMaxClosedPrefixes stay closed.
  for (size_t i = 0; i < KvStore::kMaxClosedPrefixes; ++i) {
    s.ClosePrefix(absl::StrCat("gen1/m", i, "/"), closed);
  }
  absl::StatusOr<std::string> reopened = absl::UnknownError("pending");
  EXPECT_NE(s.Get("gen0/m1/rank_9", kFar, [&](absl::StatusOr<std::string> v) { reopened = v; }),
            KvStore::kNotParked)
      << "the oldest closed prefix was forgotten: its keys are waited for again";
  s.CancelAll(absl::CancelledError("end"));
  EXPECT_EQ(s.WaiterKeyBytes(), 0u);
}

// Wait means every key exists at once: a key that appeared and was deleted again is waited for
// again; a key named twice counts once.
TEST(KvStoreTest, WaitAfterADeleteWaitsForTheKeyAgain) {
  KvStore s;
  absl::Status done = absl::UnknownError("pending");
  s.Wait({"a", "b", "a"}, kFar, [&](absl::Status st) { done = st; });
  ASSERT_TRUE(s.Set("a", "1").ok());
  ASSERT_TRUE(s.Delete("a"));
  ASSERT_TRUE(s.Set("b", "1").ok());
  EXPECT_EQ(done.code(), absl::StatusCode::kUnknown) << done;
  EXPECT_EQ(s.NumWaiters(), 1u);
  ASSERT_TRUE(s.Add("a", 1).ok());
  EXPECT_TRUE(done.ok()) << done;
  EXPECT_EQ(s.NumWaiters(), 0u);
}

// Deadlines expire in order, only those due.
TEST(KvStoreTest, ExpireWaitersEndsOnlyTheDueOnes) {
  KvStore s;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  std::vector<int> expired;
  for (int i : {3, 1, 2}) {
    s.Get(absl::StrCat("k", i), t0 + absl::Seconds(i),
          [&expired, i](absl::StatusOr<std::string> v) {
            if (absl::IsDeadlineExceeded(v.status())) expired.push_back(i);
          });
  }
  s.ExpireWaiters(t0 + absl::Seconds(2));
  EXPECT_EQ(expired, (std::vector<int>{1, 2}));
  EXPECT_EQ(s.NumWaiters(), 1u);
}

// Waking waiters costs time linear in the waiters woken, under the store's lock: many waiters on
// one key, and waiters on many keys each. A quadratic wake (a per-key list scanned once per woken
// waiter, or every waiter's key list rescanned at each key) takes 16 times as long for 4 times
// the waiters, and seconds at these sizes.
TEST(KvStoreTest, WakingWaitersIsLinear) {
  auto one_key = [](int n) {
    KvStore s;
    int woke = 0;
    for (int i = 0; i < n; ++i) {
      s.Get("barrier", kFar, [&](absl::StatusOr<std::string> v) { woke += v.ok() ? 1 : 0; });
    }
    const absl::Time start = absl::Now();
    EXPECT_TRUE(s.Set("barrier", "go").ok());
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(woke, n);
    EXPECT_EQ(s.NumWaiters(), 0u);
    return took;
  };
  auto many_keys = [](int keys) {
    KvStore s;
    std::vector<std::string> names;
    for (int i = 0; i < keys; ++i) names.push_back(absl::StrCat("rank/", i));
    int woke = 0;
    for (int w = 0; w < 16; ++w) s.Wait(names, kFar, [&](absl::Status st) { woke += st.ok(); });
    const absl::Time start = absl::Now();
    for (const std::string& k : names) EXPECT_TRUE(s.Set(k, "x").ok());
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(woke, 16);
    return took;
  };
  struct Case {
    const char* what;
    absl::Duration small;
    absl::Duration large;
  };
  const Case cases[] = {
      {"waiters on one key (20000, 80000)", one_key(20000), one_key(80000)},
      {"keys per waiter (2048, 8192)", many_keys(2048), many_keys(8192)},
  };
  for (const Case& c : cases) {
    const double ratio = absl::FDivDuration(c.large, std::max(c.small, absl::Microseconds(1)));
    std::printf("%s: %.1f ms, %.1f ms (x%.1f)\n", c.what, absl::ToDoubleMilliseconds(c.small),
                absl::ToDoubleMilliseconds(c.large), ratio);
    // Linear: about x4. Timing on a shared machine is noisy, so fail only when the large case is
    // both slow and far from linear.
    EXPECT_FALSE(c.large > absl::Milliseconds(500) && ratio > 8)
        << c.what << ": " << c.small << " then " << c.large;
  }
}

}  // namespace
}  // namespace ddp
