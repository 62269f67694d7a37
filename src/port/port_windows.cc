// The port layer on Windows (Win32, built with MinGW-w64). See port.h for the
// contract; docs/porting.md for each function side by side with POSIX.
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <windows.h>
// After windows.h:
#include <bcrypt.h>
#include <fcntl.h>
#include <io.h>
#include <malloc.h>
#include <psapi.h>
#include <shellapi.h>
#include <sys/stat.h>

#include <cpuid.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "port.h"

namespace ebb::port {
namespace {

std::wstring Wide(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  const int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring wide(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), wide.data(), n);
  return wide;
}

std::string Narrow(const std::wstring& wide) {
  if (wide.empty()) return std::string();
  const int n = WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), nullptr, 0, nullptr, nullptr);
  std::string utf8(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), utf8.data(), n, nullptr, nullptr);
  return utf8;
}

// The system's text for error `code`.
std::string ErrorText(DWORD code) {
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                                 nullptr, code, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string message = n > 0 ? Narrow(std::wstring(text, n)) : "error " + std::to_string(code);
  if (text) LocalFree(text);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r' || message.back() == ' ')) message.pop_back();
  return message;
}

bool IsNotFound(DWORD code) { return code == ERROR_FILE_NOT_FOUND || code == ERROR_PATH_NOT_FOUND; }

// FILETIME (100 ns since 1601) as ns since 1970.
int64_t Nanoseconds(const FILETIME& t) {
  const uint64_t ticks = (static_cast<uint64_t>(t.dwHighDateTime) << 32) | t.dwLowDateTime;
  return (static_cast<int64_t>(ticks) - 116444736000000000LL) * 100;
}

FileInfo InfoOf(const BY_HANDLE_FILE_INFORMATION& h, DWORD type) {
  FileInfo info;
  if (h.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
    info.kind = FileKind::kLink;
  } else if (h.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
    info.kind = FileKind::kFolder;
  } else if (type == FILE_TYPE_DISK) {
    info.kind = FileKind::kRegular;
  } else if (type == FILE_TYPE_PIPE) {
    info.kind = FileKind::kFifo;
  } else if (type == FILE_TYPE_CHAR) {
    info.kind = FileKind::kCharDevice;
  }
  info.identity.device = h.dwVolumeSerialNumber;
  info.identity.inode = (static_cast<uint64_t>(h.nFileIndexHigh) << 32) | h.nFileIndexLow;
  info.identity.size = static_cast<int64_t>((static_cast<uint64_t>(h.nFileSizeHigh) << 32) | h.nFileSizeLow);
  info.identity.mtime_ns = Nanoseconds(h.ftLastWriteTime);
  info.identity.ctime_ns = info.identity.mtime_ns;
  info.owned_by_me = true;
  return info;
}

Result<FileInfo> InfoOfHandle(HANDLE handle) {
  BY_HANDLE_FILE_INFORMATION h{};
  if (!GetFileInformationByHandle(handle, &h)) return Internal(ErrorText(GetLastError()));
  return InfoOf(h, GetFileType(handle));
}

PROCESS_MEMORY_COUNTERS CountersOf(HANDLE process) {
  PROCESS_MEMORY_COUNTERS counters{};
  counters.cb = sizeof counters;
  if (!GetProcessMemoryInfo(process, &counters, sizeof counters)) std::memset(&counters, 0, sizeof counters);
  return counters;
}

HANDLE OpenForReading(const std::wstring& path, DWORD flags) {
  return CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                     OPEN_EXISTING, flags, nullptr);
}

}  // namespace

// ---- Memory

int64_t ResidentBytes() { return static_cast<int64_t>(CountersOf(GetCurrentProcess()).WorkingSetSize); }
int64_t PeakResidentBytes() { return static_cast<int64_t>(CountersOf(GetCurrentProcess()).PeakWorkingSetSize); }
bool ResetPeakResident() { return false; }

int64_t ResidentBytesOf(int64_t id) {
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(id));
  if (!process) return 0;
  const int64_t bytes = static_cast<int64_t>(CountersOf(process).WorkingSetSize);
  CloseHandle(process);
  return bytes;
}

int64_t PeakResidentBytesOf(int64_t id) {
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(id));
  if (!process) return 0;
  const int64_t bytes = static_cast<int64_t>(CountersOf(process).PeakWorkingSetSize);
  CloseHandle(process);
  return bytes;
}

