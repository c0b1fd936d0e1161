/* Write the TLS secrets of every connection a program makes with OpenSSL to the file named by
 * SSLKEYLOGFILE (NSS key log format), for a program that has no such option of its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef void (*keylog_cb)(const SSL *, const char *);
void SSL_CTX_set_keylog_callback(SSL_CTX *ctx, keylog_cb cb);

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void write_line(const SSL *ssl, const char *line)
{
    (void)ssl;
    pthread_mutex_lock(&lock);
    if (!out) {
        const char *name = getenv("SSLKEYLOGFILE");
        if (name)
            out = fopen(name, "a");
    }
    if (out) {
        fputs(line, out);
        fputc('\n', out);
        fflush(out);
    }
    pthread_mutex_unlock(&lock);
}

SSL *SSL_new(SSL_CTX *ctx)
{
    static SSL *(*real)(SSL_CTX *);
    if (!real)
        real = (SSL *(*)(SSL_CTX *))dlsym(RTLD_NEXT, "SSL_new");
    SSL_CTX_set_keylog_callback(ctx, write_line);
    return real(ctx);
}
