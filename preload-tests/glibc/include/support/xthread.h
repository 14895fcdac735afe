/* Stand-in for glibc's <support/xthread.h>: pthread calls that end the
   test on error. See support.h. */
#ifndef HEAPLIVE_SUPPORT_XTHREAD_H
#define HEAPLIVE_SUPPORT_XTHREAD_H
#include <pthread.h>
#include <signal.h>
#include <support/support.h>

pthread_t xpthread_create (pthread_attr_t *, void *(*) (void *), void *);
void *xpthread_join (pthread_t);
void xpthread_kill (pthread_t, int);
void xpthread_barrier_init (pthread_barrier_t *, pthread_barrierattr_t *,
                            unsigned int);
void xpthread_barrier_destroy (pthread_barrier_t *);
int xpthread_barrier_wait (pthread_barrier_t *);
void xpthread_barrierattr_init (pthread_barrierattr_t *);
void xpthread_barrierattr_setpshared (pthread_barrierattr_t *, int);
void xpthread_barrierattr_destroy (pthread_barrierattr_t *);
#endif
