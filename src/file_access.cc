#include "file_access.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ebb::detail {
namespace {

namespace fs = std::filesystem;

// errno as text; take it first thing after the failed call (building a message may allocate).
std::string ErrnoText(int err) { return std::strerror(err); }

// The canonical form of `path` (every link resolved), or why there is none.
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

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Where the descriptor really points (/proc/self/fd), when the system says.
std::string PathOfDescriptor(int fd) {
  char link[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(proc.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

Status OverCap(const FileRules& rules, const std::string& path, const std::string& size) {
  return InvalidArgument("'" + path + "' is " + size + ", larger than the limit of " + CapText(rules.max_bytes) +
                         " for " + rules.what + ": refused");
}

}  // namespace

std::string CapText(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

FileCopy::~FileCopy() {
  if (mapped_ > 0) munmap(data_, mapped_);
}

CheckedFile::CheckedFile(CheckedFile&& other) noexcept
    : fd_(other.fd_), size_(other.size_), rules_(std::move(other.rules_)) {
  other.fd_ = -1;
}

CheckedFile& CheckedFile::operator=(CheckedFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    rules_ = std::move(other.rules_);
    other.fd_ = -1;
  }
  return *this;
}

CheckedFile::~CheckedFile() {
  if (fd_ >= 0) close(fd_);
}

Result<CheckedFile> CheckedFile::Open(const std::string& path, const FileRules& rules) {
  const std::string& what = rules.what;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(what + " '" + path + "' does not exist");
    return Internal("cannot look at " + what + " '" + path + "': " + ErrnoText(err));
  }
  std::string target = path;
  std::string root;
  if (!rules.root.empty()) {
    Result<std::string> real_root = RealPath(rules.root);
    if (!real_root.ok()) return InvalidArgument("the root '" + rules.root + "' " + real_root.status().message());
    root = *real_root;
    Result<std::string> real = RealPath(path);
    if (!real.ok()) return InvalidArgument(what + " '" + path + "' " + real.status().message());
    if (!PathInside(root, *real)) return InvalidArgument(what + " '" + path + "' resolves outside " + root + ": refused");
    target = *real;
  }
  // O_NONBLOCK: opening a FIFO with no writer, or a device, returns at once (fstat then refuses it).
  const int fd = open(target.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) return InvalidArgument(what + " '" + path + "' is a symbolic link: refused");
    if (err == ENOENT) return NotFound(what + " '" + path + "' does not exist");
    return InvalidArgument("cannot open " + what + " '" + path + "': " + ErrnoText(err));
  }
  CheckedFile file(fd, 0, rules);
  if (!root.empty()) {
    // What was opened, not what the path said a moment before: a folder on the way swapped for a link
    // in between shows here.
    const std::string opened = PathOfDescriptor(fd);
    if (!opened.empty() && !PathInside(root, opened)) {
      return InvalidArgument(what + " '" + path + "' changed into a link out of " + root + " while it was opened");
    }
  }
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    return Internal("cannot stat " + what + " '" + path + "': " + ErrnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(what + " '" + path + "' is " + KindOf(st.st_mode) + ", not a regular file: refused");
  }
  if (rules.own_private) {
    if (st.st_uid != geteuid()) {
      return InvalidArgument(what + " '" + path + "' belongs to user " + std::to_string(st.st_uid) +
                             ", not to this process's user " + std::to_string(geteuid()) + ": refused");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return InvalidArgument(what + " '" + path + "' is writable by group or others (mode " + Octal(st.st_mode) +
                             "): refused");
    }
  }
  if (rules.max_bytes > 0 && static_cast<uint64_t>(st.st_size) > rules.max_bytes) {
    return OverCap(rules, path, std::to_string(st.st_size) + " bytes");
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

Result<size_t> CheckedFile::Read(void* buffer, size_t n) {
  while (true) {
    const ssize_t got = read(fd_, buffer, n);
    if (got >= 0) return static_cast<size_t>(got);
    const int err = errno;
    if (err == EINTR) continue;
    return Internal("cannot read " + rules_.what + ": " + ErrnoText(err));
  }
}

Result<std::string> CheckedFile::ReadAll() {
  std::string text;
  char chunk[64 * 1024];
  while (true) {
    Result<size_t> n = Read(chunk, sizeof chunk);
    if (!n.ok()) return n.status();
    if (*n == 0) return text;
    text.append(chunk, *n);
    if (rules_.max_bytes > 0 && text.size() > rules_.max_bytes) {
      return InvalidArgument("larger than the limit of " + CapText(rules_.max_bytes) + " for " + rules_.what +
                             " (it grew while it was read): refused");
    }
  }
}

Result<std::shared_ptr<FileCopy>> CheckedFile::Copy() {
  if (size_ == 0) return InvalidArgument(rules_.what + " is empty");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (static_cast<size_t>(size_) + page - 1) / page * page;
  // Anonymous pages of our own, faulted in at once (one pass instead of a fault per page while reading).
  void* data = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (data == MAP_FAILED) {
    return ResourceExhausted("cannot allocate " + std::to_string(size_) + " bytes for " + rules_.what);
  }
  std::shared_ptr<FileCopy> copy(new FileCopy(data, static_cast<size_t>(size_), mapped));
  size_t filled = 0;
  while (filled < size_) {
    Result<size_t> n = Read(static_cast<char*>(data) + filled, static_cast<size_t>(size_) - filled);
    if (!n.ok()) return n.status();
    if (*n == 0) return InvalidArgument(rules_.what + " shrank while it was read (truncated)");
    filled += *n;
  }
  char extra;
  Result<size_t> more = Read(&extra, 1);
  if (!more.ok()) return more.status();
  if (*more != 0) return InvalidArgument(rules_.what + " grew while it was read");
  mprotect(data, mapped, PROT_READ);  // nothing in this process writes it either
  return copy;
}

Status CheckedFile::MakePrivate() {
  if (fchmod(fd_, S_IRUSR | S_IWUSR) != 0) {
    const int err = errno;
    return Internal("cannot make " + rules_.what + " private: " + ErrnoText(err));
  }
  return Status::Ok();
}

Result<std::string> ReadCheckedFile(const std::string& path, const FileRules& rules) {
  Result<CheckedFile> file = CheckedFile::Open(path, rules);
  if (!file.ok()) return file.status();
  Result<std::string> text = file->ReadAll();
  if (!text.ok()) return Status(text.status().code(), "'" + path + "': " + text.status().message());
  return text;
}

Status CheckPrivateFolder(const std::string& folder) {
  struct stat st;
  if (stat(folder.c_str(), &st) != 0) {
    const int err = errno;
    return FailedPrecondition("cannot look at '" + folder + "': " + ErrnoText(err));
  }
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition("'" + folder + "' is not a folder");
  if (st.st_uid != geteuid()) {
    return FailedPrecondition("the folder '" + folder + "' belongs to user " + std::to_string(st.st_uid) +
                              ", not to this process's user " + std::to_string(geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return FailedPrecondition("the folder '" + folder + "' is writable by group or others (mode " +
                              Octal(st.st_mode) + "; make it 0700, or name a new folder, which ebb creates so)");
  }
  return Status::Ok();
}

Status WritePrivateFile(const std::string& path, const std::string& text) {
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

bool PathInside(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *r != *p) return false;
  }
  return true;
}

}  // namespace ebb::detail
