// Internal: the one place where ebb calls the operating system. Everything
// else in src/, server/ and cli/ calls these functions instead of /proc,
// malloc_trim, mmap, stat, dlopen, fork, signals, getenv of HOME, ...
//
// Two implementations, one per family, chosen by the build (never by an
// #ifdef in a caller): port_posix.cc (Linux: /proc, glibc, cgroups) and
// port_windows.cc (Win32: psapi, the CRT heap, job objects, wide paths).
// docs/porting.md states each function on POSIX, on Windows and what its
// macOS equivalent would be.
//
// Strings are UTF-8 everywhere; the Windows implementation converts to and
// from UTF-16 inside. Paths handed to ONNX Runtime go through OrtPath().
//
// Thread safety: every free function is safe to call from any thread; a
// ReadOnlyFile, Mapping, Library or Child is one owned OS object (move-only);
// a GuardedMapping one mapping (not movable; it is held by pointer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ebb/status.h"

namespace ebb::port {

// ONNX Runtime's path character (ORTCHAR_T), without including its headers
// here (only src/ort/ includes them; ort_context.cc checks it is ORTCHAR_T).
#ifdef _WIN32
using OrtChar = wchar_t;
#else
using OrtChar = char;
#endif

// ---- Memory of this process and of the machine -----------------------------

// Bytes of this process resident in physical memory now: RSS
// (/proc/self/statm) on Linux, the working set on Windows. 0 if unknown.
int64_t ResidentBytes();

// The high-water mark of ResidentBytes since the process started or since
// the last ResetPeakResident() that returned true. 0 if unknown.
int64_t PeakResidentBytes();

// Starts PeakResidentBytes over from the current resident size. Returns
// false where the system cannot (Windows: the peak working set has no reset),
// in which case PeakResidentBytes stays the peak since start.
bool ResetPeakResident();

// ResidentBytes, PeakResidentBytes and ResetPeakResident for another process
// of this user, by id (the benchmarks' children). 0 / false when unknown.
int64_t ResidentBytesOf(int64_t process_id);
int64_t PeakResidentBytesOf(int64_t process_id);
bool ResetPeakResidentOf(int64_t process_id);

// Page faults of this process so far that needed no disk read: getrusage's
// ru_minflt on Linux; on Windows PageFaultCount (soft and hard faults together:
// Windows counts them as one). The benchmarks' cost of regrowing memory.
int64_t MinorPageFaults();

// Page faults of another process of this user so far, by id (the benchmarks'
// `ebb serve` children): minflt + majflt from /proc/<id>/stat on Linux, the
// process's PageFaultCount on Windows. -1 when unknown (no such process, or a
// system without either).
int64_t PageFaultsOf(int64_t process_id);

// The machine's physical memory in bytes.
int64_t MachineMemoryBytes();

// The memory limit this process runs under, when lower than the machine: the
// lowest cgroup (v1 or v2) limit on the way up from its group on Linux, the
// job object's process or job memory limit on Windows. 0 when there is none.
int64_t ProcessMemoryLimitBytes();

// The lowest cgroup memory limit of this process as ebb::CgroupMemoryLimitBytes
// (ebb/memory_stats.h) defines it, read from the cgroup file system at
// `cgroup_root` for the groups named in the file `proc_self_cgroup`. 0 when no
// file sets a limit; always 0 on Windows (no cgroups).
int64_t CgroupMemoryLimitBytes(const std::string& cgroup_root, const std::string& proc_self_cgroup);

// The size of a memory page (4096 on x86-64 Linux and Windows).
size_t PageSize();

// Gives the heap's free pages back to the system, so that the resident size
// falls after large frees: malloc_trim(0) with glibc; on Windows the CRT's
// _heapmin and HeapCompact on every heap of the process.
void TrimHeap();

// Once per process: keeps the allocator from moving large blocks into places
// TrimHeap cannot return (glibc raises its mmap and trim thresholds after each
// large free; fixed at glibc's starting 128 KiB unless the user set them in
// the environment). Nothing to do on Windows.
void KeepHeapReturnable();

// Re-executes this program once with the allocator's large blocks on huge
// pages (glibc.malloc.hugetlb=1 in GLIBC_TUNABLES, read by glibc only at
// start-up), unless EBB_NO_HUGEPAGES is set, the tunable already is, or it
// runs under valgrind (which cannot follow the re-execution).
// Returns only when it did not (on failure, or where there is no such
// setting: Windows). `argv` as main got it.
void RestartWithHugePageHeap(char** argv);

// Pages of this process's own, zeroed, readable and writable, faulted in at
// once (MAP_POPULATE / VirtualAlloc + touch): nullptr when the system has
// none to give. `bytes` is rounded up to whole pages by the system.
void* AllocatePages(size_t bytes);
// Makes pages from AllocatePages read-only.
void ProtectPagesReadOnly(void* pages, size_t bytes);
// Returns pages from AllocatePages (the same `bytes`).
void FreePages(void* pages, size_t bytes);

// ---- Files --------------------------------------------------------------

enum class FileKind { kRegular, kFolder, kLink, kFifo, kCharDevice, kBlockDevice, kSocket, kOther };

// What tells one version of a file from another without reading it (ctime
// cannot be set by users and changes with every write, so a file with the
// same identity has not been written since): device
// and inode (volume serial and file index on Windows), size, modification
// and change times in ns (Windows has no change time a user cannot set:
// there ctime_ns is the last-write time too).
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

struct FileInfo {
  FileKind kind = FileKind::kOther;
  FileIdentity identity;
  uint32_t owner = 0;               // uid (0 on Windows)
  bool owned_by_me = false;         // owner is this process's effective user (always true on Windows)
  bool writable_by_others = false;  // group or others may write (never on Windows: ACLs not read)
  uint32_t mode = 0;                // permission bits (0 on Windows)
};

// What is at `path`, following a final link or not. Errors: kNotFound
// ("does not exist": nothing there, or a folder on the way is missing),
// kInternal with the system's reason (the messages name no path: callers do).
Result<FileInfo> StatPath(const std::string& path, bool follow_links);

// The canonical absolute form of `path`, every link resolved. Errors:
// kInvalidArgument with the system's reason ("cannot be resolved (...)").
Result<std::string> RealPath(const std::string& path);

// Whether this process may read, write and enter `folder`.
bool FolderWritable(const std::string& folder);

// Sets a file's modification time to now (the cache's last-use mark).
void TouchFile(const std::string& path);

// Writes `text` to a new file at `path`, readable and writable by this user
// only (0600); refused if anything is there already, a link included.
Status WriteNewPrivateFile(const std::string& path, const std::string& text);

// One file opened for reading, never blocking the open (a FIFO or device
// returns at once and is then refused by its kind), not inherited by child
// processes; closed with the object.
class ReadOnlyFile {
 public:
  // Errors: kNotFound (nothing there), kInvalidArgument ("is a symbolic
  // link" when `no_follow` and the final name is a link; any other open
  // failure with the system's reason).
  static Result<ReadOnlyFile> Open(const std::string& path, bool no_follow);

  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  // What the open file is (fstat / GetFileInformationByHandle).
  Result<FileInfo> Info() const;
  // Up to `n` bytes from the current position; 0 at the end. Errors:
  // kInternal with the system's reason.
  Result<size_t> Read(void* buffer, size_t n);
  // Where the open file really is (/proc/self/fd, GetFinalPathNameByHandle),
  // "" when the system does not say.
  std::string OpenedPath() const;
  // Mode 0600 (POSIX); nothing on Windows, whose files are private to
  // their creator's profile by their folder's ACL.
  Status MakePrivate();

