/* Names of the workspaces under the state directory (<state>/workspaces/<name>, statedir.h).
 * `--workspace NAME` names one (a value with a '/' names a host directory instead); a session
 * without --workspace gets an unnamed one, named when and by which session it was made:
 * 2026-11-26T130512Z-<session id, 16 hex>, which sorts by time and which
 * `ipybox workspaces prune` recognises (so do the 16-hex names of older versions). Pure
 * string functions. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "error.h"

#define IPB_WS_NAME_MAX 64
/* "YYYY-MM-DDTHHMMSSZ-" and the 16 hex digits of a session id */
#define IPB_WS_UNNAMED_LEN (19 + 16)

/* Whether the --workspace value is a name (no '/') rather than a host path. */
bool ipb_workspace_is_name(const char *v);
/* A name: 1 to IPB_WS_NAME_MAX characters of [A-Za-z0-9._-], not starting with '.' or '-'
 * (so never "." or ".."); else an error that says so, for what (the option). */
int ipb_workspace_name_check(const char *what, const char *name, ipb_error **err);
/* The name of the unnamed workspace of session id (16 hex digits) made at t (UTC) into buf
 * (at least IPB_WS_UNNAMED_LEN + 1 bytes): 0, or -1 when it does not fit. */
int ipb_workspace_unnamed_name(time_t t, const char *id, char *buf, size_t size);
/* Whether name is that of an unnamed workspace (or a 16-hex one of an older version); then
 * id (17 bytes) gets the session id and *made (may be NULL) its time (0: not in the name). */
bool ipb_workspace_unnamed_id(const char *name, char id[17], time_t *made);
