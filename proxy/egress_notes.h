/* What the proxy and the DNS stub refused, kept for the model's view: one note per
 * destination (name or address, port, reason), de-duplicated and capped, in text that the
 * sandbox cannot use to forge lines (printable ASCII only, bounded). Pure data; the proxy's
 * loop fills a sandbox's notes, the supervisor takes them when a cell ends. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPB_EGRESS_NOTES_MAX 10   /* destinations listed; the rest are only counted */
#define IPB_EGRESS_NOTES_SEEN 256 /* destinations beyond the list told apart for the count */
#define IPB_EGRESS_NOTE_HOST 96   /* escaped name or address, with its NUL */
#define IPB_EGRESS_NOTE_WHY 160
#define IPB_EGRESS_NOTE_ALLOW (IPB_EGRESS_NOTE_HOST + 96)
#define IPB_EGRESS_NOTE_LINE 512 /* a formatted line fits */

typedef struct ipb_egress_note {
    char host[IPB_EGRESS_NOTE_HOST]; /* escaped (ipb_egress_escape); "": no destination (a cap) */
    bool is_addr;                    /* host is an address */
    bool dns;                        /* a DNS lookup (no port) */
    uint16_t port;
    char why[IPB_EGRESS_NOTE_WHY];     /* escaped */
    char allow[IPB_EGRESS_NOTE_ALLOW]; /* the option that lifts it ("--allowed-domain x"), or "" */
    bool no_option;                    /* a policy refusal no option lifts */
    bool starts_list;                  /* allow would be the first entry: the list then starts */
    unsigned count;                    /* refusals of this destination */
} ipb_egress_note;

typedef struct ipb_egress_notes {
    ipb_egress_note list[IPB_EGRESS_NOTES_MAX];
    size_t n;                             /* listed */
    size_t told;                          /* list[0..told) were taken already */
    uint64_t seen[IPB_EGRESS_NOTES_SEEN]; /* hashes of destinations past the list */
    size_t nseen;
    unsigned more, more_told; /* destinations past the list (counted once each) */
    bool more_at_least;       /* past IPB_EGRESS_NOTES_SEEN: more is a lower bound */
} ipb_egress_notes;

/* Copies s (len bytes) into out (cap bytes, NUL-terminated): printable ASCII stays (a space
 * only with keep_space), a backslash and every other byte become \xNN; what does not fit is
 * cut and marked "...". Returns out. */
char *ipb_egress_escape(const char *s, size_t len, bool keep_space, char *out, size_t cap);

/* Counts a refusal of host (raw, escaped here) and why. Returns the new note to complete
 * (allow, no_option, is_addr) when this destination is new and listed; NULL when it was
 * listed before (counted) or the list is full (counted in more). */
ipb_egress_note *ipb_egress_notes_add(ipb_egress_notes *n, const char *host, size_t host_len, bool dns, uint16_t port,
                                      const char *why);
/* Moves what was not taken yet into out (emptied first): the new notes and the count of new
 * destinations past the list. n keeps every destination, so a repeat is not told again. */
void ipb_egress_notes_take(ipb_egress_notes *n, ipb_egress_notes *out);
void ipb_egress_notes_clear(ipb_egress_notes *n);
/* Whether there is anything to tell. */
bool ipb_egress_notes_any(const ipb_egress_notes *n);

/* "[ipybox] egress refused: pypi.org:443 — the name is not allowed; allow it with
 * --allowed-domain pypi.org" (no newline). */
void ipb_egress_note_line(const ipb_egress_note *note, char *buf, size_t len);
/* "[ipybox] egress refused: ... and 3 more destinations", or "" when there are none. */
void ipb_egress_notes_more_line(const ipb_egress_notes *n, char *buf, size_t len);
