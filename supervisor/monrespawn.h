/* When a private monitor that ended may be started again (monclient.c): one that served
 * (answered a request) and was then killed is replaced at the next request; one that keeps
 * ending before it serves anything (a broken configuration, a binary that cannot run) is
 * started at most IPB_RESPAWN_TRIES times in a row, then not again for IPB_RESPAWN_PAUSE_MS,
 * so that no request loops on it. Starts happen only on demand (a request finds the monitor
 * gone), never from a timer. */
#pragma once
#include <stdbool.h>

#define IPB_RESPAWN_TRIES 3
#define IPB_RESPAWN_PAUSE_MS 60000L

typedef struct ipb_respawn {
    unsigned unserved; /* monitors in a row that ended before serving anything */
    bool served;       /* the running monitor answered a request */
    long ended_ms;     /* when the last one was found gone */
} ipb_respawn;

/* The running monitor answered a request. */
void ipb_respawn_served(ipb_respawn *r);
/* The running monitor was found gone at now_ms (once per monitor). */
void ipb_respawn_ended(ipb_respawn *r, long now_ms);
/* Whether another may start now; when not, *wait_ms says in how long one more may. */
bool ipb_respawn_may_start(ipb_respawn *r, long now_ms, long *wait_ms);
