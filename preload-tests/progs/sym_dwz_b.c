/* See sym_dwz_shared.h. */
#include <stdio.h>
#include "sym_dwz_shared.h"
struct record *keep_b;
__attribute__((noinline)) void user_fn_b(void) { keep_b = shared_inline_alloc(4242); }
int main(void) { user_fn_b(); printf("%ld\n", keep_b->id); return 0; }
