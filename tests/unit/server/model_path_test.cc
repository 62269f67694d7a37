// ResolveModelFile (ebb/model_location.h): a path confined to a root,
// on real files in a temporary folder — ModelMesh's loadModel paths and
// KServe's --model-dir; and the files beside a model (LoadModelConfig,
// LoadModelLabels in ebb/model_config.h) confined to the same root, at their
// size limits exactly.
#include "core/repository.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "ebb/confined_path.h"
#include "ebb/model_config.h"
#include "ebb/model_location.h"
#include "ebb/runtime.h"
#include "test_util.h"

namespace fs = std::filesystem;
using ebb::LoadModelConfig;
using ebb::LoadModelLabels;
using ebb::StatusCode;
using ebb::ResolveModelFile;

namespace {

class ModelPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = ebb::testing::MakeTempFolder("ebb_model_path_");
    ASSERT_FALSE(tmp_.empty());
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

// The one confinement primitive (ebb/confined_path.h) that the resolvers above, the repository,
// external data and CheckedFile share.
TEST_F(ModelPathTest, ConfinementPrimitiveRefusesEveryWayOut) {
  using ebb::PathInside;
  using ebb::ResolveUnder;
  // Whole components: a root /a/b does not hold /a/bc; a trailing separator is no component.
  EXPECT_TRUE(PathInside("/a/b", "/a/b"));
  EXPECT_TRUE(PathInside("/a/b", "/a/b/c"));
  EXPECT_TRUE(PathInside("/a/b/", "/a/b/c"));
  EXPECT_FALSE(PathInside("/a/b", "/a/bc"));
  EXPECT_FALSE(PathInside("/a/b", "/a"));
  EXPECT_FALSE(PathInside("/a/b", "/x/a/b"));

  Touch(root_ / "in" / "f");
  Touch(tmp_ / "rootx" / "f");  // a sibling whose name starts like the root
  Touch(tmp_ / "outside" / "f");
  auto in = ResolveUnder(root_.string(), "in/f");
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(*in, Real(root_ / "in" / "f"));
  EXPECT_TRUE(ResolveUnder(root_.string(), "in/../in/./f").ok()) << "a '..' that stays inside";
  EXPECT_TRUE(ResolveUnder(root_.string(), (root_ / "in" / "f").string()).ok()) << "absolute, inside";
  struct Case {
    std::string path;
    StatusCode code;
    std::string says;
  };
  fs::create_directory_symlink(tmp_ / "outside", root_ / "escape");
  fs::create_symlink(tmp_ / "outside" / "f", root_ / "in" / "link_out");
  fs::create_symlink(root_ / "in" / "missing", root_ / "in" / "dangling");
  const std::vector<Case> cases = {
      {"../outside/f", StatusCode::kInvalidArgument, "leaves 'R'"},
      {"in/../../outside/f", StatusCode::kInvalidArgument, "leaves 'R'"},
      {(tmp_ / "outside" / "f").string(), StatusCode::kInvalidArgument, "leaves 'R'"},
      {(tmp_ / "rootx" / "f").string(), StatusCode::kInvalidArgument, "leaves 'R'"},
      {"../rootx/f", StatusCode::kInvalidArgument, "leaves 'R'"},
      {"escape/f", StatusCode::kInvalidArgument, "resolves outside 'R' (to "},
      {"in/link_out", StatusCode::kInvalidArgument, "resolves outside 'R' (to "},
      {"in/missing", StatusCode::kNotFound, "does not exist under 'R'"},
      {"in/dangling", StatusCode::kNotFound, "does not exist under 'R'"},
      {"../outside/missing", StatusCode::kInvalidArgument, "leaves 'R'"},  // the text first
  };
  for (const Case& c : cases) {
    auto r = ResolveUnder(root_.string(), c.path);
    ASSERT_FALSE(r.ok()) << c.path << " -> " << *r;
    EXPECT_EQ(r.status().code(), c.code) << c.path << ": " << r.status().ToString();
    std::string says = c.says;
    says.replace(says.find('R'), 1, root_.string());
    EXPECT_NE(r.status().message().find(says), std::string::npos) << c.path << ": " << r.status().ToString();
  }
  // The root given through a link: confined to where it leads, by name or by its link.
  fs::create_directory_symlink(root_, tmp_ / "root_link");
  auto linked = ResolveUnder((tmp_ / "root_link").string(), "in/f");
  ASSERT_TRUE(linked.ok()) << linked.status().ToString();
  EXPECT_EQ(*linked, Real(root_ / "in" / "f"));
  EXPECT_TRUE(ResolveUnder((tmp_ / "root_link").string(), (tmp_ / "root_link" / "in" / "f").string()).ok());
  EXPECT_EQ(ResolveUnder((tmp_ / "root_link").string(), "escape/f").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnder((tmp_ / "no_root").string(), "f").status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ModelPathTest, FolderWithModelOnnxRelativeOrAbsolute) {
  Touch(root_ / "a" / "model.onnx");
  auto relative = ResolveModelFile(root_.string(), "a");
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_EQ(relative->path, Real(root_ / "a" / "model.onnx"));
  EXPECT_EQ(relative->version, "1");
  EXPECT_EQ(relative->root, Real(root_)) << "the files beside the model are confined to the same root";
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

// The one listing of a model folder under the three resolvers (the CLI's, ModelMesh's, the repository's).
TEST_F(ModelPathTest, ReadModelFolderListsAndConfines) {
  const fs::path m = root_ / "m";
  Touch(m / "model.onnx");
  Touch(m / "extra.onnx");
  Touch(m / "3" / "model.onnx");
  Touch(m / "12" / "model.onnx");
  fs::create_directories(m / "5");   // a version folder without a model
  Touch(m / "07" / "model.onnx");    // not a version name (leading zero)
  Touch(m / "other" / "model.onnx");  // nor this
  Touch(tmp_ / "outside" / "model.onnx");
  Touch(tmp_ / "outside_v" / "model.onnx");
  fs::create_symlink(tmp_ / "outside" / "model.onnx", m / "out.onnx");
  fs::create_directory_symlink(tmp_ / "outside_v", m / "7");  // a version folder leading out
  fs::create_directory_symlink(m, m / "8");                   // a version folder that is the folder itself
  fs::create_directories(m / "9");
  fs::create_symlink(tmp_ / "outside" / "model.onnx", m / "9" / "model.onnx");  // its model.onnx leading out

  // Unconfined (a person's own folder): links followed wherever they lead.
  const ebb::ModelFolderLayout open = ebb::ReadModelFolder(m.string());
  ASSERT_TRUE(open.model_onnx.has_value());
  EXPECT_EQ(open.model_onnx->path, (m / "model.onnx").string()) << "the path as given, for the person's messages";
  ASSERT_EQ(open.onnx_files.size(), 2u);
  std::vector<int64_t> numbers;
  for (const auto& v : open.versions) numbers.push_back(v.number);
  EXPECT_EQ(numbers, (std::vector<int64_t>{3, 7, 8, 9, 12}));
  EXPECT_EQ(open.empty_versions, (std::vector<std::string>{"5"}));

  // Confined to the root: the files out are listed with their refusal, the version folders out are empty.
  const ebb::ModelFolderLayout confined = ebb::ReadModelFolder(Real(m), root_.string(), "the root");
  ASSERT_TRUE(confined.model_onnx.has_value());
  EXPECT_TRUE(confined.model_onnx->confined.ok());
  EXPECT_EQ(confined.model_onnx->path, Real(m / "model.onnx"));
  ASSERT_EQ(confined.onnx_files.size(), 2u);
  EXPECT_TRUE(confined.onnx_files[0].confined.ok()) << confined.onnx_files[0].path;  // extra.onnx
  EXPECT_EQ(confined.onnx_files[1].confined.code(), StatusCode::kInvalidArgument);    // out.onnx
  EXPECT_NE(confined.onnx_files[1].confined.message().find("resolves outside the root"), std::string::npos)
      << confined.onnx_files[1].confined.ToString();
  numbers.clear();
  for (const auto& v : confined.versions) numbers.push_back(v.number);
  EXPECT_EQ(numbers, (std::vector<int64_t>{3, 9, 12}));
  EXPECT_EQ(confined.versions[1].model_onnx.confined.code(), StatusCode::kInvalidArgument) << "9/model.onnx leads out";
  EXPECT_EQ(confined.empty_versions, (std::vector<std::string>{"5", "7", "8"}));
  // So ModelMesh is refused the link out where it is the file chosen, and takes model.onnx here.
  auto chosen = ResolveModelFile(root_.string(), "m");
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->path, Real(m / "model.onnx"));
  EXPECT_EQ(ebb::VersionNumber("12"), 12);
  EXPECT_FALSE(ebb::VersionNumber("07").has_value());
  EXPECT_FALSE(ebb::VersionNumber("1234567890123456789").has_value());
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
  auto linked = ResolveModelFile((tmp_ / "root_link").string(), "a");
  ASSERT_TRUE(linked.ok());
  EXPECT_EQ(linked->root, Real(root_));
}

TEST_F(ModelPathTest, FilesBesideAModelAreConfinedRegularAndCapped) {
  const fs::path m = root_ / "m";
  Touch(m / "model.onnx");
  const std::string folder = m.string(), root = root_.string();
  // Nothing there: defaults.
  ASSERT_TRUE(LoadModelConfig(folder, root).ok());
  ASSERT_TRUE(LoadModelLabels(folder, root).ok());
  EXPECT_TRUE(LoadModelLabels(folder, root)->empty());
  // A link inside the root is followed; a link out, a dangling link, a folder, a FIFO are refused.
  fs::create_directories(root_ / "shared");
  std::ofstream(root_ / "shared" / "labels.txt") << "cat\r\ndog\n";
  fs::create_symlink(root_ / "shared" / "labels.txt", m / "labels.txt");
  auto labels = LoadModelLabels(folder, root);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(*labels, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(LoadModelLabels(folder, folder).status().code(), StatusCode::kInvalidArgument) << "out of a narrower root";
  Touch(tmp_ / "outside" / "config.json");
  fs::create_symlink(tmp_ / "outside" / "config.json", m / "config.json");
  EXPECT_NE(LoadModelConfig(folder, root).status().message().find("resolves outside"), std::string::npos);
  fs::remove(m / "config.json");
  fs::create_symlink(m / "nothing.json", m / "config.json");
  EXPECT_NE(LoadModelConfig(folder, root).status().message().find("cannot be resolved"), std::string::npos);
  fs::remove(m / "config.json");
  fs::create_directories(m / "config.json");
  EXPECT_NE(LoadModelConfig(folder, root).status().message().find("is a folder, not a regular file"),
            std::string::npos);
  fs::remove(m / "config.json");
  ASSERT_EQ(mkfifo((m / "config.json").c_str(), 0600), 0);
  EXPECT_NE(LoadModelConfig(folder, root).status().message().find("is a FIFO"), std::string::npos);
  fs::remove(m / "config.json");
  // config.json: exactly the limit is read, one byte more is not.
  std::string config = R"({"kind": "tensor"})";
  config.insert(config.size() - 1, ebb::kMaxConfigFileBytes - config.size(), ' ');
  std::ofstream(m / "config.json") << config;
  EXPECT_TRUE(LoadModelConfig(folder, root).ok()) << LoadModelConfig(folder, root).status().ToString();
  std::ofstream(m / "config.json", std::ios::app) << " ";
  EXPECT_NE(LoadModelConfig(folder, root).status().message().find("larger than the limit of 64 KiB for config.json"),
            std::string::npos)
      << LoadModelConfig(folder, root).status().ToString();
  // labels.txt: exactly kMaxLabels lines are read, one more is not.
  fs::remove(m / "labels.txt");
  std::ofstream(m / "labels.txt") << std::string(ebb::kMaxLabels, '\n');
  ASSERT_TRUE(LoadModelLabels(folder, root).ok());
  EXPECT_EQ(LoadModelLabels(folder, root)->size(), ebb::kMaxLabels);
  std::ofstream(m / "labels.txt", std::ios::app) << "one more";
  EXPECT_NE(LoadModelLabels(folder, root).status().message().find("more than 262144 lines"), std::string::npos);
}

}  // namespace

// Issue 34: the repository's own files are the operator's, and its links are followed by default,
// as Triton follows them: Hugging Face's cache (a snapshot folder whose files link into
// ../../blobs/) linked into the repository, and a model file linked to a shared store. With
// confine_links they are refused, naming the flag. Names a caller gives stay confined.
namespace {

class RepositoryLinksTest : public ModelPathTest {
 protected:
  void SetUp() override {
    ModelPathTest::SetUp();
    const fs::path cache = tmp_ / "hf" / "models--ebb--tiny";
    fs::create_directories(cache / "blobs");
    fs::copy_file(std::string(EBB_MODELS_DIR) + "/tiny/model.onnx", cache / "blobs" / "0a1b2c");
    std::ofstream(cache / "blobs" / "3d4e5f") << R"({"device": "cpu"})";
    fs::create_directories(cache / "snapshots" / "rev1");
    fs::create_symlink("../../blobs/0a1b2c", cache / "snapshots" / "rev1" / "model.onnx");
    fs::create_symlink("../../blobs/3d4e5f", cache / "snapshots" / "rev1" / "config.json");
    fs::create_symlink(cache / "snapshots" / "rev1", root_ / "hf_tiny");
    fs::create_directories(tmp_ / "store");
    fs::copy_file(std::string(EBB_MODELS_DIR) + "/tiny/model.onnx", tmp_ / "store" / "tiny.onnx");
    fs::create_directories(root_ / "shared" / "1");
    fs::create_symlink(tmp_ / "store" / "tiny.onnx", root_ / "shared" / "1" / "model.onnx");
  }

  std::unique_ptr<ebb::server::ModelRepository> Open(bool confine) {
    if (!runtime_) runtime_ = std::move(ebb::Runtime::Create()).value();
    ebb::server::ModelRepository::Options options;
    options.root = root_.string();
    options.confine_links = confine;
    auto repository = ebb::server::ModelRepository::Open(*runtime_, options);
    EXPECT_TRUE(repository.ok()) << repository.status().ToString();
    return std::move(repository).value();
  }

  std::unique_ptr<ebb::Runtime> runtime_;
};

TEST_F(RepositoryLinksTest, LinksOutOfTheRepositoryAreFollowedByDefault) {
  auto repository = Open(/*confine=*/false);
  for (const char* name : {"hf_tiny", "shared"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(repository->Load(name).ok()) << repository->Load(name).ToString();
    auto handle = repository->Acquire(name);
    EXPECT_TRUE(handle.ok()) << handle.status().ToString();
  }
  EXPECT_EQ(repository->Folder("hf_tiny")->config->device, "cpu") << "config.json, a link into blobs/, was read";
  EXPECT_TRUE(repository->Problems().empty());
  // A name is still one component of the repository.
  EXPECT_EQ(repository->Load("../hf").code(), StatusCode::kInvalidArgument);
}

TEST_F(RepositoryLinksTest, ConfineLinksRefusesThemNamingTheFlag) {
  auto repository = Open(/*confine=*/true);
  for (const char* name : {"hf_tiny", "shared"}) {
    SCOPED_TRACE(name);
    ebb::Status st = repository->Load(name);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find("outside the repository (--confine-links)"), std::string::npos) << st.ToString();
  }
}

TEST(ModelConfigTest, GraphOptimizationIsReadCheckedAndWrittenBack) {
  auto unset = ebb::ParseModelConfig(R"({"kind": "tensor"})");
  ASSERT_TRUE(unset.ok()) << unset.status().ToString();
  EXPECT_FALSE(unset->graph_optimization.has_value()) << "unset means the policy's level";
  auto all = ebb::ParseModelConfig(R"({"graph_optimization": "all"})");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->graph_optimization, ebb::GraphOptimization::kAll);
  auto again = ebb::ParseModelConfig(ebb::ModelConfigToJson(*all));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->graph_optimization, ebb::GraphOptimization::kAll);
  for (const char* bad : {R"({"graph_optimization": "fastest"})", R"({"graph_optimization": 99})",
                          R"({"graph_optimization": null})"}) {
    auto refused = ebb::ParseModelConfig(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("config.graph_optimization must be"), std::string::npos)
        << refused.status().ToString();
  }
}

}  // namespace
