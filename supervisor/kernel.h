/* A Jupyter kernel inside a sandbox: start, handshake, restart, interrupt, messages.
 * The kernel's ZMQ sockets are ipc files in the session's run directory; we connect to them
 * through O_PATH descriptors (ipc:///proc/self/fd/N), so a symlink planted in that directory
 * by sandbox code can never redirect the supervisor to another socket. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "error.h"
#include "jupyter_msg.h"
#include "sandbox.h"
#include "shim_proto.h"

enum ipb_channel { IPB_SHELL, IPB_IOPUB, IPB_CONTROL, IPB_NCHANNELS };

/* The largest iopub message taken from the kernel (a larger one ends the connection, which
 * zmq makes again): room for an image of IPB_MAX_IMAGE_B64 (execute.h) and its message. */
#define IPB_IOPUB_MAX_MSG (40u << 20)

typedef struct ipb_kernel {
    ipb_sandbox sb;
    int stderr_fd;          /* read end of the sandbox's stderr */
    char stderr_tail[2048]; /* its last bytes, for reports of a kernel's death */
    size_t stderr_len;
    int rundir_fd;
    void *zctx;
    void *sock[IPB_NCHANNELS];
    int pin_fd[IPB_NCHANNELS];
    char key[JMSG_KEY_HEX_LEN + 1];
    char session[33];
    uint32_t gen;
    bool running; /* a kernel process runs and answered the handshake */
    bool died;    /* it ended on its own since the last start */
    int exit_status;
    int start_timeout_ms;
    ipb_proxy *proxy;       /* serves the sandbox's egress; NULL: nothing leaves */
    char label[64];         /* the sandbox's name in the proxy's log */
    int start_kind;         /* how the running kernel started: SHIM_START_EXEC, _ZYGOTE (forked
                             * from the sandbox's zygote), _STANDBY (a standby activated) or
                             * _RESCUE (tried again after a failed start) */
    char rescue_note[1600]; /* why the running kernel is a rescue start, not yet told */
    bool start_outside;     /* the last start failed outside the kernel (the connection file,
                             * the sandbox's channel, the shim): a rescue start would not help */
    char zygote_note[320];  /* what became of the zygote, not yet told ("" when nothing) */
    char start_note[640];   /* what the running kernel's start said of itself (IPB_START_NOTE_MARK
                             * lines on its stderr), not yet told ("" when nothing) */
} ipb_kernel;

/* Whether the kernel ended because its interpreter cannot import ipykernel (the launcher's
 * line on stderr, kernel_launch.py); why gets Python's reason. */
bool ipb_kernel_lacks_ipykernel(const ipb_kernel *k, char *why, size_t len);
/* Builds the sandbox (config in kernel mode) and starts the first kernel. */
int ipb_kernel_open(ipb_kernel *k, const shim_config *cfg, const char *rundir, ipb_proxy *proxy, const char *label,
                    ipb_error **err);
/* Ends whatever runs in the sandbox and starts a fresh kernel (same sandbox: /app, $HOME and
 * installed packages stay). */
int ipb_kernel_restart(ipb_kernel *k, ipb_error **err);
void ipb_kernel_close(ipb_kernel *k);

int ipb_kernel_send(ipb_kernel *k, enum ipb_channel ch, const char *msg_type, json_t *content, char msg_id[33],
                    ipb_error **err);
/* Receives one message without blocking: 1 = got one, 0 = none ready, -1 = error (err set;
 * a bad message from the kernel is dropped and reported as 0 with a log line). */
int ipb_kernel_recv(ipb_kernel *k, enum ipb_channel ch, jmsg *ret, ipb_error **err);
/* SIGINT to the kernel's process group (what Jupyter's interrupt_mode=signal does). */
int ipb_kernel_interrupt(ipb_kernel *k, ipb_error **err);
/* Handles readable shim/stderr fds: updates running/died. Returns 0, or -1 if the sandbox
 * itself is gone. */
int ipb_kernel_pump(ipb_kernel *k, ipb_error **err);
/* zmq_poll items for iopub, shell, the shim channel and stderr, in that order; returns 4. */
int ipb_kernel_pollitems(ipb_kernel *k, zmq_pollitem_t items[4]);
/* "the kernel died (was killed by signal 9 ...)" plus its last stderr lines. */
void ipb_kernel_death_report(ipb_kernel *k, char *buf, size_t len);
