// SPDX-License-Identifier: MIT
/*
 * ELF symbol tables of one binary.
 *
 * The reader is our own and small on purpose: every ELF we open comes from
 * a profiled process and may be hostile or truncated (or replaced under us),
 * so every header and section is read with pread() into our own memory
 * after a bounds check against the file size. No mmap of the file: a file
 * truncated while mapped would SIGBUS the stage.
 *
 * Only what symbolization needs is read: program headers (file offset ->
 * vaddr), section headers, .symtab/.dynsym with their string tables,
 * .note.gnu.build-id, .gnu_debuglink and .gnu_debugdata (MiniDebugInfo, xz).
 * ELF64 little-endian only (x86-64 hosts).
 */
#include "elfsym.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lzma.h>
#include <zlib.h>

#include "common/array.h"
#include "common/gopclntab.h"
#include "common/hash.h"
#include "common/macro.h"
#include "common/procroot.h"
#include "common/timeutil.h"
#include "names.h"
#include "shm/config.h" /* CPA_PATH_MAX */

#define SYMD_MAX_SHSTR	     (16u << 20)
#define SYMD_MAX_STRTAB	     (256ull << 20)
#define SYMD_MAX_NOTE	     (1u << 20)
#define SYMD_MAX_DEBUGDATA_Z (64ull << 20)
#define SYMD_XZ_MEMLIMIT     (128ull << 20)
#define SYMD_XZ_MIN_OUT	     (16u << 20) /* decompressed .gnu_debugdata allowed whatever its size */
#define SYMD_XZ_MAX_RATIO    32u	 /* beyond that, decompressed/compressed is a bomb */

/* ---- bounded reads from a file or a memory image ---- */

struct elfsrc {
	int fd;		    /* -1 for memory */
	const uint8_t *mem; /* memory image */
	uint64_t size;
};

