#include "model_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <vector>

namespace ebb::detail {
namespace {

int64_t Nanoseconds(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

FileIdentity IdentityOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          Nanoseconds(st.st_mtim), Nanoseconds(st.st_ctim)};
}

// Hashes of files that have not changed since, by identity (Sha256OfFile).
class HashMemo {
 public:
  std::optional<std::string> Find(const FileIdentity& id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [known, hash] : entries_) {
      if (known == id) return hash;
    }
    return std::nullopt;
  }
  void Insert(const FileIdentity& id, const std::string& hash) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= 1024) entries_.clear();
    entries_.emplace_back(id, hash);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<FileIdentity, std::string>> entries_;  // guarded by mu_
};

HashMemo& Memo() {
  static HashMemo memo;
  return memo;
}

std::string Hex(const unsigned char* digest, unsigned int length) {
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Opens `path` read-only and checks it is a non-empty regular file. O_NONBLOCK: a FIFO or device put in its
// place returns at once (and is refused) instead of blocking the open.
Status OpenRegular(const std::string& path, Fd* fd, struct stat* st) {
  fd->fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd->fd < 0) {
    if (errno == ENOENT) return NotFound("model file '" + path + "' does not exist");
    return NotFound("cannot open model file '" + path + "': " + std::strerror(errno));
  }
  if (fstat(fd->fd, st) != 0) return Internal("cannot stat '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st->st_mode)) return InvalidArgument("'" + path + "' is not a model file");
  if (st->st_size == 0) return InvalidArgument("model file '" + path + "' is empty");
  return Status::Ok();
}

}  // namespace

Result<FileIdentity> StatFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return NotFound("cannot stat '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("'" + path + "' is not a regular file");
  return IdentityOf(st);
}

std::string Sha256Hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr);
  return Hex(digest, length);
}

Result<std::string> Sha256OfFile(const std::string& path, FileIdentity* identity) {
  Fd fd;
  struct stat st;
  EBB_RETURN_IF_ERROR(OpenRegular(path, &fd, &st));
  if (identity) *identity = IdentityOf(st);
  if (std::optional<std::string> known = Memo().Find(IdentityOf(st))) return *known;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const bool settled = Nanoseconds(now) - Nanoseconds(st.st_ctim) > 2'000'000'000;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return Internal("SHA-256 unavailable");
  std::vector<char> chunk(1 << 20);
  while (true) {
    const ssize_t n = read(fd.fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), chunk.data(), static_cast<size_t>(n));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  const std::string hash = Hex(digest, length);
  // Re-stat: a write while reading moved the ctime, and then nothing is remembered.
  struct stat after;
  if (settled && fstat(fd.fd, &after) == 0 && IdentityOf(after) == IdentityOf(st)) Memo().Insert(IdentityOf(st), hash);
  return hash;
}

}  // namespace ebb::detail
