/* Running one cell: streams output through hooks as it arrives, completes on execute_reply
 * plus idle, and turns timeouts, cancellation and kernel death into clear outcomes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "kernel.h"

#define IPB_MAX_IMAGES 16
#define IPB_MAX_IMAGE_B64 (32u << 20)
#define IPB_MAX_TRACEBACK (64u << 10)

typedef struct ipb_exec_hooks {
    void *ud;
    int extra_fd;                /* watched while the cell runs; -1: none */
    bool (*on_extra)(void *ud);  /* extra_fd is readable; false: stop watching it */
    bool (*cancelled)(void *ud); /* the client cancelled the call */
    /* Output as it arrives (valid UTF-8, cleaned). json_body, when not NULL, is the same text
     * as a JSON string body (escaped, no quotes), ready to be forwarded. */
    void (*on_output)(void *ud, const char *text, size_t len, const char *json_body, size_t json_len);
    void (*on_tick)(void *ud); /* at least every tick_ms while running */
    int tick_ms;
    long (*tick_due)(void *ud);     /* ms until on_tick is due (sooner than
                                                           * tick_ms); < 0: nothing due; NULL: none */
    int tool_fd;                    /* the tool channel, watched too; -1: none */
    void (*on_tool)(void *ud);      /* tool_fd is readable */
    bool (*paused)(void *ud);       /* true: the timeout does not run (approval) */
    void (*on_interrupt)(void *ud); /* the cell is being interrupted or cancelled */
    /* Backpressure: output for the client waits in a bounded queue. While out_full, the
     * kernel's output is not read (so the kernel waits on its own writes) until on_out has
     * written enough; out_fd is polled for POLLOUT while out_waiting. Once the cell is being
     * interrupted or cancelled, its output is read regardless (the caller then stops
     * streaming it). out_fd -1: none. */
    int out_fd;
    bool (*out_waiting)(void *ud);
    bool (*out_full)(void *ud);
    void (*on_out)(void *ud);
} ipb_exec_hooks;

typedef struct ipb_image {
    char *mime; /* image/png, image/jpeg, image/svg+xml */
    char *data; /* base64 for png/jpeg, text for svg */
} ipb_image;

enum ipb_exec_outcome {
    IPB_EXEC_OK,
    IPB_EXEC_ERROR,             /* the code raised */
    IPB_EXEC_TIMEOUT,           /* interrupted after the timeout; state kept */
    IPB_EXEC_TIMEOUT_RESTARTED, /* the interrupt did not stop it: restarted, state lost */
    IPB_EXEC_CANCELLED,
    IPB_EXEC_DIED, /* the kernel died; the next call gets a fresh one */
};

typedef struct ipb_exec_result {
    enum ipb_exec_outcome outcome;
    char *text;           /* output (and traceback), capped, ANSI stripped */
    char *note;           /* a sentence about timeout/death/restart, or NULL */
    size_t output_len;    /* bytes of text that are the cell's output (before any note) */
    char *ename, *evalue; /* the first error the cell raised, or NULL */
    char *traceback;      /* its traceback lines, ANSI stripped, the last IPB_MAX_TRACEBACK bytes */
    ipb_image images[IPB_MAX_IMAGES];
    size_t n_images;
    size_t images_dropped;
} ipb_exec_result;

/* How long a wait for the kernel or a transfer may last before on_tick is due: at most
 * tick_ms, sooner when tick_due says so; -1: no tick. */
long ipb_exec_tick_wait(const ipb_exec_hooks *h);

int ipb_execute(ipb_kernel *k, const char *code, double timeout_s, size_t max_chars, const ipb_exec_hooks *h,
                ipb_exec_result *ret, ipb_error **err);
void ipb_exec_result_free(ipb_exec_result *r);
