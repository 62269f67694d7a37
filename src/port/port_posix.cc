// The port layer on Linux (glibc, /proc, cgroups). See port.h for the contract.
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include "port.h"

namespace ebb::port {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// A "Key:   123 kB" line of /proc/<who>/status, in bytes.
int64_t StatusKb(const std::string& who, const char* key) {
  std::ifstream in("/proc/" + who + "/status");
  const size_t n = std::strlen(key);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      std::istringstream fields(line.substr(n + 1));
      int64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

bool ClearRefs(const std::string& who) {
  FILE* f = std::fopen(("/proc/" + who + "/clear_refs").c_str(), "w");
  if (!f) return false;
  const bool wrote = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && wrote;
}

int64_t Nanoseconds(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

FileKind KindOf(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::kRegular;
  if (S_ISDIR(mode)) return FileKind::kFolder;
  if (S_ISLNK(mode)) return FileKind::kLink;
  if (S_ISFIFO(mode)) return FileKind::kFifo;
  if (S_ISCHR(mode)) return FileKind::kCharDevice;
  if (S_ISBLK(mode)) return FileKind::kBlockDevice;
  if (S_ISSOCK(mode)) return FileKind::kSocket;
  return FileKind::kOther;
}

FileInfo InfoOf(const struct stat& st) {
  FileInfo info;
  info.kind = KindOf(st.st_mode);
  info.identity = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                   static_cast<int64_t>(st.st_size), Nanoseconds(st.st_mtim), Nanoseconds(st.st_ctim)};
  info.owner = st.st_uid;
  info.owned_by_me = st.st_uid == geteuid();
  info.writable_by_others = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  info.mode = st.st_mode & 07777;
  return info;
}

}  // namespace

// ---- Memory

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<int64_t>(PageSize());
}

int64_t PeakResidentBytes() { return StatusKb("self", "VmHWM"); }
bool ResetPeakResident() { return ClearRefs("self"); }
int64_t ResidentBytesOf(int64_t id) { return StatusKb(std::to_string(id), "VmRSS"); }
int64_t PeakResidentBytesOf(int64_t id) { return StatusKb(std::to_string(id), "VmHWM"); }
bool ResetPeakResidentOf(int64_t id) { return ClearRefs(std::to_string(id)); }

int64_t MinorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

int64_t PageFaultsOf(int64_t id) {
  std::ifstream in("/proc/" + std::to_string(id) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  int64_t minflt = -1, majflt = -1;
  // After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt(10) cminflt majflt(12).
  for (int i = 3; i <= 12 && fields >> field; ++i) {
    if (i == 10) minflt = std::strtoll(field.c_str(), nullptr, 10);
    if (i == 12) majflt = std::strtoll(field.c_str(), nullptr, 10);
  }
  return minflt < 0 || majflt < 0 ? -1 : minflt + majflt;
}

int64_t MachineMemoryBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t CgroupMemoryLimitBytes(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  // The group paths of this process: "0::/a/b" (v2), "4:memory:/a/b" or "4:cpu,memory:/a/b" (v1).
  std::string v2_group, v1_group;
  std::ifstream groups(proc_self_cgroup);
  for (std::string line; std::getline(groups, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) v2_group = path;
    if (("," + controllers + ",").find(",memory,") != std::string::npos) v1_group = path;
  }
  int64_t lowest = 0;
  auto consider = [&](const std::string& file) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text) || text == "max") return;
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19) return;
    const uint64_t value = std::stoull(text);
    if (value == 0 || value >= (uint64_t{1} << 60)) return;  // 0 is not a limit one can run under either
    if (lowest == 0 || static_cast<int64_t>(value) < lowest) lowest = static_cast<int64_t>(value);
  };
  // A group and each of its parents up to the mount's root (a parent's limit binds its children).
  auto walk = [&](const std::string& base, std::string group, const std::string& file) {
    while (!group.empty() && group != "/") {
      consider(base + group + "/" + file);
      group = group.substr(0, group.rfind('/'));
    }
    consider(base + "/" + file);
  };
  walk(cgroup_root, v2_group, "memory.max");
  walk(cgroup_root + "/memory", v1_group, "memory.limit_in_bytes");
  return lowest;
}