bool ResetPeakResidentOf(int64_t) { return false; }

int64_t MinorPageFaults() { return static_cast<int64_t>(CountersOf(GetCurrentProcess()).PageFaultCount); }

int64_t PageFaultsOf(int64_t id) {
  HANDLE process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(id));
  if (!process) return -1;
  const int64_t faults = static_cast<int64_t>(CountersOf(process).PageFaultCount);
  CloseHandle(process);
  return faults;
}

int64_t MachineMemoryBytes() {
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof status;
  return GlobalMemoryStatusEx(&status) ? static_cast<int64_t>(status.ullTotalPhys) : 0;
}

int64_t CgroupMemoryLimitBytes(const std::string&, const std::string&) { return 0; }  // no cgroups

int64_t ProcessMemoryLimitBytes() {
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION job{};
  if (!QueryInformationJobObject(nullptr, JobObjectExtendedLimitInformation, &job, sizeof job, nullptr)) return 0;
  int64_t lowest = 0;
  const DWORD flags = job.BasicLimitInformation.LimitFlags;
  if (flags & JOB_OBJECT_LIMIT_PROCESS_MEMORY) lowest = static_cast<int64_t>(job.ProcessMemoryLimit);
  if ((flags & JOB_OBJECT_LIMIT_JOB_MEMORY) && (lowest == 0 || static_cast<int64_t>(job.JobMemoryLimit) < lowest)) {
    lowest = static_cast<int64_t>(job.JobMemoryLimit);
  }
  return lowest;
}

size_t PageSize() {
  static const size_t page = [] {
    SYSTEM_INFO info;
    GetSystemInfo(&info);
    return static_cast<size_t>(info.dwPageSize);
  }();
  return page;
}

void TrimHeap() {
  _heapmin();
  HANDLE heaps[64];
  const DWORD n = GetProcessHeaps(64, heaps);
  for (DWORD i = 0; i < n && i < 64; ++i) HeapCompact(heaps[i], 0);
}

void KeepHeapReturnable() {}

void RestartWithHugePageHeap(char**) {}

