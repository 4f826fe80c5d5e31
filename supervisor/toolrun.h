/* A long-lived background thread that runs one job at a time: each registered MCP server's
 * keeper (it connects, lists and closes the server, so that a stdio server's parent-death
 * signal follows a thread that lives as long as the server), and the loop's or a call's thread
 * waits for it meanwhile (ipb_toolrun_wait) or learns that it finished through an fd. Calls
 * themselves run elsewhere (callpool.h). */
#pragma once
#include <stdbool.h>

#include "error.h"

typedef struct ipb_toolrun ipb_toolrun;

ipb_toolrun *ipb_toolrun_start(ipb_error **err);
/* Readable (POLLIN) once a job has finished and not been taken. */
int ipb_toolrun_fd(const ipb_toolrun *t);
bool ipb_toolrun_busy(const ipb_toolrun *t);
/* Runs fn(arg) on the thread. false when a job is running or waiting to be taken. */
bool ipb_toolrun_submit(ipb_toolrun *t, void (*fn)(void *arg), void *arg);
/* Asks the job that runs (or waits to run) to give up: ipb_toolrun_cancel_fd() becomes
 * readable until the next submit. The job decides what giving up means. Returns whether a job
 * was running. */
bool ipb_toolrun_cancel(ipb_toolrun *t);
/* For the job to poll (POLLIN): readable once the job was cancelled. */
int ipb_toolrun_cancel_fd(const ipb_toolrun *t);
/* The finished job's arg (the job is then gone), or NULL when none has finished. */
void *ipb_toolrun_take(ipb_toolrun *t);
/* Waits up to ms (-1: no limit) for the job to finish and takes it; NULL when none runs or it
 * did not finish in time. */
void *ipb_toolrun_wait(ipb_toolrun *t, int ms);
/* Waits for a running job (its arg is given to discard, when not NULL, then), stops and
 * joins the thread. NULL is fine. */
void ipb_toolrun_stop(ipb_toolrun *t, void (*discard)(void *arg));
