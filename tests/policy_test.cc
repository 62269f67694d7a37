#include <gtest/gtest.h>

#include "ebb/memory_policy.h"

namespace ebb {
namespace {

TEST(MemoryPolicyTest, DefaultsAreTheDocumentedOnes) {
  MemoryPolicy p;
  EXPECT_EQ(p.release, ReleaseMode::kOperationEnd);
  EXPECT_EQ(p.cpu.arena, CpuArenaMode::kShared);
  EXPECT_EQ(p.cpu.arena_settings.extend_strategy, ExtendStrategy::kSameAsRequested);
  EXPECT_EQ(p.cuda.arena_settings.extend_strategy, ExtendStrategy::kSameAsRequested);
  EXPECT_EQ(p.cuda.arena, CudaArenaMode::kShared);
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

}  // namespace
}  // namespace ebb