void* AllocatePages(size_t bytes) {
  void* pages = VirtualAlloc(nullptr, bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
  if (!pages) return nullptr;
  // Faulted in at once, as MAP_POPULATE does (one pass instead of a fault per page while reading).
  const size_t page = PageSize();
  for (size_t at = 0; at < bytes; at += page) static_cast<volatile char*>(pages)[at] = 0;
  return pages;
}

void ProtectPagesReadOnly(void* pages, size_t bytes) {
  DWORD old = 0;
  VirtualProtect(pages, bytes, PAGE_READONLY, &old);
}

void FreePages(void* pages, size_t) {
  if (pages) VirtualFree(pages, 0, MEM_RELEASE);
}

// ---- Files

Result<FileInfo> StatPath(const std::string& path, bool follow_links) {
  const DWORD flags = FILE_FLAG_BACKUP_SEMANTICS | (follow_links ? 0 : FILE_FLAG_OPEN_REPARSE_POINT);
  HANDLE handle = CreateFileW(Wide(path).c_str(), FILE_READ_ATTRIBUTES,
                              FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING, flags,
                              nullptr);
  if (handle == INVALID_HANDLE_VALUE) {
    const DWORD err = GetLastError();
    if (IsNotFound(err)) return NotFound("does not exist");
    return Internal(ErrorText(err));
  }
  Result<FileInfo> info = InfoOfHandle(handle);
  CloseHandle(handle);
  return info;
}

Result<std::string> RealPath(const std::string& path) {
  HANDLE handle = OpenForReading(Wide(path), FILE_FLAG_BACKUP_SEMANTICS);
  if (handle == INVALID_HANDLE_VALUE) {
    return InvalidArgument("cannot be resolved (" + ErrorText(GetLastError()) + ")");
  }
  wchar_t buffer[32768];
  const DWORD n = GetFinalPathNameByHandleW(handle, buffer, 32768, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
  CloseHandle(handle);
  if (n == 0 || n >= 32768) return InvalidArgument("cannot be resolved (" + ErrorText(GetLastError()) + ")");
  std::wstring text(buffer, n);
  if (text.rfind(L"\\\\?\\", 0) == 0) text = text.substr(4);
  return Narrow(text);
}

bool FolderWritable(const std::string& folder) {
  const DWORD attributes = GetFileAttributesW(Wide(folder).c_str());
  return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) &&
         !(attributes & FILE_ATTRIBUTE_READONLY);
}

void TouchFile(const std::string& path) {
  HANDLE handle = CreateFileW(Wide(path).c_str(), FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                              OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  if (handle == INVALID_HANDLE_VALUE) return;
  FILETIME now;
  GetSystemTimeAsFileTime(&now);
  SetFileTime(handle, nullptr, nullptr, &now);
  CloseHandle(handle);
}

Status WriteNewPrivateFile(const std::string& path, const std::string& text) {
  HANDLE handle = CreateFileW(Wide(path).c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW,
                              FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, nullptr);
  if (handle == INVALID_HANDLE_VALUE) return Internal("cannot create '" + path + "': " + ErrorText(GetLastError()));
  size_t written = 0;
  while (written < text.size()) {
    DWORD n = 0;
    const DWORD chunk = static_cast<DWORD>(std::min<size_t>(text.size() - written, 1u << 30));
    if (!WriteFile(handle, text.data() + written, chunk, &n, nullptr) || n == 0) {
      const std::string why = ErrorText(GetLastError());
      CloseHandle(handle);
      DeleteFileW(Wide(path).c_str());
      return Internal("cannot write '" + path + "': " + why);
    }
    written += n;
  }
  if (!CloseHandle(handle)) {
    DeleteFileW(Wide(path).c_str());
    return Internal("cannot write '" + path + "': " + ErrorText(GetLastError()));
  }
  return Status::Ok();
}

Result<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path, bool no_follow) {
  const std::wstring wide = Wide(path);
  if (no_follow) {
    const DWORD attributes = GetFileAttributesW(wide.c_str());
    if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
      return InvalidArgument("is a symbolic link");
    }
  }
  // Not inherited (no SECURITY_ATTRIBUTES with bInheritHandle); a folder opens too (and is refused by its kind).
  HANDLE handle = OpenForReading(wide, FILE_FLAG_BACKUP_SEMANTICS | (no_follow ? FILE_FLAG_OPEN_REPARSE_POINT : 0));
  if (handle == INVALID_HANDLE_VALUE) {
    const DWORD err = GetLastError();
    if (IsNotFound(err)) return NotFound("does not exist");
    return InvalidArgument(ErrorText(err));
  }
  return ReadOnlyFile(reinterpret_cast<intptr_t>(handle));
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept : handle_(other.handle_) { other.handle_ = -1; }

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (handle_ != -1) CloseHandle(reinterpret_cast<HANDLE>(handle_));
    handle_ = other.handle_;
    other.handle_ = -1;
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_ != -1) CloseHandle(reinterpret_cast<HANDLE>(handle_));
}

Result<FileInfo> ReadOnlyFile::Info() const {
  Result<FileInfo> info = InfoOfHandle(reinterpret_cast<HANDLE>(handle_));
  if (!info.ok()) return Internal("cannot stat: " + info.status().message());
  return info;
}

Result<size_t> ReadOnlyFile::Read(void* buffer, size_t n) {
  DWORD got = 0;
  const DWORD want = static_cast<DWORD>(std::min<size_t>(n, 1u << 30));
  if (!ReadFile(reinterpret_cast<HANDLE>(handle_), buffer, want, &got, nullptr)) {
    const DWORD err = GetLastError();
    if (err == ERROR_HANDLE_EOF || err == ERROR_BROKEN_PIPE) return size_t{0};
    return Internal(ErrorText(err));
  }
  return static_cast<size_t>(got);
}