int64_t ProcessMemoryLimitBytes() { return CgroupMemoryLimitBytes("/sys/fs/cgroup", "/proc/self/cgroup"); }

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

void TrimHeap() { malloc_trim(0); }

// glibc raises its mmap threshold each time a large mmapped block is freed (up
// to 32 MiB) and its trim threshold to twice that (mallopt(3)). ORT frees
// large blocks on every unload and release, so after a few of them large
// blocks come from the heap arenas instead, and malloc_trim(0) did not give
// them all back: in `ebb serve --modelmesh`, loads, evictions and on-demand
// reloads left 5.4-16.2 MiB resident after every model was unloaded, against
// 1.1-1.6 MiB with the thresholds fixed. Setting them turns the adjustment
// off. Once per process, and not over thresholds the user set in the
// environment (MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES).
void KeepHeapReturnable() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
        (tunables && std::strstr(tunables, "threshold"))) {
      return;
    }
    constexpr int kThreshold = 128 * 1024;  // glibc's own starting value
    mallopt(M_MMAP_THRESHOLD, kThreshold);
    mallopt(M_TRIM_THRESHOLD, kThreshold);
  });
}

void RestartWithHugePageHeap(char** argv) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("EBB_NO_HUGEPAGES") || (tunables && std::strstr(tunables, "glibc.malloc.hugetlb"))) return;
  // Under valgrind /proc/self/exe is valgrind's own tool, which refuses to be started by hand:
  // the restart would end the process ("You cannot run ... directly"). Its preload says it is there.
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload && std::strstr(preload, "vgpreload")) return;
  std::string value = tunables ? std::string(tunables) + ":glibc.malloc.hugetlb=1" : "glibc.malloc.hugetlb=1";
  setenv("GLIBC_TUNABLES", value.c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with 4 KiB pages
}

void* AllocatePages(size_t bytes) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return data == MAP_FAILED ? nullptr : data;
}

void ProtectPagesReadOnly(void* pages, size_t bytes) { mprotect(pages, bytes, PROT_READ); }

void FreePages(void* pages, size_t bytes) {
  if (pages) munmap(pages, bytes);
}

// ---- Files

Result<FileInfo> StatPath(const std::string& path, bool follow_links) {
  struct stat st;
  if ((follow_links ? stat(path.c_str(), &st) : lstat(path.c_str(), &st)) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound("does not exist");
    return Internal(ErrnoText(err));
  }
  return InfoOf(st);
}

Result<std::string> RealPath(const std::string& path) {
  char* real = realpath(path.c_str(), nullptr);
  if (!real) {
    const int err = errno;
    return InvalidArgument("cannot be resolved (" + ErrnoText(err) + ")");
  }
  std::string text(real);
  std::free(real);
  return text;
}

bool FolderWritable(const std::string& folder) { return access(folder.c_str(), R_OK | W_OK | X_OK) == 0; }

void TouchFile(const std::string& path) { utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

Status WriteNewPrivateFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) {
    const int err = errno;
    return Internal("cannot create '" + path + "': " + ErrnoText(err));
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? ErrnoText(errno) : "nothing written";
      close(fd);
      unlink(path.c_str());
      return Internal("cannot write '" + path + "': " + why);
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return Internal("cannot write '" + path + "': " + ErrnoText(err));
  }
  return Status::Ok();
}

Result<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path, bool no_follow) {
  // O_NONBLOCK: opening a FIFO with no writer, or a device, returns at once (its kind then refuses it).
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | (no_follow ? O_NOFOLLOW : 0));
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP && no_follow) return InvalidArgument("is a symbolic link");
    if (err == ENOENT) return NotFound("does not exist");
    return InvalidArgument(ErrnoText(err));
  }
  return ReadOnlyFile(fd);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept : handle_(other.handle_) { other.handle_ = -1; }

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (handle_ >= 0) close(static_cast<int>(handle_));
    handle_ = other.handle_;
    other.handle_ = -1;
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_ >= 0) close(static_cast<int>(handle_));
}

