#include "curl_load.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpc_internal.h"

struct ipb_curl_api ipb_curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* empty: loaded */

/* Each pointer of ipb_curl with the name libcurl exports it under. */
#define FN(member, name)                                                                                               \
    { offsetof(struct ipb_curl_api, member), #name }
static const struct {
    size_t off;
    const char *name;
} fns[] = {
    FN(global_init, curl_global_init),
    FN(easy_strerror, curl_easy_strerror),
    FN(multi_strerror, curl_multi_strerror),
    FN(url_strerror, curl_url_strerror),
    FN(version_info, curl_version_info),
    FN(easy_init, curl_easy_init),
    FN(easy_cleanup, curl_easy_cleanup),
    FN(easy_reset, curl_easy_reset),
    FN(easy_setopt, curl_easy_setopt),
    FN(easy_getinfo, curl_easy_getinfo),
    FN(easy_pause, curl_easy_pause),
    FN(multi_init, curl_multi_init),
    FN(multi_cleanup, curl_multi_cleanup),
    FN(multi_add_handle, curl_multi_add_handle),
    FN(multi_remove_handle, curl_multi_remove_handle),
    FN(multi_perform, curl_multi_perform),
    FN(multi_poll, curl_multi_poll),
    FN(multi_info_read, curl_multi_info_read),
    FN(slist_append, curl_slist_append),
    FN(slist_free_all, curl_slist_free_all),
    FN(free, curl_free),
    FN(url, curl_url),
    FN(url_dup, curl_url_dup),
    FN(url_cleanup, curl_url_cleanup),
    FN(url_get, curl_url_get),
    FN(url_set, curl_url_set),
};
#undef FN

/* Why LD_LIBRARY_PATH may not be searched now, or NULL. An empty or relative entry is looked
 * up from the working directory at the time of the load, which here comes after the sandbox
 * ran (the first server over HTTP is reached from a cell): a workspace run from could hold a
 * libcurl.so.4 that kernel code wrote. */
static const char *library_path_risk(void) {
    const char *lp = getenv("LD_LIBRARY_PATH");
    if (!lp || !*lp) /* unset or empty: no entry */
        return NULL;
    for (const char *p = lp;; p++) {
        const char *start = p;
        p += strcspn(p, ":;");
        if (p == start || *start != '/')
            return lp;
        if (!*p)
            return NULL;
    }
}

/* One library: opened and every function found, into ipb_curl; or why not (in why). */
static bool load_from(const char *soname, char *why, size_t why_len) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_len, "%s", e ? e : soname);
        return false;
    }
    struct ipb_curl_api found;
    memset(&found, 0, sizeof(found));
    for (size_t i = 0; i < sizeof(fns) / sizeof(*fns); i++) {
        void *f = dlsym(h, fns[i].name);
        if (!f) {
            snprintf(why, why_len, "%s has no %s: it is older than ipybox needs (7.85 or later)", soname, fns[i].name);
            dlclose(h);
            return false;
        }
        /* Into `found`: ipb_curl is set whole, or not at all. (POSIX: what dlsym returns for a
         * function converts to a function pointer; they have the same size here.) */
        memcpy((char *)&found + fns[i].off, &f, sizeof(f));
    }
    /* Never closed: handles and threads of it may live until the process ends. */
    ipb_curl = found;
    return true;
}

static void load(void) {
    const char *risky = library_path_risk();
    if (risky) {
        snprintf(failure, sizeof(failure),
                 "libcurl, which MCP servers over HTTP need, is not loaded while LD_LIBRARY_PATH has an empty or "
                 "relative entry (%.200s): it would be looked for in the working directory, which the sandbox may "
                 "have written",
                 risky);
        return;
    }
    char why1[200], why2[200];
    if (load_from(IPB_CURL_SONAME, why1, sizeof(why1)) || load_from(IPB_CURL_SONAME_GNUTLS, why2, sizeof(why2)))
        return;
    snprintf(failure, sizeof(failure),
             "cannot load libcurl (%s; %s), which MCP servers over HTTP need (Debian: apt-get install libcurl4)", why1,
             why2);
}

int ipb_curl_load(ipb_error **err) {
    pthread_once(&once, load);
    if (failure[0])
        return mcpc_fail(err, ELIBACC, "%s", failure);
    return 0;
}
