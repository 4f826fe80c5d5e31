/* upload_file / download_file run on a thread of their own while the caller keeps serving
 * (ping, cancellation, queued requests): nothing on the host side, a slow FUSE file or a
 * stuck NFS server, can stop the supervisor's loop. A transfer that is cancelled or runs out
 * of time is abandoned: its thread finishes when the stuck system call returns, removes its
 * temporary file instead of renaming it into place, and closes its fds. */
#pragma once
#include <stdbool.h>

#include "error.h"
#include "execute.h"
#include "hostpath.h"

/* Abandoned transfers whose threads have not returned yet: past this many, new transfers
 * are refused (each holds a thread and a few fds). */
#define IPB_TRANSFER_STUCK_MAX 8

enum ipb_transfer_outcome {
    IPB_TRANSFER_DONE,      /* finished (well or with *err) */
    IPB_TRANSFER_CANCELLED, /* the client cancelled: abandoned */
    IPB_TRANSFER_TIMEOUT,   /* abandoned after timeout_ms (*err says so) */
};

typedef struct ipb_transfer_req {
    bool download;          /* /app -> host; else host -> /app */
    const char *local_path; /* host path as given */
    int ws_fd;              /* directory fd below which relpath lives */
    const char *relpath;    /* relative to ws_fd */
    const char *app_path;   /* relpath as the client named it, for messages */
    const ipb_host_dirs *dirs;
} ipb_transfer_req;

/* Runs the transfer on a thread and waits for it, calling h's extra (input), tick and
 * cancelled hooks meanwhile. Returns -1 with *err when it failed, timed out or could not
 * start; *ret_outcome says which. */
int ipb_transfer_run(const ipb_transfer_req *req, int timeout_ms, const ipb_exec_hooks *h,
                     enum ipb_transfer_outcome *ret_outcome, ipb_error **err);
/* Transfers abandoned and still running. */
int ipb_transfer_stuck(void);