std::string ReadOnlyFile::OpenedPath() const {
  wchar_t buffer[32768];
  const DWORD n =
      GetFinalPathNameByHandleW(reinterpret_cast<HANDLE>(handle_), buffer, 32768, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
  if (n == 0 || n >= 32768) return "";
  std::wstring text(buffer, n);
  if (text.rfind(L"\\\\?\\", 0) == 0) text = text.substr(4);
  return Narrow(text);
}

Status ReadOnlyFile::MakePrivate() { return Status::Ok(); }

Result<Mapping> Mapping::Open(const std::string& path) {
  HANDLE file = OpenForReading(Wide(path), FILE_FLAG_BACKUP_SEMANTICS);
  if (file == INVALID_HANDLE_VALUE) {
    return NotFound("cannot open model file '" + path + "': " + ErrorText(GetLastError()));
  }
  Mapping mapping;
  Result<FileInfo> info = InfoOfHandle(file);
  Status status = !info.ok()                             ? Internal("cannot stat '" + path + "': " + info.status().message())
                  : info->kind != FileKind::kRegular     ? InvalidArgument("'" + path + "' is not a model file")
                  : info->identity.size == 0             ? InvalidArgument("model file '" + path + "' is empty")
                                                         : Status::Ok();
  if (status.ok()) {
    mapping.size_ = static_cast<size_t>(info->identity.size);
    mapping.identity_ = info->identity;
    HANDLE section = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
    void* data = section ? MapViewOfFile(section, FILE_MAP_READ, 0, 0, 0) : nullptr;
    if (!data) {
      status = Internal("cannot map '" + path + "': " + ErrorText(GetLastError()));
    } else {
      mapping.data_ = data;
    }
    if (section) CloseHandle(section);  // the view keeps the section
  }
  CloseHandle(file);
  if (!status.ok()) return status;
  return mapping;
}

Mapping::Mapping(Mapping&& other) noexcept : data_(other.data_), size_(other.size_), identity_(other.identity_) {
  other.data_ = nullptr;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_) UnmapViewOfFile(data_);
    data_ = other.data_;
    size_ = other.size_;
    identity_ = other.identity_;
    other.data_ = nullptr;
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_) UnmapViewOfFile(data_);
}

// The guard of GuardedMapping on Windows: a second handle to the file that does not share writing, held
// as long as the view. Opening the file for writing then fails, and a file with a view cannot be truncated.
struct GuardedMapping::State {
  HANDLE guard = INVALID_HANDLE_VALUE;
  void* data = nullptr;
  size_t size = 0;
  FileIdentity identity;
};

Result<std::unique_ptr<GuardedMapping>> GuardedMapping::Map(ReadOnlyFile& file, size_t size) {
  if (size == 0) return InvalidArgument("is empty");
  auto state = std::make_unique<State>();
  // The same file as `file` (no path to race on), shared for reading and deleting only.
  state->guard =
      ReOpenFile(reinterpret_cast<HANDLE>(file.handle_), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, 0);
  if (state->guard == INVALID_HANDLE_VALUE) {
    return Unavailable("cannot hold the file against writers: " + ErrorText(GetLastError()));
  }
  Result<FileInfo> info = InfoOfHandle(state->guard);
  const std::string sizes = info.ok() ? std::to_string(info->identity.size) + " bytes, not " + std::to_string(size) : "";
  Status status = !info.ok() ? Internal("cannot stat: " + info.status().message())
                  : static_cast<uint64_t>(info->identity.size) != size ? InvalidArgument("is " + sizes)
                                                                        : Status::Ok();
  if (status.ok()) {
    HANDLE section = CreateFileMappingW(state->guard, nullptr, PAGE_READONLY, 0, 0, nullptr);
    state->data = section ? MapViewOfFile(section, FILE_MAP_READ, 0, 0, 0) : nullptr;
    if (!state->data) status = Internal("cannot map: " + ErrorText(GetLastError()));
    if (section) CloseHandle(section);  // the view keeps the section
  }
  if (!status.ok()) {
    CloseHandle(state->guard);
    return status;
  }
  state->size = size;
  state->identity = info->identity;
  CloseHandle(reinterpret_cast<HANDLE>(file.handle_));
  file.handle_ = -1;
  return std::unique_ptr<GuardedMapping>(new GuardedMapping(std::move(state)));
}

GuardedMapping::GuardedMapping(std::unique_ptr<State> state) : state_(std::move(state)) {}

GuardedMapping::~GuardedMapping() {
  UnmapViewOfFile(state_->data);
  CloseHandle(state_->guard);
}

const void* GuardedMapping::data() const { return state_->data; }
size_t GuardedMapping::size() const { return state_->size; }
const FileIdentity& GuardedMapping::identity() const { return state_->identity; }
bool GuardedMapping::copied() const { return false; }

