// ArenaGate (src/memory/arena_gate.h): who carries an arena's release, and
// runs that must go alone. The gate is pure bookkeeping over a mutex, so it is
// tested here alone; the runs through it on real ORT are run_boundary_test's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "arena_gate.h"

namespace ebb::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kLong = std::chrono::seconds(10);  // a wait that must not time out

TEST(ArenaGateTest, ARunAloneThatWantsAReleaseCarriesIt) {
  ArenaGate gate("cpu:0", /*can_trim=*/true);
  EXPECT_TRUE(gate.Enter(/*wants_release=*/true));
  EXPECT_EQ(gate.in_flight(), 1);
  EXPECT_FALSE(gate.Exit(/*still_wants_release=*/false));  // it released itself
  EXPECT_EQ(gate.in_flight(), 0);
}

TEST(ArenaGateTest, ARunThatWantsNoReleaseCarriesNone) {
  ArenaGate gate("cpu:0", true);
  EXPECT_FALSE(gate.Enter(false));
  EXPECT_FALSE(gate.Exit(false));
  EXPECT_TRUE(gate.TryEnterForTrim());  // nothing left pending, the arena is free
  EXPECT_FALSE(gate.Exit(false));
}

TEST(ArenaGateTest, BesideAnotherRunTheReleaseWaitsForTheLastOneOut) {
  ArenaGate gate("cpu:0", true);
  EXPECT_FALSE(gate.Enter(false));
  // Wants a release but is not alone: it must not shrink under the first run.
  EXPECT_FALSE(gate.Enter(true));
  EXPECT_FALSE(gate.Exit(false));  // the second leaves; one run still in
  EXPECT_TRUE(gate.Exit(false));   // the last one out trims
  gate.Enter(false);               // and nothing is pending after it
  EXPECT_FALSE(gate.Exit(false));
}

TEST(ArenaGateTest, AReleaseNotFullyDoneIsTrimmedByTheLastOneOut) {
  ArenaGate gate("cpu:0", true);
  EXPECT_TRUE(gate.Enter(true));
  EXPECT_TRUE(gate.Exit(/*still_wants_release=*/true));  // an output pinned a region: trim on exit
}

TEST(ArenaGateTest, AnArenaWithoutTrimHandsThePendingReleaseToItsNextLoneRun) {
  ArenaGate gate("cpu:0", /*can_trim=*/false);  // a per-session arena
  EXPECT_FALSE(gate.Enter(false));
  EXPECT_FALSE(gate.Enter(true));  // left pending
  EXPECT_FALSE(gate.Exit(false));
  EXPECT_FALSE(gate.Exit(false));  // no trim function: nobody trims on exit
  EXPECT_FALSE(gate.TryEnterForTrim());  // nor from the idle timer
  EXPECT_TRUE(gate.Enter(false));  // the next run alone carries it, though it wants none
  EXPECT_FALSE(gate.Exit(false));
  EXPECT_FALSE(gate.Enter(false));  // once
  EXPECT_FALSE(gate.Exit(false));
}

TEST(ArenaGateTest, OverlappedSeesRunsThatCameAndWent) {
  ArenaGate gate("cpu:0", true);
  ArenaGate::Entry first;
  gate.Enter(false, &first);
  EXPECT_FALSE(gate.Overlapped(first));
  ArenaGate::Entry second;
  gate.Enter(false, &second);
  EXPECT_TRUE(second.others);
  EXPECT_TRUE(gate.Overlapped(first));
  gate.Exit(false);
  EXPECT_TRUE(gate.Overlapped(first));  // the second run came and went: still overlapped
  gate.Exit(false);
}

TEST(ArenaGateTest, TrimNowOrDeferDefersWhileARunIsIn) {
  ArenaGate gate("cpu:0", true);
  EXPECT_TRUE(gate.TrimNowOrDefer());  // nobody in: trim now
  gate.Enter(false);
  EXPECT_FALSE(gate.TrimNowOrDefer());  // a run is in: pending
  EXPECT_TRUE(gate.Exit(false));        // and the run performs it on leaving
}

TEST(ArenaGateTest, TheIdleTrimEntersOnlyAFreeTrimmableArena) {
  ArenaGate gate("cpu:0", true);
  gate.Enter(false);
  EXPECT_FALSE(gate.TryEnterForTrim());  // a run is in
  EXPECT_FALSE(gate.Exit(false));        // and nothing was left pending by the refusal
  ASSERT_TRUE(gate.TryEnterForTrim());
  // A run starting during the idle trim must not shrink under it: its release is left
  // pending, and performed by the last one out, here the trim's own Exit.
  EXPECT_FALSE(gate.Enter(true));
  EXPECT_FALSE(gate.Exit(false));
  EXPECT_TRUE(gate.Exit(false));
}

// Waits until `n` runs wait to go alone on `gate`.
void WaitForLoneWaiters(const ArenaGate& gate, int n) {
  const auto until = Clock::now() + kLong;
  while (gate.lone_waiting() != n && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
  ASSERT_EQ(gate.lone_waiting(), n);
}

TEST(ArenaGateTest, ALoneRunWaitsForTheOthersAndHoldsNewOnesBack) {
  ArenaGate gate("cpu:0", true);
  gate.Enter(false);  // a run in flight
  std::atomic<bool> alone_in{false};
  auto lone = std::async(std::launch::async, [&] {
    bool carry = false;
    const bool entered = gate.EnterAlone(true, Clock::now() + kLong, &carry);
    alone_in = true;
    return std::make_pair(entered, carry);
  });
  WaitForLoneWaiters(gate, 1);
  EXPECT_FALSE(alone_in.load());  // the first run is still in
  std::atomic<bool> late_in{false};
  auto late = std::async(std::launch::async, [&] {
    gate.Enter(false);
    late_in = true;
    gate.Exit(false);
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(late_in.load());  // held back behind the lone waiter
  gate.Exit(false);              // the first run leaves
  auto [entered, carry] = lone.get();
  EXPECT_TRUE(entered);
  EXPECT_TRUE(carry);  // alone, it carries its release
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(late_in.load());  // nobody enters while a run is in alone
  EXPECT_EQ(gate.in_flight(), 1);
  gate.Exit(false);
  ASSERT_EQ(late.wait_for(kLong), std::future_status::ready);
  EXPECT_TRUE(late_in.load());
}

TEST(ArenaGateTest, ALoneRunPastItsDeadlineEntersNothingAndLetsHeldRunsGo) {
  ArenaGate gate("cpu:0", true);
  gate.Enter(false);  // never leaves during the wait
  std::atomic<bool> late_in{false};
  auto lone = std::async(std::launch::async, [&] {
    bool carry = false;
    return gate.EnterAlone(true, Clock::now() + std::chrono::seconds(1), &carry);
  });
  WaitForLoneWaiters(gate, 1);
  auto late = std::async(std::launch::async, [&] {
    gate.Enter(false);
    late_in = true;
  });
  EXPECT_FALSE(lone.get());  // deadline passed with a run still in
  EXPECT_EQ(gate.lone_waiting(), 0);
  ASSERT_EQ(late.wait_for(kLong), std::future_status::ready);  // the held run went in after it gave up
  EXPECT_TRUE(late_in.load());
  EXPECT_EQ(gate.in_flight(), 2);  // the first run and the late one; the lone run entered nothing
  gate.Exit(false);
  gate.Exit(false);
}

}  // namespace
}  // namespace ebb::detail
