// SPDX-License-Identifier: MIT
/*
 * Go binaries for the walker (ugo.h): the .gopclntab section read once per
 * binary (pread: the file may be rewritten under us, a copy cannot fault),
 * the runtime's special functions found once, by their funcFlag (and name).
 */
#include "ugo.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "walk.h"

#define UGO_MAX_SECTION (512u << 20) /* a pclntab larger than this is refused */
#define UGO_MAX_LOADS	4
#define UGO_MAX_SPECIAL 128

struct ugo_special {
	uint64_t entry, end;
	unsigned int kind;
};

struct ugo {
	struct gopclntab t;
	uint8_t *buf;
	size_t len;
	struct {
		uint64_t off, va, size;
	} load[UGO_MAX_LOADS];
	unsigned int n_load, n_special;
	struct ugo_special special[UGO_MAX_SPECIAL];
};

/*
 * The runtime's special functions, as Go's traceback for a profile sees them
 * (runtime/traceback.go): a function flagged TOPFRAME is the outermost frame
 * of its stack (goexit: a goroutine's; mstart, rt0_go: a thread's g0 stack;
 * sigtramp: the signal stack's; and sigreturn, the restorer sigtramp returns
 * to, in rt_sigreturn: the signal stack's last frame too). At systemstack and morestack the
 * traceback jumps back to the goroutine's stack (UNW_GO_SWITCH). At any other function flagged
 * SPWRITE (mcall, asmcgocall, gogo...) it stops: its callee runs on another stack (mcall's never
 * returns: the goroutine is parked) (UNW_GO_SPWRITE). Go 1.16 has no flags: the names below stand
 * in.
 */
static const struct {
	const char *name;
	unsigned int kind;
} specials[] = {
	{"runtime.goexit", UNW_GO_BOTTOM},	{"runtime.mstart", UNW_GO_BOTTOM},
	{"runtime.rt0_go", UNW_GO_BOTTOM},	{"runtime.sigtramp", UNW_GO_BOTTOM},
	{"runtime.sigreturn", UNW_GO_BOTTOM},	{"runtime.sigreturn__sigaction", UNW_GO_BOTTOM},
	{"runtime.systemstack", UNW_GO_SWITCH}, {"runtime.morestack", UNW_GO_SWITCH},
	{"runtime.mcall", UNW_GO_SPWRITE},	{"runtime.asmcgocall", UNW_GO_SPWRITE},
};

/* The kind of function f: its name, then its flag (the flag wins for SPWRITE
 * and TOPFRAME functions the names do not list). */