std::filesystem::path PathFromUtf8(const std::string& utf8) { return std::filesystem::path(Wide(utf8)); }
std::string Utf8FromPath(const std::filesystem::path& path) { return Narrow(path.wstring()); }

std::basic_string<OrtChar> OrtPath(const std::string& utf8) { return Wide(utf8); }

// ---- SHA-256 (BCrypt)

Sha256::Sha256() {
  BCRYPT_ALG_HANDLE algorithm = nullptr;
  if (BCryptOpenAlgorithmProvider(&algorithm, BCRYPT_SHA256_ALGORITHM, nullptr, 0) != 0) return;
  BCRYPT_HASH_HANDLE hash = nullptr;
  if (BCryptCreateHash(algorithm, &hash, nullptr, 0, nullptr, 0, 0) != 0) {
    BCryptCloseAlgorithmProvider(algorithm, 0);
    return;
  }
  extra_ = algorithm;
  state_ = hash;
}

Sha256::~Sha256() {
  if (state_) BCryptDestroyHash(static_cast<BCRYPT_HASH_HANDLE>(state_));
  if (extra_) BCryptCloseAlgorithmProvider(static_cast<BCRYPT_ALG_HANDLE>(extra_), 0);
}

void Sha256::Update(const void* data, size_t size) {
  if (!state_) return;
  const auto* bytes = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const ULONG chunk = static_cast<ULONG>(std::min<size_t>(size, 1u << 30));
    BCryptHashData(static_cast<BCRYPT_HASH_HANDLE>(state_), const_cast<PUCHAR>(bytes), chunk, 0);
    bytes += chunk;
    size -= chunk;
  }
}

std::string Sha256::Hex() {
  if (!state_) return "";
  unsigned char digest[32];
  BCryptFinishHash(static_cast<BCRYPT_HASH_HANDLE>(state_), digest, sizeof digest, 0);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned char byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

// ---- Shared libraries

std::vector<std::string> Utf8Arguments(int argc, char** argv) {
  int count = 0;
  wchar_t** wide = CommandLineToArgvW(GetCommandLineW(), &count);
  if (!wide) return std::vector<std::string>(argv, argv + argc);
  std::vector<std::string> args;
  for (int i = 0; i < count; ++i) args.push_back(Narrow(wide[i]));
  LocalFree(wide);
  return args;
}

void UseUtf8Console() {
  SetConsoleOutputCP(CP_UTF8);
  SetConsoleCP(CP_UTF8);
}

std::string ShellQuoted(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0;; ++i) {
    size_t slashes = 0;
    while (i < text.size() && text[i] == '\\') {
      ++i;
      ++slashes;
    }
    if (i == text.size()) {
      out.append(slashes * 2, '\\');
      break;
    }
    if (text[i] == '"') {
      out.append(slashes * 2 + 1, '\\');
    } else {
      out.append(slashes, '\\');
    }
    out += text[i];
  }
  return out + "\"";
}

const char* const kLineFilter = "findstr";
const char* const kCudaProviderHint = "this Windows build's ONNX Runtime has the CPU provider only";

Status CheckOrtLibrary() {
  // The programs delay-load onnxruntime.dll (cmake/windows-deps.cmake): the loader does not refuse to
  // start without it, and the first call into ORT would end the process without a word. Load it
  // here, from where the delay-load helper will look (the program's folder first), and say which.
  HMODULE ort = LoadLibraryW(L"onnxruntime.dll");
  if (ort) return Status::Ok();  // kept loaded: the delay-load helper finds it
  const DWORD error = GetLastError();
  const std::string folder = Narrow(std::filesystem::path(Wide(ExecutablePath())).parent_path().wstring());
  return FailedPrecondition("onnxruntime.dll cannot be loaded (" + ErrorText(error) +
                            "): it belongs beside ebb.exe, in " + folder + ", as in the release zip");
}

namespace {

// The universal C runtime's descriptor calls, reached by name: onnxruntime.dll (built with MSVC) writes
// through ucrtbase.dll, and MinGW's own _dup2 would redirect msvcrt.dll's descriptor 2, not ORT's.
struct UcrtDescriptors {
  using Dup = int(__cdecl*)(int);
  using Dup2 = int(__cdecl*)(int, int);
  using Open = int(__cdecl*)(const char*, int, ...);
  using Close = int(__cdecl*)(int);
  using OsHandle = intptr_t(__cdecl*)(int);
  Dup dup = nullptr;
  Dup2 dup2 = nullptr;
  Open open = nullptr;
  Close close = nullptr;
  OsHandle os_handle = nullptr;

