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
#include <epan/prefs.h>
#include <epan/proto_data.h>
#include <epan/etypes.h>
#include <epan/tap.h>
#include <epan/stat_tap_ui.h>
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

static int proto_pushwire = -1;
static gint ett_pushwire = -1;
static gint ett_pushwire_write = -1;
static gint ett_pushwire_pool = -1;
static dissector_handle_t cell_handle;
static dissector_handle_t post_handle;
static dissector_handle_t payload_handle; /* Decode As: Infiniband payload -> pushwire */
static dissector_table_t ib_payload_table;
static int pushwire_tap = -1;

/* ------------------------------------------------------------------ claiming idata */

/* Which RDMA WRITE with immediate frames show idata (spec/wireshark.md section 3, "Claiming"). */
enum { IDATA_AUTO, IDATA_ALWAYS, IDATA_NEVER };
static gint idata_mode = IDATA_AUTO;
static const enum_val_t idata_modes[] = {
    {"auto", "Between hosts that spoke push-push, naming an advertised pool", IDATA_AUTO},
    {"always", "Always", IDATA_ALWAYS},
    {"never", "Never", IDATA_NEVER},
    {NULL, NULL, 0},
};

/* Decode As "Infiniband payload" -> pushwire (a table without keys: the whole capture) means
 * always; otherwise the preference. */
static gint effective_idata_mode(void)
{
    if (payload_handle && ib_payload_table && dissector_get_payload_handle(ib_payload_table) == payload_handle)
        return IDATA_ALWAYS;
    return idata_mode;
}

/* ------------------------------------------------------------------ the capture's history */

/* What one frame means in its capture (pools, writes, joined messages, cell reassembly) comes
 * from the library's observer (flow/observer.hpp, through bridge.h), fed every frame in order on
 * the first pass; its note is kept as the frame's proto data for every later pass. */
static pw_observer *observer;

/* The frame's own tvb (its first data source), when nothing of it was cut by the snap length. */
static tvbuff_t *whole_frame(packet_info *pinfo)
{
    tvbuff_t *top = pinfo->data_src ? get_data_source_tvb((const struct data_source *)pinfo->data_src->data) : NULL;
    return top && tvb_captured_length(top) == tvb_reported_length(top) ? top : NULL;
}

/* The observer's note for this frame: computed on the first pass (once, whichever dissector asks
 * first), then kept. NULL for frames it cannot see whole (not Ethernet, cut by the snap length). */
static const pw_note *frame_note(packet_info *pinfo)
{
    pw_note *n = (pw_note *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 0);
    if (n || PINFO_FD_VISITED(pinfo) || !observer) return n;
    if (pinfo->rec->rec_type != REC_TYPE_PACKET || pinfo->rec->rec_header.packet_header.pkt_encap != WTAP_ENCAP_ETHERNET)
        return NULL;
    tvbuff_t *top = whole_frame(pinfo);
    if (!top) return NULL;
    const guint len = tvb_captured_length(top);
    const guint64 ns = pinfo->abs_ts.secs < 0 ? 0 : (guint64)pinfo->abs_ts.secs * 1000000000u + (guint64)pinfo->abs_ts.nsecs;
    n = wmem_new0(wmem_file_scope(), pw_note);
    pw_observer_feed(observer, pinfo->num, ns, tvb_get_ptr(top, 0, (gint)len), len, n);
    /* The observer's bytes last until its next frame: keep copies. */
    if (n->message) n->message = (const guint8 *)wmem_memdup(wmem_file_scope(), n->message, n->message_len);
    if (n->send_data) n->send_data = (const guint8 *)wmem_memdup(wmem_file_scope(), n->send_data, n->send_data_len);
    if (n->n_pools) n->pools = (const pw_pool_state *)wmem_memdup(wmem_file_scope(), n->pools, n->n_pools * sizeof *n->pools);
    p_add_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 0, n);
    return n;
}

