#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>

#include "ebb/memory_policy.h"
#include "ebb/runtime.h"

namespace ebb {
namespace {

TEST(MemoryPolicyTest, AnExplicitOperationReleasesAtItsEndUnderIdle) {
  MemoryPolicy p;
  p.release = ReleaseMode::kIdle;
  EXPECT_EQ(OperationReleaseMode(p, std::nullopt), ReleaseMode::kOperationEnd);
  EXPECT_EQ(OperationReleaseMode(p, ReleaseMode::kIdle), ReleaseMode::kIdle);  // as the server asks outside sequences
  for (ReleaseMode mode : {ReleaseMode::kOperationEnd, ReleaseMode::kEveryRun, ReleaseMode::kNever}) {
    p.release = mode;
    EXPECT_EQ(OperationReleaseMode(p, std::nullopt), mode) << ReleaseModeName(mode);
    EXPECT_EQ(OperationReleaseMode(p, ReleaseMode::kNever), ReleaseMode::kNever);
  }
}

TEST(MemoryPolicyTest, DefaultsAreTheDocumentedOnes) {
  MemoryPolicy p;
  EXPECT_EQ(p.release, ReleaseMode::kIdle) << "single runs in a loop keep the arena; a pause gives it back";
  EXPECT_EQ(p.idle_release_ms, 50);
  EXPECT_EQ(p.cpu.arena, CpuArenaMode::kShared);
  EXPECT_EQ(p.cpu.arena_settings.extend_strategy, ExtendStrategy::kSameAsRequested);
  EXPECT_EQ(p.cuda.arena_settings.extend_strategy, ExtendStrategy::kSameAsRequested);
  EXPECT_EQ(p.cuda.arena, CudaArenaMode::kPerSession) << "shared is opt-in until a GPU run shows it working";
  EXPECT_EQ(p.cuda.arena_settings.max_bytes, 0u);  // no cap unless the policy sets one
  EXPECT_TRUE(p.weights_outside_arena);
  EXPECT_FALSE(p.strict_device);
  EXPECT_FALSE(p.memory_pattern);
  EXPECT_TRUE(p.trim_heap_after_release);
  EXPECT_EQ(p.graph_optimization, GraphOptimization::kExtended);
  EXPECT_TRUE(p.optimized_model_cache.enabled);
  EXPECT_EQ(p.optimized_model_cache.dir, "");
  EXPECT_EQ(p.optimized_model_cache.max_bytes, uint64_t{2} << 30);
}

TEST(MemoryPolicyTest, ParsesTheGraphOptimizationLevelAndTheOptimizedModelCache) {
  for (const char* level : {"all", "extended", "basic", "disabled"}) {
    auto p = ParseMemoryPolicy(std::string(R"({"graph_optimization": ")") + level + "\"}");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_STREQ(GraphOptimizationName(p->graph_optimization), level);
  }
  EXPECT_EQ(MemoryPolicy{}.max_unused_models, 8);  // issue 34: closed models are bounded by default
  auto unused = ParseMemoryPolicy(R"({"max_unused_models": 0})");
  ASSERT_TRUE(unused.ok()) << unused.status().ToString();
  EXPECT_EQ(unused->max_unused_models, 0);
  EXPECT_FALSE(ParseMemoryPolicy(R"({"max_unused_models": -1})").ok());
  auto p = ParseMemoryPolicy(
      R"({"max_unused_models": 3, "optimized_model_cache": {"enabled": false, "dir": "/var/cache/x", "max_bytes": 5000000000}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->optimized_model_cache.enabled);
  EXPECT_EQ(p->optimized_model_cache.dir, "/var/cache/x");
  EXPECT_EQ(p->optimized_model_cache.max_bytes, 5000000000u);
  EXPECT_EQ(p->max_unused_models, 3);
  auto again = ParseMemoryPolicy(MemoryPolicyToJson(*p));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(MemoryPolicyToJson(*again), MemoryPolicyToJson(*p));
}

TEST(MemoryPolicyTest, ParsesTheCudaArenaMode) {
  for (const char* mode : {"shared", "per_session", "env_allocator"}) {
    auto p = ParseMemoryPolicy(std::string(R"({"cuda": {"arena": ")") + mode +
                               R"(", "arena_settings": {"max_bytes": 268435456}}})");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_STREQ(CudaArenaModeName(p->cuda.arena), mode);
    EXPECT_EQ(p->cuda.arena_settings.max_bytes, 268435456u);
    auto again = ParseMemoryPolicy(MemoryPolicyToJson(*p));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->cuda.arena, p->cuda.arena);
  }
  EXPECT_NE(MemoryPolicyToJson(MemoryPolicy{}).find(R"("arena": "shared")"), std::string::npos);
  for (const char* bad : {R"({"cuda": {"arena": "none"}})", R"({"cuda": {"arena": "Shared"}})",
                          R"({"cuda": {"arena": 1}})", R"({"cuda": {"arena": null}})"}) {
    auto p = ParseMemoryPolicy(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(), "policy.cuda.arena must be one of: shared, per_session, env_allocator") << bad;
  }
}

