#include "zygote_env.h"

#include <stdio.h>
#include <string.h>

/* Variables whose value names code or files that Python, glibc, the dynamic loader or OpenSSL
 * load at an interpreter's start or at the zygote's imports (ssl is one, through tornado). The
 * loader and glibc part is glibc's own list of variables it ignores in a set-id program
 * (UNSECURE_ENVVARS), for the same reason: the process is more trusted than whoever wrote the
 * files they name. */
static const char *const refused[] = {
    /* Python: its imports and bytecode. */
    "PYTHONPATH", "PYTHONUSERBASE", "PYTHONHOME", "PYTHONPYCACHEPREFIX", "PYTHONPLATLIBDIR",
    /* glibc: gconv modules (code), locale and message catalogues, time zone data, resolver
     * files, malloc's trace file. */
    "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NIS_PATH", "NLSPATH",
    "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
    /* OpenSSL: its configuration loads provider and engine modules (code). */
    "OPENSSL_CONF", "OPENSSL_CONF_INCLUDE", "OPENSSL_MODULES", "OPENSSL_ENGINES", NULL};

/* TZ names a file read at `import time`: one under the zone directory (a read-only tree) is
 * fine; an absolute path or one that climbs out of it is not. */
static bool tz_file_outside(const char *v) {
    if (*v == ':')
        v++;
    return *v == '/' || strstr(v, "..") != NULL;
}

bool ipb_zygote_env_ok(char *const *env, size_t n, char *why, size_t size) {
    for (size_t i = 0; i < n; i++) {
        const char *kv = env[i];
        const char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        size_t klen = (size_t)(eq - kv);
        bool bad = klen > 3 && !strncmp(kv, "LD_", 3); /* every variable of the dynamic loader */
        for (const char *const *r = refused; *r && !bad; r++)
            bad = strlen(*r) == klen && !strncmp(kv, *r, klen);
        if (!bad && klen == 2 && !strncmp(kv, "TZ", 2))
            bad = tz_file_outside(eq + 1);
        if (bad) {
            snprintf(why, size, "%.*s", (int)klen, kv);
            return false;
        }
    }
    return true;
}
