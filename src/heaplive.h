/* heaplive.h: the C API of libheaplive.so (the heaplive heap profiler).
 *
 * Declare the functions weak so that the program also runs without the
 * library preloaded, and test the address before calling:
 *     if (heaplive_dump) heaplive_dump(NULL);
 */
#ifndef HEAPLIVE_H
#define HEAPLIVE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Writes a dump now: to `path`, or (NULL) to the next file name of
 * HEAPLIVE_OUTPUT. Returns 0, or -1 with errno set (EAGAIN: heaplive is not
 * initialised yet or cannot dump in this process). */
int heaplive_dump(const char *path) __attribute__((weak));

/* Starts sampling: after HEAPLIVE_START=0 (loaded dormant) or
 * heaplive_stop(). Allocations made while sampling was off stay unseen,
 * and their frees change nothing. Returns 1 if sampling was already on,
 * 0 if it was off. Async-signal-safe. */
int heaplive_start(void) __attribute__((weak));

/* Stops sampling. The samples already taken stay: they leave as their
 * blocks are freed, so a later dump still shows what was allocated while
 * sampling and is still live. Returns 1 if sampling was on, 0 if it was
 * off already. Async-signal-safe. */
int heaplive_stop(void) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* HEAPLIVE_H */
