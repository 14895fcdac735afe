/* Stand-in for glibc's <support/xsignal.h>: see support.h. */
#ifndef HEAPLIVE_SUPPORT_XSIGNAL_H
#define HEAPLIVE_SUPPORT_XSIGNAL_H
#include <signal.h>
sighandler_t xsignal (int, sighandler_t);
#endif
