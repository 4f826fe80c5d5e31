#include "refusals.h"

#include "proxy.h"

void ipb_refusals_begin(ipb_sandbox *sb) { ipb_proxy_clear_notes(sb->proxy, sb->proxy_id); }

void ipb_refusals_take(ipb_sandbox *sb, ipb_egress_notes *out) {
    ipb_proxy_take_notes(sb->proxy, sb->proxy_id, out); /* empties out first, whatever it returns */
}

void ipb_refusals_append_text(const ipb_egress_notes *n, ipb_buf *text) {
    char line[IPB_EGRESS_NOTE_LINE];
    for (size_t i = 0; i < n->n; i++) {
        ipb_egress_note_line(&n->list[i], line, sizeof(line));
        ipb_buf_appendf(text, "%s%s", text->len ? "\n" : "", line);
    }
    ipb_egress_notes_more_line(n, line, sizeof(line));
    if (line[0])
        ipb_buf_appendf(text, "%s%s", text->len ? "\n" : "", line);
}

void ipb_refusals_add_meta(const ipb_egress_notes *n, json_t *meta) {
    if (!ipb_egress_notes_any(n))
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < n->n; i++) {
        const ipb_egress_note *e = &n->list[i];
        json_t *o = json_object();
        json_object_set_new(o, e->is_addr ? "address" : "host", e->host[0] ? json_string(e->host) : json_null());
        json_object_set_new(o, "port", e->dns || !e->host[0] ? json_null() : json_integer(e->port));
        json_object_set_new(o, "dns", json_boolean(e->dns));
        json_object_set_new(o, "reason", json_string(e->why));
        json_object_set_new(o, "allow", e->allow[0] ? json_string(e->allow) : json_null());
        json_object_set_new(o, "count", json_integer(e->count));
        json_array_append_new(list, o);
    }
    json_object_set_new(meta, "egressRefused", list);
    if (n->more)
        json_object_set_new(meta, "egressRefusedMore", json_integer(n->more));
}