static unsigned int special_kind(const struct gopclntab *t, const struct gofunc *f)
{
	unsigned int i;
	uint8_t flag = 0;

	if (!strncmp(f->name, "runtime.", 8))
		for (i = 0; i < ARRAY_SIZE(specials); i++)
			if (!strcmp(f->name, specials[i].name))
				return specials[i].kind;
	if (gopclntab__flag(t, f, &flag) < 0)
		return UNW_GO_CODE;
	if (flag & GOFUNC_TOPFRAME)
		return UNW_GO_BOTTOM;
	if (flag & GOFUNC_SPWRITE)
		return UNW_GO_SPWRITE;
	return UNW_GO_CODE;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

void ugo__free(struct ugo *g)
{
	if (!g)
		return;
	free(g->buf);
	free(g);
}

size_t ugo__bytes(const struct ugo *g)
{
	return g ? sizeof(*g) + g->len : 0;
}

int ugo__open(int fd, struct ugo **ret)
{
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL, *pcln = NULL, *text = NULL;
	char *names = NULL;
	struct ugo *g = NULL;
	uint64_t nsz;
	unsigned int i;
	int r;

	*ret = NULL;
	r = pread_all(fd, &eh, sizeof(eh), 0);
	if (r < 0)
		return r;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_shnum || eh.e_shstrndx >= eh.e_shnum)
		return -ENOENT;
	sh = calloc(eh.e_shnum, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	r = pread_all(fd, sh, eh.e_shnum * sizeof(*sh), eh.e_shoff);
	if (r < 0)
		goto out;
	nsz = sh[eh.e_shstrndx].sh_size;
	r = -ENOENT;
	if (!nsz || nsz > (1u << 20) || sh[eh.e_shstrndx].sh_type == SHT_NOBITS)
		goto out;
	names = malloc(nsz + 1);
	r = -ENOMEM;
	if (!names)
		goto out;
	r = pread_all(fd, names, nsz, sh[eh.e_shstrndx].sh_offset);
	if (r < 0)
		goto out;
	names[nsz] = '\0';
	for (i = 0; i < eh.e_shnum; i++) {
		if (sh[i].sh_name >= nsz || sh[i].sh_type == SHT_NOBITS)
			continue;
		if (!strcmp(names + sh[i].sh_name, ".gopclntab"))
			pcln = &sh[i];
		else if (!strcmp(names + sh[i].sh_name, ".text"))
			text = &sh[i];
	}
	r = -ENOENT;
	if (!pcln || !text)
		goto out;
	r = -EFBIG;
	if (pcln->sh_size > UGO_MAX_SECTION)
		goto out;
	g = calloc(1, sizeof(*g));
	r = -ENOMEM;
	if (!g || !(g->buf = malloc(pcln->sh_size ? pcln->sh_size : 1)))
		goto out;
	g->len = pcln->sh_size;
	r = pread_all(fd, g->buf, g->len, pcln->sh_offset);
	if (r < 0)
		goto out;
	r = gopclntab__init(&g->t, g->buf, g->len, text->sh_addr);
	if (r < 0)
		goto out;
	for (i = 0; i < eh.e_phnum && g->n_load < UGO_MAX_LOADS; i++) {
		Elf64_Phdr ph;

		r = pread_all(fd, &ph, sizeof(ph), eh.e_phoff + (uint64_t)i * sizeof(ph));
		if (r < 0)
			goto out;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_filesz) {
			g->load[g->n_load].off = ph.p_offset;
			g->load[g->n_load].va = ph.p_vaddr;
			g->load[g->n_load].size = ph.p_filesz;
			g->n_load++;
		}
	}
	r = -ENOENT;
	if (!g->n_load)
		goto out;
	/* functab is sorted by entry: so is special[] */
	for (uint32_t k = 0; k < g->t.nfunc && g->n_special < UGO_MAX_SPECIAL; k++) {
		struct gofunc f;
		unsigned int kind;

		if (gopclntab__func(&g->t, k, &f) < 0)
			continue;
		kind = special_kind(&g->t, &f);
		if (kind != UNW_GO_CODE)
			g->special[g->n_special++] = (struct ugo_special){f.entry, f.end, kind};
	}
	*ret = g;
	g = NULL;
	r = 0;
out:
	ugo__free(g);
	free(names);
	free(sh);
	return r;
}

unsigned int ugo__at(const struct ugo *g, uint64_t off, int32_t *ret_sp)
{
	struct gofunc f;
	uint64_t va = 0;
	unsigned int i;
	bool in = false;

	*ret_sp = -1;
	for (i = 0; i < g->n_load && !in; i++) {
		if (off - g->load[i].off < g->load[i].size) {
			va = off - g->load[i].off + g->load[i].va;
			in = true;
		}
	}
	if (!in || gopclntab__find(&g->t, va, &f) < 0)
		return UNW_GO_NONE;
	{
		unsigned int lo = 0, hi = g->n_special;

		while (lo < hi) {
			unsigned int mid = (lo + hi) / 2;

			if (va < g->special[mid].entry)
				hi = mid;
			else if (va >= g->special[mid].end)
				lo = mid + 1;
			else
				return g->special[mid].kind;
		}
	}
	if (gopclntab__sp(&g->t, &f, va, ret_sp) < 0)
		*ret_sp = -1;
	return UNW_GO_CODE;
}