/* ------------------------------------------------------------------ conformance */

/* The rules of spec/conformance.md each frame breaks, judged by the library's checker (through
 * bridge.h) as pushwire-conform judges them: fed every Ethernet frame in order on the first pass;
 * what only the rest of the capture shows (a PSN never sent, a NAK never obeyed) is added on the
 * first later pass (Wireshark's display pass; tshark -2). */
static pw_conform *conform;
static gboolean conform_enabled = TRUE;
static gboolean conform_complete = FALSE; /* the capture is complete (pushwire-conform --complete) */
static gboolean conform_finished;
static wmem_map_t *conform_late; /* frame number -> GSList of pw_violation, from pw_conform_finish */

static GSList *conform_keep(GSList *list, const pw_violation *v)
{
    return g_slist_append(list, wmem_memdup(wmem_file_scope(), v, sizeof *v));
}

/* This frame's violations (a GSList of pw_violation), computed on the first pass and kept. */
static GSList *frame_violations(tvbuff_t *tvb, packet_info *pinfo)
{
    GSList *list = (GSList *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 1);
    if (!conform_enabled || !conform) return NULL;
    if (!PINFO_FD_VISITED(pinfo)) {
        const guint len = tvb_captured_length(tvb);
        const guint64 ns = pinfo->abs_ts.secs < 0 ? 0 : (guint64)pinfo->abs_ts.secs * 1000000000u + (guint64)pinfo->abs_ts.nsecs;
        pw_violation found[8];
        const size_t n = pw_conform_feed(conform, pinfo->num, ns, tvb_get_ptr(tvb, 0, (gint)len), len, tvb_reported_length(tvb),
                                         found, G_N_ELEMENTS(found));
        for (size_t i = 0; i < n && i < G_N_ELEMENTS(found); i++) list = conform_keep(list, &found[i]);
        if (list) p_add_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 1, list);
        return list;
    }
    if (!conform_finished) {
        conform_finished = TRUE;
        pw_violation late[64];
        const size_t n = pw_conform_finish(conform, late, G_N_ELEMENTS(late));
        for (size_t i = 0; i < n && i < G_N_ELEMENTS(late); i++) {
            const guint32 f = late[i].frame;
            GSList *l = (GSList *)wmem_map_lookup(conform_late, GUINT_TO_POINTER(f));
            wmem_map_insert(conform_late, GUINT_TO_POINTER(f), conform_keep(l, &late[i]));
        }
    }
    GSList *late = (GSList *)wmem_map_lookup(conform_late, GUINT_TO_POINTER(pinfo->num));
    if (!late) return list;
    /* both: the first pass's and the end's (copied so neither list is changed) */
    GSList *all = g_slist_copy(list);
    for (GSList *l = late; l; l = l->next) all = g_slist_append(all, l->data);
    return all;
}

/* One expert info and a pushwire.conform.rule item per violation of this frame. */
static void show_violations(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree)
{
    GSList *list = frame_violations(tvb, pinfo);
    if (!list) return;
    GSList *kept = (GSList *)p_get_proto_data(wmem_file_scope(), pinfo, proto_pushwire, 1);
    proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, 0, -1, ENC_NA);
    proto_item_append_text(ti, " conformance");
    proto_tree *sub = proto_item_add_subtree(ti, ett_pushwire);
    for (GSList *l = list; l; l = l->next) {
        const pw_violation *v = (const pw_violation *)l->data;
        if (v->rule < 0 || v->rule >= PW_CONFORM_RULES) continue;
        proto_item *ri = proto_tree_add_string(sub, hf_pushwire_conform_rule, tvb, 0, 0, v->name);
        proto_item_set_generated(ri);
        expert_add_info_format(pinfo, ri, pw_conform_ei[v->rule], "%s: %s", v->name, v->text);
        col_append_fstr(pinfo->cinfo, COL_INFO, " [%s]", v->name);
    }
    if (list != kept) g_slist_free(list);
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
        const pw_note *note = frame_note(pinfo);
        if (!note || !note->message) return FALSE; /* FIRST and MIDDLE stay the stock dissector's data */
        msg = tvb_new_child_real_data(tvb, note->message, (guint)note->message_len, (gint)note->message_len);
        add_new_data_source(pinfo, msg, "Reassembled push-push message");
        first_frame = note->message_first_frame;
    }
    proto_tree *sub = show_message(msg, pinfo, tree);
    if (first_frame)
        proto_item_set_generated(proto_tree_add_uint(sub, hf_pushwire_message_first_frame, msg, 0, 0, first_frame));
    return TRUE;
}

