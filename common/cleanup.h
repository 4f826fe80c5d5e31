/* Scope-bound ownership: a local declared with one of these is released when it goes out of
 * scope; hand ownership on with steal_ptr()/steal_fd(). */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void ipb_freep(void *p) { free(*(void **)p); }
static inline void ipb_closep(int *fd) {
    if (*fd >= 0)
        close(*fd);
}
static inline void ipb_fclosep(FILE **f) {
    if (*f)
        fclose(*f);
}
#define cleanup_free __attribute__((cleanup(ipb_freep)))
#define cleanup_close __attribute__((cleanup(ipb_closep)))
#define cleanup_fclose __attribute__((cleanup(ipb_fclosep)))
#define cleanup_error __attribute__((cleanup(ipb_error_freep)))

static inline void *ipb_steal_ptr(void *pp) {
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}
static inline int ipb_steal_fd(int *fd) {
    int v = *fd;
    *fd = -1;
    return v;
}
#define steal_ptr(p) ipb_steal_ptr(&(p))
#define steal_fd(fd) ipb_steal_fd(&(fd))
