// The server core's SequenceTable (server/core/sequences.h) alone: ids, limits,
// timeouts. Over HTTP and gRPC, with real memory, in sequence_test.py.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/sequences.h"

namespace ebb::server {
namespace {

using std::chrono::milliseconds;

SequenceControl Seq(SequenceId id, bool start, bool end) { return *MakeSequenceControl(std::move(id), start, end); }

struct Timeouts {
  std::mutex mu;
  std::vector<std::string> ids;
};

std::unique_ptr<SequenceTable> Table(size_t max_open, milliseconds timeout, Timeouts* seen = nullptr) {
  return std::make_unique<SequenceTable>(
      SequenceOptions{max_open, timeout}, [] { return nullptr; },
      [seen](const std::string& model, const std::string&, const SequenceId& id) {
        if (!seen) return;
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->ids.push_back(model + ":" + SequenceIdText(id));
      });
}

TEST(SequenceTableTest, StartGoOnEnd) {
  auto t = Table(8, milliseconds(60000));
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{7}, true, false)).ok());
  t->Leave("m", "1", Seq(uint64_t{7}, true, false));
  EXPECT_EQ(t->open(), 1u);
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{7}, false, false)).ok());
  t->Leave("m", "1", Seq(uint64_t{7}, false, false));
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{7}, false, true)).ok());
  t->Leave("m", "1", Seq(uint64_t{7}, false, true));
  EXPECT_EQ(t->open(), 0u);
}

TEST(SequenceTableTest, UnknownIdsAreRefusedWithTritonsMessage) {
  auto t = Table(8, milliseconds(60000));
  Status st = t->Enter("m", "1", Seq(uint64_t{9}, false, true));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "inference request for sequence 9 to model 'm' must specify the START flag on the first request of the "
            "sequence");
  // 7 and "7" differ, and so do versions and models.
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{7}, true, false)).ok());
  EXPECT_FALSE(t->Enter("m", "1", Seq(std::string("7"), false, false)).ok());
  EXPECT_FALSE(t->Enter("m", "2", Seq(uint64_t{7}, false, false)).ok());
  EXPECT_FALSE(t->Enter("n", "1", Seq(uint64_t{7}, false, false)).ok());
}

TEST(SequenceTableTest, NoIdIsNoSequence) {
  EXPECT_FALSE(Seq(uint64_t{0}, true, true).in_sequence());
  EXPECT_FALSE(Seq(std::string(), true, true).in_sequence());
  EXPECT_FALSE(MakeSequenceControl(std::nullopt, true, true)->in_sequence());
  EXPECT_TRUE(Seq(std::string("a"), false, false).in_sequence());
}

// Round four: gRPC took string ids of any length (20 starts of a 64 MiB id held 2.7 GB) and quoted
// them whole in errors and logs. One bound for every front end, and clipped quotes.
TEST(SequenceTableTest, StringIdsAreBoundedAndClippedInMessages) {
  const std::string longest(kMaxSequenceIdBytes, 'x');
  Result<SequenceControl> ok = MakeSequenceControl(SequenceId(longest), true, false);
  ASSERT_TRUE(ok.ok());
  Result<SequenceControl> over = MakeSequenceControl(SequenceId(longest + "x"), true, false);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("parameters.sequence_id is a string of 1025 bytes, longer than the limit of "
                                         "1024 bytes"),
            std::string::npos)
      << over.status().message();
  auto t = Table(4, milliseconds(60000));
  Status st = t->Enter("m", "1", *MakeSequenceControl(SequenceId(longest), false, false));
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("must specify the START flag"), std::string::npos);
  EXPECT_LT(st.message().size(), 400u) << "the id is quoted clipped";
  EXPECT_NE(st.message().find("... (1024 bytes)"), std::string::npos) << st.message();
}

TEST(SequenceTableTest, TheLimitIsAClearErrorAndARestartIsNotANewSequence) {
  auto t = Table(2, milliseconds(60000));
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{1}, true, false)).ok());
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{2}, true, false)).ok());
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{2}, true, false)).ok()) << "a restart of an open id";
  Status st = t->Enter("m", "1", Seq(uint64_t{3}, true, false));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("too many open sequences: 2 are open, the limit (--max-sequences)"), std::string::npos);
  t->Leave("m", "1", Seq(uint64_t{1}, false, true));
  EXPECT_TRUE(t->Enter("m", "1", Seq(uint64_t{3}, true, false)).ok());
}

TEST(SequenceTableTest, AnIdleSequenceTimesOutButNotOneWithARequestInFlight) {
  Timeouts seen;
  auto t = Table(8, milliseconds(100), &seen);
  ASSERT_TRUE(t->Enter("m", "1", Seq(uint64_t{1}, true, false)).ok());
  t->Leave("m", "1", Seq(uint64_t{1}, true, false));
  ASSERT_TRUE(t->Enter("m", "1", Seq(std::string("busy"), true, false)).ok());  // in flight throughout
  const auto start = std::chrono::steady_clock::now();
  while (t->open() > 1 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(90));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(t->open(), 1u);
  {
    std::lock_guard<std::mutex> lock(seen.mu);
    EXPECT_EQ(seen.ids, std::vector<std::string>{"m:1"});
  }
  EXPECT_FALSE(t->Enter("m", "1", Seq(uint64_t{1}, false, true)).ok()) << "a timed-out id is unknown";
  t->Leave("m", "1", Seq(std::string("busy"), false, false));
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(t->open(), 0u) << "idle once its request left";
}

TEST(SequenceTableTest, ConcurrentSequences) {
  auto t = Table(64, milliseconds(60000));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 50; ++round) {
        const SequenceId id = uint64_t(k * 1000 + round + 1);
        for (int i = 0; i < 4; ++i) {
          SequenceControl c = Seq(id, i == 0, i == 3);
          if (!t->Enter("m", "1", c).ok()) ++failures;
          t->Leave("m", "1", c);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(t->open(), 0u);
}

}  // namespace
}  // namespace ebb::server