TEST(MemoryPolicyTest, EmptyObjectKeepsDefaults) {
  auto p = ParseMemoryPolicy("{}");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(MemoryPolicyToJson(*p), MemoryPolicyToJson(MemoryPolicy{}));
}

TEST(MemoryPolicyTest, ParsesEveryGroup) {
  auto p = ParseMemoryPolicy(R"({
    "release": "every_run", "weights_outside_arena": false, "strict_device": true, "intra_op_threads": 2,
    "cpu": {"arena": "per_session", "arena_settings": {"max_bytes": 1048576, "extend_strategy": "next_power_of_two"}},
    "cuda": {"conv_algo_search": "exhaustive", "conv_use_max_workspace": true,
             "arena_settings": {"initial_chunk_bytes": 4096, "max_dead_bytes_per_chunk": 8192}}
  })");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->release, ReleaseMode::kEveryRun);
  EXPECT_FALSE(p->weights_outside_arena);
  EXPECT_TRUE(p->strict_device);
  EXPECT_EQ(p->intra_op_threads, 2);
  EXPECT_EQ(p->cpu.arena, CpuArenaMode::kPerSession);
  EXPECT_EQ(p->cpu.arena_settings.max_bytes, 1048576u);
  EXPECT_EQ(p->cpu.arena_settings.extend_strategy, ExtendStrategy::kNextPowerOfTwo);
  EXPECT_EQ(p->cuda.conv_algo_search, ConvAlgoSearch::kExhaustive);
  EXPECT_TRUE(p->cuda.conv_use_max_workspace);
  EXPECT_EQ(p->cuda.arena_settings.initial_chunk_bytes, 4096u);
  EXPECT_EQ(p->cuda.arena_settings.max_dead_bytes_per_chunk, 8192u);
}

TEST(MemoryPolicyTest, RoundTripsThroughJson) {
  auto p = ParseMemoryPolicy(R"({"release": "never", "cpu": {"arena": "none"}})");
  ASSERT_TRUE(p.ok());
  auto again = ParseMemoryPolicy(MemoryPolicyToJson(*p));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(MemoryPolicyToJson(*again), MemoryPolicyToJson(*p));
}

TEST(MemoryPolicyTest, RejectsTyposAndBadValuesWithTheirPath) {
  struct Case {
    const char* json;
    const char* mentions;
  };
  for (const Case& c : {Case{R"({"relese": "never"})", "policy.relese"},
                        Case{R"({"release": "sometimes"})", "operation_end, every_run, never, idle"},
                        Case{R"({"cpu": {"arena_settings": {"max_bytes": -1}}})", "policy.cpu.arena_settings.max_bytes"},
                        Case{R"({"cuda": {"conv_use_max_workspace": 1}})", "true or false"},
                        Case{R"({"cpu": []})", "policy.cpu must be a JSON object"},
                        Case{R"({"graph_optimization": "max"})", "all, extended, basic, disabled"},
                        Case{R"({"optimized_model_cache": {"dir": 3}})", "policy.optimized_model_cache.dir must be a string"},
                        Case{R"({"optimized_model_cache": {"size": 3}})", "policy.optimized_model_cache.size"},
                        Case{"{not json", "not valid JSON"}}) {
    auto p = ParseMemoryPolicy(c.json);
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.mentions), std::string::npos) << p.status().message();
  }
}