Result<FileInfo> ReadOnlyFile::Info() const {
  struct stat st;
  if (fstat(static_cast<int>(handle_), &st) != 0) {
    const int err = errno;
    return Internal("cannot stat: " + ErrnoText(err));
  }
  return InfoOf(st);
}

Result<size_t> ReadOnlyFile::Read(void* buffer, size_t n) {
  while (true) {
    const ssize_t got = read(static_cast<int>(handle_), buffer, n);
    if (got >= 0) return static_cast<size_t>(got);
    const int err = errno;
    if (err == EINTR) continue;
    return Internal(ErrnoText(err));
  }
}

std::string ReadOnlyFile::OpenedPath() const {
  char link[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(handle_);
  const ssize_t n = readlink(proc.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

Status ReadOnlyFile::MakePrivate() {
  if (fchmod(static_cast<int>(handle_), S_IRUSR | S_IWUSR) != 0) {
    const int err = errno;
    return Internal(ErrnoText(err));
  }
  return Status::Ok();
}

Result<Mapping> Mapping::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return NotFound("cannot open model file '" + path + "': " + ErrnoText(err));
  }
  struct stat st;
  Mapping mapping;
  Status status = fstat(fd, &st) != 0 ? Internal("cannot stat '" + path + "': " + ErrnoText(errno))
                  : !S_ISREG(st.st_mode) ? InvalidArgument("'" + path + "' is not a model file")
                  : st.st_size == 0      ? InvalidArgument("model file '" + path + "' is empty")
                                         : Status::Ok();
  if (status.ok()) {
    mapping.size_ = static_cast<size_t>(st.st_size);
    mapping.identity_ = InfoOf(st).identity;
    void* data = mmap(nullptr, mapping.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      status = Internal("cannot map '" + path + "': " + ErrnoText(errno));
    } else {
      mapping.data_ = data;
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return mapping;
}

Mapping::Mapping(Mapping&& other) noexcept : data_(other.data_), size_(other.size_), identity_(other.identity_) {
  other.data_ = nullptr;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, size_);
    data_ = other.data_;
    size_ = other.size_;
    identity_ = other.identity_;
    other.data_ = nullptr;
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_) munmap(data_, size_);
}

// The guard of GuardedMapping on Linux: a read lease per mapped file, and one thread that the kernel
// tells (SIGIO, directed at that thread only, blocked there and taken with sigwaitinfo) when a process
// wants to write a leased file. That thread copies each such mapping into anonymous pages, moves them
// over the file's pages (mremap: readers see the same bytes at the same address throughout), then gives
// the lease up, which lets the writer go on.
struct GuardedMapping::State {
  int fd = -1;
  void* data = nullptr;
  size_t size = 0;
  FileIdentity identity;
  std::atomic<bool> copied{false};
};

namespace {

#ifdef __linux__
class LeaseWatcher {
 public:
  // The process's watcher, its thread started on first use; nullptr when it cannot be.
  static LeaseWatcher* Get() {
    static LeaseWatcher* watcher = [] {
      auto* w = new LeaseWatcher();  // never destroyed: its thread waits for signals until the process ends
      return w->Start() ? w : nullptr;
    }();
    return watcher;
  }

  // Takes a read lease on `file`, checks it is `size` bytes, maps it and registers the mapping, all
  // under the watcher's lock (a lease break in between is handled once the mapping is in place).
  Result<std::unique_ptr<GuardedMapping::State>> Map(int fd, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    f_owner_ex owner{F_OWNER_TID, tid_};
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, SIGIO) != 0) {
      return Unavailable("cannot direct the file's signals: " + ErrnoText(errno));
    }
    if (fcntl(fd, F_SETLEASE, F_RDLCK) != 0) return Unavailable("no read lease: " + ErrnoText(errno));
    auto state = std::make_unique<GuardedMapping::State>();
    state->fd = fd;
    struct stat st;
    Status status = fstat(fd, &st) != 0 ? Internal("cannot stat: " + ErrnoText(errno))
                    : static_cast<uint64_t>(st.st_size) != size
                        ? InvalidArgument("is " + std::to_string(st.st_size) + " bytes, not " + std::to_string(size))
                        : Status::Ok();
    if (status.ok()) {
      void* data = mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (data == MAP_FAILED) {
        status = Internal("cannot map: " + ErrnoText(errno));
      } else {
        state->data = data;
        state->size = size;
        state->identity = InfoOf(st).identity;
      }
    }
    if (!status.ok()) {
      fcntl(fd, F_SETLEASE, F_UNLCK);
      return status;
    }
    leased_.insert(state.get());
    return state;
  }

  // Forgets `state` (before its mapping goes): no copy is made for it after this returns.
  void Forget(GuardedMapping::State* state) {
    std::lock_guard<std::mutex> lock(mu_);
    leased_.erase(state);
    fcntl(state->fd, F_SETLEASE, F_UNLCK);
  }

 private:
  bool Start() {
    std::promise<pid_t> started;
    std::future<pid_t> tid = started.get_future();
    try {
      std::thread([this, &started] {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGIO);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);  // taken below, never delivered to a handler
        started.set_value(static_cast<pid_t>(syscall(SYS_gettid)));
        Loop(set);
      }).detach();
    } catch (const std::system_error&) {
      return false;
    }
    tid_ = tid.get();
    return true;
  }

  void Loop(const sigset_t& set) {
    while (true) {
      siginfo_t info;
      if (sigwaitinfo(&set, &info) < 0) continue;
      // Signals of one kind merge while pending: look at every lease. One being broken reads as F_UNLCK
      // (the type it is being broken to); a lease given up already is not in the set.
      std::lock_guard<std::mutex> lock(mu_);
      for (GuardedMapping::State* state : leased_) {
        if (!state->copied.load() && fcntl(state->fd, F_GETLEASE) == F_UNLCK) CopyInPlace(*state);
      }
    }
  }

  // Makes `state`'s mapping a private copy of its bytes at the same address, then gives the lease up.
  static void CopyInPlace(GuardedMapping::State& state) {
    void* copy = mmap(nullptr, state.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy != MAP_FAILED) {
      std::memcpy(copy, state.data, state.size);  // the writer waits: the file is as it was
      mprotect(copy, state.size, PROT_READ);
      if (mremap(copy, state.size, state.size, MREMAP_MAYMOVE | MREMAP_FIXED, state.data) == MAP_FAILED) {
        munmap(copy, state.size);
      } else {
        state.copied.store(true);
      }
    }
    // Without memory for the copy the lease is given up all the same: the kernel would break it anyway.
    fcntl(state.fd, F_SETLEASE, F_UNLCK);
  }

  std::mutex mu_;
  pid_t tid_ = 0;
  std::set<GuardedMapping::State*> leased_;  // guarded by mu_
};
#endif

}  // namespace

