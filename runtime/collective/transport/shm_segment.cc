#include "runtime/collective/transport/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata {
namespace shm {

uint64_t CanaryAddress() {
  static const volatile uint64_t canary = kCanaryValue;
  return reinterpret_cast<uint64_t>(&canary);
}

bool ProbePeerMemory(int pid, uint64_t address) {
  uint64_t seen = 0;
  iovec local{&seen, sizeof(seen)};
  iovec remote{reinterpret_cast<void*>(address), sizeof(seen)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(seen) && seen == kCanaryValue;
}

absl::Status ReadPeerMemory(int pid, uint64_t address, void* to, size_t bytes) {
  char* into = static_cast<char*>(to);
  while (bytes > 0) {
    iovec local{into, bytes};
    iovec remote{reinterpret_cast<void*>(address), bytes};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("process_vm_readv from pid ", pid, ": ",
                                                 n == 0 ? "no progress" : std::strerror(errno)));
    }
    into += n;
    address += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0 when the
// process is gone or a zombie (a killed child its parent has not reaped).
uint64_t ProcessStartTime(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the name may hold spaces
  if (p == nullptr) return 0;
  char state = 0;
  unsigned long long start = 0;
  // Fields 3 (state) .. 22 (starttime).
  if (std::sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                  &state, &start) != 2) {
    return 0;
  }
  if (state == 'Z' || state == 'X' || state == 'x') return 0;
  return start;
}

std::string SegmentName(const std::string& prefix) {
  // Readable, unique, and short enough for NAME_MAX.
  std::string clean;
  for (char c : prefix) {
    if (clean.size() >= 40) break;
    clean.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  }
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return absl::StrCat("/strata-", clean, "-", getpid(), "-", counter.fetch_add(1), "-",
                      absl::Hex(rd()));
}

// A segment's name lives in /dev/shm only while its ranks attach; if rank 0
// was killed in that window the name stays. Rank 0 removes such leftovers
// before it creates a segment: names of our format whose creator (the pid
// in the name) has exited and that are older than a minute (so a creator in
// another pid namespace, whose pid we cannot see, keeps a young segment).
void RemoveLeftoverSegments() {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("strata-", 0) != 0) continue;
    // strata-<prefix>-<pid>-<counter>-<hex>: the pid is the third field from the end.
    std::vector<std::string> parts = absl::StrSplit(name, '-');
    int pid = 0;
    if (parts.size() < 5 || !absl::SimpleAtoi(parts[parts.size() - 3], &pid) || pid <= 0) continue;
    struct stat st;
    const std::string path = "/dev/shm/" + name;
    if (stat(path.c_str(), &st) != 0 || now - st.st_mtime < 60) continue;
    if (ProcessStartTime(pid) == 0) shm_unlink(("/" + name).c_str());
  }
  closedir(d);
}

absl::Status SegmentErrno(const std::string& what) {
  const int e = errno;
  std::string msg = absl::StrCat("shm transport: ", what, ": ", std::strerror(e));
  if (e == ENOSPC || e == ENOMEM) return absl::ResourceExhaustedError(msg);
  if (e == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

// Creates the segment (rank 0). Returns the mapping.
absl::StatusOr<char*> CreateSegment(const std::string& name, const Layout& layout) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return SegmentErrno(absl::StrCat("shm_open(", name, ")"));
  // Reserve the pages now: touching a page /dev/shm cannot back would be a
  // SIGBUS later, mid-collective.
  const int err = posix_fallocate(fd, 0, layout.total);
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    errno = err;
    return SegmentErrno(absl::StrCat("reserving ", layout.total, " bytes for ", name, " in /dev/shm"));
  }
  void* p = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return SegmentErrno(absl::StrCat("mmap(", name, ")"));
  }
  char* base = static_cast<char*>(p);
  Header* h = new (base) Header();
  h->size = layout.n;
  h->total_bytes = layout.total;
  h->ring_bytes = layout.ring_bytes;
  h->chunk_bytes = layout.chunk_bytes;
  return base;
}

// Maps rank 0's segment and checks that it is one.
absl::StatusOr<std::pair<char*, Layout>> OpenSegment(const std::string& name, int size) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return SegmentErrno(absl::StrCat("shm_open(", name, ") published by rank 0"));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Header))) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shm transport: segment ", name, " is not a Strata shm segment"));
  }
  void* p = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return SegmentErrno(absl::StrCat("mmap(", name, ")"));
  char* base = static_cast<char*>(p);
  const Header* h = reinterpret_cast<const Header*>(base);
  const Layout layout(size, h->ring_bytes, h->chunk_bytes);
  if (h->magic != kMagic || h->size != static_cast<uint64_t>(size) ||
      h->total_bytes != static_cast<uint64_t>(st.st_size) || layout.total != h->total_bytes) {
    const uint64_t their_size = h->size;
    munmap(base, st.st_size);
    return absl::FailedPreconditionError(
        absl::StrCat("shm transport: segment ", name, " was made for ", their_size,
                     " ranks (or is not a Strata shm segment); this rank expects ", size));
  }
  return std::make_pair(base, layout);
}

}  // namespace shm
}  // namespace strata
