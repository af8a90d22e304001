/* packet-pushwire.c: the pushwire plugin for stock Wireshark 4.0 (spec/wireshark.md).
 *
 * - Push-push messages in RoCE SEND payloads: a heuristic on "infiniband.payload".
 * - Every RoCEv2 frame: a postdissector adds a "pushwire" tree with the verified ICRC, the DC
 *   headers stock Wireshark skips, idata, the pool and element an RDMA write lands in, and
 *   page-fault ACKs.
 * - Cells: EtherType 0x88B5, with both CRCs checked and multi-cell Sends reassembled.
 *
 * Fields, value strings, expert infos and struct layouts come from pushwire_fields.h, which
 * pushwire-wsgen generates from the C++ descriptions; validation and CRCs come from the library
 * through bridge.h. */
#include <string.h>

#include <epan/packet.h>
#include <epan/expert.h>
#include <epan/proto_data.h>
#include <epan/etypes.h>
#include <epan/dissectors/packet-infiniband.h>
#include <wiretap/wtap.h>
#include <ws_version.h>

#include "bridge.h"
#include "layout.h"
#include "pushwire_fields.h"

#ifndef PUSHWIRE_VERSION
#define PUSHWIRE_VERSION "0"
#endif

WS_DLL_PUBLIC_DEF const gchar plugin_version[] = PUSHWIRE_VERSION;
WS_DLL_PUBLIC_DEF const int plugin_want_major = WIRESHARK_VERSION_MAJOR;
WS_DLL_PUBLIC_DEF const int plugin_want_minor = WIRESHARK_VERSION_MINOR;
WS_DLL_PUBLIC void plugin_register(void);

#define PW_MAX_REASSEMBLY 65536  /* bytes of one reassembled cell packet kept for dissection */

static int proto_pushwire = -1;
static gint ett_pushwire = -1;
static gint ett_pushwire_write = -1;
static dissector_handle_t cell_handle;
static dissector_handle_t post_handle;

/* ------------------------------------------------------------------ keys and maps */

/* Map keys are small byte strings (addresses, QPs, PSNs) compared whole. */
typedef struct pw_key {
    guint8 b[48];
} pw_key;

static guint pw_key_hash(gconstpointer k)
{
    return wmem_strong_hash(((const pw_key *)k)->b, sizeof(pw_key));
}

static gboolean pw_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(pw_key)) == 0;
}

static pw_key *pw_key_copy(const pw_key *k)
{
    return (pw_key *)wmem_memdup(wmem_file_scope(), k, sizeof *k);
}

static wmem_map_t *pools_by_target;   /* (target IP, rkey) -> pw_pool chain */
static wmem_map_t *write_by_qp;       /* (target IP, source IP, QP) -> pw_write_cursor */
static wmem_map_t *writes_by_psn;     /* (source IP, target IP, PSN) -> frame of the write */
static wmem_map_t *cell_packets;      /* cell packet key -> pw_cell_packet in progress */
static wmem_map_t *cell_writes;       /* (writer MAC, target MAC, WQPs, PSN) -> frame */
static wmem_map_t *send_messages;     /* (source IP, target IP, QP) -> pw_send_message */

/* A message arriving in SEND_FIRST, MIDDLE..., LAST packets of one QP. */
typedef struct pw_send_message {
    gboolean active;
    guint32 next_psn, first_frame;
    wmem_array_t *data;
} pw_send_message;

/* The LAST packet of such a message: the message, whole. */
typedef struct pw_send_note {
    guint8 *data;
    guint len;
    guint32 first_frame;
} pw_send_note;

/* A pool advertised in a BufferRecvPool. */
typedef struct pw_pool {
    guint32 ref, elements, element_size, frame;
    guint64 address;
    struct pw_pool *next;
} pw_pool;

/* Where the next packet of a multi-packet RDMA write on a QP lands. */
typedef struct pw_write_cursor {
    const pw_pool *pool;
    guint64 start, va;        /* the write's first byte; the next packet's first byte */
} pw_write_cursor;

/* What the first pass learned about a frame, for every later pass. */
typedef struct pw_frame_note {
    const pw_pool *pool;      /* the write's pool, if known */
    guint64 start, va;        /* the write's first byte; this packet's first byte */
    guint32 write_frame;      /* page-fault ACK: the write it answers */
    gboolean idata_mismatch;
    gboolean outside;         /* the write ends beyond its element */
} pw_frame_note;

/* A cell packet being received. */
typedef struct pw_cell_packet {
    guint16 next_csn;
    gboolean broken;          /* a cell was missing, repeated or bad */
    guint32 crc;
    wmem_array_t *data;       /* Send data, when it fits PW_MAX_REASSEMBLY */
    const pw_pool *pool;      /* RDMA write: the pool its VA/MH lands in */
    guint64 va;
} pw_cell_packet;

