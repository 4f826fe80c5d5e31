#ifndef IPB_CURL_LOAD_H
#define IPB_CURL_LOAD_H
/* libcurl, loaded when it is first needed (an MCP server over HTTP) rather than linked: curl
 * and the ~30 libraries it brings cost every start of ipybox about 5 ms of the dynamic
 * loader's time and 0.5 MiB of relocated pages, and most sessions never make a request.
 *
 * Include this instead of <curl/curl.h>. The curl_* functions ipybox calls are names for the
 * pointers below (macros), filled by ipb_curl_load(); every path to them calls it first
 * (httpc_global_init, the URL check of params.c). Without it they are NULL. curl's compile-time
 * type checks of curl_easy_setopt/getinfo (GCC macros of the same names) are off. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "error.h"

/* The ABI ipybox is built against: libcurl4 on Debian (OpenSSL), else libcurl3-gnutls, the
 * same API over GnuTLS (what `-lcurl` links with libcurl4-gnutls-dev). */
#define IPB_CURL_SONAME "libcurl.so.4"
#define IPB_CURL_SONAME_GNUTLS "libcurl-gnutls.so.4"

struct ipb_curl_api {
    CURLcode (*global_init)(long);
    const char *(*easy_strerror)(CURLcode);
    const char *(*multi_strerror)(CURLMcode);
    const char *(*url_strerror)(CURLUcode);
    curl_version_info_data *(*version_info)(CURLversion);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_pause)(CURL *, int);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    void (*free)(void *);
    CURLU *(*url)(void);
    CURLU *(*url_dup)(const CURLU *);
    void (*url_cleanup)(CURLU *);
    CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
};
extern struct ipb_curl_api ipb_curl;

/* Loads libcurl (IPB_CURL_SONAME, else IPB_CURL_SONAME_GNUTLS) and finds every function above,
 * once per process (later calls return the first outcome). Not while LD_LIBRARY_PATH has an
 * empty or relative entry: those are searched from the working directory at the time of the
 * load, after sandbox code ran. Returns 0, or -1 with err (ELIBACC): a sentence naming the
 * libraries and why each failed, or the LD_LIBRARY_PATH. Thread-safe. */
int ipb_curl_load(ipb_error **err);

/* curl.h defines these two as macros (type checks, or the same call with exactly three
 * arguments): ours replace them. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init (*ipb_curl.global_init)
#define curl_easy_strerror (*ipb_curl.easy_strerror)
#define curl_multi_strerror (*ipb_curl.multi_strerror)
#define curl_url_strerror (*ipb_curl.url_strerror)
#define curl_version_info (*ipb_curl.version_info)
#define curl_easy_init (*ipb_curl.easy_init)
#define curl_easy_cleanup (*ipb_curl.easy_cleanup)
#define curl_easy_reset (*ipb_curl.easy_reset)
#define curl_easy_setopt (*ipb_curl.easy_setopt)
#define curl_easy_getinfo (*ipb_curl.easy_getinfo)
#define curl_easy_pause (*ipb_curl.easy_pause)
#define curl_multi_init (*ipb_curl.multi_init)
#define curl_multi_cleanup (*ipb_curl.multi_cleanup)
#define curl_multi_add_handle (*ipb_curl.multi_add_handle)
#define curl_multi_remove_handle (*ipb_curl.multi_remove_handle)
#define curl_multi_perform (*ipb_curl.multi_perform)
#define curl_multi_poll (*ipb_curl.multi_poll)
#define curl_multi_info_read (*ipb_curl.multi_info_read)
#define curl_slist_append (*ipb_curl.slist_append)
#define curl_slist_free_all (*ipb_curl.slist_free_all)
#define curl_free (*ipb_curl.free)
#define curl_url (*ipb_curl.url)
#define curl_url_dup (*ipb_curl.url_dup)
#define curl_url_cleanup (*ipb_curl.url_cleanup)
#define curl_url_get (*ipb_curl.url_get)
#define curl_url_set (*ipb_curl.url_set)

#endif