Result<std::unique_ptr<GuardedMapping>> GuardedMapping::Map(ReadOnlyFile& file, size_t size) {
#ifdef __linux__
  if (size == 0) return InvalidArgument("is empty");
  LeaseWatcher* watcher = LeaseWatcher::Get();
  if (!watcher) return Unavailable("no thread to watch leases");
  Result<std::unique_ptr<State>> state = watcher->Map(static_cast<int>(file.handle_), size);
  if (!state.ok()) return state.status();
  file.handle_ = -1;  // the mapping's now
  return std::unique_ptr<GuardedMapping>(new GuardedMapping(std::move(state).value()));
#else
  (void)file;
  (void)size;
  return Unavailable("no file leases on this system");
#endif
}

GuardedMapping::GuardedMapping(std::unique_ptr<State> state) : state_(std::move(state)) {}

GuardedMapping::~GuardedMapping() {
#ifdef __linux__
  LeaseWatcher::Get()->Forget(state_.get());
#endif
  munmap(state_->data, state_->size);
  close(state_->fd);
}

const void* GuardedMapping::data() const { return state_->data; }
size_t GuardedMapping::size() const { return state_->size; }
const FileIdentity& GuardedMapping::identity() const { return state_->identity; }
bool GuardedMapping::copied() const { return state_->copied.load(); }