/* Decode As "Infiniband payload" -> pushwire: the same strict decoding (a payload that is no
 * push-push message goes back to the stock dissector), and every idata is shown. */
static int dissect_pushwire_payload(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data)
{
    return dissect_pushwire_heur(tvb, pinfo, tree, data) ? (int)tvb_captured_length(tvb) : 0;
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
static proto_item *show_write(tvbuff_t *tvb, proto_tree *tree, int at, const pw_note *n)
{
    proto_item *wi = proto_tree_add_uint(tree, hf_pushwire_write_pool, tvb, at, 0, n->pool_ref);
    proto_item_set_generated(wi);
    proto_tree *ws = proto_item_add_subtree(wi, ett_pushwire_write);
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_element, tvb, at, 0, n->element));
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_offset, tvb, at, 0, n->offset));
    proto_item_set_generated(proto_tree_add_uint(ws, hf_pushwire_write_pool_frame, tvb, 0, 0, n->pool_frame));
    return wi;
}

/* The books of each pool the frame changed, as generated fields (IO Graphs, display filters),
 * and the same to the "pushwire" tap (the pools statistics). */
static void show_pools(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, const pw_note *note)
{
    if (!note->n_pools) return;
    for (size_t i = 0; i < note->n_pools; i++) {
        const pw_pool_state *p = &note->pools[i];
        const char *state = val_to_str_const(p->state, vals_pushwire_pool_state, "?");
        proto_item *bi = proto_tree_add_uint_format_value(tree, hf_pushwire_pool_books, tvb, 0, 0, p->ref,
                                                          "%u (owner %s, user %s): %u free, credits owed %u, %s", p->ref,
                                                          p->owner, p->user, p->free, p->credits, state);
        proto_item_set_generated(bi);
        proto_tree *bt = proto_item_add_subtree(bi, ett_pushwire_pool);
        proto_item_set_generated(proto_tree_add_uint(bt, hf_pushwire_pool_free, tvb, 0, 0, p->free));
        proto_item_set_generated(proto_tree_add_uint(bt, hf_pushwire_pool_credits, tvb, 0, 0, p->credits));
        proto_item_set_generated(proto_tree_add_uint(bt, hf_pushwire_pool_state, tvb, 0, 0, p->state));
        proto_item_set_generated(proto_tree_add_uint(bt, hf_pushwire_pool_lowest_free, tvb, 0, 0, p->lowest_free));
    }
    tap_queue_packet(pushwire_tap, pinfo, note);
}

