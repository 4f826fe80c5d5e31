/* The descriptor limit (RLIMIT_NOFILE). Careful daemons raise their soft limit to the hard one
 * at start: the supervisor, the daemon and the monitor (one binary) do so in main(). The
 * sandbox's limit is not this one's business: the monitor and the shim set what its processes
 * get. */
#pragma once

/* Raises the soft limit to the hard limit. Returns the soft limit now (-1: unknown or
 * unlimited). */
long ipb_nofile_raise(void);
/* The soft limit now (-1: unknown or unlimited). */
long ipb_nofile_limit(void);
/* "too many open files (the limit is N)" for EMFILE, "too many open files in the system" for
 * ENFILE, else strerror(errnum). Into buf (size >= 64), which is returned. */
const char *ipb_nofile_strerror(int errnum, char *buf, unsigned size);
