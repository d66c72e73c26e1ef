/* An LD_PRELOAD shim for journal_io_test: real failures of the journal's file I/O, on the
 * journal's descriptors only (a descriptor whose path ends in ".journal"; every other write and
 * fdatasync goes straight to libc). The test steers it through two functions it finds with
 * dlsym: after N more calls, fdatasync fails with EIO; and writes block while a flag is set. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static atomic_int fail_fdatasync_after = -1; /* -1: never */
static atomic_int block_writes = 0;
static atomic_int blocked_now = 0;

void ddp_shim_fail_fdatasync_after(int calls) { atomic_store(&fail_fdatasync_after, calls); }
void ddp_shim_block_writes(int on) { atomic_store(&block_writes, on); }
int ddp_shim_writes_blocked_now(void) { return atomic_load(&blocked_now); }

static int is_journal(int fd) {
  char link[64];
  char path[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const char* deleted = strstr(path, " (deleted)");
  const size_t len = deleted != NULL ? (size_t)(deleted - path) : (size_t)n;
  return len >= 8 && memcmp(path + len - 8, ".journal", 8) == 0;
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (is_journal(fd)) {
    int left = atomic_load(&fail_fdatasync_after);
    if (left == 0) {
      errno = EIO;
      return -1;
    }
    if (left > 0) atomic_store(&fail_fdatasync_after, left - 1);
  }
  return real(fd);
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t);
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (atomic_load(&block_writes) && is_journal(fd)) {
    atomic_store(&blocked_now, 1);
    const struct timespec tick = {0, 5 * 1000 * 1000};
    while (atomic_load(&block_writes)) nanosleep(&tick, NULL);
    atomic_store(&blocked_now, 0);
  }
  return real(fd, buf, count);
}
