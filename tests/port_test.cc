// The port layer (src/port/port.h): each function against a value known
// without it. Runs on Linux and, in the Windows build, under Wine.
#include "port.h"

#include <gtest/gtest.h>

#ifndef _WIN32
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace ebb::port {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = 1 << 20;

// A fresh folder of this test's, removed at the end.
class PortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ebb_port_test_" + std::to_string(ProcessId()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return Utf8FromPath(path);
  }
  fs::path dir_;
};

TEST_F(PortTest, FileIdentityTellsFilesAndVersionsApart) {
  const std::string a = Write("a.bin", "hello");
  const std::string b = Write("b.bin", "world");
  Result<FileInfo> ia = StatPath(a, true);
  Result<FileInfo> ib = StatPath(b, true);
  ASSERT_TRUE(ia.ok()) << ia.status().ToString();
  ASSERT_TRUE(ib.ok()) << ib.status().ToString();
  EXPECT_EQ(ia->kind, FileKind::kRegular);
  EXPECT_EQ(ia->identity.size, 5);
  EXPECT_TRUE(ia->owned_by_me);
  // Same folder, same device; different files, different inode (file index).
  EXPECT_EQ(ia->identity.device, ib->identity.device);
  EXPECT_NE(ia->identity.inode, ib->identity.inode);
  // The open file says the same as the path.
  Result<ReadOnlyFile> file = ReadOnlyFile::Open(a, false);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<FileInfo> opened = file->Info();
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->identity, ia->identity);
  // A longer write is another version.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Write("a.bin", "hello again");
  Result<FileInfo> again = StatPath(a, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->identity.inode, ia->identity.inode);
  EXPECT_EQ(again->identity.size, 11);
  EXPECT_FALSE(again->identity == ia->identity);
  // A folder is a folder; nothing is kNotFound.
  Result<FileInfo> folder = StatPath(Utf8FromPath(dir_), true);
  ASSERT_TRUE(folder.ok());
  EXPECT_EQ(folder->kind, FileKind::kFolder);
  EXPECT_EQ(StatPath(Utf8FromPath(dir_ / "none"), true).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadOnlyFile::Open(Utf8FromPath(dir_ / "none"), false).status().code(), StatusCode::kNotFound);
}

