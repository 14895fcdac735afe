/* Stand-in for glibc's internal <malloc-size.h>, for x86-64 only (the
   only target heaplive supports): glibc's chunk alignment there. */
#ifndef HEAPLIVE_MALLOC_SIZE_H
#define HEAPLIVE_MALLOC_SIZE_H
#define MALLOC_ALIGNMENT 16
#define MALLOC_ALIGN_MASK (MALLOC_ALIGNMENT - 1)
#endif