  // Empty (all null) when the runtime is not loaded: then ORT is not either, and prints nothing yet.
  static UcrtDescriptors Find() {
    UcrtDescriptors d;
    HMODULE crt = GetModuleHandleW(L"ucrtbase.dll");
    if (!crt) return d;
    d.dup = reinterpret_cast<Dup>(reinterpret_cast<void*>(GetProcAddress(crt, "_dup")));
    d.dup2 = reinterpret_cast<Dup2>(reinterpret_cast<void*>(GetProcAddress(crt, "_dup2")));
    d.open = reinterpret_cast<Open>(reinterpret_cast<void*>(GetProcAddress(crt, "_open")));
    d.close = reinterpret_cast<Close>(reinterpret_cast<void*>(GetProcAddress(crt, "_close")));
    d.os_handle = reinterpret_cast<OsHandle>(reinterpret_cast<void*>(GetProcAddress(crt, "_get_osfhandle")));
    return d;
  }
  bool usable() const { return dup && dup2 && open && close && os_handle; }
};

}  // namespace

// Both C runtimes took descriptor 2's handle from GetStdHandle at start-up: the same handle. ucrt's _dup2
// closes the handle it replaces, which would leave ebb's own stderr (msvcrt's descriptor 2) writing to a
// closed handle; so that handle is protected from closing for the one _dup2 call that replaces it.
OrtStderrSilenced::OrtStderrSilenced() {
  const UcrtDescriptors crt = UcrtDescriptors::Find();
  if (!crt.usable()) return;
  const auto shared = reinterpret_cast<HANDLE>(crt.os_handle(2));
  DWORD flags = 0;
  if (shared == INVALID_HANDLE_VALUE || !GetHandleInformation(shared, &flags)) return;  // no stderr at all
  const int saved = crt.dup(2);
  if (saved < 0) return;
  const int null_device = crt.open("NUL", _O_WRONLY);
  if (null_device < 0) {
    crt.close(saved);
    return;
  }
  SetHandleInformation(shared, HANDLE_FLAG_PROTECT_FROM_CLOSE, HANDLE_FLAG_PROTECT_FROM_CLOSE);
  const bool redirected = crt.dup2(null_device, 2) == 0;
  SetHandleInformation(shared, HANDLE_FLAG_PROTECT_FROM_CLOSE, flags & HANDLE_FLAG_PROTECT_FROM_CLOSE);
  crt.close(null_device);
  if (!redirected) {
    crt.close(saved);
    return;
  }
  saved_ = saved;
}

OrtStderrSilenced::~OrtStderrSilenced() {
  if (saved_ < 0) return;
  const UcrtDescriptors crt = UcrtDescriptors::Find();
  if (!crt.usable()) return;
  crt.dup2(saved_, 2);  // closes the null device's handle, not one another runtime holds
  crt.close(saved_);
}

std::FILE* OpenFile(const std::string& path, const char* mode) {
  return _wfopen(Wide(path).c_str(), Wide(mode).c_str());
}

std::string NativePath(const std::string& path) {
  std::string native = path;
  std::replace(native.begin(), native.end(), '/', '\\');
  return native;
}

const char* const kCudaProviderLibraryName = "onnxruntime_providers_cuda.dll";
const char* const kNvmlLibraryName = "nvml.dll";
const char* const kCudaRuntimeLibraryName = "cudart64_13.dll";

Result<Library> Library::Load(const std::string& path, bool) {
  HMODULE module = LoadLibraryW(Wide(path).c_str());
  if (!module) return NotFound(ErrorText(GetLastError()));
  return Library(reinterpret_cast<void*>(module));
}