static int dissect_pushwire_post(tvbuff_t *tvb, packet_info *pinfo, proto_tree *tree, void *data _U_)
{
    if (pinfo->rec->rec_type != REC_TYPE_PACKET || pinfo->rec->rec_header.packet_header.pkt_encap != WTAP_ENCAP_ETHERNET)
        return 0;
    show_violations(tvb, pinfo, tree);
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
    static const pw_note none;
    const pw_note *note = frame_note(pinfo);
    if (!note) note = &none;

    const int bth = (int)r.bth_offset;
    proto_item *ti = proto_tree_add_item(tree, proto_pushwire, tvb, bth, -1, ENC_NA);
    if (tree && PTREE_DATA(tree)->visible) proto_item_append_text(ti, " RoCEv2, %s", pw_opcode_name(r.opcode, r.se));
    proto_tree *sub = proto_item_add_subtree(ti, ett_pushwire);
    proto_tree_add_item(sub, hf_pushwire_opcode, tvb, bth, 1, ENC_NA);
    /* congestion (spec/qos.md): the IP header's DSCP and ECN, a CE mark, a CNP */
    proto_item_set_generated(proto_tree_add_uint(sub, hf_pushwire_dscp, tvb, (int)r.tos_offset, 1, r.dscp));
    proto_item *ecn = proto_tree_add_uint(sub, hf_pushwire_ecn, tvb, (int)r.tos_offset, 1, r.ecn);
    proto_item_set_generated(ecn);
    if (r.ecn == 3) {
        expert_add_info_format(pinfo, ecn, &ei_pushwire_congestion, "Congestion experienced (CE): the receiver owes the sender a CNP");
        col_append_str(pinfo->cinfo, COL_INFO, " [CE]");
    }
    if (r.cnp) {
        proto_item *ci = proto_tree_add_uint(sub, hf_pushwire_cnp_qp, tvb, bth + 5, 3, r.destqp);
        expert_add_info_format(pinfo, ci, &ei_pushwire_congestion, "Congestion notification (CNP) for QP 0x%06x%s: its sender slows down",
                               r.destqp, r.becn ? " (BECN)" : "");
        col_append_fstr(pinfo->cinfo, COL_INFO, " [CNP qp=0x%06x]", r.destqp);
    }
    if (note->migrated_frame) {  /* path migration (spec/qos.md section 9): MigReq set on a new path */
        proto_item *mi = proto_tree_add_uint(sub, hf_pushwire_apm_from_frame, tvb, bth + 1, 1, note->migrated_frame);
        proto_item_set_generated(mi);
        proto_item_set_generated(proto_tree_add_string(sub, hf_pushwire_apm_from, tvb, 0, 0, note->migrated_from));
        expert_add_info_format(pinfo, mi, &ei_pushwire_apm, "Path migration: QP 0x%06x's requests moved here from %s (its latest request there: frame %u)",
                               r.destqp, note->migrated_from, note->migrated_frame);
        col_append_fstr(pinfo->cinfo, COL_INFO, " [migrated from %s]", note->migrated_from);
    }

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
    if (r.sinketh_offset) {  /* pushwire's READ_AS_WRITE: the source, then the sink */
        pw_walk(tvb, sub, (int)r.reth_offset, (int)r.reth_offset + 16, &pw_layout_raw_reth);
        pw_walk(tvb, sub, (int)r.sinketh_offset, (int)r.sinketh_offset + 12, &pw_layout_sinketh);
        const guint32 dmalen = tvb_get_ntohl(tvb, (int)r.reth_offset + 12);
        expert_add_info_format(pinfo, ti, &ei_pushwire_read_as_write,
                               "Read served as a write: %u bytes at 0x%" PRIx64 " (R_Key 0x%08x) into 0x%" PRIx64 " (R_Key 0x%08x)",
                               dmalen, tvb_get_ntoh64(tvb, (int)r.reth_offset), tvb_get_ntohl(tvb, (int)r.reth_offset + 8),
                               tvb_get_ntoh64(tvb, (int)r.sinketh_offset), tvb_get_ntohl(tvb, (int)r.sinketh_offset + 8));
        col_append_fstr(pinfo->cinfo, COL_INFO, " [read as write %u bytes]", dmalen);
    }
    const gint mode = effective_idata_mode();
    if (r.write && r.immdt_offset && (mode == IDATA_ALWAYS || (mode == IDATA_AUTO && note->idata))) {
        show_idata(tvb, sub, (int)r.immdt_offset, r.imm);
        guint32 pool, element, nbytes;
        pw_idata(r.imm, &pool, &element, &nbytes);
        col_append_fstr(pinfo->cinfo, COL_INFO, " [idata pool=%u element=%u bytes=%u]", pool, element, nbytes);
    }
    if (note->has_write) {
        proto_item *wi = show_write(tvb, sub, r.reth_offset ? (int)r.reth_offset : (int)r.payload_offset, note);
        if (note->outside)
            expert_add_info_format(pinfo, wi, &ei_pushwire_write_outside,
                                   "RDMA write of %u bytes at offset %u runs past its %u-byte element", r.reth_len,
                                   note->offset, note->element_size);
    }
    if (note->idata_mismatch && mode != IDATA_NEVER) {
        guint32 pool, element, nbytes;
        pw_idata(r.imm, &pool, &element, &nbytes);
        if (note->has_write)
            expert_add_info_format(pinfo, ti, &ei_pushwire_idata_mismatch,
                                   "idata names pool %u element %u, but the RETH address is in pool %u element %u", pool,
                                   element, note->pool_ref, note->start_element);
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
    show_pools(tvb, pinfo, sub, note);
    /* As stock Wireshark's "Invariant CRC" shows the same 4 bytes: read big-endian. */
    proto_tree_add_checksum(sub, tvb, (int)r.icrc_offset, hf_pushwire_icrc, hf_pushwire_icrc_status, &ei_pushwire_icrc_bad,
                            pinfo, GUINT32_SWAP_LE_BE(r.icrc_computed), ENC_BIG_ENDIAN, PROTO_CHECKSUM_VERIFY);
    if (r.icrc_state == PW_CRC_BAD) col_append_str(pinfo->cinfo, COL_INFO, " [bad ICRC]");
    return (int)len;
}

/* ------------------------------------------------------------------ cells */

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
    static const pw_note none;
    const pw_note *note = frame_note(pinfo);
    if (!note) note = &none;
    /* The packet CRC status as Wireshark shows checksums. */
    const guint32 packet_crc_status = note->packet_crc == PW_PACKET_CRC_GOOD  ? PROTO_CHECKSUM_E_GOOD
                                      : note->packet_crc == PW_PACKET_CRC_BAD ? PROTO_CHECKSUM_E_BAD
                                                                              : PROTO_CHECKSUM_E_UNVERIFIED;
    const int base = (int)c.header; /* frame offset of tvb's first byte */
#define AT(x) ((int)(x) - base)
    proto_item_append_text(ti, ", %s, PSN %u, cell %u of %u", c.type_name, c.psn, c.csn + 1u, c.cell_count);
    col_add_fstr(pinfo->cinfo, COL_INFO, "Cell %s psn=%u cell=%u/%u len=%u", c.type_name, c.psn, c.csn + 1u, c.cell_count,
                 c.length);
    pw_walk(tvb, sub, 0, (int)pw_layout_cell_header.fixed_size, &pw_layout_cell_header);
    if (c.vamh) pw_walk(tvb, sub, AT(c.vamh), AT(c.vamh) + 12, &pw_layout_cell_vamh);
    if (note->has_write) show_write(tvb, sub, AT(c.vamh), note);
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
                                             packet_crc_status);
        proto_item_set_generated(si);
        if (packet_crc_status == PROTO_CHECKSUM_E_BAD) {
            expert_add_info(pinfo, pi, &ei_pushwire_cell_packet_crc_bad);
            col_append_str(pinfo->cinfo, COL_INFO, " [bad packet CRC]");
        }
    }
    if (note->reassembly_code)
        proto_item_set_generated(proto_tree_add_string(sub, hf_pushwire_cell_reassembly, tvb, 0, 0, note->reassembly_name));
    show_pools(tvb, pinfo, sub, note);
    proto_tree_add_checksum(sub, tvb, AT(c.cell_crc_at), hf_pushwire_cell_crc, hf_pushwire_cell_crc_status,
                            &ei_pushwire_cell_crc_bad, pinfo, c.crc_computed, ENC_BIG_ENDIAN, PROTO_CHECKSUM_VERIFY);
    if (c.crc_state == PW_CRC_BAD) col_append_str(pinfo->cinfo, COL_INFO, " [bad cell CRC]");

    /* A Send's data: a push-push message when it is one (one cell, or the reassembled packet). */
    if (pw_cell_is_send(c.type) && c.last && packet_crc_status == PROTO_CHECKSUM_E_GOOD) {
        tvbuff_t *msg = NULL;
        if (c.cell_count == 1 && c.length) {
            msg = tvb_new_subset_length(tvb, AT(c.data), c.length);
        } else if (note->send_data) {
            msg = tvb_new_child_real_data(tvb, note->send_data, (guint)note->send_data_len, (gint)note->send_data_len);
            add_new_data_source(pinfo, msg, "Reassembled cells");
            proto_tree_add_item(sub, hf_pushwire_cell_reassembled, msg, 0, -1, ENC_NA);
        }
        if (msg) {
            const guint n = tvb_captured_length(msg);
            if (pw_msg_check(tvb_get_ptr(msg, 0, n), n, NULL) == 0) show_message(msg, pinfo, tree);
        }
    }