typedef struct pw_cell_note {
    int packet_crc_status;    /* PROTO_CHECKSUM_E_* */
    guint8 *data;             /* last cell of a multi-cell Send: the whole data */
    guint data_len;
    guint32 write_frame;      /* page-fault delay: the write it answers */
    const pw_pool *pool;      /* first cell of an RDMA write: its pool */
    guint64 va;
    gboolean idata_mismatch;  /* last cell: idata disagrees with the first cell's VA */
} pw_cell_note;

static void key_put(pw_key *k, size_t *at, const void *p, size_t n)
{
    if (*at + n <= sizeof k->b) {
        memcpy(k->b + *at, p, n);
        *at += n;
    }
}

static void key_u32(pw_key *k, size_t *at, guint32 v)
{
    key_put(k, at, &v, sizeof v);
}

/* The 16 bytes of an IPv4 or IPv6 address (IPv4 zero-padded). */
static void ip_of(const address *a, guint8 out[16])
{
    memset(out, 0, 16);
    if ((a->type == AT_IPv4 && a->len == 4) || (a->type == AT_IPv6 && a->len == 16))
        memcpy(out, a->data, (size_t)a->len);
}

/* The frame's own tvb (its first data source), when nothing of it was cut by the snap length. */
static tvbuff_t *whole_frame(packet_info *pinfo)
{
    tvbuff_t *top = pinfo->data_src ? get_data_source_tvb((const struct data_source *)pinfo->data_src->data) : NULL;
    return top && tvb_captured_length(top) == tvb_reported_length(top) ? top : NULL;
}

/* ------------------------------------------------------------------ the layout walker */

static guint64 read_count(tvbuff_t *tvb, int off, guint size)
{
    switch (size) {
    case 1: return tvb_get_guint8(tvb, off);
    case 2: return tvb_get_ntohs(tvb, off);
    case 4: return tvb_get_ntohl(tvb, off);
    default: return tvb_get_ntoh64(tvb, off);
    }
}

/* Adds the fields of layout L at [base, end) of tvb. Arrays stop at `end`, so a walk never
 * runs longer than the bytes it shows. */
static void pw_walk(tvbuff_t *tvb, proto_tree *tree, int base, int end, const pw_layout *L)
{
    guint64 count = 0;
    for (guint i = 0; i < L->n_rows; i++) {
        const pw_row *r = &L->rows[i];
        int at = base + r->offset;
        switch (r->kind) {
        case PW_SCALAR:
            proto_tree_add_item(tree, *r->hf, tvb, at, r->size, r->enc);
            break;
        case PW_COUNT:
            count = read_count(tvb, at, r->size);
            proto_tree_add_item(tree, *r->hf, tvb, at, r->size, r->enc);
            break;
        case PW_BYTES: {
            gint64 len = r->counted ? (gint64)count : (gint64)end - at;
            if (len > (gint64)end - at) len = (gint64)end - at;
            if (len > 0) proto_tree_add_item(tree, *r->hf, tvb, at, (gint)len, ENC_NA);
            break;
        }
        case PW_ARRAY: {
            guint64 n = r->counted ? count : (guint64)((end - at) / r->size);
            for (guint64 k = 0; k < n && at + r->size <= end; k++, at += r->size) {
                if (r->elem) {
                    proto_item *ti = proto_tree_add_item(tree, *r->elem->hf_item, tvb, at, r->size, ENC_NA);
                    proto_item_append_text(ti, " %" G_GUINT64_FORMAT, k);
                    pw_walk(tvb, proto_item_add_subtree(ti, *r->elem->ett), at, at + r->size, r->elem);
                } else {
                    proto_tree_add_item(tree, *r->hf, tvb, at, r->size, r->enc);
                }
            }
            break;
        }
        }
    }
}

static const pw_layout *message_layout(guint16 function)
{
    for (size_t i = 0; i < G_N_ELEMENTS(pw_messages); i++)
        if (pw_messages[i].function == function) return pw_messages[i].layout;
    return NULL;
}

/* ------------------------------------------------------------------ push-push messages */

/* Registers the pools of a BufferRecvPool sent from `target` (first pass only). */
static void remember_pools(tvbuff_t *tvb, packet_info *pinfo, const guint8 target[16])
{
    pw_pool_desc d[128]; /* wire::codec_options::max_frame (4096) holds at most 127 */
    const guint len = tvb_captured_length(tvb);
    const size_t count = MIN(pw_msg_pools(tvb_get_ptr(tvb, 0, len), len, d, G_N_ELEMENTS(d)), G_N_ELEMENTS(d));
    for (size_t i = 0; i < count; i++) {
        pw_pool *p = wmem_new0(wmem_file_scope(), pw_pool);
        p->ref = d[i].ref;
        p->elements = d[i].elements;
        p->element_size = d[i].element_size;
        p->address = d[i].address;
        p->frame = pinfo->num;
        pw_key k;
        size_t n = 0;
        memset(&k, 0, sizeof k);
        key_put(&k, &n, target, 16);
        key_u32(&k, &n, d[i].rkey);
        p->next = (pw_pool *)wmem_map_lookup(pools_by_target, &k);
        wmem_map_insert(pools_by_target, pw_key_copy(&k), p);
    }
}

