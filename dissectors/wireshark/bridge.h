/* What the C dissector asks of the pushwire library: the C++ codecs, checks and CRCs behind a C
 * interface (bridge.cpp), so the plugin validates exactly as the library does. Offsets are from
 * the start of the buffer passed in. Nothing here allocates or keeps a pointer, except the
 * observer (pw_observer_new) and the conformance checker (pw_conform_new), which the caller owns.
 * No C++ exception leaves these functions: where the library runs out of memory they say so in
 * their result (NULL, -1, an empty note, no violations). */
#ifndef PUSHWIRE_BRIDGE_H
#define PUSHWIRE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A decode error: the library's errc (spec/push-push.md §4), its name, byte and field. */
typedef struct pw_err {
    int code;              /* 0: none */
    const char *name;      /* "truncated", ... ("" when code is 0) */
    size_t offset;
    char field[40];
} pw_err;

/* Push-push: 0 when p[0..n) is exactly one valid message (msg::dispatch), else the errc. */
int pw_msg_check(const uint8_t *p, size_t n, pw_err *err);
/* One line for the Info column, e.g. "BufferRecvPool txn=0x2a pools=2"; returns its length. */
size_t pw_msg_summary(const uint8_t *p, size_t n, char *out, size_t cap);
/* A pool a valid BufferRecvPool advertises. */
typedef struct pw_pool_desc {
    uint32_t ref, elements, element_size, rkey;
    uint64_t address;
} pw_pool_desc;
/* The pools of a valid BufferRecvPool (the first `max` are written); 0 for anything else. */
size_t pw_msg_pools(const uint8_t *p, size_t n, pw_pool_desc *out, size_t max);
/* A valid CfgUtilRequest (reply 0) or CfgUtilReply (reply 1): its request code and where its data
 * sits. Returns 0 for anything else. */
int pw_msg_cfg_data(const uint8_t *p, size_t n, uint16_t *code, int *reply, size_t *offset, size_t *size);
/* A SEND opcode's position in its message (PW_POS_*: SEND_ONLY, with immediate or invalidate, is
 * PW_POS_ONLY), on any transport; -1 for any other opcode. */
int pw_opcode_send_position(uint8_t opcode);
/* The largest push-push message (wire::codec_options::max_frame). */
size_t pw_msg_max_frame(void);
/* The function's name ("" when unknown). */
const char *pw_function_name(uint16_t function);

/* idata (msg/idata.hpp): pool, element, bytes placed (1..65536). */
void pw_idata(uint32_t imm, uint32_t *pool, uint32_t *element, uint32_t *bytes);

/* A RoCEv2 Ethernet frame as ib::inspect() sees it. Header offsets are 0 when absent. */
enum { PW_CRC_UNCHECKED = 0, PW_CRC_GOOD = 1, PW_CRC_BAD = 2 };
enum { PW_POS_ONLY = 0, PW_POS_FIRST, PW_POS_MIDDLE, PW_POS_LAST };
typedef struct pw_roce {
    pw_err err;
    int icrc_state;
    uint32_t icrc, icrc_computed;
    size_t icrc_offset, bth_offset, dceth_offset, dcceth_offset, reth_offset, immdt_offset, aeth_offset, sinketh_offset;
    size_t payload_offset, payload_len;
    uint8_t opcode, position;
    int se, dc, dc_connect, dc_disconnect, write, send, request, v6;
    uint32_t destqp, psn, imm, reth_rkey, reth_len, msn;
    uint64_t reth_va;
    uint8_t syndrome;
    int rnr_nak;
    uint32_t rnr_delay_us;
    uint8_t src_ip[16], dst_ip[16];
    /* Congestion (spec/qos.md): the IP header's DSCP and ECN (ip_offset: where its TOS or traffic
     * class byte is), a CNP, and the BTH's FECN and BECN. */
    size_t tos_offset;
    uint8_t dscp, ecn;
    int cnp, fecn, becn;
} pw_roce;
/* 0 when frame[0..n) is a valid RoCEv2 frame (the ICRC is checked, not required). */
int pw_roce_inspect(const uint8_t *frame, size_t n, pw_roce *out);
/* The opcode's name as pushwire reads it ("RC_SEND_ONLY"; 0x55 with SE set: "DC_DISCONNECT"). */
const char *pw_opcode_name(uint8_t opcode, int se);

/* A cell frame (EtherType 0x88B5) as cell::decode_into() sees it; the cell CRC is checked, not
 * required. Part offsets are from the frame's start, 0 when absent. */
typedef struct pw_cell {
    pw_err err;
    size_t header, vamh, ack, idata, data, packet_crc_at, cell_crc_at, end;
    uint8_t type, first, last, ack_req;
    uint32_t dst_wqp, src_wqp, psn, delay_us, idata_value, packet_crc, crc, mh;
    uint64_t va;
    uint16_t csn, cell_count, length;
    int crc_state;
    uint32_t crc_computed;
    const char *type_name;
} pw_cell;
int pw_cell_decode(const uint8_t *frame, size_t n, pw_cell *out);
/* Cell types: a page-fault delay; a Send. */
int pw_cell_is_page_fault(uint8_t type);
int pw_cell_is_send(uint8_t type);

