/* Stand-in for glibc's <support/xunistd.h>: see support.h. */
#ifndef HEAPLIVE_SUPPORT_XUNISTD_H
#define HEAPLIVE_SUPPORT_XUNISTD_H
#include <sys/types.h>
#include <unistd.h>
#include <support/support.h>

pid_t xfork (void);
long xsysconf (int);
int xopen (const char *, int, mode_t);
void xclose (int);
void *xmmap (void *, size_t, int, int, int);
void xmunmap (void *, size_t);
#endif
