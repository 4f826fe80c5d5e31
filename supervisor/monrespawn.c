#include "monrespawn.h"

void ipb_respawn_served(ipb_respawn *r) { r->served = true; }

void ipb_respawn_ended(ipb_respawn *r, long now_ms) {
    r->unserved = r->served ? 0 : r->unserved + 1;
    r->served = false;
    r->ended_ms = now_ms;
}

bool ipb_respawn_may_start(ipb_respawn *r, long now_ms, long *wait_ms) {
    *wait_ms = 0;
    if (r->unserved < IPB_RESPAWN_TRIES)
        return true;
    long since = now_ms - r->ended_ms;
    if (since >= IPB_RESPAWN_PAUSE_MS) {
        /* One more try; if it ends unserved too, another pause. */
        r->unserved = IPB_RESPAWN_TRIES - 1;
        return true;
    }
    *wait_ms = IPB_RESPAWN_PAUSE_MS - since;
    return false;
}
