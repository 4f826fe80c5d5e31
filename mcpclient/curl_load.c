#include "curl_load.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

static void load(void) {
    /* Never unloaded: handles and threads of it may live until the process ends. */
    char why[300] = IPB_CURL_SONAME;
    void *h = dlopen(IPB_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror(); /* the first library's reason is the one to tell */
        if (e)
            snprintf(why, sizeof(why), "%s", e);
        h = dlopen(IPB_CURL_SONAME_GNUTLS, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        snprintf(failure, sizeof(failure),
                 "cannot load libcurl (%s), which MCP servers over HTTP need (Debian: apt-get install libcurl4)", why);
        return;
    }
    struct ipb_curl_api found;
    memset(&found, 0, sizeof(found));
    for (size_t i = 0; i < sizeof(fns) / sizeof(*fns); i++) {
        void *f = dlsym(h, fns[i].name);
        if (!f) {
            snprintf(failure, sizeof(failure),
                     "the libcurl found has no %s: it is older than ipybox needs (7.80 or later)", fns[i].name);
            dlclose(h);
            return;
        }
        /* Into `found`: ipb_curl is set whole, or not at all. (POSIX: what dlsym returns for a
         * function converts to a function pointer; they have the same size here.) */
        memcpy((char *)&found + fns[i].off, &f, sizeof(f));
    }
    ipb_curl = found;
}

int ipb_curl_load(ipb_error **err) {
    pthread_once(&once, load);
    if (failure[0])
        return ipb_error_set(err, ELIBACC, "%s", failure);
    return 0;
}