Library::Library(Library&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

Library& Library::operator=(Library&& other) noexcept {
  if (this != &other) {
    if (handle_) FreeLibrary(static_cast<HMODULE>(handle_));
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

Library::~Library() {
  if (handle_) FreeLibrary(static_cast<HMODULE>(handle_));
}

void* Library::Find(const char* name) const {
  return handle_ ? reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(handle_), name)) : nullptr;
}

namespace {
std::string ModuleFileName(HMODULE module) {
  std::wstring buffer(32768, L'\0');
  const DWORD n = GetModuleFileNameW(module, buffer.data(), static_cast<DWORD>(buffer.size()));
  if (n == 0 || n >= buffer.size()) return "";
  buffer.resize(n);
  return Narrow(buffer);
}
}  // namespace

std::string LibraryPathOf(const void* address) {
  HMODULE module = nullptr;
  if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          static_cast<LPCWSTR>(address), &module)) {
    return "";
  }
  return ModuleFileName(module);
}

// ---- Processes

int64_t ProcessId() { return static_cast<int64_t>(GetCurrentProcessId()); }

std::string ExecutablePath() { return ModuleFileName(nullptr); }

bool StdoutIsTerminal() {
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), &mode) != 0;
}

std::string GetEnv(const char* name) {
  const std::wstring wide = Wide(name);
  const DWORD n = GetEnvironmentVariableW(wide.c_str(), nullptr, 0);
  if (n == 0) return "";
  std::wstring value(n, L'\0');
  const DWORD got = GetEnvironmentVariableW(wide.c_str(), value.data(), n);
  value.resize(got);
  return Narrow(value);
}

void SetEnvUnlessSet(const char* name, const char* value) {
  const std::wstring wide = Wide(name);
  if (GetEnvironmentVariableW(wide.c_str(), nullptr, 0) == 0 && GetLastError() == ERROR_ENVVAR_NOT_FOUND) {
    SetEnvironmentVariableW(wide.c_str(), Wide(value).c_str());
  }
}

std::string UserCacheFolder() { return GetEnv("LOCALAPPDATA"); }

std::string CpuFeatures() {
  unsigned int a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return "";
  char vendor[13];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  vendor[12] = '\0';
  std::string text = std::string(vendor) + "|";
  char hex[64];
  __get_cpuid(1, &a, &b, &c, &d);
  std::snprintf(hex, sizeof hex, "1:%08x:%08x", c, d);
  text += hex;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    std::snprintf(hex, sizeof hex, " 7:%08x:%08x:%08x", b, c, d);
    text += hex;
  }
  return text;
}

namespace {
// One argument quoted as CommandLineToArgvW and the CRT read it back (ShellQuoted's rules), when it must be.
std::wstring Quoted(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
  return Wide(ShellQuoted(Narrow(arg)));
}
}  // namespace

Result<Child> Child::SpawnSelf(const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& env) {
  return Spawn(ExecutablePath(), args, env);
}

Result<Child> Child::Spawn(const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::pair<std::string, std::string>>& env) {
  SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  HANDLE read_end = nullptr, write_end = nullptr;
  if (!CreatePipe(&read_end, &write_end, &inherit, 0)) return Internal("CreatePipe failed: " + ErrorText(GetLastError()));
  SetHandleInformation(read_end, HANDLE_FLAG_INHERIT, 0);  // only the write end goes to the child
  std::wstring command = Quoted(Wide(program));  // CreateProcess looks a bare name up on PATH
  for (size_t i = 1; i < args.size(); ++i) command += L" " + Quoted(Wide(args[i]));
  // The child's environment: this one's, with `env` set (set here around the call; a benchmark's own process).
  std::vector<std::pair<std::wstring, std::wstring>> saved;
  for (const auto& [name, value] : env) {
    const std::wstring wname = Wide(name);
    const std::string old = GetEnv(name.c_str());
    saved.emplace_back(wname, Wide(old));
    SetEnvironmentVariableW(wname.c_str(), Wide(value).c_str());
  }
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  startup.hStdOutput = write_end;
  startup.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION process{};
  const BOOL started = CreateProcessW(nullptr, command.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr, &startup, &process);
  const DWORD err = GetLastError();
  for (const auto& [name, value] : saved) SetEnvironmentVariableW(name.c_str(), value.empty() ? nullptr : value.c_str());
  CloseHandle(write_end);
  if (!started) {
    CloseHandle(read_end);
    return Internal("CreateProcess failed: " + ErrorText(err));
  }
  CloseHandle(process.hThread);
  Child child;
  child.id_ = process.dwProcessId;
  child.process_ = reinterpret_cast<intptr_t>(process.hProcess);
  child.stdout_ = reinterpret_cast<intptr_t>(read_end);
  return child;
}

