#pragma once
#include <time.h>

/* Milliseconds on the monotonic clock, for deadlines. */
static inline long ipb_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}