TEST(MemoryPolicyTest, MissingFileIsNotFound) {
  auto p = LoadMemoryPolicy("no/such/policy.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
}

#ifndef _WIN32  // FIFOs, /dev/zero and the links of a POSIX file system (Windows: the port layer's own tests)
// Round four: the policy file went through std::ifstream. A FIFO blocked in open (before `ebb serve`
// listened, with SIGTERM already blocked), /dev/zero was read until memory ran out, and a link to a
// policy must still work (a path the user names).
TEST(MemoryPolicyTest, FileIsReadUnderTheCheckedFileRules) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ebb_policy_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] { return LoadMemoryPolicy(fifo); });
  ASSERT_EQ(opened.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "blocked on a FIFO";
  Result<MemoryPolicy> from_fifo = opened.get();
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_EQ(from_fifo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(from_fifo.status().message().find("not a regular file"), std::string::npos) << from_fifo.status().message();

  Result<MemoryPolicy> from_zero = LoadMemoryPolicy("/dev/zero");
  ASSERT_FALSE(from_zero.ok());
  EXPECT_EQ(from_zero.status().code(), StatusCode::kInvalidArgument) << from_zero.status().message();

  const fs::path big = dir / "big.json";
  {
    std::ofstream out(big);
    out << "{" << std::string(kMaxMemoryPolicyFileBytes, ' ') << "}";
  }
  Result<MemoryPolicy> from_big = LoadMemoryPolicy(big.string());
  ASSERT_FALSE(from_big.ok());
  EXPECT_NE(from_big.status().message().find("larger than the limit of 1 MiB"), std::string::npos)
      << from_big.status().message();

  const fs::path real = dir / "policy.json";
  std::ofstream(real) << R"({"release": "never"})";
  fs::create_symlink(real, dir / "link.json");
  Result<MemoryPolicy> through_link = LoadMemoryPolicy((dir / "link.json").string());
  ASSERT_TRUE(through_link.ok()) << through_link.status().ToString();
  EXPECT_EQ(through_link->release, ReleaseMode::kNever);

  Result<MemoryPolicy> bad = LoadMemoryPolicy(real.string() + "x");
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}
#endif

TEST(MemoryPolicyTest, FieldsAbsentFromTheTextKeepTheBase) {
  MemoryPolicy base;
  base.release = ReleaseMode::kIdle;
  Result<MemoryPolicy> kept = ParseMemoryPolicy(R"({"memory_pattern": true})", base);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->release, ReleaseMode::kIdle);
  Result<MemoryPolicy> set = ParseMemoryPolicy(R"({"release": "never"})", base);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->release, ReleaseMode::kNever);
}

// Round four: JSON's parser stops at a NUL, so `{"release":"never"}\0garbage` parsed, and so did a
// policy whose keys after the NUL were silently dropped.
TEST(MemoryPolicyTest, RefusesTextWithANulByte) {
  const std::string text("{\"release\": \"never\"}\0{\"relese\": 1}", 34);
  ASSERT_EQ(text.size(), 34u);
  Result<MemoryPolicy> p = ParseMemoryPolicy(text);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("NUL byte at offset 20"), std::string::npos) << p.status().message();
  // Written as JSON's escape inside a string, a NUL is text like any other.
  EXPECT_TRUE(ParseMemoryPolicy(R"({"optimized_model_cache": {"dir": "a\u0000b"}})").ok());
}

// Round four: intra_op_threads had no bound; 3,000 gave no answer in a minute, and 1,000 under an
// address-space limit ended the process from inside ORT's thread pool.
TEST(MemoryPolicyTest, BoundsTheThreadCount) {
  EXPECT_GE(MaxIntraOpThreads(), kMinMaxIntraOpThreads);
  const int max = MaxIntraOpThreads();
  ASSERT_TRUE(ParseMemoryPolicy("{\"intra_op_threads\": " + std::to_string(max) + "}").ok());
  for (const std::string& n : {std::to_string(max + 1), std::string("3000"), std::string("-1"),
                               std::string("18446744073709551615"), std::string("1.5")}) {
    Result<MemoryPolicy> p = ParseMemoryPolicy("{\"intra_op_threads\": " + n + "}");
    ASSERT_FALSE(p.ok()) << n;
    EXPECT_NE(p.status().message().find("policy.intra_op_threads must be an integer from 0 to " + std::to_string(max)),
              std::string::npos)
        << p.status().message();
  }
  // A policy built in code meets the same bound where a runtime is made from it.
  MemoryPolicy in_code;
  in_code.intra_op_threads = 100000;
  auto runtime = Runtime::Create(in_code);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(runtime.status().message().find("intra_op_threads"), std::string::npos);
}

}  // namespace
}  // namespace ebb