#undef AT
    return (int)tvb_captured_length(tvb);
}

/* ------------------------------------------------------------------ statistics: pools */

/* Statistics > pushwire pools, and tshark -z pushwire,pools[,FILTER]: per owner, user and pool,
 * the counts flow::pp_tracker keeps (spec/wireshark.md section 5). Each frame that changes a
 * pool carries its counts so far; a row shows the latest (a filter keeps the rows of the frames
 * it passes). */
enum { POOL_COL_OWNER, POOL_COL_USER, POOL_COL_POOL, POOL_COL_ELEMENTS, POOL_COL_SIZE, POOL_COL_WRITES, POOL_COL_BYTES,
       POOL_COL_RETURNS, POOL_COL_FLUSHES, POOL_COL_LOWEST_FREE, POOL_COL_STATE, POOL_COLS };
static stat_tap_table_item pool_columns[POOL_COLS] = {
    {TABLE_ITEM_STRING, TAP_ALIGN_LEFT, "Owner", "%-16s"},
    {TABLE_ITEM_STRING, TAP_ALIGN_LEFT, "User", "%-16s"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Pool", "%4u"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Elements", "%8u"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Element size", "%12u"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Writes", "%8u"},
    {TABLE_ITEM_STRING, TAP_ALIGN_RIGHT, "Bytes", "%12s"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Returns", "%8u"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Flushes", "%7u"},
    {TABLE_ITEM_UINT, TAP_ALIGN_RIGHT, "Lowest free", "%11u"},
    {TABLE_ITEM_STRING, TAP_ALIGN_LEFT, "State", "%-8s"},
};

