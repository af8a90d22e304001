/* The tables pushwire-wsgen generates (pushwire_fields.h) and the walker that follows them
 * (packet-pushwire.c). A layout is one described struct: its rows in wire order. */
#ifndef PUSHWIRE_LAYOUT_H
#define PUSHWIRE_LAYOUT_H

#include <glib.h>

enum pw_row_kind {
    PW_SCALAR, /* one field of `size` bytes (bit fields: their container) */
    PW_COUNT,  /* a big-endian count that sizes the next array or bytes row */
    PW_ARRAY,  /* elements of `size` bytes: a struct (elem) or a scalar (hf) */
    PW_BYTES   /* a byte string */
};

struct pw_layout;

typedef struct pw_row {
    int *hf;
    guint enc;           /* ENC_BIG_ENDIAN, or ENC_NA for bytes */
    guint8 kind;         /* enum pw_row_kind */
    gboolean counted;    /* PW_ARRAY/PW_BYTES: sized by the preceding count, else to the end */
    guint16 offset;      /* fixed rows: byte offset from the struct's start */
    guint16 size;        /* fixed rows: bytes; arrays: bytes per element */
    const struct pw_layout *elem;
} pw_row;

typedef struct pw_layout {
    const char *title;
    int *hf_item;        /* FT_NONE field of one instance's subtree */
    gint *ett;
    guint16 fixed_size;
    guint16 n_rows;
    const pw_row *rows;
} pw_layout;

typedef struct pw_message_layout {
    guint16 function;
    const pw_layout *layout;
} pw_message_layout;

typedef struct pw_cfg_layout {
    guint16 request_code;
    gboolean reply;
    const pw_layout *layout;
} pw_cfg_layout;

#endif