/* Shows one validated message (the whole tvb) under tree, and says what it is in Info; returns
 * the message's subtree. */
static proto_tree *show_message(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree)
{
    const guint len = tvb_captured_length(tvb);
    proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, 0, -1, ENC_NA);
    /* The summary costs a formatted line: only when a column or a visible tree shows it. */
    if (pinfo->cinfo || (tree && PTREE_DATA(tree)->visible)) {
        char summary[200];
        pw_msg_summary(tvb_get_ptr(tvb, 0, len), len, summary, sizeof summary);
        col_set_str(pinfo->cinfo, COL_PROTOCOL, "pushwire");
        col_clear(pinfo->cinfo, COL_INFO);
        col_add_str(pinfo->cinfo, COL_INFO, summary);
        proto_item_append_text(ti, ", %s", summary);
    }
    proto_tree *sub = proto_item_add_subtree(ti, ett_pushwire);
    const pw_layout *L = message_layout(tvb_get_ntohs(tvb, 0));
    if (!L) return sub;
    pw_walk(tvb, sub, 0, (int)len, L);
    /* CfgUtil: the data of a standard request code, when its size is the code's. */
    guint16 code;
    int reply;
    size_t at, size;
    if (pw_msg_cfg_data(tvb_get_ptr(tvb, 0, len), len, &code, &reply, &at, &size)) {
        for (size_t i = 0; i < G_N_ELEMENTS(pw_cfg_data); i++) {
            const pw_cfg_layout *c = &pw_cfg_data[i];
            if (c->request_code == code && c->reply == (reply != 0) && c->layout->fixed_size == size) {
                proto_item *di = proto_tree_add_item(sub, *c->layout->hf_item, tvb, (gint)at, (gint)size, ENC_NA);
                proto_item_set_text(di, "%s", c->layout->title);
                pw_walk(tvb, proto_item_add_subtree(di, *c->layout->ett), (int)at, (int)(at + size), c->layout);
            }
        }
    }
    return sub;
}

/* First pass, a SEND_FIRST/MIDDLE/LAST payload p[0..n): the message whole at its LAST packet, if
 * every packet came in PSN order on its QP and the whole is a valid message (else NULL). */
static pw_send_note *reassemble_send(packet_info *pinfo, int position, const guint8 *p, guint n)
{
    /* The BTH's QP and PSN and the IP addresses: from the frame, as the library reads it. */
    tvbuff_t *top = whole_frame(pinfo);
    if (!top) return NULL;
    pw_roce r;
    const guint flen = tvb_captured_length(top);
    if (pw_roce_inspect(tvb_get_ptr(top, 0, (gint)flen), flen, &r) != 0) return NULL;
    pw_key k;
    size_t at = 0;
    memset(&k, 0, sizeof k);
    key_put(&k, &at, r.src_ip, 16);
    key_put(&k, &at, r.dst_ip, 16);
    key_u32(&k, &at, r.destqp);
    pw_send_message *m = (pw_send_message *)wmem_map_lookup(send_messages, &k);
    if (!m) {
        m = wmem_new0(wmem_file_scope(), pw_send_message);
        wmem_map_insert(send_messages, pw_key_copy(&k), m);
    }
    if (position == PW_POS_FIRST) {
        m->active = TRUE;
        m->first_frame = pinfo->num;
        m->data = wmem_array_new(wmem_file_scope(), 1);
    } else if (!m->active || r.psn != m->next_psn) {
        m->active = FALSE; /* a packet is missing or out of order: this message is lost */
        return NULL;
    }
    m->next_psn = (r.psn + 1) & 0xFFFFFF;
    if (wmem_array_get_count(m->data) + n > pw_msg_max_frame()) {
        m->active = FALSE;
        return NULL;
    }
    wmem_array_append(m->data, p, n);
    if (position != PW_POS_LAST) return NULL;
    m->active = FALSE;
    const guint len = wmem_array_get_count(m->data);
    const guint8 *whole = (const guint8 *)wmem_array_get_raw(m->data);
    if (pw_msg_check(whole, len, NULL) != 0) return NULL;
    pw_send_note *note = wmem_new0(wmem_file_scope(), pw_send_note);
    note->data = (guint8 *)whole;
    note->len = len;
    note->first_frame = m->first_frame;
    return note;
}

/* RoCE SEND payloads: a push-push message is the whole payload of one SEND_ONLY, or of the
 * SEND_FIRST ... SEND_LAST packets of one message, reassembled. */
