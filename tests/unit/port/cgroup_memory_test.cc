// CgroupMemoryLimitBytes (ebb/memory_stats.h): the container's memory limit,
// parsed from a fake cgroup file system in a temporary folder (the parsing
// is ebb's own logic; the memory itself is not faked anywhere).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ebb/memory_stats.h"
#include "test_util.h"

namespace fs = std::filesystem;
using ebb::CgroupMemoryLimitBytes;

namespace {

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = ebb::testing::MakeTempFolder("ebb_cgroup_");
    ASSERT_FALSE(tmp_.empty());
    root_ = tmp_ / "sys";
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(tmp_); }
  void Write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  int64_t Limit(const std::string& proc_self_cgroup) {
    Write(tmp_ / "cgroup", proc_self_cgroup);
    return CgroupMemoryLimitBytes(root_.string(), (tmp_ / "cgroup").string());
  }
  fs::path tmp_, root_;
};

TEST_F(CgroupTest, NoFilesNoLimit) { EXPECT_EQ(Limit("0::/\n"), 0); }

TEST_F(CgroupTest, V2AtTheMountRoot) {
  Write(root_ / "memory.max", "536870912\n");
  EXPECT_EQ(Limit("0::/\n"), 536870912);
  Write(root_ / "memory.max", "max\n");
  EXPECT_EQ(Limit("0::/\n"), 0);
}

TEST_F(CgroupTest, V2OwnGroupAndParentsLowestWins) {
  Write(root_ / "kubepods" / "memory.max", "2000000000\n");
  Write(root_ / "kubepods" / "pod1" / "memory.max", "max\n");
  Write(root_ / "kubepods" / "pod1" / "ctr" / "memory.max", "3000000000\n");
  EXPECT_EQ(Limit("0::/kubepods/pod1/ctr\n"), 2000000000);
  Write(root_ / "kubepods" / "pod1" / "memory.max", "1000000000\n");
  EXPECT_EQ(Limit("0::/kubepods/pod1/ctr\n"), 1000000000);
}

TEST_F(CgroupTest, V1LimitAndItsNoLimitValue) {
  Write(root_ / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  EXPECT_EQ(Limit("4:memory:/\n0::/\n"), 0);
  Write(root_ / "memory" / "docker" / "abc" / "memory.limit_in_bytes", "268435456\n");
  EXPECT_EQ(Limit("12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n"), 268435456);
  // Controllers listed together ("cpu,memory") count as memory.
  EXPECT_EQ(Limit("4:cpuacct,memory:/docker/abc\n"), 268435456);
}

TEST_F(CgroupTest, GarbageIsNoLimit) {
  Write(root_ / "memory.max", "lots\n");
  EXPECT_EQ(Limit("0::/\n"), 0);
  Write(root_ / "memory.max", "-5\n");
  EXPECT_EQ(Limit("0::/\n"), 0);
  Write(root_ / "memory.max", "0\n");
  EXPECT_EQ(Limit("0::/\n"), 0);
  Write(root_ / "memory.max", "99999999999999999999999\n");
  EXPECT_EQ(Limit("garbage line\n0::/\n"), 0);
}

TEST(PhysicalMemory, NeverAboveTheMachineNorTheLimit) {
  const int64_t machine = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const int64_t limit = CgroupMemoryLimitBytes();
  EXPECT_LE(ebb::PhysicalMemoryBytes(), machine);
  EXPECT_GT(ebb::PhysicalMemoryBytes(), 0);
  if (limit > 0) {
    EXPECT_LE(ebb::PhysicalMemoryBytes(), limit);
  }
}

}  // namespace