static void pools_stat_init(stat_tap_table_ui *ui)
{
    stat_tap_table *table = stat_tap_find_table(ui, "Pools");
    if (table) {
        if (ui->stat_tap_reset_table_cb) ui->stat_tap_reset_table_cb(table);
        return;
    }
    table = stat_tap_init_table("Pools", POOL_COLS, 0, NULL);
    stat_tap_add_table(ui, table);
}

static guint32 clamp32(guint64 v) { return v > G_MAXUINT32 ? G_MAXUINT32 : (guint32)v; }

static tap_packet_status pools_stat_packet(void *tapdata, packet_info *pinfo _U_, epan_dissect_t *edt _U_, const void *data,
                                           tap_flags_t flags _U_)
{
    stat_data_t *stat_data = (stat_data_t *)tapdata;
    const pw_note *note = (const pw_note *)data;
    stat_tap_table *table = g_array_index(stat_data->stat_tap_data->tables, stat_tap_table *, 0);
    for (size_t i = 0; i < note->n_pools; i++) {
        const pw_pool_state *p = &note->pools[i];
        guint row = 0;
        for (; row < table->num_elements; row++) {
            const stat_tap_table_item_type *o = stat_tap_get_field_data(table, row, POOL_COL_OWNER);
            const stat_tap_table_item_type *u = stat_tap_get_field_data(table, row, POOL_COL_USER);
            const stat_tap_table_item_type *r = stat_tap_get_field_data(table, row, POOL_COL_POOL);
            if (r->value.uint_value == p->ref && !strcmp(o->value.string_value, p->owner) && !strcmp(u->value.string_value, p->user))
                break;
        }
        if (row == table->num_elements) {
            stat_tap_table_item_type items[POOL_COLS];
            memset(items, 0, sizeof items);
            for (int c = 0; c < POOL_COLS; c++) items[c].type = pool_columns[c].type;
            items[POOL_COL_OWNER].value.string_value = g_strdup(p->owner);
            items[POOL_COL_USER].value.string_value = g_strdup(p->user);
            items[POOL_COL_POOL].value.uint_value = p->ref;
            items[POOL_COL_BYTES].value.string_value = g_strdup("0");
            items[POOL_COL_STATE].value.string_value = g_strdup("");
            stat_tap_init_table_row(table, row, POOL_COLS, items);
        }
        const guint32 u[][2] = {{POOL_COL_ELEMENTS, p->elements}, {POOL_COL_SIZE, p->element_size},
                                {POOL_COL_WRITES, clamp32(p->writes)}, {POOL_COL_RETURNS, clamp32(p->returns)},
                                {POOL_COL_FLUSHES, clamp32(p->flushes)}, {POOL_COL_LOWEST_FREE, p->lowest_free}};
        for (size_t k = 0; k < G_N_ELEMENTS(u); k++) {
            stat_tap_table_item_type *f = stat_tap_get_field_data(table, row, u[k][0]);
            f->value.uint_value = u[k][1];
            stat_tap_set_field_data(table, row, u[k][0], f);
        }
        stat_tap_table_item_type *b = stat_tap_get_field_data(table, row, POOL_COL_BYTES);
        g_free((char *)b->value.string_value);
        b->value.string_value = g_strdup_printf("%" G_GUINT64_FORMAT, p->bytes);
        stat_tap_set_field_data(table, row, POOL_COL_BYTES, b);
        stat_tap_table_item_type *st = stat_tap_get_field_data(table, row, POOL_COL_STATE);
        g_free((char *)st->value.string_value);
        st->value.string_value = g_strdup(val_to_str_const(p->state, vals_pushwire_pool_state, "?"));
        stat_tap_set_field_data(table, row, POOL_COL_STATE, st);
    }
    return TAP_PACKET_REDRAW;
}

