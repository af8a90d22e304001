// The Wireshark view of pushwire: every pushwire.* field the plugin registers, its expert infos,
// and the layout tables its generic walker follows, all derived from the C++ descriptions
// (wire::fields<T>). pushwire-wsgen turns this into the plugin's C tables at build time, and
// pushwire-spec into spec/wireshark.md, so neither the plugin nor the spec can disagree with the
// library. Naming rules: spec/wireshark.md §3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pushwire/cell/format.hpp>
#include <pushwire/ib/headers.hpp>
#include <pushwire/flow/conform.hpp>
#include <pushwire/ib/opcode.hpp>
#include <pushwire/ib/print.hpp>
#include <pushwire/msg/idata.hpp>
#include <pushwire/msg/msg.hpp>
#include <pushwire/wire/table.hpp>

namespace pushwire::ws {

using wire::field_info;
using wire::field_kind;

/// Wireshark field types and bases used here (names as in epan/ftypes.h and proto.h).
enum class ft { none, boolean, u8, u16, u24, u32, u64, bytes, ether, framenum, string };
enum class base { none, dec, hex };

constexpr std::string_view c_name(ft t) {
  constexpr std::string_view n[] = {"FT_NONE",   "FT_BOOLEAN", "FT_UINT8",    "FT_UINT16",
                                    "FT_UINT24", "FT_UINT32",  "FT_UINT64",   "FT_BYTES",
                                    "FT_ETHER",  "FT_FRAMENUM", "FT_STRING"};
  return n[static_cast<int>(t)];
}
constexpr std::string_view type_text(ft t) {
  constexpr std::string_view n[] = {"none", "boolean", "u8", "u16", "u24", "u32", "u64", "bytes", "ether",
                                    "frame number", "string"};
  return n[static_cast<int>(t)];
}

/// One registered field (an hf_register_info entry).
struct field {
  std::string abbrev{};  ///< filter name, "pushwire.pool.ref"
  std::string name{};    ///< display name
  ft type = ft::none;
  base display = base::none;
  std::uint64_t mask = 0;     ///< bit fields: the bits within their container
  unsigned bool_bits = 0;     ///< FT_BOOLEAN: width of the container (BASE of a boolean)
  std::string vals{};         ///< C name of a value_string, or "" (or "checksum" for status)
  std::string blurb{};        ///< what it is and where it comes from
  std::string id{};  ///< C identifier of its hf index (model::add sets it)
  std::string ident() const { return id; }
  bool same_shape(const field& o) const {
    return type == o.type && display == o.display && mask == o.mask && vals == o.vals && bool_bits == o.bool_bits;
  }
};

/// A value_string generated from an enumeration's names.
struct value_strings {
  std::string ident;
  std::vector<std::pair<std::uint64_t, std::string>> values;
};

/// How the walker treats one row of a layout.
enum class row_kind { scalar, count, array, bytes };

struct row {
  std::size_t field = 0;  ///< index into model::fields
  row_kind kind = row_kind::scalar;
  std::size_t offset = 0, size = 0;  ///< fixed part: byte offset and container size; arrays: element size
  int element = -1;                  ///< arrays of structs: index into model::layouts
  bool counted = false;              ///< array/bytes: sized by the preceding count row (else: to the end)
};

/// A struct's walk: its rows in wire order and its fixed size.
struct layout {
  std::string ident;          ///< C identifier suffix
  std::string title;          ///< subtree text for one element
  std::size_t item_field = 0; ///< FT_NONE field of one element's subtree
  std::size_t fixed_size = 0;
  std::vector<row> rows;
};

/// An expert info the plugin raises.
struct expert {
  std::string abbrev, group, severity, summary;
  std::string ident() const {
    std::string s = "ei_" + abbrev;
    for (char& c : s)
      if (c == '.') c = '_';
    return s;
  }
};

/// A field renamed from its snake_case member name, or given another base or type.
struct alias {
  std::string_view member, name;
  base display = base::none;  ///< none: the default rule
  ft type = ft::none;         ///< none: from the bits
};

/// A display name from a snake_case name: "element_size" -> "Element size", "dst_wqp" -> "Dst WQP".
inline std::string words(std::string_view snake) {
  static constexpr std::string_view upper[] = {"psn", "csn", "wqp", "dct", "dci", "va", "mh", "txn", "crc",
                                               "icrc", "mac", "mtu", "qp", "id"};
  std::string out;
  std::size_t i = 0;
  while (i <= snake.size()) {
    const std::size_t j = std::min(snake.find_first_of("_.", i), snake.size());
    std::string w{snake.substr(i, j - i)};
    bool up = false;
    for (std::string_view u : upper) up = up || w == u;
    if (w == "us") w = "(us)";
    for (char& c : w)
      if (up && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (out.empty() && !w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
    out += (out.empty() ? "" : " ") + w;
    i = j + 1;
  }
  return out;
}

class model {
 public:
  std::vector<field> fields;
  std::vector<value_strings> vals;
  std::vector<layout> layouts;
  std::vector<expert> experts;
  /// Message layouts by function code, and CfgUtil typed data by (request code, reply).
  std::vector<std::pair<std::uint16_t, std::size_t>> messages;
  struct cfg_entry {
    std::uint16_t code;
    bool reply;
    std::size_t layout;
  };
  std::vector<cfg_entry> cfg;

  /// Adds (or reuses, when an equal one exists) a field; a clash of shapes is an error.
  std::size_t add(field f) {
    if (auto it = by_abbrev_.find(f.abbrev); it != by_abbrev_.end()) {
      if (!fields[it->second].same_shape(f)) throw std::logic_error("field " + f.abbrev + " registered with two shapes");
      return it->second;
    }
    // hf_ + the abbrev with '.' as '_'; "pushwire.pool_ref" and "pushwire.pool.ref" would meet,
    // so a later one takes its index as a suffix.
    f.id = "hf_" + f.abbrev;
    for (char& c : f.id)
      if (c == '.') c = '_';
    for (const field& g : fields)
      if (g.id == f.id) f.id += "_" + std::to_string(fields.size());
    fields.push_back(std::move(f));
    by_abbrev_[fields.back().abbrev] = fields.size() - 1;
    return fields.size() - 1;
  }
  std::size_t index(std::string_view abbrev) const {
    auto it = by_abbrev_.find(std::string{abbrev});
    if (it == by_abbrev_.end()) throw std::logic_error("no field " + std::string{abbrev});
    return it->second;
  }

  std::string add_vals(std::string_view prefix, std::span<const wire::named_value> names) {
    std::string id = "vals_";
    for (char c : prefix) id += c == '.' ? '_' : c;
    for (const auto& v : vals)
      if (v.ident == id) return id;
    value_strings vs{id, {}};
    for (const auto& n : names) vs.values.emplace_back(n.value, std::string{n.name});
    vals.push_back(std::move(vs));
    return id;
  }

  /// The layout of described struct T, its fields named prefix.<member> (or an alias).
  template <wire::described T>
  std::size_t add_struct(std::string_view ident, std::string_view item, std::string_view prefix,
                         std::string_view title, std::span<const alias> aliases = {}) {
    return add_rows(ident, item, prefix, title, wire::fields<T>, wire::fixed_size<T>, aliases);
  }

  /// A layout: `item` names the FT_NONE field of one instance's subtree, `prefix` its fields.
  std::size_t add_rows(std::string_view ident, std::string_view item, std::string_view prefix, std::string_view title,
                       std::span<const field_info> table, std::size_t fixed, std::span<const alias> aliases) {
    for (const auto& l : layouts)
      if (l.ident == ident) return static_cast<std::size_t>(&l - layouts.data());
    layout L;
    L.ident = std::string{ident};
    L.title = std::string{title};
    L.fixed_size = fixed;
    L.item_field = add({.abbrev = std::string{item}, .name = std::string{title}, .type = ft::none,
                        .blurb = std::string{title} + " (subtree)"});
    std::vector<bool> used(aliases.size());
    for (const field_info& f : table) {
      const alias* a = nullptr;
      for (std::size_t i = 0; i < aliases.size(); ++i)
        if (aliases[i].member == f.name) a = &aliases[i], used[i] = true;
      const std::string name{a ? a->name : f.name};
      row r;
      r.offset = f.offset;
      r.size = f.size;
      field x;
      x.abbrev = std::string{prefix} + "." + name;
      x.name = words(name);
      switch (f.kind) {
        case field_kind::count:
          r.kind = row_kind::count;
          break;
        case field_kind::bytes:
          r.kind = row_kind::bytes;
          r.counted = !f.link.empty();
          break;
        case field_kind::array:
          r.kind = row_kind::array;
          r.counted = !f.link.empty();
          break;
        default:
          r.kind = row_kind::scalar;
      }
      if (f.kind == field_kind::array && !f.element.empty()) {
        // The element's own layout; the array row itself has no field of its own.
        const std::string eprefix{a ? a->name : f.name};
        r.element = static_cast<int>(element_layout(f, eprefix));
        r.field = layouts[static_cast<std::size_t>(r.element)].item_field;
        L.rows.push_back(r);
        continue;
      }
      if (f.kind == field_kind::bytes || f.kind == field_kind::octets) {
        x.type = f.kind == field_kind::octets && f.size == 6 ? ft::ether : ft::bytes;
        x.display = base::none;
      } else if (f.kind == field_kind::flag || (f.bits == 1 && f.located)) {
        x.type = ft::boolean;
        x.bool_bits = static_cast<unsigned>(8 * f.size);
        x.mask = f.mask();
      } else {
        const unsigned w = f.located ? static_cast<unsigned>(8 * f.size) : f.bits;
        x.type = w <= 8 ? ft::u8 : w <= 16 ? ft::u16 : w <= 24 ? ft::u24 : w <= 32 ? ft::u32 : ft::u64;
        x.mask = f.located ? f.mask() : 0;
        x.display = w > 32 ? base::hex : base::dec;
        if (!f.names.empty()) {
          x.vals = add_vals(x.abbrev, f.names);
          std::uint64_t hi = 0;
          for (const auto& n : f.names) hi = std::max(hi, n.value);
          x.display = hi > 9 ? base::hex : base::dec;
        }
      }
      // Queue pair and DC numbers read as hex, as Wireshark shows infiniband.bth.destqp.
      for (std::string_view q : {"dct", "dci", "dst_wqp", "src_wqp"})
        if (name == q) x.display = base::hex;
      if (a && a->display != base::none) x.display = a->display;
      if (a && a->type != ft::none) x.type = a->type, x.mask = 0;
      x.blurb = blurb(f);
      r.field = add(std::move(x));
      L.rows.push_back(r);
    }
    for (std::size_t i = 0; i < aliases.size(); ++i)
      if (!used[i]) throw std::logic_error("alias for unknown member " + std::string{aliases[i].member});
    layouts.push_back(std::move(L));
    return layouts.size() - 1;
  }

  /// How the elements of an array of structs are named, by the array's (aliased) member name.
  struct element_naming {
    std::string item, prefix, title;
    std::vector<alias> aliases;
  };
  std::map<std::string, element_naming, std::less<>> element_names;

 private:
  std::map<std::string, std::size_t, std::less<>> by_abbrev_;

  std::size_t element_layout(const field_info& f, std::string_view member) {
    auto it = element_names.find(member);
    if (it == element_names.end()) throw std::logic_error("no prefix for the elements of " + std::string{member});
    const element_naming& n = it->second;
    return add_rows(std::string{"elem_"} + std::string{member}, n.item, n.prefix, n.title, f.element, f.size, n.aliases);
  }

  static std::string blurb(const field_info& f) {
    const std::string width = "u" + std::to_string(f.bits);
    switch (f.kind) {
      case field_kind::count:
        return "count of " + std::string{f.link} + ", " + width + (f.value ? ", >= " + std::to_string(f.value) : "");
      case field_kind::bytes: return f.link.empty() ? "bytes to the end" : "bytes, " + std::string{f.link} + " of them";
      case field_kind::array: return "one " + width + " per element";
      case field_kind::reserved: return "reserved " + width + ", must be 0";
      case field_kind::constant: return f.names.empty() ? width + ", = " + std::to_string(f.value) : width + " code";
      case field_kind::flag: return "flag";
      case field_kind::enumeration: return width + " code";
      case field_kind::octets: return std::to_string(f.size) + " octets";
      default: return width;
    }
  }
};

/// Everything the plugin registers.
inline model build() {
  model m;
  using namespace std::string_view_literals;
  // Push-push messages (spec/push-push.md): every field is pushwire.<snake_case name> (the
  // header's transaction_context is pushwire.txn); fields of the same name and shape in several
  // messages are one field, so `pushwire.pool_ref == 7` finds every message about pool 7. Pool
  // descriptors have their own names under pushwire.pool.
  m.element_names["pools"] = {"pushwire.pool", "pushwire.pool", "Pool descriptor",
                              {{"pool_ref", "ref"}, {"element_count", "elements"}, {"memory_handle", "rkey", base::hex},
                               {"address", "address", base::hex}, {"pool_context", "context", base::hex}}};
  m.element_names["update_entries"] = {"pushwire.update_entry", "pushwire", "Update entry", {}};
  m.element_names["indications"] = {"pushwire.indication", "pushwire", "Indication", {}};
  m.add({.abbrev = "pushwire.message", .name = "Push-push message", .type = ft::none,
         .blurb = "a push-push message (spec/push-push.md)"});
  auto add_message = [&]<class M>(std::type_identity<M>, std::vector<alias> as) {
    as.push_back({"transaction_context", "txn", base::hex});
    const std::string title{msg::name(msg::code_of<M>)};
    const std::size_t L = m.add_struct<M>("msg_" + title, "pushwire.message", "pushwire", title, as);
    m.messages.emplace_back(static_cast<std::uint16_t>(msg::code_of<M>), L);
  };
  add_message(std::type_identity<msg::buffer_recv_pool>{}, {});
  // (the Get's count is 31 bits beside its implicit flag: a field of its own)
  add_message(std::type_identity<msg::buffer_recv_pool_get>{}, {{"element_count", "get.elements"}, {"implicit", "get.implicit"}});
  add_message(std::type_identity<msg::buffer_recv_pool_update>{}, {{"entries", "update_entries"}});
  add_message(std::type_identity<msg::buffer_pool_flush_request>{}, {{"pool_refs", "pool_ref"}});
  add_message(std::type_identity<msg::buffer_pool_flush_reply>{}, {});
  add_message(std::type_identity<msg::send_data>{}, {});
  add_message(std::type_identity<msg::buffer_rdma_indicate>{}, {{"entries", "indications"}});
  add_message(std::type_identity<msg::cfg_util_request>{}, {});
  add_message(std::type_identity<msg::cfg_util_reply>{}, {});

  // CfgUtil typed data, by request code, under pushwire.cfg.
  auto add_cfg = [&]<msg::cfg::request_code C>(std::integral_constant<msg::cfg::request_code, C>) {
    auto one = [&]<class D>(std::type_identity<D>, bool reply) {
      if constexpr (wire::member_count<D> > 0) {
        const std::string title = std::string{wire::enum_name(C)} + (reply ? " reply data" : " request data");
        const std::size_t L = m.add_struct<D>("cfg_" + std::string{wire::enum_name(C)} + (reply ? "_reply" : "_request"),
                                              "pushwire.cfg", "pushwire.cfg", title);
        m.cfg.push_back({static_cast<std::uint16_t>(C), reply, L});
      }
    };
    one(std::type_identity<msg::cfg::request_t<C>>{}, false);
    one(std::type_identity<msg::cfg::reply_t<C>>{}, true);
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {  // every standard code
    (add_cfg(std::integral_constant<msg::cfg::request_code,
                                    static_cast<msg::cfg::request_code>(msg::cfg::request_code_names[I].value)>{}),
     ...);
  }(std::make_index_sequence<msg::cfg::request_code_names.size()>{});

  // idata (msg/idata.hpp): pool, element, and bytes placed (1..65536, so 32 bits: the wire's 0
  // is shown as 65536).
  static const alias idata_alias[] = {{"pool_ref", "pool"}, {"element_index", "element"},
                                      {"byte_count", "bytes", base::dec, ft::u32}};
  m.add_struct<msg::idata>("idata", "pushwire.idata", "pushwire.idata", "idata", idata_alias);

  // Cells (cell/format.hpp) and the DC headers (ib/headers.hpp), under their `wireshark` prefix.
  m.add_struct<cell::header>("cell_header", "pushwire.cell", cell::header::wireshark, "Cell");
  m.add_struct<cell::vamh>("cell_vamh", "pushwire.cell", cell::vamh::wireshark, "Cell");
  m.add_struct<cell::ack_info>("cell_ack", "pushwire.cell", cell::ack_info::wireshark, "Cell");
  m.add_struct<ib::dceth>("dceth", "pushwire.dc", ib::dceth::wireshark, "DCETH");
  m.add_struct<ib::dcceth>("dcceth", "pushwire.dc", ib::dcceth::wireshark, "DCCETH");
  // A read served as a write (pushwire's opcode 0xC0, unknown to stock Wireshark): its RETH (the
  // source) and SinkETH (where the data goes).
  m.add_struct<ib::reth>("raw_reth", "pushwire.read_as_write", "pushwire.read_as_write", "RETH");
  m.add_struct<ib::sinketh>("sinketh", "pushwire.sink", ib::sinketh::wireshark, "SinkETH");

  // Fields that no struct describes: computed values, checksums and cross-frame references.
  const std::string cks = "checksum";
  auto extra = [&](std::string abbrev, std::string name, ft t, base b, std::string blurb, std::string vals = {}) {
    m.add({.abbrev = std::move(abbrev), .name = std::move(name), .type = t, .display = b, .vals = std::move(vals),
           .blurb = std::move(blurb)});
  };
  {
    std::vector<wire::named_value> ops;
    for (const auto& o : ib::opcodes)
      if (ib::find_opcode(o.code, ib::rd_class::dc) == &o) ops.emplace_back(o.code, o.name);
    extra("pushwire.opcode", "Opcode", ft::u8, base::hex, "BTH opcode, named as pushwire reads it (0x40-0x5F: DC)",
          m.add_vals("pushwire.opcode", ops));
  }
  extra("pushwire.message.first_frame", "Message starts in", ft::framenum, base::none,
        "a message over several SEND packets: the frame of its SEND_FIRST");
  extra("pushwire.icrc", "ICRC", ft::u32, base::hex,
        "RoCEv2 invariant CRC: its 4 bytes read big-endian, as Wireshark's infiniband.invariant.crc shows them");
  extra("pushwire.icrc.status", "ICRC status", ft::u8, base::none, "1 good, 0 bad (Wireshark checksum status)", cks);
  extra("pushwire.dc.disconnect", "DC disconnect", ft::boolean, base::none, "opcode 0x55 with SE set");
  extra("pushwire.dscp", "DSCP", ft::u8, base::dec, "the IP header's DSCP (spec/qos.md section 1)");
  extra("pushwire.ecn", "ECN", ft::u8, base::dec, "the IP header's ECN field: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE",
        m.add_vals("pushwire.ecn", ib::ecn_names));
  extra("pushwire.cnp.qp", "CNP for QP", ft::u32, base::hex, "a congestion notification packet (BTH opcode 0x81): the QP it slows down");
  extra("pushwire.apm.from_frame", "Migrated from the path of", ft::framenum, base::none,
        "a request whose QP migrated to this path (MigReq set, spec/qos.md section 9): the old path's latest request");
  extra("pushwire.apm.from", "Migrated from", ft::string, base::none, "the old path's source and destination addresses");
  extra("pushwire.write.pool", "Pool", ft::u32, base::dec, "pool the RDMA write lands in (from an earlier BufferRecvPool)");
  extra("pushwire.write.element", "Element", ft::u32, base::dec, "element of that pool the write lands in");
  extra("pushwire.write.offset", "Offset in element", ft::u32, base::dec, "bytes from the element's start");
  extra("pushwire.write.pool_frame", "Pool advertised in", ft::framenum, base::none, "frame of the BufferRecvPool");
  extra("pushwire.page_fault.delay_us", "Page-fault pause (us)", ft::u32, base::dec,
        "microseconds the sender pauses (RNR timer, or a cell's delay_us)");
  extra("pushwire.page_fault.write_frame", "Answers the write in", ft::framenum, base::none,
        "frame of the write the page-fault ACK answers");
  extra("pushwire.cell.idata", "idata", ft::u32, base::hex, "idata of a last cell (pool, element, bytes)");
  extra("pushwire.cell.data", "Data", ft::bytes, base::none, "the cell's data bytes");
  extra("pushwire.cell.packet_crc", "Packet CRC", ft::u32, base::hex, "CRC-32C across the packet's cells");
  extra("pushwire.cell.packet_crc.status", "Packet CRC status", ft::u8, base::none,
        "1 good, 0 bad, 2 unverified (the packet could not be reassembled, spec/cells.md section 8)", cks);
  extra("pushwire.cell.reassembly", "Reassembly", ft::string, base::none,
        "the reassembler's error for a cell it did not take (cell_duplicate, cell_missing, ...)");
  extra("pushwire.cell.crc", "Cell CRC", ft::u32, base::hex, "CRC-32C of the frame before it");
  extra("pushwire.cell.crc.status", "Cell CRC status", ft::u8, base::none, "1 good, 0 bad", cks);
  extra("pushwire.cell.packet_frame", "Packet completed in", ft::framenum, base::none,
        "frame of the packet's last cell");
  extra("pushwire.cell.reassembled", "Reassembled data", ft::bytes, base::none, "the packet's data, all cells");
  // A pool's books after the frame (flow::pp_tracker through flow::observer, spec/wireshark.md section 4).
  extra("pushwire.pool.books", "Books of pool", ft::u32, base::dec,
        "a pool this frame changed (its reference), as its owner's books stand after the frame");
  extra("pushwire.pool.free", "Free elements", ft::u32, base::dec,
        "elements lent to the user and not yet indicated: what the user may write now");
  extra("pushwire.pool.credits", "Credits owed", ft::u32, base::dec,
        "elements indicated and not yet returned by a BufferRecvPoolUpdate");
  extra("pushwire.pool.state", "Flush state", ft::u8, base::dec, "the pool's state on its owner's books",
        m.add_vals("pushwire.pool.state", flow::pool_state_names));
  extra("pushwire.pool.lowest_free", "Lowest free", ft::u32, base::dec, "the least free elements seen so far in the capture");
  extra("pushwire.conform.rule", "Conformance rule", ft::string, base::none,
        "a rule of spec/conformance.md this frame breaks (flow::conformance, as pushwire-conform judges)");

  m.experts = {
      {"pushwire.icrc.bad", "PI_CHECKSUM", "PI_ERROR", "Bad ICRC"},
      {"pushwire.roce.invalid", "PI_MALFORMED", "PI_ERROR", "Not a valid RoCEv2 frame"},
      {"pushwire.cell.invalid", "PI_MALFORMED", "PI_ERROR", "Not a valid cell"},
      {"pushwire.cell.crc.bad", "PI_CHECKSUM", "PI_ERROR", "Bad cell CRC"},
      {"pushwire.cell.packet_crc.bad", "PI_CHECKSUM", "PI_ERROR", "Bad packet CRC"},
      {"pushwire.idata.mismatch", "PI_PROTOCOL", "PI_WARN", "idata disagrees with the RETH virtual address"},
      {"pushwire.write.outside", "PI_PROTOCOL", "PI_WARN", "RDMA write outside the element it starts in"},
      {"pushwire.page_fault", "PI_SEQUENCE", "PI_NOTE", "Page-fault ACK: the sender pauses"},
      {"pushwire.dc.connect", "PI_SEQUENCE", "PI_CHAT", "DC connect or disconnect"},
      {"pushwire.read_as_write", "PI_SEQUENCE", "PI_CHAT", "Read served as a write"},
      {"pushwire.congestion", "PI_SEQUENCE", "PI_NOTE", "Congestion: a CE mark or a CNP"},
      {"pushwire.apm", "PI_SEQUENCE", "PI_NOTE", "Path migration: a QP's requests moved to another path"},
  };
  // One per conformance rule, in the rules' order (pushwire-wsgen indexes them by rule).
  for (const flow::rule_info& r : flow::rule_table) {
    const std::string_view n = r.name;
    const bool checksum = n == "frame.icrc" || n == "cell.crc" || n == "cell.packet_crc";
    const bool shape = n == "frame.length" || n == "cell.sequence";
    const bool sequence = n.starts_with("retx.") || n.starts_with("pagefault.") || n.starts_with("dc.") || n.starts_with("apm.") || n == "req.psn_sequence";
    m.experts.push_back({"pushwire.conform." + std::string{n}, checksum ? "PI_CHECKSUM" : shape ? "PI_MALFORMED" : sequence ? "PI_SEQUENCE" : "PI_PROTOCOL",
                         checksum || shape ? "PI_ERROR" : "PI_WARN", std::string{r.checks}});
  }
  return m;
}

}  // namespace pushwire::ws