 private:
  friend class GuardedMapping;
  explicit ReadOnlyFile(intptr_t handle) : handle_(handle) {}
  intptr_t handle_ = -1;  // a descriptor, or a HANDLE
};

// A whole file mapped read-only and private, its pages NOT faulted in until
// read. Empty files are refused (kInvalidArgument), as are non-regular ones.
class Mapping {
 public:
  static Result<Mapping> Open(const std::string& path);
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  const FileIdentity& identity() const { return identity_; }

 private:
  Mapping() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  FileIdentity identity_;
};

// A whole regular file mapped read-only and shared with the system's file
// cache (no copy: what a session runs from a cache entry), kept safe from
// writes to the file for as long as the mapping lives: no write by any
// process, this one included, can change its bytes or make reading them
// fault (a mapped file truncated under a reader kills it with SIGBUS).
//   Linux: a read lease on the file (fcntl F_SETLEASE), taken before the
//     size is checked and the file mapped. A process that opens the file for
//     writing or truncates it is held by the kernel until the lease is given
//     up; the kernel tells one thread of ebb's (a signal only that thread
//     takes, SIGIO, blocked there and waited for), which first turns the
//     mapping into a private copy of the same bytes at the same address
//     (anonymous pages moved over it with mremap, atomically for readers),
//     then gives the lease up. Leases need the file to be this user's, on a
//     file system that has them (local ones; not NFS), and nobody to have it
//     open for writing; the kernel gives the holder lease-break-time (45 s by
//     default) before it breaks a lease itself. A child made by fork shares
//     the mapping but not the thread: its mapping is not guarded.
//   Windows: a second handle to the file that shares reading and deleting
//     but not writing, held as long as the view: opening the file for writing
//     fails (a sharing violation), and a mapped file cannot be truncated.
// Renaming or removing the file is no write: the mapping keeps the bytes.
class GuardedMapping {
 public:
  // Maps all of `file` (a regular file opened by ReadOnlyFile::Open), which
  // must still be `size` bytes once guarded; on success the mapping owns the
  // file (`file` is left closed). Errors: kUnavailable when no guard can be
  // had here (the file system has no leases, the file is open for writing
  // somewhere, or the system has no such guard): read the file instead;
  // kInvalidArgument when the file is not `size` bytes (any more); kInternal
  // when the system cannot map it.
  static Result<std::unique_ptr<GuardedMapping>> Map(ReadOnlyFile& file, size_t size);