static void pools_stat_reset(stat_tap_table *table)
{
    /* A new capture: no rows (their strings are freed by pools_stat_free_item). */
    for (guint row = 0; row < table->num_elements; row++)
        for (guint c = 0; c < table->num_fields; c++) {
            stat_tap_table_item_type *f = stat_tap_get_field_data(table, row, c);
            if (f->type == TABLE_ITEM_STRING) {
                g_free((char *)f->value.string_value);
                f->value.string_value = NULL;
            }
        }
    for (guint row = 0; row < table->num_elements; row++) g_free(table->elements[row]);
    table->num_elements = 0;
}

static void pools_stat_free_item(stat_tap_table *table _U_, guint row _U_, guint column _U_, stat_tap_table_item_type *f)
{
    if (f->type == TABLE_ITEM_STRING) g_free((char *)f->value.string_value);
}

static void register_pools_stat(void)
{
    static stat_tap_table_ui ui = {
        REGISTER_STAT_GROUP_GENERIC, "pushwire pools", "pushwire", "pushwire,pools", pools_stat_init, pools_stat_packet,
        pools_stat_reset, pools_stat_free_item, NULL, G_N_ELEMENTS(pool_columns), pool_columns, 0, NULL, NULL, 0,
    };
    register_stat_tap_table_ui(&ui);
}

