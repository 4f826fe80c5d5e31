/* Warm workers (--warm): sessions started ahead, with the daemon's options alone, taken by the
 * next session made with those; they count against --max-sessions and give way to a session
 * that needs a worker of its own. */
#include <stdio.h>

#include "daemon_int.h"
#include "log.h"

unsigned ipbd_sessions_count(struct ipbd *d, bool warm) {
    /* Sessions being closed are on their way out (their workers exit within seconds) and do
     * not count: a client that closes one may make another at once. */
    unsigned n = 0;
    for (struct ipbd_session *o = d->sessions; o; o = o->next)
        n += !o->closing && o->warm == warm;
    return n;
}

/* A warm worker for a session made with the daemon's options alone: a ready one first. */
struct ipbd_session *ipbd_warm_take(struct ipbd *d) {
    struct ipbd_session *best = NULL;
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (s->warm && !s->closing && s->linkw.fd >= 0 && (!best || (s->ready && !best->ready)))
            best = s;
    if (best) {
        best->warm = false;
        d->warm_failures = 0; /* one served: failures count afresh */
    }
    return best;
}

/* Closes a warm worker (one still starting first); false when there is none. */
bool ipbd_warm_drop(struct ipbd *d, const char *why) {
    struct ipbd_session *pick = NULL;
    for (struct ipbd_session *s = d->sessions; s; s = s->next)
        if (s->warm && !s->closing && (!pick || (!s->ready && pick->ready)))
            pick = s;
    if (pick)
        ipbd_session_close(d, pick, why);
    return pick != NULL;
}

/* A warm worker could not start or ended while waiting: the next one waits 1 s, doubling to a
 * minute, so that a broken setup does not start sandboxes over and over. */
void ipbd_warm_failed(struct ipbd *d, const char *why) {
    d->warm_failures++;
    long pause = d->warm_failures > 6 ? 60000 : 1000L << (d->warm_failures - 1);
    d->warm_after_ms = ipbd_now_ms() + pause;
    if (d->warm_failures <= 6 || d->warm_failures % 10 == 0)
        log_warn("a warm worker %s; the next in %ld s", why, pause / 1000);
}

void ipbd_warm_fill(struct ipbd *d) {
    if (!d->cfg->warm || d->stopping)
        return;
    long now = ipbd_now_ms();
    if (!d->nclients && (!d->active_ms || now - d->active_ms >= d->cfg->idle_timeout_ms)) {
        /* Nobody has used the daemon lately: no sandbox waits for them. */
        while (ipbd_warm_drop(d, "no client for --idle-timeout"))
            ;
        return;
    }
    if (now < d->warm_after_ms)
        return;
    unsigned warm = ipbd_sessions_count(d, true);
    while (warm < d->cfg->warm && ipbd_sessions_count(d, false) + warm < d->cfg->max_sessions) {
        ipb_error *err = NULL;
        struct ipbd_session *s = ipbd_worker_start(d, NULL, NULL, &err);
        if (!s) {
            char why[600];
            snprintf(why, sizeof(why), "could not start: %s", ipb_error_msg(err));
            ipb_error_free(err);
            ipbd_warm_failed(d, why);
            return;
        }
        s->warm = true;
        snprintf(s->name, sizeof(s->name), "(warm %d)", (int)s->pid);
        log_debug("warm worker %d: starting", (int)s->pid);
        /* Answered once its sandbox is up. */
        struct ipbd_pending *p = ipbd_pending_add(s, P_WARM, NULL, NULL, NULL);
        bool ok = false;
        if (p)
            ipbd_worker_send(
                d, s, json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)p->wid, "method", "ping"), &ok);
        if (p && !ok)
            ipbd_pending_fail_new(d, s, p);
        warm++;
    }
}