static gboolean dissect_pushwire_heur(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
    const struct infinibandinfo *info = (const struct infinibandinfo *)data;
    if (!info) return FALSE;
    const int position = pw_opcode_send_position(info->opCode);
    if (position < 0) return FALSE;
    const guint captured = tvb_captured_length(tvb);
    if (captured != tvb_reported_length(tvb) || captured < (guint)info->pad_count) return FALSE;
    const guint len = captured - info->pad_count;
    tvbuff_t *msg = NULL;
    guint32 first_frame = 0;
    if (position == PW_POS_ONLY) {
        if (len < 12 || pw_msg_check(tvb_get_ptr(tvb, 0, len), len, NULL) != 0) return FALSE;
        msg = tvb_new_subset_length(tvb, 0, (gint)len);
    } else {
        pw_send_note *note = (pw_send_note *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 2);
        if (!PINFO_FD_VISITED(pinfo) && !note) {
            note = reassemble_send(pinfo, position, tvb_get_ptr(tvb, 0, len), len);
            if (note) p_add_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 2, note);
        }
        if (!note) return FALSE; /* FIRST and MIDDLE stay the stock dissector's data */
        msg = tvb_new_child_real_data(tvb, note->data, note->len, note->len);
        add_new_data_source(pinfo, msg, "Reassembled push-push message");
        first_frame = note->first_frame;
    }
    if (!PINFO_FD_VISITED(pinfo)) {
        guint8 target[16];
        ip_of(&pinfo->net_src, target);
        remember_pools(msg, pinfo, target);
    }
    proto_tree *sub = show_message(msg, pinfo, tree);
    if (first_frame)
        proto_item_set_generated(proto_tree_add_uint(sub, hf_pushwire_message_first_frame, msg, 0, 0, first_frame));
    return TRUE;
}

/* ------------------------------------------------------------------ RoCEv2 frames */

static void show_idata(tvbuff_t *tvb, proto_tree *tree, int at, guint32 imm)
{
    guint32 v[3]; /* in the idata layout's row order: pool, element, bytes */
    pw_idata(imm, &v[0], &v[1], &v[2]);
    proto_item *ti = proto_tree_add_item(tree, *pw_layout_idata.hf_item, tvb, at, (gint)pw_layout_idata.fixed_size, ENC_NA);
    proto_item_append_text(ti, ": pool %u, element %u, %u bytes", v[0], v[1], v[2]);
    proto_tree *sub = proto_item_add_subtree(ti, *pw_layout_idata.ett);
    for (guint i = 0; i < pw_layout_idata.n_rows && i < 3; i++) {
        const pw_row *r = &pw_layout_idata.rows[i];
        proto_tree_add_uint(sub, *r->hf, tvb, at + r->offset, r->size, v[i]);
    }
}

/* Where a write's packet lands: pool, element, offset, and the frame that advertised the pool. */
static proto_item *show_write(tvbuff_t *tvb, proto_tree *tree, int at, const pw_pool *p, guint64 va)
{
    const guint64 rel = va - p->address;
    proto_item *wi = proto_tree_add_uint(tree, hf_pushwire_write_pool, tvb, at, 0, p->ref);
    proto_item_set_generated(wi);
    proto_tree *ws = proto_item_add_subtree(wi, ett_pushwire_write);
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_element, tvb, at, 0, (guint32)(rel / p->element_size)));
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_offset, tvb, at, 0, (guint32)(rel % p->element_size)));
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_pool_frame, tvb, 0, 0, p->frame));
    return wi;
}

static const pw_pool *pools_of(const guint8 target[16], guint32 rkey)
{
    pw_key k;
    size_t n = 0;
    memset(&k, 0, sizeof k);
    key_put(&k, &n, target, 16);
    key_u32(&k, &n, rkey);
    return (const pw_pool *)wmem_map_lookup(pools_by_target, &k);
}

static const pw_pool *find_pool(const guint8 target[16], guint32 rkey, guint64 va)
{
    for (const pw_pool *p = pools_of(target, rkey); p; p = p->next)
        if (va >= p->address && va - p->address < (guint64)p->elements * p->element_size) return p;
    return NULL;
}

static pw_key qp_key(const pw_roce *r)
{
    pw_key k;
    size_t n = 0;
    memset(&k, 0, sizeof k);
    key_put(&k, &n, r->dst_ip, 16);
    key_put(&k, &n, r->src_ip, 16);
    key_u32(&k, &n, r->destqp);
    return k;
}

static pw_key psn_key(const guint8 from[16], const guint8 to[16], guint32 psn)
{
    pw_key k;
    size_t n = 0;
    memset(&k, 0, sizeof k);
    key_put(&k, &n, from, 16);
    key_put(&k, &n, to, 16);
    key_u32(&k, &n, psn);
    return k;
}