std::filesystem::path PathFromUtf8(const std::string& utf8) { return std::filesystem::path(utf8); }
std::string Utf8FromPath(const std::filesystem::path& path) { return path.string(); }
std::basic_string<OrtChar> OrtPath(const std::string& utf8) { return utf8; }

// ---- SHA-256

Sha256::Sha256() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    ctx = nullptr;
  }
  state_ = ctx;
}

Sha256::~Sha256() {
  if (state_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(state_));
}

void Sha256::Update(const void* data, size_t size) {
  if (state_) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(state_), data, size);
}

std::string Sha256::Hex() {
  if (!state_) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(state_), digest, &length);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// ---- Shared libraries

std::vector<std::string> Utf8Arguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }

void UseUtf8Console() {}

std::string ShellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

const char* const kLineFilter = "grep";
const char* const kCudaProviderHint = "`make setup GPU=1` installs it";

Status CheckOrtLibrary() { return Status::Ok(); }

OrtStderrSilenced::OrtStderrSilenced() = default;
OrtStderrSilenced::~OrtStderrSilenced() = default;

std::FILE* OpenFile(const std::string& path, const char* mode) { return std::fopen(path.c_str(), mode); }

std::string NativePath(const std::string& path) { return path; }

const char* const kCudaProviderLibraryName = "libonnxruntime_providers_cuda.so";
const char* const kNvmlLibraryName = "libnvidia-ml.so.1";
const char* const kCudaRuntimeLibraryName = "libcudart.so.13";

Result<Library> Library::Load(const std::string& path, bool now) {
  dlerror();
  void* handle = dlopen(path.c_str(), (now ? RTLD_NOW : RTLD_LAZY) | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return NotFound(why ? why : "cannot load '" + path + "'");
  }
  return Library(handle);
}

Library::Library(Library&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

Library& Library::operator=(Library&& other) noexcept {
  if (this != &other) {
    if (handle_) dlclose(handle_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

Library::~Library() {
  if (handle_) dlclose(handle_);
}

void* Library::Find(const char* name) const { return handle_ ? dlsym(handle_, name) : nullptr; }

std::string LibraryPathOf(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

// ---- Processes

int64_t ProcessId() { return static_cast<int64_t>(getpid()); }

std::string ExecutablePath() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) != 0; }

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

void SetEnvUnlessSet(const char* name, const char* value) { setenv(name, value, /*overwrite=*/0); }

std::string UserCacheFolder() {
  if (std::string xdg = GetEnv("XDG_CACHE_HOME"); !xdg.empty()) return xdg;
  if (std::string home = GetEnv("HOME"); !home.empty()) return home + "/.cache";
  return "";
}

std::string CpuFeatures() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, flags;
  while (std::getline(in, line) && flags.empty()) {
    auto value = [&line] { return line.substr(line.find(':') + 1); };
    if (line.rfind("vendor_id", 0) == 0 || line.rfind("CPU implementer", 0) == 0) vendor = value();
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) flags = value();
  }
  if (flags.empty()) return "";
  return vendor + "|" + flags;
}

Result<Child> Child::SpawnSelf(const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& env) {
  return Spawn("/proc/self/exe", args, env);
}

Result<Child> Child::Spawn(const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Internal("pipe failed: " + ErrnoText(errno));
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(out[0]);
    close(out[1]);
    return Internal("fork failed: " + ErrnoText(err));
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the new descriptor
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execvp(program.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  Child child;
  child.id_ = pid;
  child.stdout_ = out[0];
  return child;
}

Child::Child(Child&& other) noexcept
    : id_(other.id_), process_(other.process_), stdout_(other.stdout_), waited_(other.waited_),
      pending_(std::move(other.pending_)) {
  other.id_ = -1;
  other.stdout_ = -1;
}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    this->~Child();
    new (this) Child(std::move(other));
  }
  return *this;
}

Child::~Child() {
  if (id_ > 0 && !waited_) {
    Stop();
    Wait();
  }
  if (stdout_ >= 0) close(static_cast<int>(stdout_));
}

size_t Child::ReadStdout(char* buffer, size_t n) {
  if (!pending_.empty()) {
    const size_t k = std::min(n, pending_.size());
    std::memcpy(buffer, pending_.data(), k);
    pending_.erase(0, k);
    return k;
  }
  while (true) {
    const ssize_t got = read(static_cast<int>(stdout_), buffer, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) return 0;
  }
}

