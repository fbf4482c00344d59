#include "store/durable/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace ramp::store {
namespace {

// A full disk is NoSpace, so that callers (and clients) can tell it from a broken one.
Status Errno(const std::string& what, int err) {
  Status s = Status::FromErrno(what, err);
  if (err == ENOSPC || err == EFBIG || err == EDQUOT) return Status::NoSpace(s.message());
  if (err == EROFS || err == EACCES || err == EPERM) return Status::PermissionDenied(s.message());
  return s;
}

class PosixFile : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { close(fd_); }

  Status Write(uint64_t offset, const void* data, size_t len) override {
    const auto* p = static_cast<const uint8_t*>(data);
    while (len > 0) {
      ssize_t n = pwrite(fd_, p, len, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write " + path_, errno);
      }
      p += n;
      offset += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Sync() override {
    if (fdatasync(fd_) != 0) return Errno("fdatasync " + path_, errno);
    return Status::OK();
  }
  Status Read(uint64_t offset, size_t len, void* out, size_t* got) override {
    auto* p = static_cast<uint8_t*>(out);
    *got = 0;
    while (*got < len) {
      ssize_t n = pread(fd_, p + *got, len - *got, static_cast<off_t>(offset + *got));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("read " + path_, errno);
      }
      if (n == 0) break;
      *got += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Size(uint64_t* out) override {
    struct stat st;
    if (fstat(fd_, &st) != 0) return Errno("stat " + path_, errno);
    *out = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }
  Status Truncate(uint64_t size) override {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return Errno("truncate " + path_, errno);
    }
    return Status::OK();
  }
  Status Allocate(uint64_t offset, uint64_t len) override {
    for (;;) {
      if (fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(len)) == 0) {
        return Status::OK();
      }
      if (errno == EINTR) continue;
      if (errno == EOPNOTSUPP || errno == ENOSYS) return Status::NotSupported("fallocate " + path_);
      return Errno("fallocate " + path_, errno);
    }
  }
  int fd() const override { return fd_; }

 private:
  const int fd_;
  const std::string path_;
};

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

class Posix : public Env {
 public:
  Status Open(const std::string& path, bool create, std::unique_ptr<File>* out) override {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) return Errno("open " + path, errno);
    *out = std::make_unique<PosixFile>(fd, path);
    return Status::OK();
  }
  Status OpenDirect(const std::string& path, std::unique_ptr<File>* out) override {
    const int fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return Errno("open (O_DIRECT) " + path, errno);
    *out = std::make_unique<PosixFile>(fd, path);
    return Status::OK();
  }
  Status OpenSyncWrites(const std::string& path, std::unique_ptr<File>* out) override {
    const int fd = open(path.c_str(), O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
    if (fd < 0) return Errno("open (O_DIRECT|O_DSYNC) " + path, errno);
    *out = std::make_unique<PosixFile>(fd, path);
    return Status::OK();
  }
  Status ReadFile(const std::string& path, std::string* out) override {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open " + path, errno);
    PosixFile f(fd, path);
    uint64_t size = 0;
    RAMP_RETURN_IF_ERROR(f.Size(&size));
    out->resize(size);
    size_t got = 0;
    RAMP_RETURN_IF_ERROR(f.Read(0, size, out->data(), &got));
    out->resize(got);
    return Status::OK();
  }
  Status WriteFileAtomic(const std::string& path, const std::string& data) override {
    const std::string tmp = path + ".tmp";
    std::unique_ptr<File> f;
    RAMP_RETURN_IF_ERROR(Open(tmp, true, &f));
    RAMP_RETURN_IF_ERROR(f->Truncate(0));
    RAMP_RETURN_IF_ERROR(f->Write(0, data.data(), data.size()));
    RAMP_RETURN_IF_ERROR(f->Sync());
    f.reset();
    if (rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename " + tmp, errno);
    return SyncDir(DirOf(path));
  }
  Status CreateDir(const std::string& path) override {
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return Errno("mkdir " + path, errno);
    }
    return Status::OK();
  }
  Status List(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return Status::NotFound("no directory " + dir);
      return Errno("opendir " + dir, errno);
    }
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names->push_back(n);
    }
    closedir(d);
    return Status::OK();
  }
  Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Errno("unlink " + path, errno);
    }
    return Status::OK();
  }
  Status RemoveDir(const std::string& path) override {
    if (rmdir(path.c_str()) != 0 && errno != ENOENT) {
      return Errno("rmdir " + path, errno);
    }
    return Status::OK();
  }
  Status SyncDir(const std::string& dir) override {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open " + dir, errno);
    const int rc = fsync(fd);
    const int e = errno;
    close(fd);
    if (rc != 0) return Errno("fsync " + dir, e);
    return Status::OK();
  }
  bool Exists(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }
};

}  // namespace

Env* PosixEnv() {
  static Posix env;
  return &env;
}

}  // namespace ramp::store
