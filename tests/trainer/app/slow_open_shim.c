// An LD_PRELOAD shim for the straggler tests: a slow file system on one node. Every fopen() or
// open() of a path that starts with $DDP_SLOW_OPEN_DIR first sleeps as many microseconds as the
// file $DDP_SLOW_OPEN_CONTROL says (read at each such open; missing or empty: no delay), as
// opening a file on a loaded network file system does; other paths are untouched. Preloaded into
// one node's ddp-trainer task only, whose workers inherit it; the test starts and ends the
// slowdown by writing the control file.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

static FILE* (*real_fopen)(const char*, const char*);

static void MaybeSleep(const char* path) {
  const char* dir = getenv("DDP_SLOW_OPEN_DIR");
  const char* control = getenv("DDP_SLOW_OPEN_CONTROL");
  if (dir == NULL || control == NULL || path == NULL || dir[0] == '\0') return;
  if (strncmp(path, dir, strlen(dir)) != 0) return;
  if (real_fopen == NULL)
    real_fopen = (FILE * (*)(const char*, const char*)) dlsym(RTLD_NEXT, "fopen");
  FILE* f = real_fopen(control, "re");
  if (f == NULL) return;
  long v = 0;
  if (fscanf(f, "%ld", &v) != 1) v = 0;
  fclose(f);
  if (v <= 0) return;
  struct timespec ts = {v / 1000000, (v % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

FILE* fopen(const char* path, const char* mode) {
  static FILE* (*real)(const char*, const char*);
  if (real == NULL) real = (FILE * (*)(const char*, const char*)) dlsym(RTLD_NEXT, "fopen");
  MaybeSleep(path);
  return real(path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
  static FILE* (*real)(const char*, const char*);
  if (real == NULL) real = (FILE * (*)(const char*, const char*)) dlsym(RTLD_NEXT, "fopen64");
  MaybeSleep(path);
  return real(path, mode);
}

int open(const char* path, int flags, ...) {
  static int (*real)(const char*, int, ...);
  if (real == NULL) real = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open");
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
  }
  MaybeSleep(path);
  return real(path, flags, mode);
}
