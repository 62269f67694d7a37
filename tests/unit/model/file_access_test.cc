// CheckedFile::Open and its FileRules (src/model/file_access.h), and the one confinement check they
// share with the model resolver (ebb/confined_path.h), on real files in a temporary folder: each
// hostile case is refused, with the refusal saying why. POSIX only (FIFOs, modes, owners, links).
#include "file_access.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "ebb/confined_path.h"
#include "test_util.h"

namespace fs = std::filesystem;
using ebb::StatusCode;
using ebb::detail::CheckedFile;
using ebb::detail::FileRules;
using ebb::detail::ReadCheckedFile;

namespace {

class FileAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = ebb::testing::MakeTempFolder("ebb_file_access_");
    ASSERT_FALSE(tmp_.empty());
    root_ = tmp_ / "root";
    fs::create_directories(root_ / "m");
    fs::create_directories(tmp_ / "outside");
    Write(root_ / "m" / "model.onnx", "model");
    Write(tmp_ / "outside" / "secret", "secret");
  }
  void TearDown() override { fs::remove_all(tmp_); }
  static void Write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }
  // Rules for a file beside a model under root_.
  FileRules Beside(uint64_t max_bytes = 1 << 20) const {
    return {.what = "config.json", .root = root_.string(), .max_bytes = max_bytes};
  }
  // `path` opened under `rules` must be refused with `code`, the message saying `says`.
  static void ExpectRefused(const fs::path& path, const FileRules& rules, StatusCode code, const std::string& says) {
    auto file = CheckedFile::Open(path.string(), rules);
    ASSERT_FALSE(file.ok()) << path << " was opened";
    EXPECT_EQ(file.status().code(), code) << file.status().ToString();
    EXPECT_NE(file.status().message().find(says), std::string::npos)
        << path << ": expected '" << says << "' in: " << file.status().ToString();
  }

  fs::path tmp_, root_;
};

TEST_F(FileAccessTest, FileBesideAModelInsideTheRootIsRead) {
  Write(root_ / "m" / "config.json", "{\"device\": \"cpu\"}");
  auto file = CheckedFile::Open((root_ / "m" / "config.json").string(), Beside());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->size(), 17u);
  auto text = file->ReadAll();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "{\"device\": \"cpu\"}");
  // A link that stays inside the root is followed.
  fs::create_symlink(root_ / "m" / "config.json", root_ / "m" / "alias.json");
  auto alias = ReadCheckedFile((root_ / "m" / "alias.json").string(), Beside());
  ASSERT_TRUE(alias.ok()) << alias.status().ToString();
  EXPECT_EQ(*alias, "{\"device\": \"cpu\"}");
  // Nothing there, not even a dangling link: kNotFound (which LoadModelConfig reads as "no file").
  ExpectRefused(root_ / "m" / "missing.json", Beside(), StatusCode::kNotFound, "does not exist");
}

TEST_F(FileAccessTest, LinkOutOfTheRootIsRefused) {
  fs::create_symlink(tmp_ / "outside" / "secret", root_ / "m" / "config.json");
  ExpectRefused(root_ / "m" / "config.json", Beside(), StatusCode::kInvalidArgument,
                "resolves outside " + fs::canonical(root_).string());
  // A folder on the way that leads out.
  fs::create_directory_symlink(tmp_ / "outside", root_ / "m" / "shared");
  ExpectRefused(root_ / "m" / "shared" / "secret", Beside(), StatusCode::kInvalidArgument, "resolves outside");
}

TEST_F(FileAccessTest, DotDotEscapeIsRefused) {
  ExpectRefused(root_ / "m" / ".." / ".." / "outside" / "secret", Beside(), StatusCode::kInvalidArgument,
                "resolves outside");
  // A ".." that stays inside is fine.
  Write(root_ / "m" / "labels.txt", "cat\n");
  EXPECT_TRUE(CheckedFile::Open((root_ / "m" / ".." / "m" / "labels.txt").string(), Beside()).ok());
}

TEST_F(FileAccessTest, FifoIsRefusedWithoutBlocking) {
  const fs::path fifo = root_ / "m" / "config.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const FileRules& rules : {Beside(), FileRules{.what = "the file", .follow_links = true}}) {
    // Opened on another thread, so that an open that blocks fails the test instead of hanging it.
    auto opened = std::async(std::launch::async, [&] { return CheckedFile::Open(fifo.string(), rules).status(); });
    if (opened.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      const int writer = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // lets the blocked open return
      ADD_FAILURE() << "opening a FIFO blocked";
      opened.wait();
      if (writer >= 0) close(writer);
      continue;
    }
    const ebb::Status why = opened.get();
    EXPECT_EQ(why.code(), StatusCode::kInvalidArgument) << why.ToString();
    EXPECT_NE(why.message().find("is a FIFO, not a regular file"), std::string::npos) << why.ToString();
  }
  ExpectRefused(root_ / "m", Beside(), StatusCode::kInvalidArgument, "is a folder, not a regular file");
}

