/* SPDX-License-Identifier: MIT */
/*
 * Module identity: the GNU build-id note of an ELF image, read with libelf
 * from PT_NOTE segments (what the loader maps, so it is there even in
 * stripped files) and, failing that, from SHT_NOTE sections.
 */
#ifndef CPA_UNWINDD_ELFID_H
#define CPA_UNWINDD_ELFID_H

#include <stddef.h>
#include <stdint.h>

#define ELFID_MAX 20 /* CPA_BUILD_ID_MAX: sha1; longer ids are cut (counted by the caller) */

/* Call once before any other function (libelf version handshake). */
int elfid__init(void);

/* 0 and the id in ret_id[*ret_len]; -ENOENT when the file has no build-id;
 * -ENOEXEC when it is not ELF. fd is not closed and its offset is not used. */
int elfid__from_fd(int fd, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len);

/* Same for an image in memory (the vDSO); img is only read. */
int elfid__from_mem(const void *img, size_t size, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len);

#endif /* CPA_UNWINDD_ELFID_H */
