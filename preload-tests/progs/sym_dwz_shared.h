/* Shared by sym_dwz_a.c and sym_dwz_b.c: dwz moves the DWARF that both
 * describe identically (this inline function, the struct) into a
 * supplementary file named by .gnu_debugaltlink. */
#include <stdlib.h>
#include <string.h>
struct record { long id; char name[40]; double weights[8]; struct record *next; };
static inline __attribute__((always_inline)) struct record *shared_inline_alloc(long id) {
    struct record *r = malloc(sizeof *r + (size_t)id); /* L_DWZ_MALLOC */
    memset(r, 0, sizeof *r);
    r->id = id;
    return r;
}
