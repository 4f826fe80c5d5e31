/* Jupyter wire protocol (v5.3): signing, building and parsing multipart messages.
 * Messages from the kernel are untrusted: unsigned, forged or oversized ones are refused. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define JMSG_KEY_HEX_LEN 64
#define JMSG_MAX_FRAME (64u << 20)

typedef struct jmsg_frame {
    const void *data;
    size_t len;
} jmsg_frame;

typedef struct jmsg {
    json_t *header, *parent, *metadata, *content;
    const char *msg_type;  /* borrowed from header */
    const char *parent_id; /* borrowed from parent, "" if none */
    /* A `stream` message of the plain shape has content {"name"} only; its text stays in the
     * content frame as a checked JSON string body (see jsonfast.h), valid while that frame
     * lives: jmsg_parse points into the caller's frames, and a caller that keeps the message
     * longer hands the frame's owner to `keep`, which jmsg_free releases. */
    const char *text_body;
    size_t text_body_len;
    bool text_clean;
    void *keep;
    void (*keep_free)(void *keep);
} jmsg;

/* HMAC-SHA256 over the four JSON parts, as lowercase hex (65 bytes with NUL). */
int jmsg_sign(const char *key, const jmsg_frame parts[4], char out[65]);
/* Builds the five frames after the identities: delimiter, signature, header, parent,
 * metadata, content. Frames point into *ret_storage (free it with free()). Writes the new
 * message id into msg_id (33 bytes). */
int jmsg_build(const char *key, const char *session, const char *msg_type, json_t *content, char msg_id[33],
               jmsg_frame ret_frames[6], char **ret_storage, ipb_error **err);
/* Parses received frames (identities, "<IDS|MSG>", signature, 4 JSON parts, buffers...). */
int jmsg_parse(const char *key, const jmsg_frame *frames, size_t n, jmsg *ret, ipb_error **err);
void jmsg_free(jmsg *m);