/* The capture's history (flow::observer, flow/observer.hpp): fed every Ethernet frame in capture
 * order on the first pass, it says what earlier frames mean for this one. */
typedef struct pw_observer pw_observer;
enum { PW_PACKET_CRC_NONE = 0, PW_PACKET_CRC_GOOD, PW_PACKET_CRC_BAD, PW_PACKET_CRC_UNVERIFIED };
/* A pool's books as its owner keeps them after a frame, and its counts over the capture so far
 * (flow::pool_view, spec/wireshark.md section 4). */
typedef struct pw_pool_state {
    char owner[48], user[48];    /* the pool's owner (advertiser) and user: IP address or MAC, as text */
    uint32_t ref, elements, element_size;
    uint32_t state;              /* flow::pool_state: 1 active, 2 draining, 3 flushing, 4 flushed */
    uint32_t free;               /* lent, not yet indicated: elements the user may write now */
    uint32_t credits;            /* indicated, not yet returned: credits the owner owes */
    uint32_t lowest_free;        /* least free seen so far */
    uint32_t advertised_frame;
    uint64_t writes, bytes, returns, flushes;
} pw_pool_state;
typedef struct pw_note {
    int idata;                   /* an RDMA WRITE with immediate whose immediate is push-push idata (claimed) */
    const pw_pool_state *pools;  /* the pools this frame changed (n_pools of them) */
    size_t n_pools;
    int has_write;               /* an RDMA write packet (a write's first cell) in an advertised pool: */
    uint32_t pool_ref, pool_frame, element_size;
    uint32_t element, offset;    /* this packet's first byte: element, bytes from its start */
    uint32_t start_element;      /* the element of the write's first byte */
    int outside;                 /* the RETH's DMA length runs past that element */
    int idata_mismatch;          /* idata names another pool or element (spec/wireshark.md section 3) */
    uint32_t write_frame;        /* page-fault ACK or delay: frame of the write it answers, 0 none */
    uint32_t migrated_frame;     /* a request whose QP migrated here (path migration): the old path's latest request's frame, 0 none */
    char migrated_from[96];      /* the old path: "198.18.0.1 > 198.18.0.2" */
    const uint8_t *message;      /* SEND_LAST: the push-push message joined from SEND_FIRST.. */
    size_t message_len;
    uint32_t message_first_frame;
    int packet_crc;              /* a last cell: PW_PACKET_CRC_* (spec/cells.md section 8) */
    int reassembly_code;         /* the reassembler's rejection of this cell (wire::errc), 0 none */
    const char *reassembly_name; /* its name ("" when 0) */
    const uint8_t *send_data;    /* a cell Send this cell completed: its data */
    size_t send_data_len;
    int limit;                   /* 1: a bound of observer_limits was hit (limit_field names it) */
    char limit_field[24];
} pw_note;
/* NULL when out of memory. Pointers in a note stay valid until the next feed or reset. */
pw_observer *pw_observer_new(void);
void pw_observer_reset(pw_observer *o);
void pw_observer_free(pw_observer *o);
void pw_observer_feed(pw_observer *o, uint32_t frame, uint64_t time_ns, const uint8_t *p, size_t n, pw_note *out);

/* The conformance checker (flow::conformance, spec/conformance.md): fed every Ethernet frame in
 * capture order on the first pass (wire_len: the frame's length on the wire, more than n when the
 * snap length cut it), it says which rules each frame breaks; pw_conform_finish(), once every
 * frame was fed, adds what only the rest of the capture could show (about earlier frames). */
typedef struct pw_conform pw_conform;
typedef struct pw_violation {
    uint32_t frame;
    int rule;           /* index in flow::rule_table (PW_CONFORM_RULES of them) */
    const char *name;   /* "req.mtu" */
    char text[480];     /* "RC 198.18.0.1 QP ? > 198.18.0.2 QP 0x000012: expected ...; seen ..." */
} pw_violation;
/* NULL when out of memory. mtu: the path MTU, 0 to infer it from the traffic as it comes. */
pw_conform *pw_conform_new(uint32_t mtu);
/* Forgets everything and judges from now on with path MTU `mtu` (0: inferred) and, when
 * `complete` is nonzero, the capture taken as complete (spec/conformance.md §1, --complete).
 * 0; -1 when out of memory (then the checker says nothing until it is configured again). */
int pw_conform_configure(pw_conform *c, uint32_t mtu, int complete);
/* Forgets everything (a new capture), keeping the configuration. */
void pw_conform_reset(pw_conform *c);
void pw_conform_free(pw_conform *c);
/* The violations frame `frame` shows (at most max written); returns how many it shows. Out of
 * memory while judging: 0, and 0 from every call until the next reset or configure. */
size_t pw_conform_feed(pw_conform *c, uint32_t frame, uint64_t time_ns, const uint8_t *p, size_t n, size_t wire_len,
                       pw_violation *out, size_t max);
/* The capture's end: the violations left (each names its frame); returns how many. */
size_t pw_conform_finish(pw_conform *c, pw_violation *out, size_t max);

#ifdef __cplusplus
}
#endif
#endif