static int elfsrc__read(const struct elfsrc *s, uint64_t off, uint64_t len, void *dst)
{
	uint8_t *d = dst;

	if (off > s->size || len > s->size - off)
		return -EBADMSG;
	if (!len)
		return 0; /* an empty section: dst may be NULL (memcpy's arguments may not) */
	if (s->mem) {
		memcpy(d, s->mem + off, len);
		return 0;
	}
	while (len) {
		ssize_t n = pread(s->fd, d, len > (1u << 30) ? (1u << 30) : len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EBADMSG; /* shrank under us */
		d += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

struct elfimg {
	struct elfsrc src;
	Elf64_Ehdr eh;
	Elf64_Phdr *ph;
	uint32_t phnum;
	Elf64_Shdr *sh;
	uint32_t shnum;
	char *shstr;
	uint64_t shstr_size;
};

static void elfimg__fini(struct elfimg *e)
{
	free(e->ph);
	free(e->sh);
	free(e->shstr);
	if (e->src.fd >= 0)
		close(e->src.fd);
	memset(e, 0, sizeof(*e));
	e->src.fd = -1;
}

static int elfimg__open(struct elfimg *e, const struct elfsrc *src)
{
	uint64_t shnum, shstrndx;
	int r;

	memset(e, 0, sizeof(*e));
	e->src = *src;
	r = elfsrc__read(src, 0, sizeof(e->eh), &e->eh);
	if (r < 0)
		return r;
	if (memcmp(e->eh.e_ident, ELFMAG, SELFMAG) || e->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return -EBADMSG;

	if (e->eh.e_phnum) {
		if (e->eh.e_phentsize != sizeof(Elf64_Phdr) || e->eh.e_phnum == PN_XNUM)
			return -EBADMSG;
		e->phnum = e->eh.e_phnum;
		e->ph = calloc(e->phnum, sizeof(*e->ph));
		if (!e->ph)
			return -ENOMEM;
		r = elfsrc__read(src, e->eh.e_phoff, (uint64_t)e->phnum * sizeof(*e->ph), e->ph);
		if (r < 0)
			return r;
	}

	if (!e->eh.e_shoff)
		return 0;
	if (e->eh.e_shentsize != sizeof(Elf64_Shdr))
		return -EBADMSG;
	shnum = e->eh.e_shnum;
	shstrndx = e->eh.e_shstrndx;
	if (shnum == 0 || shstrndx == SHN_XINDEX) {
		/* Extended numbering lives in section header 0. */
		Elf64_Shdr sh0;

		r = elfsrc__read(src, e->eh.e_shoff, sizeof(sh0), &sh0);
		if (r < 0)
			return r;
		if (shnum == 0)
			shnum = sh0.sh_size;
		if (shstrndx == SHN_XINDEX)
			shstrndx = sh0.sh_link;
	}
	if (shnum > SYMD_MAX_SECTIONS)
		return -E2BIG;
	e->shnum = (uint32_t)shnum;
	e->sh = calloc(shnum ? shnum : 1, sizeof(*e->sh));
	if (!e->sh)
		return -ENOMEM;
	r = elfsrc__read(src, e->eh.e_shoff, shnum * sizeof(*e->sh), e->sh);
	if (r < 0)
		return r;

	if (shstrndx < shnum && e->sh[shstrndx].sh_type == SHT_STRTAB) {
		const Elf64_Shdr *s = &e->sh[shstrndx];

		if (s->sh_size > SYMD_MAX_SHSTR)
			return -E2BIG;
		e->shstr = malloc(s->sh_size + 1);
		if (!e->shstr)
			return -ENOMEM;
		r = elfsrc__read(src, s->sh_offset, s->sh_size, e->shstr);
		if (r < 0)
			return r;
		e->shstr[s->sh_size] = '\0'; /* every name lookup stays inside */
		e->shstr_size = s->sh_size;
	}
	return 0;
}

static const char *elfimg__sh_name(const struct elfimg *e, const Elf64_Shdr *s)
{
	if (!e->shstr || s->sh_name >= e->shstr_size)
		return "";
	return e->shstr + s->sh_name;
}

static const Elf64_Shdr *elfimg__find(const struct elfimg *e, const char *name)
{
	uint32_t i;

	for (i = 1; i < e->shnum; i++)
		if (!strcmp(elfimg__sh_name(e, &e->sh[i]), name))
			return &e->sh[i];
	return NULL;
}

static const Elf64_Shdr *elfimg__find_type(const struct elfimg *e, uint32_t type)
{
	uint32_t i;

	for (i = 1; i < e->shnum; i++)
		if (e->sh[i].sh_type == type)
			return &e->sh[i];
	return NULL;
}

/* Section bytes in a fresh buffer (one extra NUL byte after them). */
static int elfimg__data(const struct elfimg *e, const Elf64_Shdr *s, uint64_t max, uint8_t **ret,
			uint64_t *ret_size)
{
	uint8_t *buf;
	int r;

	if (s->sh_type == SHT_NOBITS)
		return -ENODATA;
	if (s->sh_flags & SHF_COMPRESSED)
		return -EOPNOTSUPP;
	if (s->sh_size > max)
		return -E2BIG;
	buf = malloc(s->sh_size + 1);
	if (!buf)
		return -ENOMEM;
	r = elfsrc__read(&e->src, s->sh_offset, s->sh_size, buf);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[s->sh_size] = 0;
	*ret = buf;
	*ret_size = s->sh_size;
	return 0;
}

static int notes_build_id(const uint8_t *p, uint64_t size, uint8_t *out, uint8_t *ret_len)
{
	uint64_t off = 0;

	while (size - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		uint64_t name_off, desc_off, next;

		memcpy(&nh, p + off, sizeof(nh));
		name_off = off + sizeof(nh);
		desc_off = name_off + ALIGN_UP((uint64_t)nh.n_namesz, 4);
		next = desc_off + ALIGN_UP((uint64_t)nh.n_descsz, 4);
		if (desc_off > size || (uint64_t)nh.n_descsz > size - desc_off)
			return -EBADMSG;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp(p + name_off, "GNU", 4) && nh.n_descsz > 0) {
			uint8_t n = nh.n_descsz > CPA_BUILD_ID_MAX ? CPA_BUILD_ID_MAX
								   : (uint8_t)nh.n_descsz;

			memcpy(out, p + desc_off, n);
			*ret_len = n;
			return 0;
		}
		if (next <= off)
			return -EBADMSG;
		off = next;
		if (off > size)
			break;
	}
	return -ENOENT;
}

static int elfimg__build_id(const struct elfimg *e, uint8_t *out, uint8_t *ret_len)
{
	uint32_t i;

	for (i = 1; i < e->shnum; i++) {
		_cleanup_free_ uint8_t *buf = NULL;
		uint64_t size;

		if (e->sh[i].sh_type != SHT_NOTE)
			continue;
		if (elfimg__data(e, &e->sh[i], SYMD_MAX_NOTE, &buf, &size) < 0)
			continue;
		if (notes_build_id(buf, size, out, ret_len) == 0)
			return 0;
	}
	for (i = 0; i < e->phnum; i++) {
		_cleanup_free_ uint8_t *buf = NULL;
		const Elf64_Phdr *ph = &e->ph[i];

		if (ph->p_type != PT_NOTE || ph->p_filesz > SYMD_MAX_NOTE)
			continue;
		buf = malloc(ph->p_filesz + 1);
		if (!buf || elfsrc__read(&e->src, ph->p_offset, ph->p_filesz, buf) < 0)
			continue;
		if (notes_build_id(buf, ph->p_filesz, out, ret_len) == 0)
			return 0;
	}
	return -ENOENT;
}

/* ---- symbol candidates from one or more tables ---- */

struct symcand {
	uint64_t addr;
	uint32_t size;
	uint32_t rank; /* lower wins at equal address */
	const char *name;
	uint32_t name_len;
	uint32_t flags; /* SYMD_SYM_* */
};

struct symvec {
	struct symcand *v;
	size_t n;
	size_t cap;
	uint8_t **bufs; /* string tables kept alive until the build */
	size_t nbufs;
	uint64_t deadline;
};

static void symvec__fini(struct symvec *sv)
{
	size_t i;

	for (i = 0; i < sv->nbufs; i++)
		free(sv->bufs[i]);
	free(sv->bufs);
	free(sv->v);
}

static int symvec__keep(struct symvec *sv, uint8_t *buf)
{
	uint8_t **b = realloc(sv->bufs, (sv->nbufs + 1) * sizeof(*b));

	if (!b)
		return -ENOMEM;
	sv->bufs = b;
	sv->bufs[sv->nbufs++] = buf;
	return 0;
}

static int symvec__push(struct symvec *sv, const struct symcand *c)
{
	if (sv->n == sv->cap && (sv->cap ? sv->cap * 2 : 4096) > 3ull * SYMD_MAX_SYMBOLS)
		return -E2BIG;
	if (array_grow_first((void **)&sv->v, &sv->cap, sv->n + 1, sizeof(*sv->v), 4096) < 0)
		return -ENOMEM;
	sv->v[sv->n++] = *c;
	return 0;
}

/* A symbol table and its string table (kept in sv until the build). */
static int symvec__read_table(struct symvec *sv, const struct elfimg *e, const Elf64_Shdr *s,
			      uint8_t **ret_syms, uint64_t *ret_count, const uint8_t **ret_strs,
			      uint64_t *ret_strsize)
{
	_cleanup_free_ uint8_t *syms = NULL;
	uint8_t *strs = NULL;
	uint64_t ssize;
	const Elf64_Shdr *str;
	int r;

	if (s->sh_entsize != sizeof(Elf64_Sym) || s->sh_size % sizeof(Elf64_Sym))
		return -EBADMSG;
	if (s->sh_size / sizeof(Elf64_Sym) > SYMD_MAX_SYMBOLS)
		return -E2BIG;
	if (s->sh_link == 0 || s->sh_link >= e->shnum)
		return -EBADMSG;
	str = &e->sh[s->sh_link];
	if (str->sh_type != SHT_STRTAB)
		return -EBADMSG;
	r = elfimg__data(e, s, SYMD_MAX_SYMBOLS * sizeof(Elf64_Sym), &syms, &ssize);
	if (r < 0)
		return r;
	r = elfimg__data(e, str, SYMD_MAX_STRTAB, &strs, ret_strsize);
	if (r < 0)
		return r;
	r = symvec__keep(sv, strs);
	if (r < 0) {
		free(strs);
		return r;
	}
	*ret_count = ssize / sizeof(Elf64_Sym);
	*ret_syms = TAKE_PTR(syms);
	*ret_strs = strs;
	return 0;
}

static int symvec__collect(struct symvec *sv, const struct elfimg *e, uint32_t type,
			   bool *ret_found)
{
	_cleanup_free_ uint8_t *syms = NULL;
	const uint8_t *strs;
	uint64_t strsize, count, i;
	const Elf64_Shdr *s = elfimg__find_type(e, type);
	int r;

	*ret_found = false;
	if (!s || s->sh_type == SHT_NOBITS)
		return 0;
	r = symvec__read_table(sv, e, s, &syms, &count, &strs, &strsize);
	if (r < 0)
		return r;
	*ret_found = true;

	for (i = 0; i < count; i++) {
		Elf64_Sym sym;
		unsigned int st, bind;
		size_t len;

		if ((i & 0xffff) == 0xffff && clock_ns(CLOCK_MONOTONIC) > sv->deadline)
			return -ETIME;
		memcpy(&sym, syms + i * sizeof(sym), sizeof(sym));
		st = ELF64_ST_TYPE(sym.st_info);
		bind = ELF64_ST_BIND(sym.st_info);
		if ((st != STT_FUNC && st != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_size == 0 || sym.st_value == 0 || sym.st_name >= strsize)
			continue;
		/* strs has a NUL at strsize: the name ends inside the buffer. */
		len = strlen((const char *)strs + sym.st_name);
		if (len == 0 || len > 4096)
			continue;
		r = symvec__push(
			sv, &(struct symcand){
				    .addr = sym.st_value,
				    .size = sym.st_size > UINT32_MAX ? UINT32_MAX
								     : (uint32_t)sym.st_size,
				    /* symtab before dynsym, global before weak before local */
				    .rank = (type == SHT_SYMTAB ? 0 : 4) + (bind == STB_GLOBAL ? 0
									    : bind == STB_WEAK ? 1
											       : 2),
				    .name = (const char *)strs + sym.st_name,
				    .name_len = (uint32_t)len,
			    });
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- PLT stubs: "sym@plt" ---- */

struct pltrel {
	uint64_t got; /* r_offset: the GOT slot the stub jumps through */
	uint32_t sym; /* .dynsym index */
	uint32_t _pad;
};

static int pltrel_cmp(const void *a, const void *b)
{
	const struct pltrel *x = a, *y = b;

	return x->got < y->got ? -1 : x->got > y->got;
}

static const struct pltrel *pltrel_find(const struct pltrel *v, size_t n, uint64_t got)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].got == got)
			return &v[mid];
		if (v[mid].got < got)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The JUMP_SLOT / GLOB_DAT relocations against .dynsym (index dsidx). */
static int plt_relocs(const struct elfimg *e, uint32_t dsidx, uint64_t nsyms, struct pltrel **ret,
		      size_t *ret_n)
{
	struct pltrel *v = NULL;
	size_t n = 0, cap = 0;
	uint32_t i;

	for (i = 1; i < e->shnum; i++) {
		const Elf64_Shdr *s = &e->sh[i];
		_cleanup_free_ uint8_t *buf = NULL;
		uint64_t size, k;

		if (s->sh_type != SHT_RELA || s->sh_link != dsidx ||
		    s->sh_entsize != sizeof(Elf64_Rela))
			continue;
		if (elfimg__data(e, s, SYMD_MAX_SYMBOLS * sizeof(Elf64_Rela), &buf, &size) < 0)
			continue;
		for (k = 0; k + sizeof(Elf64_Rela) <= size; k += sizeof(Elf64_Rela)) {
			Elf64_Rela r;
			uint64_t sym;

			memcpy(&r, buf + k, sizeof(r));
			sym = ELF64_R_SYM(r.r_info);
			if ((ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT &&
			     ELF64_R_TYPE(r.r_info) != R_X86_64_GLOB_DAT) ||
			    sym == 0 || sym >= nsyms)
				continue;
			if (n == cap && (cap ? cap * 2 : 256) > SYMD_MAX_SYMBOLS) {
				free(v);
				return -E2BIG;
			}
			if (array_grow_first((void **)&v, &cap, n + 1, sizeof(*v), 256) < 0) {
				free(v);
				return -ENOMEM;
			}
			v[n++] = (struct pltrel){.got = r.r_offset, .sym = (uint32_t)sym};
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), pltrel_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

/*
 * Every stub of .plt, .plt.sec and .plt.got jumps through its GOT slot with
 * `jmp *disp32(%rip)` (ff 25, maybe after endbr64 / a bnd prefix); the
 * relocation of that slot names the function (perf's "memcmp@plt"). The
 * lazy-binding halves of an IBT .plt (push; jmp PLT0) and PLT0 itself have
 * no such jump and stay unnamed.
 */
static int symvec__collect_plt(struct symvec *sv, const struct elfimg *e, bool *ret_found)
{
	static const char *const names[] = {".plt", ".plt.sec", ".plt.got"};
	const Elf64_Shdr *ds = elfimg__find_type(e, SHT_DYNSYM);
	_cleanup_free_ struct pltrel *rels = NULL;
	_cleanup_free_ uint8_t *syms = NULL;
	const uint8_t *strs;
	uint64_t nsyms, strsize;
	size_t nrels, i;
	int r;

	*ret_found = false;
	if (!ds || ds->sh_type == SHT_NOBITS)
		return 0;
	r = symvec__read_table(sv, e, ds, &syms, &nsyms, &strs, &strsize);
	if (r < 0)
		return r;
	r = plt_relocs(e, (uint32_t)(ds - e->sh), nsyms, &rels, &nrels);
	if (r < 0 || nrels == 0)
		return r;
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		const Elf64_Shdr *s = elfimg__find(e, names[i]);
		_cleanup_free_ uint8_t *code = NULL;
		uint64_t size, ent, k, j;

		if (!s || !(s->sh_flags & SHF_EXECINSTR) ||
		    elfimg__data(e, s, 16u << 20, &code, &size) < 0)
			continue;
		ent = s->sh_entsize == 8 || s->sh_entsize == 16 ? s->sh_entsize : 16;
		for (k = 0; k + ent <= size; k += ent) {
			for (j = 0; j + 6 <= ent; j++) {
				const struct pltrel *pr;
				Elf64_Sym sym;
				int32_t disp;
				size_t len;

				if (code[k + j] != 0xff || code[k + j + 1] != 0x25)
					continue;
				memcpy(&disp, code + k + j + 2, 4);
				pr = pltrel_find(rels, nrels,
						 s->sh_addr + k + j + 6 + (int64_t)disp);
				if (!pr)
					break;
				memcpy(&sym, syms + (uint64_t)pr->sym * sizeof(sym), sizeof(sym));
				if (sym.st_name == 0 || sym.st_name >= strsize)
					break;
				len = strlen((const char *)strs + sym.st_name);
				if (len == 0 || len > 4096)
					break;
				r = symvec__push(sv,
						 &(struct symcand){
							 .addr = s->sh_addr + k,
							 .size = (uint32_t)ent,
							 .rank = 8,
							 .name = (const char *)strs + sym.st_name,
							 .name_len = (uint32_t)len,
							 .flags = SYMD_SYM_PLT,
						 });
				if (r < 0)
					return r;
				*ret_found = true;
				break;
			}
		}
	}
	return 0;
}

/* ---- function starts: .eh_frame_hdr's search table ---- */

#define DW_EH_PE_udata4	  0x03
#define DW_EH_PE_sdata4	  0x0b
#define DW_EH_PE_pcrel	  0x10
#define DW_EH_PE_datarel  0x30
#define SYMD_MAX_EH_FRAME (256ull << 20)

static int fde_cmp(const void *a, const void *b)
{
	const struct symd_fde *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static uint32_t le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * .eh_frame is read 16 bytes per FDE (length, CIE pointer, pc_begin,
 * pc_range) through one window of EF_WIN bytes kept for the process's life,
 * the FDEs visited in file order: the section goes through the same few
 * cache-hot pages however large it is (cc1's is 2.3 MB, libLLVM's 4.9 MB),
 * where a buffer of the section's size is page-faulted in and unmapped again
 * for every binary (on a small VM the faults cost more than the copy). A
 * memory image is read in place. Only the loading thread (symd's main loop)
 * reads here.
 */
#define EF_WIN (64u << 10)

struct efwin {
	const struct elfsrc *src;
	uint64_t off, size; /* the section in the file */
	uint64_t lo, hi;    /* the window, section-relative */
	const uint8_t *p;
};

static uint8_t ef_win_buf[EF_WIN + 64];

/* The len bytes at rel in the section, or NULL. Windows share one buffer:
 * one window is read at a time. */
static const uint8_t *efwin__at(struct efwin *w, uint64_t rel, uint32_t len_needed)
{
	if (rel > w->size || w->size - rel < len_needed)
		return NULL;
	if (w->src->mem)
		return w->src->mem + w->off + rel;
	if (!w->p || rel < w->lo || rel + len_needed > w->hi) {
		/* from rel's window start (EF_WIN-aligned), a little over so an
		 * entry at the window's end is whole */
		uint64_t lo = MIN(rel - rel % EF_WIN, rel), len;

		if (rel + len_needed > lo + sizeof(ef_win_buf))
			lo = rel;
		len = MIN((uint64_t)sizeof(ef_win_buf), w->size - lo);
		w->p = NULL;
		if (elfsrc__read(w->src, w->off + lo, len, ef_win_buf) < 0)
			return NULL;
		w->p = ef_win_buf;
		w->lo = lo;
		w->hi = lo + len;
	}
	return w->p + (rel - w->lo);
}

struct fdepos {
	uint32_t rel; /* the FDE's offset in .eh_frame */
	uint32_t idx; /* its entry in the table being built */
};

/* pos in window order (a counting sort by rel / EF_WIN: FDEs of one window
 * in any order); the table's order is the functions', which the section
 * follows only in runs (hot, cold and startup text). */
static int fdepos_bucket(struct fdepos **pos, uint32_t n, uint64_t size)
{
	uint32_t nb = (uint32_t)(size / EF_WIN) + 1, i;
	_cleanup_free_ uint32_t *first = calloc((size_t)nb + 1, sizeof(*first));
	struct fdepos *out;

	if (!first)
		return -ENOMEM;
	out = malloc((size_t)n * sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		first[(*pos)[i].rel / EF_WIN + 1]++;
	for (i = 0; i < nb; i++)
		first[i + 1] += first[i];
	for (i = 0; i < n; i++)
		out[first[(*pos)[i].rel / EF_WIN]++] = (*pos)[i];
	free(*pos);
	*pos = out;
	return 0;
}

/* Each FDE's length, where its pc_begin (pcrel|sdata4) confirms the table
 * entry that points at it; the others keep size 0. */
static void fdes_read_sizes(struct symd_fde *v, struct fdepos **pos, uint32_t n, bool in_order,
			    struct efwin *w, uint64_t efva, uint64_t base)
{
	if (!in_order && fdepos_bucket(pos, n, w->size) < 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		const struct fdepos *q = &(*pos)[i];
		const uint8_t *fde = efwin__at(w, q->rel, 16);
		uint64_t fva = efva + q->rel;
		struct symd_fde *f = &v[q->idx];

		/* length (not 64-bit DWARF), CIE pointer, pc_begin, pc_range */
		if (fde && le32(fde) != 0xffffffffu && le32(fde) >= 12 &&
		    fva + 8 + (int64_t)(int32_t)le32(fde + 8) == base + f->start)
			f->size = le32(fde + 12);
	}
}

/*
 * Every function compiled with unwind info has an FDE, stripped or not, and
 * .eh_frame_hdr (PT_GNU_EH_FRAME) holds their start addresses sorted (the
 * table the runtime unwinder searches). The usual encodings only (version 1,
 * 4-byte pointers, table datarel|sdata4); the FDE's own length is read from
 * .eh_frame when its pc_begin (pcrel|sdata4) confirms the table entry,
 * else the function reaches to the next start. Failures leave no table.
 */
static void symbin__read_fdes(struct symbin *b, const struct elfimg *e)
{
	_cleanup_free_ struct symd_fde *v = NULL;
	_cleanup_free_ struct fdepos *pos = NULL;
	uint64_t hoff = 0, hsize = 0, hva = 0, efva = 0, base = UINT64_MAX;
	struct efwin w = {.src = &e->src}, ht = {.src = &e->src};
	const uint8_t *hdr, *ent;
	uint64_t count, i;
	const Elf64_Shdr *s;
	uint32_t n = 0, npos = 0, k;
	bool sorted = true, pos_sorted = true;

	for (k = 0; k < e->phnum; k++)
		if (e->ph[k].p_type == PT_GNU_EH_FRAME) {
			hoff = e->ph[k].p_offset;
			hsize = e->ph[k].p_filesz;
			hva = e->ph[k].p_vaddr;
		}
	s = elfimg__find(e, ".eh_frame_hdr");
	if (!hsize && s && s->sh_type != SHT_NOBITS) {
		hoff = s->sh_offset;
		hsize = s->sh_size;
		hva = s->sh_addr;
	}
	for (k = 0; k < b->nloads; k++)
		base = MIN(base, b->loads[k].vaddr);
	if (hsize < 12 || hsize > SYMD_MAX_EH_FRAME || base == UINT64_MAX)
		return;
	if (hoff > e->src.size || hsize > e->src.size - hoff)
		return;
	ht.off = hoff;
	ht.size = hsize;
	hdr = efwin__at(&ht, 0, 12);
	if (!hdr)
		return;
	if (hdr[0] != 1 || (hdr[1] & 0x0f) != DW_EH_PE_sdata4 ||
	    (hdr[2] != DW_EH_PE_udata4 && hdr[2] != DW_EH_PE_sdata4) ||
	    hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return;
	count = le32(hdr + 8);
	if (count == 0 || count > SYMD_MAX_SYMBOLS || 12 + count * 8 > hsize)
		return;
	if ((hdr[1] & 0x70) == DW_EH_PE_pcrel)
		efva = hva + 4 + (int64_t)(int32_t)le32(hdr + 4);
	hdr = NULL; /* the window moves on */
	s = elfimg__find(e, ".eh_frame");
	if (efva && s && s->sh_addr == efva && s->sh_type != SHT_NOBITS &&
	    !(s->sh_flags & SHF_COMPRESSED) && s->sh_size <= SYMD_MAX_EH_FRAME &&
	    s->sh_offset <= e->src.size && s->sh_size <= e->src.size - s->sh_offset) {
		w.off = s->sh_offset;
		w.size = s->sh_size;
	}
	v = calloc(count, sizeof(*v));
	if (w.size)
		pos = calloc(count, sizeof(*pos));
	if (!v)
		return;
	for (i = 0; i < count; i++) {
		uint64_t start, fva;

		ent = efwin__at(&ht, 12 + i * 8, 8);
		if (!ent)
			return;
		start = hva + (int64_t)(int32_t)le32(ent);
		fva = hva + (int64_t)(int32_t)le32(ent + 4);
		if (start < base || start - base > UINT32_MAX)
			continue;
		if (pos && fva >= efva && fva - efva + 16 <= w.size) {
			if (npos && pos[npos - 1].rel > fva - efva)
				pos_sorted = false;
			pos[npos++] = (struct fdepos){.rel = (uint32_t)(fva - efva), .idx = n};
		}
		if (n && v[n - 1].start > start - base)
			sorted = false;
		v[n++] = (struct symd_fde){.start = (uint32_t)(start - base)};
	}
	if (!n)
		return;
	if (npos)
		fdes_read_sizes(v, &pos, npos, pos_sorted, &w, efva, base);
	if (!sorted)
		qsort(v, n, sizeof(*v), fde_cmp);
	b->fdes = realloc(v, n * sizeof(*v));
	if (!b->fdes)
		b->fdes = v;
	v = NULL;
	b->nfdes = n;
	b->fde_base = base;
	b->src |= SYMBIN_SRC_FDE;
}

/* The index of the first FDE starting after rel (FDEs sorted by start). */
static uint32_t fde_after(const struct symbin *b, uint64_t rel)
{
	uint32_t lo = 0, hi = b->nfdes;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b->fdes[mid].start <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The ELF entry point is the process's first function: when no symbol names
 * it (stripped executables; ld.so, whose `_start` is a local symbol Debian
 * strips) it is "_start", ranked below every real symbol at that address.
 * Its extent is its FDE's, or for FDE-less start code (ld.so's) up to the
 * next FDE, so it never swallows a neighbour. Shared libraries have e_entry
 * 0, except those that can be run (libc.so.6), where it is that run's entry.
 */
static int symvec__collect_entry(struct symvec *sv, const struct elfimg *e, const struct symbin *b)
{
	uint64_t entry = e->eh.e_entry, rel, size;
	uint32_t lo;

	if (!entry || !b->nfdes || entry < b->fde_base || entry - b->fde_base > UINT32_MAX)
		return 0;
	rel = entry - b->fde_base;
	lo = fde_after(b, rel);
	if (lo > 0 && b->fdes[lo - 1].size && rel - b->fdes[lo - 1].start < b->fdes[lo - 1].size)
		size = b->fdes[lo - 1].start + b->fdes[lo - 1].size - rel; /* its FDE */
	else if (lo < b->nfdes)
		size = MIN(b->fdes[lo].start - rel, (uint64_t)4096); /* FDE-less start code */
	else
		return 0;
	return symvec__push(sv, &(struct symcand){
					.addr = entry,
					.size = (uint32_t)size,
					.rank = 16,
					.name = "_start",
					.name_len = 6,
				});
}

/*
 * A Go binary without a symbol table (-ldflags='-s -w') keeps .gopclntab,
 * the runtime's own: every function's name and extent (common/gopclntab.h).
 * Ranked below every ELF symbol at the same address.
 */
static int symvec__collect_go(struct symvec *sv, const struct elfimg *e, bool *ret_found)
{
	const Elf64_Shdr *s = elfimg__find(e, ".gopclntab"), *text = elfimg__find(e, ".text");
	struct gopclntab t;
	uint8_t *buf = NULL;
	uint64_t size;
	uint32_t i;
	int r;

	*ret_found = false;
	if (!s || !text)
		return 0;
	r = elfimg__data(e, s, SYMD_MAX_STRTAB, &buf, &size);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	r = symvec__keep(sv, buf);
	if (r < 0) {
		free(buf);
		return r;
	}
	if (gopclntab__init(&t, buf, size, text->sh_addr) < 0)
		return 0;
	for (i = 0; i < t.nfunc; i++) {
		struct gofunc f;
		size_t len;

		if ((i & 0xffff) == 0xffff && clock_ns(CLOCK_MONOTONIC) > sv->deadline)
			return -ETIME;
		if (gopclntab__func(&t, i, &f) < 0 || f.end == f.entry)
			continue;
		len = strlen(f.name);
		if (len == 0 || len > 4096)
			continue;
		r = symvec__push(sv, &(struct symcand){
					     .addr = f.entry,
					     .size = f.end - f.entry > UINT32_MAX
							     ? UINT32_MAX
							     : (uint32_t)(f.end - f.entry),
					     .rank = 8,
					     .name = f.name,
					     .name_len = (uint32_t)len,
				     });
		if (r < 0)
			return r;
	}
	*ret_found = true;
	return 0;
}

static int symcand_cmp(const void *a, const void *b)
{
	const struct symcand *x = a, *y = b;
	size_t ux, uy;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	/* Aliases at one address (printf/_IO_printf, malloc/__libc_malloc):
	 * like perf, take the one with fewer leading underscores, then the
	 * shorter one, so the public name wins. */
	ux = strspn(x->name, "_");
	uy = strspn(y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int pool_add(struct symbin *b, const char *s, size_t len, uint32_t *ret_off)
{
	if (b->pool_len + len + 1 > UINT32_MAX)
		return -E2BIG;
	if (array_grow_first((void **)&b->pool, &b->pool_cap, b->pool_len + len + 1, 1, 4096) < 0)
		return -ENOMEM;
	memcpy(b->pool + b->pool_len, s, len);
	b->pool[b->pool_len + len] = '\0';
	*ret_off = (uint32_t)b->pool_len;
	b->pool_len += len + 1;
	return 0;
}

static int symbin__build(struct symbin *b, struct symvec *sv)
{
	size_t i, n = 0;
	uint32_t off;
	int r;

	r = pool_add(b, "", 0, &off); /* offset 0 means "no name" */
	if (r < 0)
		return r;
	if (sv->n)
		qsort(sv->v, sv->n, sizeof(*sv->v), symcand_cmp);
	b->syms = calloc(sv->n ? sv->n : 1, sizeof(*b->syms));
	if (!b->syms)
		return -ENOMEM;
	for (i = 0; i < sv->n; i++) {
		const struct symcand *c = &sv->v[i];

		if (n && b->syms[n - 1].addr == c->addr)
			continue; /* an alias: the best-ranked one is already in */
		r = pool_add(b, c->name, c->name_len, &off);
		if (r < 0)
			return r;
		b->syms[n++] = (struct symd_sym){
			.addr = c->addr, .size = c->size, .name = off, .flags = c->flags};
	}
	b->nsyms = (uint32_t)n;
	if (n < sv->n) {
		struct symd_sym *s = realloc(b->syms, (n ? n : 1) * sizeof(*s));

		if (s)
			b->syms = s;
	}
	return 0;
}

static void symbin__set_loads(struct symbin *b, const struct elfimg *e)
{
	uint32_t i;

	for (i = 0; i < e->phnum && b->nloads < SYMD_MAX_LOADS; i++) {
		const Elf64_Phdr *ph = &e->ph[i];

		if (ph->p_type != PT_LOAD || ph->p_filesz == 0)
			continue;
		b->loads[b->nloads++] = (struct symd_load){
			.off = ph->p_offset,
			.vaddr = ph->p_vaddr,
			.filesz = ph->p_filesz,
		};
	}
}

static bool elfimg__is_go(const struct elfimg *e)
{
	return elfimg__find(e, ".go.buildinfo") || elfimg__find(e, ".gopclntab") ||
	       elfimg__find(e, ".note.go.buildid");
}

/* ---- opening files ---- */

/* path under root (common/procroot.h: "" ours, else where a process's paths
 * resolve). */
static int open_elf(const char *root, const char *path, struct elfimg *e)
{
	/* A regular file only (no FIFO, no device). */
	_cleanup_close_ int fd = proc_root_open(root, path, O_RDONLY);
	struct stat st;
	int r;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > SYMD_MAX_FILE_SIZE)
		return -EFBIG;
	r = elfimg__open(e, &(struct elfsrc){.fd = fd, .size = (uint64_t)st.st_size});
	if (r < 0) {
		e->src.fd = -1; /* fd is still ours */
		elfimg__fini(e);
		return r;
	}
	TAKE_FD(fd);
	return 0;
}

static const char *proc_dir(const struct symd_paths *p)
{
	return p && p->proc ? p->proc : "/proc";
}

static const char *debug_root(const struct symd_paths *p)
{
	return p && p->debug_root ? p->debug_root : "/usr/lib/debug";
}

static bool build_id_eq(const uint8_t *a, uint8_t alen, const uint8_t *b, uint8_t blen)
{
	return alen && alen == blen && !memcmp(a, b, alen);
}

/* A file opened at our path is the mapped one: the same dev and inode, or
 * (dev unknown: a module known by build-id) a build-id to check it by. */
static bool is_mapped_file(int fd, const struct symd_file_ref *ref)
{
	struct stat st;

	if (!ref->dev)
		return ref->build_id_len > 0;
	return fstat(fd, &st) == 0 && (uint64_t)st.st_dev == ref->dev &&
	       (uint64_t)st.st_ino == ref->ino;
}

/* A file at the path under a peer's root (another process of the gone
 * one's mount namespace) is the mapped one: the same build-id (checked by
 * the caller), else the same dev and inode. Not the inode alone: the peer
 * is picked by a mount namespace id the kernel reuses once the namespace is
 * gone, and inode numbers repeat across filesystems (an overlay's file
 * without a build-id is not taken: its dev differs from its mapping's). */
static bool is_peer_file(int fd, const struct symd_file_ref *ref)
{
	struct stat st;

	if (ref->build_id_len)
		return true;
	return ref->dev && ref->ino && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == ref->dev &&
	       (uint64_t)st.st_ino == ref->ino;
}

/*
 * The module's own file as process ref->pid sees it (kind: proc_root_kind()
 * of it). map_files/ names the mapped inode in any mount namespace;
 * root/<path> resolves in the process's namespace and root. Once the process
 * is gone (kind < 0), the path under the root of peer (a live process of its
 * mount namespace; 0: none), when it is the mapped file (is_peer_file()). The
 * path as we see it serves only when there is no process (pid 0) or it is
 * gone, and only when it is the mapped file: the same dev and inode, else (a
 * module known by build-id only) the same build-id. A candidate whose
 * build-id differs from the one unwindd saw (replaced on disk) is skipped.
 * *root_pid becomes peer when its root held the file.
 */
static int open_module(const struct symd_paths *paths, const struct symd_file_ref *ref, int kind,
		       uint32_t peer, struct elfimg *e, uint8_t *bid, uint8_t *bid_len,
		       uint32_t *root_pid)
{
	/* Each candidate: a path under a root (common/procroot.h). */
	char cand[4][CPA_PATH_MAX + 128], root[4][320] = {};
	bool ours[4] = {}, of_peer[4] = {};
	unsigned int n = 0, i;
	int r, err = -ENOENT;

	if (ref->pid && ref->map_start < ref->map_end)
		snprintf(cand[n++], sizeof(cand[0]), "%s/%u/map_files/%lx-%lx", proc_dir(paths),
			 ref->pid, (unsigned long)ref->map_start, (unsigned long)ref->map_end);
	if (ref->pid && kind >= 0 && ref->path[0] == '/') {
		snprintf(root[n], sizeof(root[0]), "%s/%u/root", proc_dir(paths), ref->pid);
		snprintf(cand[n++], sizeof(cand[0]), "%s", ref->path);
	}
	if (ref->pid && kind < 0 && peer && ref->path[0] == '/') {
		of_peer[n] = true;
		snprintf(root[n], sizeof(root[0]), "%s/%u/root", proc_dir(paths), peer);
		snprintf(cand[n++], sizeof(cand[0]), "%s", ref->path);
	}
	if ((!ref->pid || kind < 0) && ref->path[0] == '/') {
		ours[n] = ref->pid != 0;
		snprintf(cand[n++], sizeof(cand[0]), "%s", ref->path);
	}

	for (i = 0; i < n; i++) {
		r = open_elf(root[i], cand[i], e);
		if (r < 0) {
			/* A refused ELF says more than a missing path. */
			if (r != -ENOENT && r != -EACCES && r != -EPERM && r != -ENOTDIR)
				err = r;
			else if (err == -ENOENT)
				err = r;
			continue;
		}
		if ((ours[i] && !is_mapped_file(e->src.fd, ref)) ||
		    (of_peer[i] && !is_peer_file(e->src.fd, ref))) {
			/* Not provably the process's file. */
			elfimg__fini(e);
			err = -ESTALE;
			continue;
		}
		*bid_len = 0;
		elfimg__build_id(e, bid, bid_len);
		if (ref->build_id_len &&
		    !build_id_eq(ref->build_id, ref->build_id_len, bid, *bid_len)) {
			elfimg__fini(e);
			err = -ESTALE;
			continue;
		}
		if (of_peer[i])
			*root_pid = peer;
		return 0;
	}
	return err;
}

static int file_crc32(int fd, uint64_t size, uint32_t *ret)
{
	_cleanup_free_ uint8_t *buf = malloc(1u << 16);
	uLong crc = crc32(0, Z_NULL, 0);
	uint64_t off = 0;

	if (!buf)
		return -ENOMEM;
	while (off < size) {
		ssize_t n = pread(fd, buf, 1u << 16, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EBADMSG;
		crc = crc32(crc, buf, (uInt)n);
		off += (uint64_t)n;
	}
	*ret = (uint32_t)crc;
	return 0;
}

/* A debug file is good when it carries a .symtab and matches the binary:
 * same build-id, or (no build-id) the CRC from .gnu_debuglink. */
static int open_debug(const char *root, const char *path, const uint8_t *bid, uint8_t bid_len,
		      bool check_crc, uint32_t crc, struct elfimg *e)
{
	const Elf64_Shdr *s;
	uint8_t dbid[CPA_BUILD_ID_MAX];
	uint8_t dlen = 0;
	int r;

	r = open_elf(root, path, e);
	if (r < 0)
		return r;
	s = elfimg__find_type(e, SHT_SYMTAB);
	if (!s || s->sh_type == SHT_NOBITS)
		goto out_reject;
	if (bid_len) {
		elfimg__build_id(e, dbid, &dlen);
		if (!build_id_eq(bid, bid_len, dbid, dlen))
			goto out_reject;
	} else if (check_crc) {
		uint32_t c = 0;

		if (file_crc32(e->src.fd, e->src.size, &c) < 0 || c != crc)
			goto out_reject;
	}
	return 0;

out_reject:
	elfimg__fini(e);
	return -ESTALE;
}

/*
 * Most candidate debug paths do not exist on a host (no .build-id entry, no
 * .debug directory next to the binary, no /usr/lib/debug/<dir>): 8 failed
 * opens per binary without a debug file (440 in 30 s of churn). The parent
 * directory of a candidate is looked up once per DIR_TTL_NS in a small cache
 * (per thread), and a candidate whose directory is missing is not opened.
 * A debug package installed meanwhile is seen after at most DIR_TTL_NS.
 */
#define DIR_SLOTS  256u
#define DIR_TTL_NS (10ull * 1000000000ull)

struct dir_slot {
	uint64_t h, t;
	bool exists;
};

static _Thread_local struct dir_slot dir_cache[DIR_SLOTS];

/* path's directory under root (common/procroot.h). */
static bool dir_may_exist(const char *root, const char *path)
{
	const char *slash = strrchr(path, '/');
	uint64_t h, now;
	char dir[CPA_PATH_MAX * 2 + 256];
	struct dir_slot *d;
	struct stat st;
	size_t len;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
		return true;
	len = (size_t)(slash - path);
	/* 0 marks an empty slot */
	h = (hash64(path, len) ^ hash64(root, strlen(root)) * 0x9e3779b97f4a7c15ull) | 1;
	now = clock_ns(CLOCK_MONOTONIC);
	d = &dir_cache[h % DIR_SLOTS];
	if (d->h == h && now - d->t < DIR_TTL_NS)
		return d->exists;
	memcpy(dir, path, len);
	dir[len] = 0;
	d->h = h;
	d->t = now;
	d->exists = proc_root_stat(root, dir, O_DIRECTORY, &st) == 0;
	return d->exists;
}

static int open_debug_cand(const char *root, const char *path, const uint8_t *bid, uint8_t bid_len,
			   bool check_crc, uint32_t crc, struct elfimg *e)
{
	if (!dir_may_exist(root, path))
		return -ENOENT;
	return open_debug(root, path, bid, bid_len, check_crc, crc, e);
}

/*
 * The debug file of a module, where the process would find it: under
 * /proc/<root_pid>/root (the process's own in another mount namespace or
 * root; a live process of a gone one's namespace, whose root held its
 * binary), else (root_pid 0) our paths (our namespace; no process; or a
 * process gone, whose binary open_module() proved to be the file at our
 * path). A test's debug_root and the debuginfod cache are ours.
 */
static int find_debug_file(const struct symd_paths *paths, const struct symd_file_ref *ref,
			   uint32_t root_pid, const struct elfimg *main, const uint8_t *bid,
			   uint8_t bid_len, struct elfimg *e, uint32_t *ret_src)
{
	char path[CPA_PATH_MAX * 2 + 256], hex[2 * CPA_BUILD_ID_MAX + 1], root[CPA_PATH_MAX] = "";
	const char *droot = root; /* where the debug root resolves */
	const Elf64_Shdr *link;
	unsigned int i;

	if (root_pid)
		snprintf(root, sizeof(root), "%s/%u/root", proc_dir(paths), root_pid);
	if (paths && paths->debug_root)
		droot = "";

	if (bid_len >= 2) {
		for (i = 0; i < bid_len; i++)
			snprintf(hex + 2 * i, 3, "%02x", bid[i]);
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", debug_root(paths), hex,
			 hex + 2);
		if (open_debug_cand(droot, path, bid, bid_len, false, 0, e) == 0) {
			*ret_src = SYMBIN_SRC_DEBUG_BUILDID;
			return 0;
		}
		if (paths && paths->debuginfod_cache) {
			snprintf(path, sizeof(path), "%s/%s/debuginfo", paths->debuginfod_cache,
				 hex);
			/* not through the directory cache: the download thread
			 * creates the directory, and the load is retried then */
			if (open_debug("", path, bid, bid_len, false, 0, e) == 0) {
				*ret_src = SYMBIN_SRC_DEBUGINFOD;
				return 0;
			}
		}
	}

	link = elfimg__find(main, ".gnu_debuglink");
	if (link && ref->path[0] == '/') {
		_cleanup_free_ uint8_t *d = NULL;
		char dir[CPA_PATH_MAX];
		uint64_t size, nlen, crc_off;
		const char *slash;
		uint32_t crc;

		if (elfimg__data(main, link, 4096, &d, &size) < 0)
			return -ENOENT;
		nlen = strnlen((const char *)d, size);
		crc_off = ALIGN_UP(nlen + 1, 4);
		if (nlen == 0 || crc_off + 4 > size || memchr(d, '/', nlen))
			return -ENOENT;
		memcpy(&crc, d + crc_off, 4);
		slash = strrchr(ref->path, '/');
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - ref->path), ref->path);

		for (i = 0; i < 3; i++) {
			if (i == 0)
				snprintf(path, sizeof(path), "%s/%s", dir, (char *)d);
			else if (i == 1)
				snprintf(path, sizeof(path), "%s/.debug/%s", dir, (char *)d);
			else
				snprintf(path, sizeof(path), "%s%s/%s", debug_root(paths), dir,
					 (char *)d);
			if (open_debug_cand(i < 2 ? root : droot, path, bid, bid_len, true, crc,
					    e) == 0) {
				*ret_src = SYMBIN_SRC_DEBUGLINK;
				return 0;
			}
		}
	}
	return -ENOENT;
}

static int xz_decode(const uint8_t *in, size_t in_len, uint8_t **ret, size_t *ret_len)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	size_t cap = 1u << 20;
	uint8_t *out = NULL;
	lzma_ret lr;
	int r = 0;
	/* Both the decoder memory and the output are capped: .gnu_debugdata
	 * comes from the profiled binary, an xz bomb must not reach us. A
	 * real MiniDebugInfo (symbols and names) packs 3-8x; the output may
	 * be SYMD_XZ_MAX_RATIO times the input (at least SYMD_XZ_MIN_OUT), so
	 * a 46 KB bomb stops at 16 MiB instead of SYMD_MAX_DEBUGDATA. */
	uint64_t limit = MIN(SYMD_MAX_DEBUGDATA,
			     MAX((uint64_t)SYMD_XZ_MIN_OUT, (uint64_t)in_len * SYMD_XZ_MAX_RATIO));

	if (lzma_stream_decoder(&strm, SYMD_XZ_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	strm.next_in = in;
	strm.avail_in = in_len;
	for (;;) {
		if (!out || strm.avail_out == 0) {
			uint8_t *o;

			if (out) {
				if (cap >= limit) {
					r = -E2BIG;
					break;
				}
				cap = MIN(cap * 2, limit);
			}
			o = realloc(out, cap);
			if (!o) {
				r = -ENOMEM;
				break;
			}
			out = o;
			strm.next_out = out + strm.total_out;
			strm.avail_out = cap - strm.total_out;
		}
		lr = lzma_code(&strm, LZMA_FINISH);
		if (lr == LZMA_STREAM_END)
			break;
		if (lr != LZMA_OK) {
			r = lr == LZMA_MEM_ERROR || lr == LZMA_MEMLIMIT_ERROR ? -E2BIG : -EBADMSG;
			break;
		}
	}
	if (r == 0) {
		*ret = out;
		*ret_len = strm.total_out;
		out = NULL;
	}
	free(out);
	lzma_end(&strm);
	return r;
}

/* MiniDebugInfo: an xz-compressed ELF holding a .symtab of the functions
 * missing from .dynsym. The collected names are copies, so the image goes
 * right away. */
static int add_minidebug(const struct elfimg *main, struct symvec *sv)
{
	const Elf64_Shdr *s = elfimg__find(main, ".gnu_debugdata");
	_cleanup_free_ uint8_t *z = NULL, *img = NULL;
	struct elfimg e;
	uint64_t zlen;
	size_t len;
	bool found = false;
	int r;

	if (!s)
		return -ENOENT;
	r = elfimg__data(main, s, SYMD_MAX_DEBUGDATA_Z, &z, &zlen);
	if (r < 0)
		return r;
	r = xz_decode(z, zlen, &img, &len);
	if (r < 0)
		return r;
	r = elfimg__open(&e, &(struct elfsrc){.fd = -1, .mem = img, .size = len});
	if (r == 0)
		r = symvec__collect(sv, &e, SHT_SYMTAB, &found);
	e.src.fd = -1;
	elfimg__fini(&e);
	if (r < 0)
		return r;
	return found ? 0 : -ENOENT;
}

static struct symbin *symbin__alloc(void)
{
	return calloc(1, sizeof(struct symbin));
}

void symbin__free(struct symbin *b)
{
	if (!b)
		return;
	free(b->syms);
	free(b->fdes);
	free(b->pool);
	free(b);
}

size_t symbin__bytes(const struct symbin *b)
{
	return sizeof(*b) + (size_t)b->nsyms * sizeof(*b->syms) +
	       (size_t)b->nfdes * sizeof(*b->fdes) + b->pool_cap;
}

static int symbin__from_img(struct symbin *b, const struct elfimg *e, struct symvec *sv,
			    bool *ret_has_symtab)
{
	bool found;
	int r;

	symbin__set_loads(b, e);
	if (b->nloads == 0)
		return -EBADMSG;
	b->is_go = elfimg__is_go(e);
	r = symvec__collect(sv, e, SHT_SYMTAB, &found);
	if (r < 0)
		return r;
	if (found)
		b->src |= SYMBIN_SRC_SYMTAB;
	*ret_has_symtab = found;
	r = symvec__collect(sv, e, SHT_DYNSYM, &found);
	if (r < 0)
		return r;
	if (found)
		b->src |= SYMBIN_SRC_DYNSYM;
	r = symvec__collect_plt(sv, e, &found);
	if (r < 0)
		return r;
	if (found)
		b->src |= SYMBIN_SRC_PLT;
	symbin__read_fdes(b, e);
	return symvec__collect_entry(sv, e, b);
}

int symbin__load(const struct symd_paths *paths, const struct symd_file_ref *ref,
		 struct symbin **ret)
{
	struct symvec sv = {.deadline = clock_ns(CLOCK_MONOTONIC) + SYMD_BIN_TIME_NS};
	struct elfimg e = {.src.fd = -1}, d = {.src.fd = -1};
	struct symbin *b = symbin__alloc();
	bool has_symtab = false;
	uint32_t src = 0, peer = 0, root_pid = 0;
	int r, kind;

	if (!b)
		return -ENOMEM;
	/* Where the process's paths lead, told once: both lookups follow it.
	 * Gone, a live process of its mount namespace shows them. */
	kind = ref->pid ? proc_root_kind(proc_dir(paths), ref->pid) : PROC_ROOT_OURS;
	if (kind == PROC_ROOT_OTHER)
		root_pid = ref->pid;
	else if (kind < 0)
		peer = proc_mnt_peer(proc_dir(paths), ref->mnt_tab, ref->mnt_ns);
	r = open_module(paths, ref, kind, peer, &e, b->build_id, &b->build_id_len, &root_pid);
	if (r < 0)
		goto out;
	r = symbin__from_img(b, &e, &sv, &has_symtab);
	if (r < 0)
		goto out;
	if (!has_symtab) {
		if (find_debug_file(paths, ref, root_pid, &e, b->build_id, b->build_id_len, &d,
				    &src) == 0) {
			bool found;

			r = symvec__collect(&sv, &d, SHT_SYMTAB, &found);
			if (r < 0)
				goto out;
			b->src |= src;
			b->is_go = b->is_go || elfimg__is_go(&d);
		} else {
			int mr = add_minidebug(&e, &sv);

			if (mr == 0)
				b->src |= SYMBIN_SRC_MINIDEBUG;
			else if (mr == -E2BIG)
				b->refused = true; /* an xz bomb: counted by the cache */
		}
		if (b->is_go) {
			bool found;

			r = symvec__collect_go(&sv, &e, &found);
			if (r < 0)
				goto out;
			if (found)
				b->src |= SYMBIN_SRC_GOPCLNTAB;
		}
	}
	if (clock_ns(CLOCK_MONOTONIC) > sv.deadline) {
		r = -ETIME;
		goto out;
	}
	r = symbin__build(b, &sv);
out:
	symvec__fini(&sv);
	elfimg__fini(&e);
	elfimg__fini(&d);
	if (r < 0) {
		symbin__free(b);
		return r;
	}
	*ret = b;
	return 0;
}

int symbin__load_mem(const void *img, size_t size, struct symbin **ret)
{
	struct symvec sv = {.deadline = clock_ns(CLOCK_MONOTONIC) + SYMD_BIN_TIME_NS};
	struct elfimg e;
	struct symbin *b = symbin__alloc();
	bool has_symtab;
	int r;

	if (!b)
		return -ENOMEM;
	r = elfimg__open(&e, &(struct elfsrc){.fd = -1, .mem = img, .size = size});
	if (r == 0) {
		elfimg__build_id(&e, b->build_id, &b->build_id_len);
		r = symbin__from_img(b, &e, &sv, &has_symtab);
	}
	if (r == 0)
		r = symbin__build(b, &sv);
	e.src.fd = -1;
	elfimg__fini(&e);
	symvec__fini(&sv);
	if (r < 0) {
		symbin__free(b);
		return r;
	}
	*ret = b;
	return 0;
}

/* ---- lookups ---- */

int symbin__off_to_vaddr(const struct symbin *b, uint64_t off, uint64_t *ret_vaddr)
{
	uint32_t i;

	for (i = 0; i < b->nloads; i++) {
		const struct symd_load *l = &b->loads[i];

		if (off >= l->off && off - l->off < l->filesz) {
			*ret_vaddr = off - l->off + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

static uint64_t symbin__vaddr_to_off(const struct symbin *b, uint64_t vaddr, uint64_t fallback)
{
	uint32_t i;

	for (i = 0; i < b->nloads; i++) {
		const struct symd_load *l = &b->loads[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr < l->filesz)
			return vaddr - l->vaddr + l->off;
	}
	return fallback;
}

int symbin__lookup(struct symbin *b, uint64_t off, bool keep_go, const char **ret_name,
		   uint64_t *ret_sym_off)
{
	uint64_t va;
	uint32_t lo = 0, hi = b->nsyms, i, back;
	struct symd_sym *s = NULL;

	if (symbin__off_to_vaddr(b, off, &va) < 0)
		return -ENOENT;
	/* Last symbol starting at or below va. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b->syms[mid].addr <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Nested symbols (a sized alias inside a bigger one) are rare; a short
	 * look back finds the enclosing one without a linear scan. */
	for (i = lo, back = 0; i > 0 && back < 8; i--, back++) {
		struct symd_sym *c = &b->syms[i - 1];

		if (va - c->addr < c->size) {
			s = c;
			break;
		}
	}
	if (!s)
		return -ENOENT;

	if (!s->fmt) {
		char buf[SYMD_MAX_NAME + 1];
		size_t n =
			symd_name__format(b->pool + s->name, b->is_go, keep_go, buf, sizeof(buf));
		uint32_t fo;

		if ((s->flags & SYMD_SYM_PLT) && n + 4 < sizeof(buf)) {
			memcpy(buf + n, "@plt", 5);
			n += 4;
		}
		if (n == strlen(b->pool + s->name) && !memcmp(buf, b->pool + s->name, n))
			s->fmt = s->name;
		else if (pool_add(b, buf, n, &fo) == 0)
			s->fmt = fo;
		else
			s->fmt = s->name;
	}
	*ret_name = b->pool + s->fmt;
	*ret_sym_off = symbin__vaddr_to_off(b, s->addr, off);
	return 0;
}

int symbin__func_start(const struct symbin *b, uint64_t off, uint64_t *ret_start_off)
{
	const struct symd_fde *f;
	uint64_t va, rel;
	uint32_t lo;

	if (!b->nfdes || symbin__off_to_vaddr(b, off, &va) < 0 || va < b->fde_base ||
	    va - b->fde_base > UINT32_MAX)
		return -ENOENT;
	rel = va - b->fde_base;
	lo = fde_after(b, rel);
	if (lo == 0)
		return -ENOENT;
	f = &b->fdes[lo - 1];
	if (f->size && rel - f->start >= f->size)
		return -ENOENT; /* padding between functions, or code without an FDE */
	*ret_start_off = symbin__vaddr_to_off(b, b->fde_base + f->start, off);
	return 0;
}