TEST_F(PortTest, ReadOnlyFileReadsTheBytes) {
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  Result<ReadOnlyFile> file = ReadOnlyFile::Open(Write("r.bin", bytes), true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::string got;
  char chunk[4096];
  while (true) {
    Result<size_t> n = file->Read(chunk, sizeof chunk);
    ASSERT_TRUE(n.ok());
    if (*n == 0) break;
    got.append(chunk, *n);
  }
  EXPECT_EQ(got, bytes);
}

TEST_F(PortTest, AMappingHoldsTheFilesBytes) {
  std::string bytes(3 * 4096 + 17, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13 + 1);
  const std::string path = Write("m.bin", bytes);
  Result<Mapping> mapping = Mapping::Open(path);
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  ASSERT_EQ(mapping->size(), bytes.size());
  EXPECT_EQ(std::memcmp(mapping->data(), bytes.data(), bytes.size()), 0);
  Result<FileInfo> info = StatPath(path, true);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(mapping->identity(), info->identity);
  // Empty files and folders are refused.
  EXPECT_EQ(Mapping::Open(Write("empty.bin", "")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Mapping::Open(Utf8FromPath(dir_)).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PortTest, ANonAsciiPathWorksEverywhere) {
  // "modèle-模型.bin" in UTF-8.
  const std::string name = "mod\xC3\xA8le-\xE6\xA8\xA1\xE5\x9E\x8B.bin";
  const fs::path path = PathFromUtf8(Utf8FromPath(dir_) + "/" + name);
  std::ofstream(path, std::ios::binary) << "abc";
  ASSERT_TRUE(fs::exists(path));
  const std::string utf8 = Utf8FromPath(path);
  EXPECT_NE(utf8.find(name), std::string::npos);
  Result<FileInfo> info = StatPath(utf8, true);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->identity.size, 3);
  Result<Mapping> mapping = Mapping::Open(utf8);
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  EXPECT_EQ(std::string(static_cast<const char*>(mapping->data()), mapping->size()), "abc");
  Result<std::string> real = RealPath(utf8);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_NE(real->find(name), std::string::npos);
  // What ORT gets names the same file (narrow on POSIX, UTF-16 on Windows).
  const std::basic_string<OrtChar> ort = OrtPath(utf8);
  EXPECT_EQ(fs::path(ort), path);
  // fopen of the UTF-8 path (_wfopen on Windows: its fopen reads the ANSI code page).
  std::FILE* file = OpenFile(utf8, "rb");
  ASSERT_NE(file, nullptr);
  char bytes[4] = {};
  EXPECT_EQ(std::fread(bytes, 1, 3, file), 3u);
  std::fclose(file);
  EXPECT_EQ(std::string(bytes), "abc");
}

// Issue 34: the command line as UTF-8 (on Windows from its UTF-16 form: this test's own arguments
// are ASCII, so they are argv), and text quoted for this system's shell.
TEST(PortCommandLineTest, ArgumentsAndShellQuotes) {
  char arg0[] = "prog", arg1[] = "mod\xC3\xA8le";
  char* argv[] = {arg0, arg1};
  const std::vector<std::string> args = Utf8Arguments(2, argv);
  ASSERT_GE(args.size(), 1u);
#ifndef _WIN32
  EXPECT_EQ(args, (std::vector<std::string>{"prog", "mod\xC3\xA8le"}));
  EXPECT_EQ(ShellQuoted(R"(it's {"a": 1})"), R"('it'\''s {"a": 1}')");
#else
  EXPECT_EQ(ShellQuoted(R"({"a": "b\"})"), R"("{\"a\": \"b\\\"}")");
#endif
  EXPECT_TRUE(CheckOrtLibrary().ok());
}

TEST_F(PortTest, NewPrivateFileIsWrittenOnceAndIsMine) {
  const std::string path = Utf8FromPath(dir_ / "private.txt");
  ASSERT_TRUE(WriteNewPrivateFile(path, "secret").ok());
  EXPECT_FALSE(WriteNewPrivateFile(path, "again").ok());  // something is there already
  Result<FileInfo> info = StatPath(path, false);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->identity.size, 6);
  EXPECT_TRUE(info->owned_by_me);
  EXPECT_FALSE(info->writable_by_others);
  EXPECT_TRUE(FolderWritable(Utf8FromPath(dir_)));
}

TEST(PortMemoryTest, ResidentSizeFollowsATouchedBufferAndTheTrim) {
  if (!ebb::testing::kRssBoundsHold) GTEST_SKIP() << "RSS bounds do not hold under a sanitizer's allocator";
  TrimHeap();
  const int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = 64 * kMiB;
  // In 1 MiB blocks: large enough to be the allocator's own mappings or its heap's top, the case TrimHeap is for.
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBytes / kMiB; ++i) {
    char* block = static_cast<char*>(std::malloc(kMiB));
    ASSERT_NE(block, nullptr);
    std::memset(block, static_cast<int>(i + 1), kMiB);
    blocks.push_back(block);
  }
  const int64_t touched = ResidentBytes();
  EXPECT_GE(touched - before, 60 * kMiB) << "before " << before << ", touched " << touched;
  EXPECT_GE(PeakResidentBytes(), touched - 2 * kMiB);  // Linux updates the counters lazily
  for (char* block : blocks) std::free(block);
  TrimHeap();
  const int64_t after = ResidentBytes();
  EXPECT_LE(after - before, 8 * kMiB) << "before " << before << ", after free + trim " << after;
  // The peak stays until reset; where it can be reset it falls back to about now.
  EXPECT_GE(PeakResidentBytes(), touched - 2 * kMiB);  // Linux updates the counters lazily
  if (ResetPeakResident()) {
    EXPECT_LT(PeakResidentBytes(), touched - 32 * kMiB);
  }
}

TEST(PortMemoryTest, PagesAreZeroedWritableAndFreed) {
  const size_t bytes = 16 * PageSize();
  char* pages = static_cast<char*>(AllocatePages(bytes));
  ASSERT_NE(pages, nullptr);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(pages[i], 0);
  pages[5] = 42;
  ProtectPagesReadOnly(pages, bytes);
  EXPECT_EQ(pages[5], 42);
  FreePages(pages, bytes);
}

TEST(PortMemoryTest, MachineAndLimitAreSane) {
  EXPECT_EQ(PageSize(), 4096u);
  const int64_t machine = MachineMemoryBytes();
  EXPECT_GT(machine, 256 * kMiB);
  const int64_t limit = ProcessMemoryLimitBytes();
  EXPECT_GE(limit, 0);
  EXPECT_GT(ResidentBytes(), 0);
  EXPECT_LT(ResidentBytes(), machine);
}

TEST(PortProcessTest, ThisProcess) {
  EXPECT_GT(ProcessId(), 0);
  const std::string exe = ExecutablePath();
  ASSERT_FALSE(exe.empty());
  EXPECT_NE(exe.find("port_test"), std::string::npos) << exe;
  EXPECT_TRUE(fs::exists(PathFromUtf8(exe)));
  EXPECT_EQ(ResidentBytesOf(ProcessId()) > 0, ResidentBytes() > 0);
  EXPECT_FALSE(CpuFeatures().empty());
}

TEST(PortProcessTest, TheLibraryHoldingACodeAddress) {
  // This test's own code lives in the executable.
  const std::string self = LibraryPathOf(reinterpret_cast<const void*>(&ProcessId));
  ASSERT_FALSE(self.empty());
  EXPECT_EQ(fs::path(self).filename(), fs::path(ExecutablePath()).filename());
  // A library that is not there: kNotFound with the loader's reason.
  Result<Library> none = Library::Load("ebb_no_such_library_here", true);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(none.status().message().empty());
}

TEST(PortProcessTest, ThisProgramRunAgainAsAChild) {
  Result<Child> child = Child::SpawnSelf({"port_test", "--gtest_list_tests", "--gtest_filter=PortSha256Test.*"},
                                         {{"EBB_PORT_TEST_CHILD", "1"}});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_GT(child->id(), 0);
  std::string out, line;
  while (child->ReadStdoutLine(&line)) out += line;
  EXPECT_EQ(child->Wait(), 0);
  EXPECT_NE(out.find("PortSha256Test."), std::string::npos) << out;
  EXPECT_NE(out.find("KnownDigests"), std::string::npos) << out;
}

TEST(PortProcessTest, EnvironmentReads) {
  EXPECT_EQ(GetEnv("EBB_PORT_TEST_SURELY_UNSET"), "");
  EXPECT_FALSE(GetEnv("PATH").empty());
}

TEST(PortSha256Test, KnownDigests) {
  Sha256 empty;
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.Hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.Update("a", 1);
  abc.Update("bc", 2);
  EXPECT_EQ(abc.Hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

#ifndef _WIN32
// A port with a listener on it is refused with the system's words; the same port once closed, and
// port 0, are free; a host that does not resolve is refused with the resolver's.
TEST(PortSocketTest, CheckListenableTellsATakenPortFromAFreeOne) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int taken = ntohs(addr.sin_port);
  const Status st = CheckListenable("127.0.0.1", taken);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "Address already in use");
  close(fd);
  EXPECT_TRUE(CheckListenable("127.0.0.1", taken).ok()) << "closed, the port is free again";
  EXPECT_TRUE(CheckListenable("127.0.0.1", 0).ok());
  const Status bad = CheckListenable("no-such-host.invalid", 8000);
  EXPECT_EQ(bad.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(bad.message().empty());
}
#endif

}  // namespace
}  // namespace ebb::port