/* First pass: what this RoCE frame means in its capture (pools, page faults). */
static pw_frame_note *note_roce(packet_info *pinfo, const pw_roce *r)
{
    pw_frame_note *note = wmem_new0(wmem_file_scope(), pw_frame_note);
    if (r->write) {
        pw_key pk = psn_key(r->src_ip, r->dst_ip, r->psn);
        wmem_map_insert(writes_by_psn, pw_key_copy(&pk), GUINT_TO_POINTER(pinfo->num));
        pw_key qk = qp_key(r);
        pw_write_cursor *cur = (pw_write_cursor *)wmem_map_lookup(write_by_qp, &qk);
        if (r->reth_offset) {
            if (!cur) {
                cur = wmem_new0(wmem_file_scope(), pw_write_cursor);
                wmem_map_insert(write_by_qp, pw_key_copy(&qk), cur);
            }
            cur->pool = find_pool(r->dst_ip, r->reth_rkey, r->reth_va);
            cur->start = cur->va = r->reth_va;
            if (cur->pool && r->reth_len) {
                const guint64 off = (r->reth_va - cur->pool->address) % cur->pool->element_size;
                note->outside = off + r->reth_len > cur->pool->element_size;
            }
        }
        if (cur && cur->pool) {
            note->pool = cur->pool;
            note->start = cur->start;
            note->va = cur->va;
            cur->va += r->payload_len;
        }
        if (r->immdt_offset) {
            guint32 pool, element, nbytes;
            pw_idata(r->imm, &pool, &element, &nbytes);
            if (note->pool) {
                const guint64 el = (note->start - note->pool->address) / note->pool->element_size;
                note->idata_mismatch = pool != note->pool->ref || element != el;
            } else if (r->reth_offset) {
                /* The RETH lands in no pool advertised so far: wrong if idata names one of the
                 * target's pools under the same R_Key. */
                for (const pw_pool *p = pools_of(r->dst_ip, r->reth_rkey); p; p = p->next)
                    if (p->ref == pool) note->idata_mismatch = TRUE;
            }
        }
    }
    if (r->rnr_nak && !r->request) {
        pw_key pk = psn_key(r->dst_ip, r->src_ip, r->psn);
        note->write_frame = GPOINTER_TO_UINT(wmem_map_lookup(writes_by_psn, &pk));
    }
    return note;
}

static int dissect_pushwire_post(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
    if (pinfo->rec->rec_type != REC_TYPE_PACKET || pinfo->rec->rec_header.packet_header.pkt_encap != WTAP_ENCAP_ETHERNET)
        return 0;
    const guint len = tvb_captured_length(tvb);
    if (len != tvb_reported_length(tvb)) return 0; /* cut by the snap length: nothing to verify */
    pw_roce r;
    const int err = pw_roce_inspect(tvb_get_ptr(tvb, 0, len), len, &r);
    if (err != 0) {
        /* Only frames stock Wireshark took for RoCE are worth a complaint. */
        if (!proto_is_frame_protocol(pinfo->layers, "infiniband")) return 0;
        proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, 0, -1, ENC_NA);
        expert_add_info_format(pinfo, ti, &ei_pushwire_roce_invalid, "Not a valid RoCEv2 frame: %s at byte %zu (%s)",
                               r.err.name, r.err.offset, r.err.field);
        return (int)len;
    }
    pw_frame_note *note = (pw_frame_note *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 0);
    if (!note) {
        note = note_roce(pinfo, &r);
        p_add_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 0, note);
    }

    const int bth = (int)r.bth_offset;
    proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, bth, -1, ENC_NA);
    if (tree && PTREE_DATA(tree)->visible) proto_item_append_text(ti, " RoCEv2, %s", pw_opcode_name(r.opcode, r.se));
    proto_tree *sub = proto_item_add_subtree(ti, ett_pushwire);
    proto_tree_add_item(sub, hf_pushwire_opcode, tvb, bth, 1, ENC_NA);

    if (r.dceth_offset) pw_walk(tvb, sub, (int)r.dceth_offset, (int)r.dceth_offset + 8, &pw_layout_dceth);
    if (r.dcceth_offset) {
        pw_walk(tvb, sub, (int)r.dcceth_offset, (int)r.dcceth_offset + 16, &pw_layout_dcceth);
        proto_item *di = proto_tree_add_boolean(sub, hf_pushwire_dc_disconnect, tvb, bth + 1, 1, r.dc_disconnect);
        expert_add_info_format(pinfo, di, &ei_pushwire_dc_connect, "DC %s: DCT 0x%06x, DCI 0x%06x",
                               r.dc_disconnect ? "disconnect" : "connect", tvb_get_ntoh24(tvb, (int)r.dcceth_offset + 1),
                               tvb_get_ntoh24(tvb, (int)r.dcceth_offset + 5));
        col_append_fstr(pinfo->cinfo, COL_INFO, " [%s dct=0x%06x dci=0x%06x]", r.dc_disconnect ? "DC disconnect" : "DC connect",
                        tvb_get_ntoh24(tvb, (int)r.dcceth_offset + 1), tvb_get_ntoh24(tvb, (int)r.dcceth_offset + 5));
    }
    if (r.write && r.immdt_offset) {
        show_idata(tvb, sub, (int)r.immdt_offset, r.imm);
        guint32 pool, element, nbytes;
        pw_idata(r.imm, &pool, &element, &nbytes);
        col_append_fstr(pinfo->cinfo, COL_INFO, " [idata pool=%u element=%u bytes=%u]", pool, element, nbytes);
    }
    if (note->pool) {
        proto_item *wi = show_write(tvb, sub, r.reth_offset ? (int)r.reth_offset : (int)r.payload_offset, note->pool, note->va);
        if (note->outside)
            expert_add_info_format(pinfo, wi, &ei_pushwire_write_outside,
                                   "RDMA write of %u bytes at offset %" G_GUINT64_FORMAT " runs past its %u-byte element",
                                   r.reth_len, (note->va - note->pool->address) % note->pool->element_size,
                                   note->pool->element_size);
    }
    if (note->idata_mismatch) {
        guint32 pool, element, nbytes;
        pw_idata(r.imm, &pool, &element, &nbytes);
        if (note->pool)
            expert_add_info_format(pinfo, ti, &ei_pushwire_idata_mismatch,
                                   "idata names pool %u element %u, but the RETH address is in pool %u element %" G_GUINT64_FORMAT,
                                   pool, element, note->pool->ref,
                                   (note->start - note->pool->address) / note->pool->element_size);
        else
            expert_add_info_format(pinfo, ti, &ei_pushwire_idata_mismatch,
                                   "idata names pool %u element %u, but the RETH address is in none of its elements", pool,
                                   element);
    }
    if (r.rnr_nak && note->write_frame) {
        proto_item *pi = proto_tree_add_uint(sub, hf_pushwire_page_fault_delay_us, tvb, (int)r.aeth_offset, 1, r.rnr_delay_us);
        proto_item_set_generated(proto_tree_add_uint(sub, hf_pushwire_page_fault_write_frame, tvb, 0, 0, note->write_frame));
        expert_add_info_format(pinfo, pi, &ei_pushwire_page_fault,
                               "Page-fault ACK: RNR NAK answering the RDMA write in frame %u; the sender pauses %u us",
                               note->write_frame, r.rnr_delay_us);
        col_append_fstr(pinfo->cinfo, COL_INFO, " [page-fault ACK, pause %u us]", r.rnr_delay_us);
    }
    proto_tree_add_checksum(sub, tvb, (int)r.icrc_offset, hf_pushwire_icrc, hf_pushwire_icrc_status, &ei_pushwire_icrc_bad,
                            pinfo, r.icrc_computed, ENC_LITTLE_ENDIAN, PROTO_CHECKSUM_VERIFY);
    if (r.icrc_state == PW_CRC_BAD) col_append_str(pinfo->cinfo, COL_INFO, " [bad ICRC]");
    return (int)len;
}

