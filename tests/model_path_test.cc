// ResolveModelFile (server/core/model_path.h): a path confined to a root,
// on real files in a temporary folder — ModelMesh's loadModel paths and
// KServe's --model-dir.
#include "core/model_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using ebb::StatusCode;
using ebb::server::ResolveModelFile;

namespace {

class ModelPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ebb_model_path_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    tmp_ = fs::path(pattern);
    root_ = tmp_ / "root";
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(tmp_); }
  static void Touch(const fs::path& file) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "x";
  }
  std::string Real(const fs::path& p) const { return fs::canonical(p).string(); }

  fs::path tmp_, root_;
};

TEST_F(ModelPathTest, FolderWithModelOnnxRelativeOrAbsolute) {
  Touch(root_ / "a" / "model.onnx");
  auto relative = ResolveModelFile(root_.string(), "a");
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_EQ(relative->path, Real(root_ / "a" / "model.onnx"));
  EXPECT_EQ(relative->version, "1");
  auto absolute = ResolveModelFile(root_.string(), (root_ / "a").string());
  ASSERT_TRUE(absolute.ok());
  EXPECT_EQ(absolute->path, relative->path);
  auto file = ResolveModelFile(root_.string(), (root_ / "a" / "model.onnx").string());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->path, relative->path);
}

TEST_F(ModelPathTest, OneOnnxFileOrVersionFolders) {
  Touch(root_ / "one" / "mnist.onnx");
  auto one = ResolveModelFile(root_.string(), "one");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->path, Real(root_ / "one" / "mnist.onnx"));
  Touch(root_ / "v" / "1" / "model.onnx");
  Touch(root_ / "v" / "12" / "model.onnx");
  Touch(root_ / "v" / "3" / "model.onnx");
  auto versioned = ResolveModelFile(root_.string(), "v");
  ASSERT_TRUE(versioned.ok());
  EXPECT_EQ(versioned->path, Real(root_ / "v" / "12" / "model.onnx"));
  EXPECT_EQ(versioned->version, "12");
  Touch(root_ / "two" / "a.onnx");
  Touch(root_ / "two" / "b.onnx");
  EXPECT_EQ(ResolveModelFile(root_.string(), "two").status().code(), StatusCode::kFailedPrecondition);
  fs::create_directories(root_ / "empty");
  EXPECT_EQ(ResolveModelFile(root_.string(), "empty").status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ModelPathTest, MissingIsFailedPrecondition) {
  EXPECT_EQ(ResolveModelFile(root_.string(), "nothing").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResolveModelFile((tmp_ / "no_root").string(), "a").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResolveModelFile(root_.string(), "").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelPathTest, NothingOutsideTheRoot) {
  Touch(tmp_ / "outside" / "model.onnx");
  Touch(root_ / "a" / "model.onnx");
  // "..", an absolute path elsewhere, a sibling whose name starts like the root.
  EXPECT_EQ(ResolveModelFile(root_.string(), "../outside").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveModelFile(root_.string(), "a/../../outside/model.onnx").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveModelFile(root_.string(), (tmp_ / "outside").string()).status().code(),
            StatusCode::kInvalidArgument);
  Touch(tmp_ / "root2" / "model.onnx");
  EXPECT_EQ(ResolveModelFile(root_.string(), (tmp_ / "root2").string()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveModelFile(root_.string(), "/etc/passwd").status().code(), StatusCode::kInvalidArgument);
  // A ".." that stays inside is fine.
  EXPECT_TRUE(ResolveModelFile(root_.string(), "a/../a").ok());
  // Symlinks: a folder link out, a model.onnx link out, a link to a file out.
  fs::create_directory_symlink(tmp_ / "outside", root_ / "escape");
  EXPECT_EQ(ResolveModelFile(root_.string(), "escape").status().code(), StatusCode::kInvalidArgument);
  fs::create_directories(root_ / "inner");
  fs::create_symlink(tmp_ / "outside" / "model.onnx", root_ / "inner" / "model.onnx");
  EXPECT_EQ(ResolveModelFile(root_.string(), "inner").status().code(), StatusCode::kInvalidArgument);
  fs::create_directories(root_ / "one");
  fs::create_symlink(tmp_ / "outside" / "model.onnx", root_ / "one" / "x.onnx");
  EXPECT_EQ(ResolveModelFile(root_.string(), "one").status().code(), StatusCode::kInvalidArgument);
  // A link that stays inside is followed.
  fs::create_directory_symlink(root_ / "a", root_ / "alias");
  auto alias = ResolveModelFile(root_.string(), "alias");
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->path, Real(root_ / "a" / "model.onnx"));
  // The root itself given through a link: its real path is the root.
  fs::create_directory_symlink(root_, tmp_ / "root_link");
  EXPECT_TRUE(ResolveModelFile((tmp_ / "root_link").string(), "a").ok());
}

}  // namespace