/* ------------------------------------------------------------------ registration */

/* A new capture starts with an empty history. */
static void observer_reset(void)
{
    if (observer) pw_observer_reset(observer);
    if (conform) pw_conform_configure(conform, 0, conform_complete);
    conform_finished = FALSE;
}

static void observer_free(void)
{
    pw_observer_free(observer);
    observer = NULL;
    pw_conform_free(conform);
    conform = NULL;
}

static void proto_register_pushwire(void)
{
    static hf_register_info hf[] = {PW_HF_REGISTER};
    static ei_register_info ei[] = {PW_EI_REGISTER};
    static gint *ett[] = {&ett_pushwire, &ett_pushwire_write, &ett_pushwire_pool, PW_ETT_REGISTER};

    proto_pushwire = proto_register_protocol("pushwire", "pushwire", "pushwire");
    proto_register_field_array(proto_pushwire, hf, array_length(hf));
    proto_register_subtree_array(ett, array_length(ett));
    expert_register_field_array(expert_register_protocol(proto_pushwire), ei, array_length(ei));

    observer = pw_observer_new();
    conform = pw_conform_new(0);
    conform_late = wmem_map_new_autoreset(wmem_epan_scope(), wmem_file_scope(), g_direct_hash, g_direct_equal);
    module_t *prefs = prefs_register_protocol(proto_pushwire, NULL);
    prefs_register_enum_preference(prefs, "idata_mode", "Read immediate data as idata",
                                   "auto: an RDMA WRITE with immediate carries push-push idata only between two hosts "
                                   "that exchanged a push-push message, naming a pool its target advertised "
                                   "(spec/wireshark.md section 3); always; never. Decode As Infiniband payload: "
                                   "pushwire also means always.",
                                   &idata_mode, idata_modes, FALSE);
    prefs_register_bool_preference(prefs, "conform", "Check conformance",
                                   "Judge every frame against spec/conformance.md's rules, as pushwire-conform does "
                                   "(expert infos pushwire.conform.*)",
                                   &conform_enabled);
    prefs_register_bool_preference(prefs, "conform_complete", "Conformance: the capture is complete",
                                   "The capture was taken at an endpoint, nothing lost or reordered before it "
                                   "(pushwire-conform --complete): a skipped PSN, a response before its request, a lost "
                                   "READ response are violations. Off: they are taken for the capture's own losses and "
                                   "reorderings (spec/conformance.md section 1)",
                                   &conform_complete);
    register_init_routine(observer_reset);
    register_cleanup_routine(observer_reset);
    register_shutdown_routine(observer_free);

    cell_handle = create_dissector_handle(dissect_cell, proto_pushwire);
    post_handle = create_dissector_handle(dissect_pushwire_post, proto_pushwire);
    payload_handle = create_dissector_handle(dissect_pushwire_payload, proto_pushwire);
    pushwire_tap = register_tap("pushwire");
    register_pools_stat();
}

static void proto_reg_handoff_pushwire(void)
{
    heur_dissector_add("infiniband.payload", dissect_pushwire_heur, "pushwire push-push messages in RoCE SENDs",
                       "pushwire_roce", proto_pushwire, HEURISTIC_ENABLE);
    dissector_add_uint("ethertype", PW_CELL_ETHERTYPE, cell_handle);
    ib_payload_table = find_dissector_table("infiniband");
    if (ib_payload_table) dissector_add_for_decode_as("infiniband", payload_handle);
    register_postdissector(post_handle);
}

void plugin_register(void)
{
    static proto_plugin plug;
    plug.register_protoinfo = proto_register_pushwire;
    plug.register_handoff = proto_reg_handoff_pushwire;
    proto_register_plugin(&plug);
}