bool Child::ReadStdoutLine(std::string* line) {
  line->clear();
  while (true) {
    const size_t end = pending_.find('\n');
    if (end != std::string::npos) {
      *line = pending_.substr(0, end + 1);
      pending_.erase(0, end + 1);
      return true;
    }
    char buffer[4096];
    ssize_t got;
    while ((got = read(static_cast<int>(stdout_), buffer, sizeof buffer)) < 0 && errno == EINTR) {
    }
    if (got <= 0) {
      line->swap(pending_);
      pending_.clear();
      return !line->empty();
    }
    pending_.append(buffer, static_cast<size_t>(got));
  }
}

void Child::Stop() {
  if (id_ > 0 && !waited_) kill(static_cast<pid_t>(id_), SIGTERM);
}

int Child::Wait() {
  if (id_ <= 0) return -1;
  int status = 0;
  while (waitpid(static_cast<pid_t>(id_), &status, 0) < 0 && errno == EINTR) {
  }
  waited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---- Sockets and descriptors

int64_t SendWithoutWaiting(intptr_t socket, const void* a, size_t a_size, const void* b, size_t b_size) {
  iovec parts[2];
  size_t count = 0;
  parts[count++] = {const_cast<void*>(a), a_size};
  if (b_size > 0) parts[count++] = {const_cast<void*>(b), b_size};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = count;
  while (true) {
    const ssize_t n = sendmsg(static_cast<int>(socket), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) return n;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    return 0;
  }
}

PeerState PeekPeer(intptr_t socket) {
  char byte;
  const ssize_t n = recv(static_cast<int>(socket), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return PeerState::kSent;
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return PeerState::kClosed;
  return PeerState::kNothing;
}

Status CheckListenable(const std::string& host, int port) {
  if (port == 0) return Status::Ok();  // the server picks a free one
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return Unavailable(gai_strerror(rc));
  }
  int error = 0;
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) {
    error = errno;
  } else {
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) error = errno;
    close(fd);
  }
  freeaddrinfo(found);
  if (error != 0) return Unavailable(std::strerror(error));
  return Status::Ok();
}

int64_t UnacknowledgedBytesOn(int port) {
  // The inodes of this process's sockets: /proc/self/fd/N links to "socket:[inode]".
  std::set<std::string> mine;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (!link_ec && target.rfind("socket:[", 0) == 0 && target.back() == ']') {
      mine.insert(target.substr(8, target.size() - 9));
    }
  }
  if (ec) return -1;
  // Each line of /proc/net/tcp{,6}: "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout
  // inode ...", the addresses as HEXADDR:HEXPORT and st in hex (01: ESTABLISHED).
  int64_t unacknowledged = 0;
  bool read_any = false;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    if (!in) continue;
    read_any = true;
    std::string line;
    std::getline(in, line);  // the heading
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode)) {
        continue;
      }
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "01") continue;
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) != port || mine.count(inode) == 0) continue;
      unacknowledged += std::strtoll(queues.c_str(), nullptr, 16);  // "tx_queue:rx_queue"
    }
  }
  return read_any ? unacknowledged : -1;
}

int64_t RaiseOpenFileLimit(size_t needed) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return -1;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) return static_cast<int64_t>(limit.rlim_max);
  limit.rlim_cur = needed;
  setrlimit(RLIMIT_NOFILE, &limit);
  return -1;
}

// ---- Stop signals

namespace {
sigset_t StopSet() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // SIGHUP too: a closed terminal or a supervisor's reload signal drains like SIGTERM.
  sigaddset(&signals, SIGHUP);
  return signals;
}
}  // namespace

void BlockStopSignals() {
  const sigset_t signals = StopSet();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

std::string WaitForStopSignal() {
  const sigset_t signals = StopSet();
  int signal = 0;
  sigwait(&signals, &signal);
  return signal == SIGINT ? "SIGINT" : signal == SIGHUP ? "SIGHUP" : "SIGTERM";
}

}  // namespace ebb::port