/* ------------------------------------------------------------------ cells */

static pw_key cell_key(const guint8 *frame, const pw_cell *c, gboolean reverse)
{
    pw_key k;
    size_t n = 0;
    memset(&k, 0, sizeof k);
    key_put(&k, &n, frame + (reverse ? 0 : 6), 6); /* source MAC */
    key_put(&k, &n, frame + (reverse ? 6 : 0), 6); /* destination MAC */
    key_u32(&k, &n, reverse ? c->dst_wqp : c->src_wqp);
    key_u32(&k, &n, reverse ? c->src_wqp : c->dst_wqp);
    key_u32(&k, &n, c->psn);
    return k;
}

/* First pass: the packet CRC across cells, reassembly, and page-fault delays. */
static pw_cell_note *note_cell(packet_info *pinfo, const guint8 *frame, const pw_cell *c)
{
    pw_cell_note *note = wmem_new0(wmem_file_scope(), pw_cell_note);
    note->packet_crc_status = PROTO_CHECKSUM_E_NOT_PRESENT;
    pw_key k = cell_key(frame, c, FALSE);
    key_u32(&k, &(size_t){44}, c->type);
    pw_cell_packet *pk = (pw_cell_packet *)wmem_map_lookup(cell_packets, &k);
    if (c->first) {
        if (!pk) {
            pk = wmem_new0(wmem_file_scope(), pw_cell_packet);
            wmem_map_insert(cell_packets, pw_key_copy(&k), pk);
        }
        pk->next_csn = 0;
        pk->broken = FALSE;
        pk->crc = 0;
        pk->data = NULL;
        pk->pool = NULL;
        if (pw_cell_is_write(c->type)) {
            pw_key wk = cell_key(frame, c, FALSE);
            wmem_map_insert(cell_writes, pw_key_copy(&wk), GUINT_TO_POINTER(pinfo->num));
            guint8 target[16];
            memset(target, 0, sizeof target);
            memcpy(target, frame, 6); /* the target: the destination MAC */
            pk->pool = note->pool = find_pool(target, c->mh, c->va);
            pk->va = note->va = c->va;
        }
    }
    if (pk) {
        if (pk->broken || c->csn != pk->next_csn || c->crc_state != PW_CRC_GOOD) {
            pk->broken = TRUE;
        } else {
            pk->crc = pw_packet_crc_extend(pk->crc, c->part_crc, c->part_size);
            pk->next_csn++;
            if (pw_cell_is_send(c->type) && c->cell_count > 1) {
                if (!pk->data) pk->data = wmem_array_new(wmem_file_scope(), 1);
                if (wmem_array_get_count(pk->data) + c->length <= PW_MAX_REASSEMBLY)
                    wmem_array_append(pk->data, frame + c->data, c->length);
                else
                    pk->broken = TRUE;
            }
        }
    }
    if (c->idata && pw_cell_is_write(c->type) && pk && pk->pool) {
        guint32 pool, element, nbytes;
        pw_idata(c->idata_value, &pool, &element, &nbytes);
        note->idata_mismatch = pool != pk->pool->ref || element != (pk->va - pk->pool->address) / pk->pool->element_size;
    }
    if (c->last) {
        note->packet_crc_status = PROTO_CHECKSUM_E_UNVERIFIED;
        if (pk && !pk->broken) {
            note->packet_crc_status = pk->crc == c->packet_crc ? PROTO_CHECKSUM_E_GOOD : PROTO_CHECKSUM_E_BAD;
            if (note->packet_crc_status == PROTO_CHECKSUM_E_GOOD && pk->data && wmem_array_get_count(pk->data)) {
                note->data_len = wmem_array_get_count(pk->data);
                note->data = (guint8 *)wmem_array_get_raw(pk->data);
            }
        }
        if (pk) {
            pk->broken = TRUE; /* a repeated last cell is not a second packet */
            pk->data = NULL;
        }
    }
    if (pw_cell_is_page_fault(c->type)) {
        pw_key wk = cell_key(frame, c, TRUE);
        note->write_frame = GPOINTER_TO_UINT(wmem_map_lookup(cell_writes, &wk));
    }
    return note;
}

