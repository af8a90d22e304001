// Card memory as a host program holds it (spec/rnic.md §15, spec/verbs.md §3): a buffer whose
// name says which card of the platform it belongs to. The buffer is a udmabuf (a dma-buf over
// a memfd, /dev/udmabuf) where the kernel has CONFIG_UDMABUF, and the memfd itself otherwise.
// Real I/O: nothing sans-IO includes it.
#pragma once

#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <pushwire/rnic/core.hpp>

namespace pushwire::net {

/// Card buffers are named card_stem followed by the card's number, 0 .. max_card_name.
inline constexpr std::string_view card_stem = "pushwire-card";
inline constexpr unsigned max_card_name = 255;

/// The name of card `card`'s buffers: `pushwire-cardN`, N in decimal.
inline std::string card_name(unsigned card) { return std::string(card_stem) + std::to_string(card); }

/// The card a buffer belongs to, from its fd's /proc/self/fd link: a memfd named
/// `pushwire-cardN` ("/memfd:pushwire-cardN (deleted)") or a dma-buf given that name with
/// DMA_BUF_SET_NAME ("/dmabuf:pushwire-cardN"), N 0 .. 255 without leading zeros. -1: no
/// card's (host memory).
inline int card_of_link(std::string_view link) {
  constexpr std::string_view memfd = "/memfd:", dmabuf = "/dmabuf:", deleted = " (deleted)";
  if (link.starts_with(memfd)) {
    link.remove_prefix(memfd.size());
    if (link.ends_with(deleted)) link.remove_suffix(deleted.size());
  } else if (link.starts_with(dmabuf)) {
    link.remove_prefix(dmabuf.size());
  } else {
    return -1;
  }
  if (!link.starts_with(card_stem)) return -1;
  link.remove_prefix(card_stem.size());
  unsigned n = 0;
  if (link.size() > 3 || (link.size() > 1 && link[0] == '0') || !rnic::parse_number(link, n) || n > max_card_name) return -1;
  return static_cast<int>(n);
}

/// The card fd's buffer belongs to (card_of_link of its /proc/self/fd link), or -1.
inline int card_of_fd(int fd) {
  char link[128] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t k = ::readlink(self.c_str(), link, sizeof link - 1);
  return k > 0 ? card_of_link(std::string_view(link, static_cast<std::size_t>(k))) : -1;
}

/// A new buffer of card `card` (0 .. max_card_name) of `bytes` (rounded up to whole pages),
/// zeroed: a udmabuf over a memfd sealed against shrinking, both named card_name(card), where
/// /dev/udmabuf makes one; the memfd otherwise (no /dev/udmabuf, or it refused: udmabuf's
/// size_limit_mb is 64 MiB by default). The caller owns the returned fd; it maps with
/// mmap(MAP_SHARED). -1 and errno on failure (EINVAL: card past max_card_name or bytes 0;
/// memfd_create's or ftruncate's errno).
inline int card_buffer(unsigned card, std::size_t bytes) {
  if (card > max_card_name || bytes == 0) {
    errno = EINVAL;
    return -1;
  }
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX - page) {
    errno = EINVAL;
    return -1;
  }
  bytes = (bytes + page - 1) / page * page;
  const std::string name = card_name(card);
  const int file = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (file < 0) return -1;
  if (::ftruncate(file, static_cast<off_t>(bytes)) != 0 || ::fcntl(file, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    const int e = errno;
    ::close(file);
    errno = e;
    return -1;
  }
  const int dev = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (dev < 0) return file;  // no udmabuf here: the memfd is the card's memory
  udmabuf_create c{};
  c.memfd = static_cast<std::uint32_t>(file);
  c.flags = UDMABUF_FLAGS_CLOEXEC;
  c.offset = 0;
  c.size = bytes;
  const int buf = ::ioctl(dev, UDMABUF_CREATE, &c);
  ::close(dev);
  if (buf < 0) return file;
  if (::ioctl(buf, DMA_BUF_SET_NAME, name.c_str()) != 0) {  // (unnamed, it would be host memory)
    ::close(buf);
    return file;
  }
  ::close(file);  // (the udmabuf holds the memfd's pages)
  return buf;
}

}  // namespace pushwire::net
