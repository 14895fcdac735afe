/* A PHP extension (preload-tests/php_error_cb.rs) that wraps zend_error_cb
 * in each request's RINIT and puts the one before back in RSHUTDOWN, the
 * way APM extensions hook errors per request. Its callback chains to the
 * callback it found, which after the first request is heaplive's wrapper:
 * heaplive must neither call itself through it (a cycle) nor bypass it.
 * Every call is logged to the file named by REWRAP_LOG (opened at MINIT,
 * in php-fpm's master, before workers clear their environment); a call
 * from inside itself for the same error is logged as a cycle and not
 * chained further, so a cycle shows as a line instead of a stack overflow.
 * A user warning whose message holds "nested" makes the callback raise a
 * notice before it chains (an error inside the error callback). Built with php8.2-dev's
 * headers: gcc -shared -fPIC $(php-config8.2 --includes); PHP 8.0 and later. */
#include "php.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if PHP_VERSION_ID < 80000
#error "the callback of PHP 7.4 takes a format and a va_list: not written here"
#elif PHP_VERSION_ID < 80100
typedef const char *file_t; /* 8.0 */
#else
typedef zend_string *file_t;
#endif

static void (*prev_cb)(int, file_t, const uint32_t, zend_string *);
static int log_fd = -1;

static void say(const char *what, int type, zend_string *message) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s type=%d %.*s\n", what, type,
                     (int)(ZSTR_LEN(message) > 40 ? 40 : ZSTR_LEN(message)),
                     ZSTR_VAL(message));
    if (log_fd >= 0 && n > 0)
        (void)!write(log_fd, buf, (size_t)n);
}

/* The message whose call is running (NULL: none). */
static zend_string *running;

static void rewrap_cb(int type, file_t file, const uint32_t line, zend_string *message) {
    if (running == message) {
        say("cycle", type, message);
        return;
    }
    say("rewrap_cb", type, message);
    /* Another error raised while this one is handled (a legitimate nested
     * call, not a cycle): a warning whose message asks for it. */
    if (type == E_USER_WARNING && strstr(ZSTR_VAL(message), "nested"))
        zend_error(E_NOTICE, "raised by the extension's callback");
    zend_string *outer = running;
    running = message;
    prev_cb(type, file, line, message);
    running = outer;
}

static PHP_MINIT_FUNCTION(rewrap) {
    const char *p = getenv("REWRAP_LOG");
    if (p)
        log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return SUCCESS;
}

static PHP_RINIT_FUNCTION(rewrap) {
    running = NULL; /* a fatal error longjmps out of the callback */
    prev_cb = zend_error_cb;
    zend_error_cb = rewrap_cb;
    return SUCCESS;
}

static PHP_RSHUTDOWN_FUNCTION(rewrap) {
    if (zend_error_cb == rewrap_cb)
        zend_error_cb = prev_cb;
    return SUCCESS;
}

zend_module_entry rewrap_module_entry = {
    STANDARD_MODULE_HEADER,
    "rewrap",
    NULL,
    PHP_MINIT(rewrap),
    NULL,
    PHP_RINIT(rewrap),
    PHP_RSHUTDOWN(rewrap),
    NULL,
    "1.0",
    STANDARD_MODULE_PROPERTIES};

ZEND_GET_MODULE(rewrap)
