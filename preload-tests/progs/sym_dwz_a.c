/* See sym_dwz_shared.h. */
#include <stdio.h>
#include "sym_dwz_shared.h"
struct record *keep_a;
__attribute__((noinline)) void user_fn_a(void) { keep_a = shared_inline_alloc(4242); }
int main(void) { user_fn_a(); printf("%ld\n", keep_a->id); return 0; }