  ~GuardedMapping();
  GuardedMapping(const GuardedMapping&) = delete;
  GuardedMapping& operator=(const GuardedMapping&) = delete;

  const void* data() const;
  size_t size() const;
  // The file's identity once guarded: the version of the file the mapping
  // holds (no write can come between it and the map).
  const FileIdentity& identity() const;
  // Whether a write to the file made the mapping a private copy (never on
  // Windows, where writes are refused instead).
  bool copied() const;

  struct State;  // per system, in port_<family>.cc

 private:
  explicit GuardedMapping(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A path from UTF-8 text as the standard library takes it (u8path: on
// Windows a narrow path would be read in the ANSI code page).
std::filesystem::path PathFromUtf8(const std::string& utf8);
// A path as UTF-8 text.
std::string Utf8FromPath(const std::filesystem::path& path);

// A UTF-8 path as ONNX Runtime takes it (ORTCHAR_T: char on POSIX, wchar_t
// on Windows). Every path given to ORT goes through here.
std::basic_string<OrtChar> OrtPath(const std::string& utf8);

// ---- SHA-256 ---------------------------------------------------------------

// A SHA-256 digest computed piece by piece: OpenSSL's EVP on POSIX, the
// system's BCrypt on Windows (no OpenSSL build there).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  // Whether the digest could be set up (false: every call below is a no-op
  // and Hex returns "").
  bool ok() const { return state_ != nullptr; }
  void Update(const void* data, size_t size);
  // The 64 lower-case hex digits of the digest of everything given; once.
  std::string Hex();

 private:
  void* state_ = nullptr;
  void* extra_ = nullptr;  // the algorithm handle (Windows)
};

// ---- The command line and the console ---------------------------------------

// The program's arguments as UTF-8, converted once at the edge (main): POSIX
// passes argv through; Windows reads the UTF-16 command line
// (GetCommandLineW, CommandLineToArgvW), since its argv is in the ANSI code
// page and would lose every character outside it.
std::vector<std::string> Utf8Arguments(int argc, char** argv);
// Console output in UTF-8 (Windows: SetConsoleOutputCP(CP_UTF8); POSIX
// terminals take the bytes as they are).
void UseUtf8Console();
// `text` quoted as one argument for this system's shell, to paste: sh's
// single quotes on POSIX; on Windows cmd.exe's double quotes, with the quotes
// and backslashes inside escaped as the C runtime reads them back.
std::string ShellQuoted(const std::string& text);
// The command a pasted line pipes text through to keep the lines with a word:
// "grep" on POSIX, "findstr" on Windows.
extern const char* const kLineFilter;
// What to do when the CUDA provider library is missing, for `ebb --version`.
extern const char* const kCudaProviderHint;
// Whether ONNX Runtime's library can be loaded, before anything calls it:
// Windows programs load onnxruntime.dll on first use (delay-loaded), and a
// missing DLL is then this one-line error naming it; POSIX: always OK (the
// loader refused to start a program without it, naming it).
Status CheckOrtLibrary();
// While one lives, what ONNX Runtime's own C runtime writes to standard error
// goes to the null device; its destructor puts stderr back. For the calls
// that create ORT's environment only. Windows: at that moment ORT's device
// discovery probes the display adapters through DXGI and, where it finds no
// DXGI (Wine without a display, Windows Server Core), writes "Failed to create
// DXGI factory." to stderr itself, past ORT's logger; the DLL writes through
// the universal C runtime (ucrtbase.dll), whose descriptors are not those of
// the program's runtime. POSIX: does nothing (ORT prints nothing there).
class OrtStderrSilenced {
 public:
  OrtStderrSilenced();
  ~OrtStderrSilenced();
  OrtStderrSilenced(const OrtStderrSilenced&) = delete;
  OrtStderrSilenced& operator=(const OrtStderrSilenced&) = delete;

 private:
  int saved_ = -1;  // the runtime's descriptor 2 as it was, -1 when nothing was redirected
};

// ---- Files -------------------------------------------------------------------

// std::fopen of a UTF-8 path (_wfopen on Windows, whose fopen reads the ANSI
// code page).
std::FILE* OpenFile(const std::string& path, const char* mode);
// The path with this system's separators ("/" and "\" mixed on Windows
// otherwise), for messages.
std::string NativePath(const std::string& path);

// ---- Shared libraries ------------------------------------------------------

// The file names of the libraries ebb looks for, on this system.
extern const char* const kCudaProviderLibraryName;  // libonnxruntime_providers_cuda.so / onnxruntime_providers_cuda.dll
extern const char* const kNvmlLibraryName;          // libnvidia-ml.so.1 / nvml.dll
extern const char* const kCudaRuntimeLibraryName;   // libcudart.so.13 / cudart64_13.dll (CUDA 13, as the provider)

// A library loaded into this process; unloaded with the object unless
// kept.
class Library {
 public:
  // Loads `path` (dlopen RTLD_LOCAL / LoadLibraryW); `now` resolves every
  // symbol at once (POSIX; Windows always does). Errors: kNotFound with the
  // loader's reason (a missing dependency, most often).
  static Result<Library> Load(const std::string& path, bool now);
  Library(Library&& other) noexcept;
  Library& operator=(Library&& other) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  // The address of `name` in the library, nullptr if it has none.
  void* Find(const char* name) const;
  // Keeps the library loaded for the rest of the process.
  void Keep() { handle_ = nullptr; }

 private:
  explicit Library(void* handle) : handle_(handle) {}
  void* handle_ = nullptr;
};

// The file of the loaded library (or executable) that holds `address`
// (dladdr / GetModuleHandleExW + GetModuleFileNameW), "" when unknown.
std::string LibraryPathOf(const void* address);

// ---- Processes -------------------------------------------------------------

// This process's id.
int64_t ProcessId();

// This program's file (/proc/self/exe / GetModuleFileNameW(NULL)).
std::string ExecutablePath();

// Whether standard output is a terminal (a console on Windows).
bool StdoutIsTerminal();

// The value of environment variable `name`, "" when unset.
std::string GetEnv(const char* name);

// Sets environment variable `name` to `value` for this process and the
// processes it starts, unless it is set already (even to ""): a value the user
// gave wins. Not safe against other threads reading the environment at the same
// moment (POSIX setenv); call it before starting threads that do.
void SetEnvUnlessSet(const char* name, const char* value);

// The per-user cache folder: $XDG_CACHE_HOME, else $HOME/.cache on POSIX;
// %LOCALAPPDATA% on Windows. "" when none is set.
std::string UserCacheFolder();

// A text naming this CPU's vendor and feature flags ("" when unknown): the
// optimized-model cache keys entries by it. /proc/cpuinfo on Linux, CPUID on
// Windows.
std::string CpuFeatures();

// A child process: this program run again. Stopped (terminated) and waited
// for when the object goes, unless waited for before.
class Child {
 public:
  // Starts ExecutablePath() with `args` (args[0] is its name), its stdout a
  // pipe this process reads, its stderr and environment this process's plus
  // `env` set in the child. Errors: kInternal naming the call that failed.
  static Result<Child> SpawnSelf(const std::vector<std::string>& args,
                                 const std::vector<std::pair<std::string, std::string>>& env);
  // Starts `program` (looked up on PATH when it has no directory part) with
  // `args` (args[0] is its name), as SpawnSelf does otherwise. Errors:
  // kInternal naming the call that failed. A program that cannot be started:
  // on POSIX the child exits with 127 (seen at Wait()); on Windows kInternal
  // (CreateProcess failed).
  static Result<Child> Spawn(const std::string& program, const std::vector<std::string>& args,
                             const std::vector<std::pair<std::string, std::string>>& env);
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  int64_t id() const { return id_; }
  // Up to `n` bytes of the child's stdout; 0 at its end (the child closed it).
  size_t ReadStdout(char* buffer, size_t n);
  // One line of the child's stdout with its '\n' (without at the end); false
  // at the end.
  bool ReadStdoutLine(std::string* line);
  // Asks the child to stop (SIGTERM / TerminateProcess).
  void Stop();
  // Waits for the child to end: its exit code, -1 when it did not exit by
  // itself (a signal).
  int Wait();

 private:
  Child() = default;
  int64_t id_ = -1;
  intptr_t process_ = 0;  // the process HANDLE (Windows)
  intptr_t stdout_ = -1;  // the read end of the child's stdout
  bool waited_ = false;
  std::string pending_;   // read past the last line ReadStdoutLine returned
};

// ---- Sockets and descriptors ------------------------------------------------

// Sends what a connected socket takes now without waiting, from `a` then
// `b` (b may be empty) in one call (sendmsg with MSG_DONTWAIT|MSG_NOSIGNAL;
// on Windows nothing is sent here: the caller's asynchronous write sends it).
// Returns the bytes sent (> 0), 0 when the socket takes nothing now, -1
// when the connection failed.
int64_t SendWithoutWaiting(intptr_t socket, const void* a, size_t a_size, const void* b, size_t b_size);

// What a connected socket that turned readable holds, without reading it
// (recv MSG_PEEK | MSG_DONTWAIT; on Windows FIONREAD, then a peek): data
// (kSent), the peer's close or a reset (kClosed), or nothing yet (kNothing).
enum class PeerState { kSent, kClosed, kNothing };
PeerState PeekPeer(intptr_t socket);

// Whether a TCP listener could bind host:port now: binds (and closes) a socket
// there as a server would (SO_REUSEADDR, no SO_REUSEPORT). Ok, or kUnavailable
// whose message is the reason alone (the resolver's or the system's words).
// Port 0 is always Ok. On Windows nothing is checked (Ok): the server's own
// bind reports it there. A port taken between this check and the bind still
// fails at the bind.
Status CheckListenable(const std::string& host, int port);

// The bytes this process wrote to its TCP connections on local `port` that
// their peers have not acknowledged yet (the send queues of those in state
// ESTABLISHED; on Linux from /proc/self/net/tcp and tcp6, matched to this
// process's descriptors). -1 where that cannot be read (Windows, a system
// without /proc). A server shutting down waits for 0 before it closes them:
// a connection closed with input unread is reset, and a reset discards what
// the peer has not received yet.
int64_t UnacknowledgedBytesOn(int port);

// Raises this process's soft limit on open files to `needed` when it is
// lower. Returns -1 when done or not needed (always on Windows, whose socket
// count has no such limit), else the hard limit that is too low.
int64_t RaiseOpenFileLimit(size_t needed);

// ---- Stop signals ----------------------------------------------------------

// Takes the stop requests away from the default handling, for
// WaitForStopSignal: SIGINT, SIGTERM and SIGHUP blocked in this thread and
// every thread started after (call it before starting any); on Windows a
// console control handler for Ctrl+C, Ctrl+Break, closing the console, log
// off and shut down.
void BlockStopSignals();

// Waits for the next stop request after BlockStopSignals and names it
// ("SIGINT", "SIGTERM", "SIGHUP"; "Ctrl+C", "Ctrl+Break", "console close").
std::string WaitForStopSignal();

}  // namespace ebb::port