static int dissect_cell(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
    col_set_str(pinfo->cinfo, COL_PROTOCOL, "pushwire cell");
    col_clear(pinfo->cinfo, COL_INFO);
    proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, 0, -1, ENC_NA);
    proto_item_append_text(ti, " cell");
    proto_tree *sub = proto_item_add_subtree(ti, ett_pushwire);

    /* The cell CRC covers the Ethernet header: decode the frame from its destination MAC. */
    tvbuff_t *top = whole_frame(pinfo);
    const int h0 = tvb_raw_offset(tvb);
    const int l2 = proto_is_frame_protocol(pinfo->layers, "vlan") ? 18 : 14;
    pw_cell c;
    int err = -1;
    const guint8 *frame = NULL;
    if (top && h0 >= l2) {
        const guint n = tvb_captured_length(top) - (guint)(h0 - l2);
        frame = tvb_get_ptr(top, h0 - l2, (gint)n);
        err = pw_cell_decode(frame, n, &c);
    }
    if (err != 0) {
        if (tvb_captured_length(tvb) >= pw_layout_cell_header.fixed_size)
            pw_walk(tvb, sub, 0, (int)pw_layout_cell_header.fixed_size, &pw_layout_cell_header);
        if (err > 0)
            expert_add_info_format(pinfo, ti, &ei_pushwire_cell_invalid, "Not a valid cell: %s at byte %zu (%s)", c.err.name,
                                   c.err.offset, c.err.field);
        else
            expert_add_info_format(pinfo, ti, &ei_pushwire_cell_invalid, "Not a valid cell: the frame is cut short");
        col_add_fstr(pinfo->cinfo, COL_INFO, "Invalid cell (%s)", err > 0 ? c.err.name : "truncated capture");
        return (int)tvb_captured_length(tvb);
    }
    pw_cell_note *note = (pw_cell_note *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 1);
    if (!note) {
        note = note_cell(pinfo, frame, &c);
        p_add_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 1, note);
    }
    const int base = (int)c.header; /* frame offset of tvb's first byte */
