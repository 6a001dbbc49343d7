// SPDX-License-Identifier: MIT
#include "elfid.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <string.h>

int elfid__init(void)
{
	return elf_version(EV_CURRENT) == EV_NONE ? -ELIBBAD : 0;
}

/* Walk the notes of one data chunk; true when a GNU build-id was found. */
static bool notes_find(Elf_Data *d, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
		    memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0) {
			size_t n = nh.n_descsz < ELFID_MAX ? nh.n_descsz : ELFID_MAX;

			memcpy(ret_id, (const uint8_t *)d->d_buf + desc_off, n);
			*ret_len = (uint8_t)n;
			return true;
		}
		off = next;
	}
	return false;
}

static int elfid__from_elf(Elf *elf, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len)
{
	Elf_Scn *scn = NULL;
	size_t i, n;

	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return -ENOEXEC;

	if (elf_getphdrnum(elf, &n) == 0) {
		for (i = 0; i < n; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						 ELF_T_NHDR);
			if (d && notes_find(d, ret_id, ret_len))
				return 0;
		}
	}
	/* Relocatables and odd links keep the note only as a section. */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && notes_find(d, ret_id, ret_len))
			return 0;
	}
	return -ENOENT;
}

/* elfid__from_elf() of an Elf this file opened (NULL: it could not), which it ends. */
static int from_elf_end(Elf *elf, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len)
{
	int r;

	if (!elf)
		return -ENOEXEC;
	r = elfid__from_elf(elf, ret_id, ret_len);
	elf_end(elf);
	return r;
}

int elfid__from_fd(int fd, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len)
{
	return from_elf_end(elf_begin(fd, ELF_C_READ_MMAP, NULL), ret_id, ret_len);
}

int elfid__from_mem(const void *img, size_t size, uint8_t ret_id[ELFID_MAX], uint8_t *ret_len)
{
	/* libelf takes a char *, but ELF_C_READ on a native-endian image does
	 * not write to it. */
	return from_elf_end(elf_memory((char *)(uintptr_t)img, size), ret_id, ret_len);
}
