// The port layer (src/port/port.h): each function against a value known
// without it. Runs on Linux and, in the Windows build, under Wine.
#include "port.h"

#include <gtest/gtest.h>

#ifndef _WIN32
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <atomic>
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

// GuardedMapping: the file's bytes, no copy; a write to the file can change nothing the mapping holds nor
// make reading it fault: on Linux the write waits until the mapping is a private copy, on Windows it is
// refused while the mapping lives.
TEST_F(PortTest, AGuardedMappingKeepsItsBytesWhateverIsWrittenToTheFile) {
  std::string bytes(64 * 4096 + 5, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31 + 3);
  const std::string path = Write("g.bin", bytes);
  Result<ReadOnlyFile> file = ReadOnlyFile::Open(path, true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // The wrong size is refused, and the file stays open.
  Result<std::unique_ptr<GuardedMapping>> wrong = GuardedMapping::Map(*file, bytes.size() + 1);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument) << wrong.status().ToString();
  char first = 0;
  Result<size_t> n = file->Read(&first, 1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(first, bytes[0]);
  Result<std::unique_ptr<GuardedMapping>> mapping = GuardedMapping::Map(*file, bytes.size());
  if (mapping.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << "no guard on this file system (callers copy instead): " << mapping.status().ToString();
  }
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  const GuardedMapping& m = **mapping;
  ASSERT_EQ(m.size(), bytes.size());
  EXPECT_EQ(std::memcmp(m.data(), bytes.data(), bytes.size()), 0);
  EXPECT_FALSE(m.copied());
  Result<FileInfo> info = StatPath(path, true);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(m.identity(), info->identity);
  EXPECT_FALSE(file->Read(&first, 1).ok()) << "the file is the mapping's now";
  // Renamed away and another file put in its place: no write to this file.
  fs::rename(path, dir_ / "g.old");
  Write("g.bin", "another");
  EXPECT_FALSE(m.copied());
  EXPECT_EQ(std::memcmp(m.data(), bytes.data(), bytes.size()), 0);
  // Truncated and rewritten in place, while a thread reads the mapping all along.
  std::atomic<bool> done{false};
  std::atomic<uint64_t> mismatches{0};
  std::thread reader([&] {
    const auto* data = static_cast<const unsigned char*>(m.data());
    while (!done.load()) {
      for (size_t i = 0; i < bytes.size(); i += 4096) {
        if (data[i] != static_cast<unsigned char>(bytes[i])) mismatches.fetch_add(1);
      }
    }
  });
  std::error_code ec;
  fs::resize_file(dir_ / "g.old", 0, ec);
#ifdef _WIN32
  EXPECT_TRUE(ec) << "a mapped file cannot be truncated";
  std::ofstream writer(dir_ / "g.old", std::ios::binary | std::ios::in | std::ios::out);
  EXPECT_FALSE(writer.is_open()) << "nor opened for writing";
#else
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(m.copied()) << "the truncation waited for the copy";
  {
    std::ofstream writer(dir_ / "g.old", std::ios::binary | std::ios::trunc);
    writer << std::string(bytes.size(), 'x');
  }
  EXPECT_EQ(fs::file_size(dir_ / "g.old"), bytes.size());
#endif
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done = true;
  reader.join();
  EXPECT_EQ(mismatches.load(), 0u);
  EXPECT_EQ(std::memcmp(m.data(), bytes.data(), bytes.size()), 0);
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

// PageFaultsOf counts what MinorPageFaults counts (and the major faults), by process id, and
// grows when fresh pages are touched.
TEST(PortProcessTest, PageFaultsOfAProcessById) {
  const int64_t minor = MinorPageFaults();
  const int64_t before = PageFaultsOf(ProcessId());
  ASSERT_GE(before, minor);
  constexpr size_t kPages = 64;
  const size_t page = static_cast<size_t>(PageSize());
  char* fresh = static_cast<char*>(std::malloc(64 << 20));  // above glibc's largest mmap threshold: fresh pages
  ASSERT_NE(fresh, nullptr);
  for (size_t i = 0; i < kPages; ++i) fresh[i * page] = 1;
  const int64_t after = PageFaultsOf(ProcessId());
  const int64_t minor_after = MinorPageFaults();
  std::free(fresh);
  EXPECT_EQ(PageFaultsOf(-1), -1);
  if (minor_after == minor) {  // this process's own counter did not move either: the system counts none
    GTEST_SKIP() << "the system counts no page faults (Wine's PageFaultCount stays put)";
  }
  EXPECT_GE(after - before, static_cast<int64_t>(kPages) / 2);
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

#ifndef _WIN32
// A program looked up on PATH, with the environment given; one that is not there exits with 127.
TEST(PortProcessTest, AProgramOnThePathAsAChild) {
  Result<Child> child = Child::Spawn("sh", {"sh", "-c", "echo \"$EBB_PORT_TEST_CHILD\""}, {{"EBB_PORT_TEST_CHILD", "42"}});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::string line;
  ASSERT_TRUE(child->ReadStdoutLine(&line));
  EXPECT_EQ(line, "42\n");
  EXPECT_EQ(child->Wait(), 0);
  Result<Child> missing = Child::Spawn("ebb-no-such-program", {"ebb-no-such-program"}, {});
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(missing->Wait(), 127);
}
#endif

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
// A TCP listener on 127.0.0.1 and a port the system chose; its descriptor (-1 on failure) and address.
int LoopbackListener(sockaddr_in* addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(addr), sizeof *addr) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// A port with a listener on it is refused with the system's words; the same port once closed, and
// port 0, are free; a host that does not resolve is refused with the resolver's.
TEST(PortSocketTest, CheckListenableTellsATakenPortFromAFreeOne) {
  sockaddr_in addr;
  const int fd = LoopbackListener(&addr);
  ASSERT_GE(fd, 0);
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

#ifdef __linux__
// What a server waits for before it closes a connection at shutdown (grpc_server.cc): the bytes it
// wrote that the peer has not acknowledged. A peer that does not read leaves them unacknowledged
// once its window is full; once it has read them all, none is left. The listener and the client's
// own end (whose local port is another) are not counted.
TEST(PortSocketTest, UnacknowledgedBytesFollowWhatThePeerReads) {
  sockaddr_in addr;
  const int listener = LoopbackListener(&addr);
  ASSERT_GE(listener, 0);
  const int port = ntohs(addr.sin_port);
  EXPECT_EQ(UnacknowledgedBytesOn(port), 0) << "a listener alone";

  const int client = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);  // a window that fills quickly
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int served = accept(listener, nullptr, nullptr);
  ASSERT_GE(served, 0);
  EXPECT_EQ(UnacknowledgedBytesOn(port), 0) << "connected, nothing written";

  std::vector<char> chunk(64 << 10, 'x');
  size_t written = 0;
  for (;;) {  // until the client's window and the server's send buffer are full
    const ssize_t n = send(served, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ASSERT_GT(written, 0u);
  const int64_t waiting = UnacknowledgedBytesOn(port);
  EXPECT_GT(waiting, 0) << "the client read nothing yet";
  EXPECT_LE(waiting, static_cast<int64_t>(written));

  size_t read_back = 0;
  while (read_back < written) {
    const ssize_t n = recv(client, chunk.data(), chunk.size(), 0);
    ASSERT_GT(n, 0);
    read_back += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (UnacknowledgedBytesOn(port) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(UnacknowledgedBytesOn(port), 0) << "all read, all acknowledged";
  close(served);
  close(client);
  close(listener);
}
#endif

}  // namespace
}  // namespace ebb::port
