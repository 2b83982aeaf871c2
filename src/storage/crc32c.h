#pragma once

#include <cstddef>
#include <cstdint>

namespace stalkd::storage {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and LevelDB.
// Extend(0, data, n) is the CRC of data; Extend(Crc(a), b) is the CRC of a followed by b.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

}  // namespace stalkd::storage