#define AT(x) ((int)(x) - base)
    proto_item_append_text(ti, ", %s, PSN %u, cell %u of %u", c.type_name, c.psn, c.csn + 1u, c.cell_count);
    col_add_fstr(pinfo->cinfo, COL_INFO, "Cell %s psn=%u cell=%u/%u len=%u", c.type_name, c.psn, c.csn + 1u, c.cell_count,
                 c.length);
    pw_walk(tvb, sub, 0, (int)pw_layout_cell_header.fixed_size, &pw_layout_cell_header);
    if (c.vamh) pw_walk(tvb, sub, AT(c.vamh), AT(c.vamh) + 12, &pw_layout_cell_vamh);
    if (note->pool) show_write(tvb, sub, AT(c.vamh), note->pool, note->va);
    if (c.ack) {
        pw_walk(tvb, sub, AT(c.ack), AT(c.ack) + 8, &pw_layout_cell_ack);
        if (pw_cell_is_page_fault(c.type)) {
            proto_item *pi = proto_tree_add_uint(sub, hf_pushwire_page_fault_delay_us, tvb, AT(c.ack) + 4, 4, c.delay_us);
            if (note->write_frame)
                proto_item_set_generated(proto_tree_add_uint(sub, hf_pushwire_page_fault_write_frame, tvb, 0, 0, note->write_frame));
            expert_add_info_format(pinfo, pi, &ei_pushwire_page_fault, "Page-fault delay: the sender pauses %u us", c.delay_us);
            col_append_fstr(pinfo->cinfo, COL_INFO, " [page-fault delay %u us]", c.delay_us);
        }
    }
    if (c.idata) {
        proto_tree_add_item(sub, hf_pushwire_cell_idata, tvb, AT(c.idata), 4, ENC_BIG_ENDIAN);
        show_idata(tvb, sub, AT(c.idata), c.idata_value);
        if (note->idata_mismatch)
            expert_add_info(pinfo, ti, &ei_pushwire_idata_mismatch);
    }
    if (c.length) proto_tree_add_item(sub, hf_pushwire_cell_data, tvb, AT(c.data), c.length, ENC_NA);
    if (c.packet_crc_at) {
        proto_item *pi = proto_tree_add_item(sub, hf_pushwire_cell_packet_crc, tvb, AT(c.packet_crc_at), 4, ENC_BIG_ENDIAN);
        proto_item *si = proto_tree_add_uint(sub, hf_pushwire_cell_packet_crc_status, tvb, AT(c.packet_crc_at), 4,
                                             (guint32)note->packet_crc_status);
        proto_item_set_generated(si);
        if (note->packet_crc_status == PROTO_CHECKSUM_E_BAD) {
            expert_add_info(pinfo, pi, &ei_pushwire_cell_packet_crc_bad);
            col_append_str(pinfo->cinfo, COL_INFO, " [bad packet CRC]");
        }
    }
    proto_tree_add_checksum(sub, tvb, AT(c.cell_crc_at), hf_pushwire_cell_crc, hf_pushwire_cell_crc_status,
                            &ei_pushwire_cell_crc_bad, pinfo, c.crc_computed, ENC_BIG_ENDIAN, PROTO_CHECKSUM_VERIFY);
    if (c.crc_state == PW_CRC_BAD) col_append_str(pinfo->cinfo, COL_INFO, " [bad cell CRC]");

    /* A Send's data: a push-push message when it is one (one cell, or the reassembled packet). */
    if (pw_cell_is_send(c.type) && c.last && note->packet_crc_status == PROTO_CHECKSUM_E_GOOD) {
        tvbuff_t *msg = NULL;
        if (c.cell_count == 1 && c.length) {
            msg = tvb_new_subset_length(tvb, AT(c.data), c.length);
        } else if (note->data) {
            msg = tvb_new_child_real_data(tvb, note->data, note->data_len, note->data_len);
            add_new_data_source(pinfo, msg, "Reassembled cells");
            proto_tree_add_item(sub, hf_pushwire_cell_reassembled, msg, 0, -1, ENC_NA);
        }
        if (msg) {
            const guint n = tvb_captured_length(msg);
            if (pw_msg_check(tvb_get_ptr(msg, 0, n), n, NULL) == 0) {
                if (!PINFO_FD_VISITED(pinfo)) {
                    guint8 target[16];
                    memset(target, 0, sizeof target);
                    memcpy(target, frame + 6, 6); /* cells: the advertiser is its source MAC */
                    remember_pools(msg, pinfo, target);
                }
                show_message(msg, pinfo, tree);
            }
        }
    }
#undef AT
    return (int)tvb_captured_length(tvb);
}

/* ------------------------------------------------------------------ registration */

static void proto_register_pushwire(void)
{
    static hf_register_info hf[] = {PW_HF_REGISTER};
    static ei_register_info ei[] = {PW_EI_REGISTER};
    static gint *ett[] = {&ett_pushwire, &ett_pushwire_write, PW_ETT_REGISTER};

    proto_pushwire = proto_register_protocol("pushwire", "pushwire", "pushwire");
    proto_register_field_array(proto_pushwire, hf, array_length(hf));
    proto_register_subtree_array(ett, array_length(ett));
    expert_register_field_array(expert_register_protocol(proto_pushwire), ei, array_length(ei));

    pools_by_target = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);
    write_by_qp = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);
    writes_by_psn = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);
    cell_packets = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);
    cell_writes = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);
    send_messages = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), pw_key_hash, pw_key_equal);

    cell_handle = create_dissector_handle(dissect_cell, proto_pushwire);
    post_handle = create_dissector_handle(dissect_pushwire_post, proto_pushwire);
}

static void proto_reg_handoff_pushwire(void)
{
    heur_dissector_add("infiniband.payload", dissect_pushwire_heur, "pushwire push-push messages in RoCE SENDs",
                       "pushwire_roce", proto_pushwire, HEURISTIC_ENABLE);
    dissector_add_uint("ethertype", PW_CELL_ETHERTYPE, cell_handle);
    register_postdissector(post_handle);
}

void plugin_register(void)
{
    static proto_plugin plug;
    plug.register_protoinfo = proto_register_pushwire;
    plug.register_handoff = proto_reg_handoff_pushwire;
    proto_register_plugin(&plug);
}
