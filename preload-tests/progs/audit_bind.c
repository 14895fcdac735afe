// An LD_AUDIT module that asks for every symbol binding (la_objopen
// returns LA_FLG_BINDTO | LA_FLG_BINDFROM) and binds each to its own
// definition (la_symbind64): the loader then calls malloc before libc's
// initialiser has set `environ` (preload-tests/other_allocators.rs).
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>

unsigned int la_version(unsigned int version) {
    (void)version;
    return LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
    (void)map, (void)lmid, (void)cookie;
    return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook,
                       unsigned int *flags, const char *symname) {
    (void)ndx, (void)refcook, (void)defcook, (void)flags, (void)symname;
    return sym->st_value;
}