Child::Child(Child&& other) noexcept
    : id_(other.id_), process_(other.process_), stdout_(other.stdout_), waited_(other.waited_),
      pending_(std::move(other.pending_)) {
  other.id_ = -1;
  other.process_ = 0;
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
  if (stdout_ != -1) CloseHandle(reinterpret_cast<HANDLE>(stdout_));
  if (process_) CloseHandle(reinterpret_cast<HANDLE>(process_));
}

size_t Child::ReadStdout(char* buffer, size_t n) {
  if (!pending_.empty()) {
    const size_t k = std::min(n, pending_.size());
    std::memcpy(buffer, pending_.data(), k);
    pending_.erase(0, k);
    return k;
  }
  DWORD got = 0;
  if (!ReadFile(reinterpret_cast<HANDLE>(stdout_), buffer, static_cast<DWORD>(std::min<size_t>(n, 1u << 30)), &got,
                nullptr)) {
    return 0;  // ERROR_BROKEN_PIPE: the child closed its end
  }
  return got;
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
    DWORD got = 0;
    if (!ReadFile(reinterpret_cast<HANDLE>(stdout_), buffer, sizeof buffer, &got, nullptr) || got == 0) {
      line->swap(pending_);
      pending_.clear();
      return !line->empty();
    }
    pending_.append(buffer, got);
  }
}

void Child::Stop() {
  if (process_ && !waited_) TerminateProcess(reinterpret_cast<HANDLE>(process_), 1);
}

int Child::Wait() {
  if (!process_) return -1;
  WaitForSingleObject(reinterpret_cast<HANDLE>(process_), INFINITE);
  DWORD code = 0;
  GetExitCodeProcess(reinterpret_cast<HANDLE>(process_), &code);
  waited_ = true;
  return static_cast<int>(code);
}

// ---- Sockets

int64_t SendWithoutWaiting(intptr_t, const void*, size_t, const void*, size_t) { return 0; }

PeerState PeekPeer(intptr_t socket) {
  const SOCKET s = static_cast<SOCKET>(socket);
  u_long pending = 0;
  if (ioctlsocket(s, FIONREAD, &pending) == 0 && pending > 0) return PeerState::kSent;
  // Readable with nothing to read: the peer closed (recv returns 0 at once) or reset the connection.
  char byte;
  const int n = recv(s, &byte, 1, MSG_PEEK);
  if (n > 0) return PeerState::kSent;
  if (n == 0) return PeerState::kClosed;
  const int err = WSAGetLastError();
  return err == WSAEWOULDBLOCK || err == WSAEINTR ? PeerState::kNothing : PeerState::kClosed;
}

Status CheckListenable(const std::string&, int) { return Status::Ok(); }  // the server's bind reports it

int64_t UnacknowledgedBytesOn(int) { return -1; }  // gRPC, its one caller, is not built for Windows

int64_t RaiseOpenFileLimit(size_t) { return -1; }

// ---- Stop signals

namespace {
HANDLE g_stop_event = nullptr;
volatile LONG g_stop_kind = -1;

BOOL WINAPI OnConsoleControl(DWORD kind) {
  switch (kind) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT:
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT:
      InterlockedExchange(&g_stop_kind, static_cast<LONG>(kind));
      SetEvent(g_stop_event);
      // For a console close, Windows ends the process when this returns: give the drain a moment.
      if (kind == CTRL_CLOSE_EVENT) Sleep(5000);
      return TRUE;
    default: return FALSE;
  }
}
}  // namespace

void BlockStopSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_stop_event = CreateEventW(nullptr, FALSE, FALSE, nullptr);
    SetConsoleCtrlHandler(OnConsoleControl, TRUE);
  });
}

std::string WaitForStopSignal() {
  BlockStopSignals();
  WaitForSingleObject(g_stop_event, INFINITE);
  switch (g_stop_kind) {
    case CTRL_C_EVENT: return "Ctrl+C";
    case CTRL_BREAK_EVENT: return "Ctrl+Break";
    case CTRL_CLOSE_EVENT: return "console close";
    case CTRL_LOGOFF_EVENT: return "log off";
    default: return "shut down";
  }
}

}  // namespace ebb::port