TEST_F(FileAccessTest, FileOverItsCapIsRefused) {
  Write(root_ / "m" / "config.json", std::string(64, 'x'));
  EXPECT_TRUE(ReadCheckedFile((root_ / "m" / "config.json").string(), Beside(64)).ok()) << "exactly the cap";
  ExpectRefused(root_ / "m" / "config.json", Beside(63), StatusCode::kInvalidArgument,
                "is 64 bytes, larger than the limit of 63 bytes for config.json");
  // A file that says it is empty but is not (the kernel's files do) is bounded while it is read.
  const fs::path claims_zero = "/proc/self/status";
  if (!fs::exists(claims_zero) || fs::file_size(claims_zero) != 0) GTEST_SKIP() << "no file that claims size 0";
  auto file = CheckedFile::Open(claims_zero.string(), {.what = "the status", .max_bytes = 16});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->size(), 0u);
  auto text = file->ReadAll();
  ASSERT_FALSE(text.ok()) << "read " << text->size() << " bytes past the cap";
  EXPECT_NE(text.status().message().find("larger than the limit of 16 bytes for the status (it grew while it was read)"),
            std::string::npos)
      << text.status().ToString();
}

TEST_F(FileAccessTest, OwnPrivateRefusesWhatOthersCouldWrite) {
  const FileRules own{.what = "the cache entry", .own_private = true};
  const fs::path entry = tmp_ / "entry";
  Write(entry, "bytes");
  ASSERT_EQ(chmod(entry.c_str(), 0600), 0);
  EXPECT_TRUE(CheckedFile::Open(entry.string(), own).ok());
  ASSERT_EQ(chmod(entry.c_str(), 0620), 0);
  ExpectRefused(entry, own, StatusCode::kInvalidArgument, "is writable by group or others (mode 0620)");
  ASSERT_EQ(chmod(entry.c_str(), 0602), 0);
  ExpectRefused(entry, own, StatusCode::kInvalidArgument, "is writable by group or others (mode 0602)");
  ASSERT_EQ(chmod(entry.c_str(), 0600), 0);
  // A link, even to this user's own private file.
  fs::create_symlink(entry, tmp_ / "entry_link");
  ExpectRefused(tmp_ / "entry_link", own, StatusCode::kInvalidArgument, "is a symbolic link: refused");
  // Another user's file: made so as root; else a system file, when there is one of another user.
  fs::path foreign = tmp_ / "foreign";
  if (geteuid() == 0) {
    Write(foreign, "bytes");
    ASSERT_EQ(chmod(foreign.c_str(), 0600), 0);
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
  } else {
    foreign = "/etc/passwd";
  }
  struct stat st {};
  if (stat(foreign.c_str(), &st) != 0 || st.st_uid == geteuid()) GTEST_SKIP() << "no file of another user";
  ExpectRefused(foreign, own, StatusCode::kInvalidArgument,
                "belongs to user " + std::to_string(st.st_uid) + ", not to this process's user: refused");
}

TEST_F(FileAccessTest, FollowLinksForAUsersOwnPath) {
  fs::create_symlink(tmp_ / "outside" / "secret", tmp_ / "mine");
  const FileRules followed{.what = "the image", .follow_links = true};
  auto text = ReadCheckedFile((tmp_ / "mine").string(), followed);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "secret");
  // Without it, a link in the final name is refused (O_NOFOLLOW).
  ExpectRefused(tmp_ / "mine", {.what = "the image"}, StatusCode::kInvalidArgument, "is a symbolic link: refused");
  // Followed to a FIFO or a folder, the rules apply to what the link leads to.
  ASSERT_EQ(mkfifo((tmp_ / "pipe").c_str(), 0600), 0);
  fs::create_symlink(tmp_ / "pipe", tmp_ / "pipe_link");
  ExpectRefused(tmp_ / "pipe_link", followed, StatusCode::kInvalidArgument, "is a FIFO");
}

// The confinement check itself: what CheckedFile's root rule, the model resolver and external data call.
TEST_F(FileAccessTest, ConfinementCheck) {
  using ebb::PathInside;
  using ebb::ResolveBelow;
  using ebb::ResolveUnder;
  EXPECT_TRUE(PathInside("/a/b", "/a/b/c"));
  EXPECT_FALSE(PathInside("/a/b", "/a/bc"));
  const std::string real_root = fs::canonical(root_).string();
  auto inside = ResolveUnder(root_.string(), "m/model.onnx");
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(*inside, real_root + "/m/model.onnx");
  auto dotdot = ResolveUnder(root_.string(), "m/../../outside/secret");
  EXPECT_EQ(dotdot.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dotdot.status().message().find("leaves '" + root_.string() + "'"), std::string::npos)
      << dotdot.status().ToString();
  fs::create_symlink(tmp_ / "outside" / "secret", root_ / "m" / "out");
  auto linked = ResolveUnder(root_.string(), "m/out", "the model's folder");
  EXPECT_EQ(linked.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(linked.status().message().find("resolves outside the model's folder (to " +
                                           fs::canonical(tmp_ / "outside" / "secret").string() + ")"),
            std::string::npos)
      << linked.status().ToString();
  // ResolveBelow: inside and not the root itself, however it is named.
  auto below = ResolveBelow(root_.string(), "m");
  ASSERT_TRUE(below.ok()) << below.status().ToString();
  EXPECT_EQ(*below, real_root + "/m");
  fs::create_directory_symlink(root_, root_ / "m" / "up");
  for (const std::string& itself : {std::string("."), std::string("m/.."), std::string("m/up")}) {
    auto r = ResolveBelow(root_.string(), itself);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << itself;
    EXPECT_NE(r.status().message().find("is the folder itself"), std::string::npos) << itself;
  }
  EXPECT_EQ(ResolveBelow(root_.string(), "m/out").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
