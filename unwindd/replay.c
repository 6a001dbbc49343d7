// SPDX-License-Identifier: MIT
/*
 * cpa-unwind-replay: re-run unwindd's unwinder (unwindd__unwind(), the very
 * function the stage runs) on the samples of a --debug_option dump, offline,
 * with the dumped /proc/PID/maps: binaries are opened by path (under
 * --binary-root when given) and checked against the dumped build-ids.
 *
 *   cpa-unwind-replay PATH [--binary-root DIR] [--check] [--quiet]
 *
 * Per sample: a header line, then one line per frame, leaf first:
 *
 *   sample 3 seq=0x10000000007 pid=4242 tid=4243 comm=worker stop=end frames=2 live=match
 *     #0 pc=0x55d0c8a01234 off=0x1234 flags=0x10 sym=spin+0x14 mod=/usr/bin/app
 *     #1 pc=0x7f3a1c029d90 off=0x29d90 flags=0x0 sym=? mod=/usr/lib/x86_64-linux-gnu/libc.so.6
 *
 * live= compares with what unwindd produced when it dumped the sample
 * (match, differs, none). Then one summary line:
 *
 *   summary: samples=10 complete=9 (90.0%) live_match=10/10 stop end=9 read=1
 *
 * Exit 0; 1 with --check when a sample differs from its live result; 2 on
 * bad usage or an unreadable dump.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfi.h"
#include "common/macro.h"
#include "common/usage.h"
#include "dump.h"
#include "elfid.h"
#include "procmaps.h"
#include "unwindd.h"
#include "walk.h"

struct rsym {
	uint64_t addr;
	uint64_t size;
	const char *name;
};

struct rphdr {
	uint64_t off, filesz, vaddr;
};

/* A binary of the replay: what the dump said, and what we found on disk. */
struct rbin {
	uint64_t dev, ino;
	char *path;
	uint32_t id; /* replay's own module id, from 1 */
	uint8_t kind;
	bool has_def; /* a MODULE record named it */
	uint8_t build_id_len;
	uint8_t build_id[CPA_BUILD_ID_MAX];
	bool loaded;
	bool usable; /* opened, build-id checked */
	struct cfi_table *table;
	struct rsym *syms;
	size_t n_syms;
	char *strs; /* names of syms */
	struct rphdr ph[16];
	unsigned int n_ph;
};

struct rmap {
	uint64_t start, end, pgoff;
	uint8_t kind; /* enum procmaps_kind */
	struct rbin *bin;
};

struct live_mod {
	uint32_t id;
	uint64_t dev, ino;
	uint8_t kind;
};

struct replay {
	const char *root;
	bool quiet;
	struct rbin **bins;
	size_t n_bins;
	struct rmap *maps;
	size_t n_maps;
	struct rbin vdso;
	struct live_mod *live;
	size_t n_live;

	/* the replayed sample waiting for its RESULT */
	bool pending;
	struct cpa_sample ps;
	struct cpa_uframe out[CPA_MAX_UWALK + 1];
	unsigned int n_out;
	int stop;
	uint32_t mod_of[CPA_MAX_UWALK + 1]; /* rbin per frame: index + 1, 0 = none */

	unsigned int samples, complete, compared, matched, no_maps;
	unsigned int stops[CPA_STOP_MAX];
};

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p) {
		fprintf(stderr, "cpa-unwind-replay: out of memory\n");
		exit(2);
	}
	return p;
}

static struct rbin *bin_get(struct replay *r, uint64_t dev, uint64_t ino, const char *path,
			    size_t path_len)
{
	struct rbin *b;
	size_t i;

	for (i = 0; i < r->n_bins; i++)
		if (r->bins[i]->dev == dev && r->bins[i]->ino == ino)
			return r->bins[i];
	r->bins = realloc(r->bins, (r->n_bins + 1) * sizeof(*r->bins));
	if (!r->bins)
		exit(2);
	b = xcalloc(1, sizeof(*b));
	b->dev = dev;
	b->ino = ino;
	b->path = strndup(path, path_len);
	b->id = (uint32_t)r->n_bins + 1;
	b->kind = CPA_MOD_FILE;
	r->bins[r->n_bins++] = b;
	return b;
}

static void hex(const uint8_t *id, unsigned int len, char *buf)
{
	unsigned int i;

	for (i = 0; i < len; i++)
		sprintf(buf + 2 * i, "%02x", id[i]);
	buf[2 * len] = 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct rsym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* .symtab (or .dynsym) functions and the PT_LOAD segments of an ELF. */
/* Symbol i of d if it is a function with an address (its name in *ret_name, NULL if unnamed). */
static bool func_sym(Elf *e, Elf_Data *d, size_t strtab, size_t i, GElf_Sym *s,
		     const char **ret_name)
{
	if (!gelf_getsym(d, (int)i, s) || GELF_ST_TYPE(s->st_info) != STT_FUNC || !s->st_value)
		return false;
	*ret_name = elf_strptr(e, strtab, s->st_name);
	return true;
}

static void elf_load_syms(struct rbin *b, Elf *e)
{
	size_t nph = 0, i;
	Elf_Scn *scn = NULL, *best = NULL;
	GElf_Shdr sh, best_sh = {0};
	size_t strs_len = 0, n = 0;

	if (elf_getphdrnum(e, &nph) == 0) {
		for (i = 0; i < nph && b->n_ph < ARRAY_SIZE(b->ph); i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
				b->ph[b->n_ph++] =
					(struct rphdr){ph.p_offset, ph.p_filesz, ph.p_vaddr};
		}
	}
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB || (sh.sh_type == SHT_DYNSYM && !best)) {
			best = scn;
			best_sh = sh;
		}
	}
	if (!best || !best_sh.sh_entsize)
		return;
	{
		Elf_Data *d = elf_getdata(best, NULL);
		size_t cnt = best_sh.sh_size / best_sh.sh_entsize;
		char *sp;

		if (!d)
			return;
		for (i = 0; i < cnt; i++) {
			GElf_Sym s;
			const char *nm;

			if (!func_sym(e, d, best_sh.sh_link, i, &s, &nm))
				continue;
			if (nm)
				strs_len += strlen(nm) + 1;
			n++;
		}
		b->syms = xcalloc(n ? n : 1, sizeof(*b->syms));
		b->strs = xcalloc(strs_len ? strs_len : 1, 1);
		sp = b->strs;
		for (i = 0; i < cnt && b->n_syms < n; i++) {
			GElf_Sym s;
			const char *nm;

			if (!func_sym(e, d, best_sh.sh_link, i, &s, &nm) || !nm)
				continue;
			strcpy(sp, nm);
			b->syms[b->n_syms++] = (struct rsym){s.st_value, s.st_size, sp};
			sp += strlen(nm) + 1;
		}
		qsort(b->syms, b->n_syms, sizeof(*b->syms), sym_cmp);
	}
}

static int open_under_root(const struct replay *r, const char *path)
{
	char full[4096];

	if (snprintf(full, sizeof(full), "%s%s", r->root ? r->root : "", path) >= (int)sizeof(full))
		return -ENAMETOOLONG;
	return open(full, O_RDONLY | O_CLOEXEC);
}

static void bin_load(struct replay *r, struct rbin *b)
{
	_cleanup_close_ int fd = -1, dfd = -1;
	uint8_t id[CPA_BUILD_ID_MAX];
	uint8_t id_len = 0;
	Elf *e;
	int rc;

	if (b->loaded)
		return;
	b->loaded = true;
	fd = open_under_root(r, b->path);
	if (fd < 0) {
		fprintf(stderr, "warning: %s%s: cannot open: %s (its frames are not replayed)\n",
			r->root ? r->root : "", b->path, strerror(errno));
		return;
	}
	if (elfid__from_fd(fd, id, &id_len) < 0)
		id_len = 0;
	if (b->has_def && (id_len != b->build_id_len || memcmp(id, b->build_id, id_len))) {
		char want[2 * CPA_BUILD_ID_MAX + 1], got[2 * CPA_BUILD_ID_MAX + 1];

		hex(b->build_id, b->build_id_len, want);
		hex(id, id_len, got);
		fprintf(stderr,
			"warning: %s%s: build-id %s, the dump has %s: not the same binary "
			"(its frames are not replayed)\n",
			r->root ? r->root : "", b->path, got[0] ? got : "(none)",
			want[0] ? want : "(none)");
		return;
	}
	if (id_len >= 2) {
		char dpath[128];
		int n = snprintf(dpath, sizeof(dpath), "/usr/lib/debug/.build-id/%02x/", id[0]);

		hex(id + 1, id_len - 1u, dpath + n);
		strcat(dpath, ".debug");
		dfd = open_under_root(r, dpath);
	}
	b->usable = true;
	rc = cfi_table__build(fd, dfd, &b->table);
	if (rc < 0)
		b->table = NULL;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e) {
		elf_load_syms(b, e);
		elf_end(e);
	}
}

static void vdso_load(struct replay *r, const void *img, size_t size)
{
	_cleanup_close_ int fd = memfd_create("cpa-replay-vdso", MFD_CLOEXEC);
	Elf *e;

	if (r->vdso.loaded || fd < 0 || write(fd, img, size) != (ssize_t)size)
		return;
	r->vdso.loaded = r->vdso.usable = true;
	if (cfi_table__build(fd, -1, &r->vdso.table) < 0)
		r->vdso.table = NULL;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e) {
		elf_load_syms(&r->vdso, e);
		elf_end(e);
	}
}

static void maps_set(struct replay *r, const char *text, size_t len)
{
	const char *pos = text, *end = text + len;
	struct procmaps_entry e;
	int rc;

	r->n_maps = 0;
	while ((rc = procmaps__next(&pos, end, &e)) != 0) {
		struct rmap *m;

		if (rc < 0 || !e.exec)
			continue;
		r->maps = realloc(r->maps, (r->n_maps + 1) * sizeof(*r->maps));
		if (!r->maps)
			exit(2);
		m = &r->maps[r->n_maps++];
		memset(m, 0, sizeof(*m));
		m->start = e.start;
		m->end = e.end;
		m->pgoff = e.pgoff;
		m->kind = e.kind;
		if (e.kind == PROCMAPS_FILE)
			m->bin = bin_get(r, e.dev, e.ino, e.path, e.path_len);
	}
}

struct rfind {
	struct replay *r;
	unsigned int n; /* frames resolved so far, to note their binary */
};

/* The replay's unwindd_find_fn: the dumped maps stand in for the cache. */
static int replay_find(void *ctx, uint64_t pc, unsigned int how, struct unw_loc *ret)
{
	struct rfind *f = ctx;
	struct replay *r = f->r;
	const struct rmap *m = NULL;
	size_t i;

	for (i = 0; i < r->n_maps; i++) {
		if (pc >= r->maps[i].start && pc < r->maps[i].end) {
			m = &r->maps[i];
			break;
		}
	}
	if (!m)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	switch (m->kind) {
	case PROCMAPS_FILE:
		ret->file_off = pc - m->start + m->pgoff;
		ret->module_id = m->bin->id;
		if (how & UNWINDD_FIND_TABLE) {
			bin_load(r, m->bin);
			ret->table = m->bin->usable ? m->bin->table : NULL;
		}
		break;
	case PROCMAPS_VDSO:
		ret->file_off = pc - m->start;
		ret->flags = CPA_UF_VDSO;
		ret->module_id = UINT32_MAX; /* the vDSO */
		ret->table = r->vdso.table;
		break;
	case PROCMAPS_VSYSCALL:
		ret->file_off = pc;
		ret->flags = CPA_UF_ANON;
		ret->module_id = UINT32_MAX - 1;
		break;
	default:
		ret->file_off = pc;
		ret->flags = CPA_UF_ANON;
		break;
	}
	return 0;
}

static const struct rbin *bin_by_id(const struct replay *r, uint32_t id)
{
	if (id == UINT32_MAX)
		return &r->vdso;
	if (id == 0 || id > r->n_bins)
		return NULL;
	return r->bins[id - 1];
}

static void frame_symbol(struct replay *r, const struct cpa_uframe *f, char *buf, size_t len)
{
	struct rbin *b = (struct rbin *)bin_by_id(r, f->module_id);
	uint64_t off = f->offset, vaddr = 0;
	size_t lo = 0, hi;
	unsigned int i;
	bool found = false;

	snprintf(buf, len, "?");
	if (!b)
		return;
	if (b != &r->vdso)
		bin_load(r, b);
	if (!b->n_syms)
		return;
	/* A return address belongs to the call before it. */
	if (!(f->flags & (CPA_UF_LEAF | CPA_UF_SIGNAL)) && off)
		off--;
	for (i = 0; i < b->n_ph; i++) {
		if (off >= b->ph[i].off && off < b->ph[i].off + b->ph[i].filesz) {
			vaddr = off - b->ph[i].off + b->ph[i].vaddr;
			found = true;
			break;
		}
	}
	if (!found)
		return;
	hi = b->n_syms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return;
	{
		const struct rsym *s = &b->syms[lo - 1];

		if (s->size && vaddr >= s->addr + s->size)
			return;
		snprintf(buf, len, "%s+0x%llx", s->name,
			 (unsigned long long)(vaddr - s->addr + (off != f->offset)));
	}
}

static const char *frame_module(const struct replay *r, const struct cpa_uframe *f)
{
	const struct rbin *b;

	if (f->module_id == UINT32_MAX)
		return "[vdso]";
	if (f->module_id == UINT32_MAX - 1)
		return "[vsyscall]";
	b = bin_by_id(r, f->module_id);
	if (b)
		return b->path;
	return f->flags & CPA_UF_ANON ? "[anon]" : "[unknown]";
}

static const struct live_mod *live_get(const struct replay *r, uint32_t id)
{
	size_t i;

	/* The latest definition of an id wins (epochs renumber). */
	for (i = r->n_live; i-- > 0;)
		if (r->live[i].id == id)
			return &r->live[i];
	return NULL;
}

/* The replayed frames equal the live ones: pcs, offsets, flags, binaries. */
static bool same_as_live(const struct replay *r, const struct udump_result *res,
			 const struct cpa_uframe *live)
{
	unsigned int i;

	if (res->stop_reason != r->stop || res->n_uframes != r->n_out)
		return false;
	for (i = 0; i < r->n_out; i++) {
		const struct cpa_uframe *a = &r->out[i], *b = &live[i];
		const struct live_mod *lm;
		const struct rbin *rb;

		if (a->pc != b->pc || a->offset != b->offset || a->flags != b->flags)
			return false;
		if (!b->module_id || (b->flags & (CPA_UF_VDSO | CPA_UF_ANON))) {
			if (!b->module_id != !a->module_id)
				return false;
			continue;
		}
		lm = live_get(r, b->module_id);
		rb = bin_by_id(r, a->module_id);
		if (lm && rb && rb != &r->vdso && (lm->dev != rb->dev || lm->ino != rb->ino))
			return false;
	}
	return true;
}

static void flush_pending(struct replay *r, const struct udump_result *res,
			  const struct cpa_uframe *live)
{
	const struct cpa_sample *s = &r->ps;
	const char *verdict = "none";
	unsigned int i;

	if (!r->pending)
		return;
	r->pending = false;
	if (res) {
		r->compared++;
		if (same_as_live(r, res, live)) {
			r->matched++;
			verdict = "match";
		} else {
			verdict = "differs";
		}
	}
	if (r->quiet && (!res || !strcmp(verdict, "match")))
		return;
	printf("sample %u seq=%#llx pid=%u tid=%u comm=%.*s stop=%s frames=%u live=%s\n",
	       r->samples, (unsigned long long)s->seq, s->pid, s->tid, CPA_COMM_LEN, s->comm,
	       r->stop >= 0 ? unw_stop_name((unsigned int)r->stop) : "?", r->n_out, verdict);
	for (i = 0; i < r->n_out; i++) {
		const struct cpa_uframe *f = &r->out[i];
		char sym[512];

		frame_symbol(r, f, sym, sizeof(sym));
		printf("  #%u pc=%#llx off=%#llx flags=0x%x sym=%s mod=%s\n", i,
		       (unsigned long long)f->pc, (unsigned long long)f->offset, f->flags, sym,
		       frame_module(r, f));
	}
	if (res && strcmp(verdict, "match")) {
		printf("  live: stop=%s frames=%u\n", unw_stop_name(res->stop_reason),
		       res->n_uframes);
		for (i = 0; i < res->n_uframes; i++)
			printf("  live #%u pc=%#llx off=%#llx flags=0x%x\n", i,
			       (unsigned long long)live[i].pc, (unsigned long long)live[i].offset,
			       live[i].flags);
	}
}

static void replay_sample(struct replay *r, const void *data, uint32_t len)
{
	const struct cpa_sample *s;
	const uint64_t *kstack, *ufp;
	struct rfind f = {.r = r};
	bool fp_deeper;

	flush_pending(r, NULL, NULL);
	memcpy(&r->ps, data, MIN((size_t)len, sizeof(r->ps)));
	s = &r->ps;
	if (len < sizeof(*s) || !cpa_rec_sample_ok(s, len)) {
		fprintf(stderr, "warning: malformed sample record skipped\n");
		return;
	}
	kstack = (const uint64_t *)((const uint8_t *)data + sizeof(*s));
	ufp = kstack + s->n_kstack;
	r->samples++;
	if (!r->n_maps)
		r->no_maps++;
	r->n_out = 0;
	r->stop = CPA_STOP_NONE;
	if (s->pid && !(s->flags & CPA_SF_KERNEL_THREAD) &&
	    (s->n_ufp || (s->flags & CPA_SF_USER_REGS)))
		r->stop = unwindd__unwind(s, ufp, (const uint8_t *)(ufp + s->n_ufp), replay_find,
					  &f, r->out, &r->n_out, &fp_deeper, NULL);
	if (r->stop >= 0 && r->stop < CPA_STOP_MAX)
		r->stops[r->stop]++;
	if (r->stop == CPA_STOP_END)
		r->complete++;
	r->pending = true;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: cpa-unwind-replay DUMP [--binary-root DIR] [--check] [--quiet]\n"
		   "  Re-run unwindd's unwinder on the samples of a --debug_option dump.\n"
		   "  --binary-root DIR  open the dumped binaries under DIR (a copy of the host's\n"
		   "                     files); build-ids are checked against the dump\n"
		   "  --check            exit 1 when a sample differs from unwindd's live result\n"
		   "  --quiet            print only samples that differ, and the summary\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"binary-root", required_argument, NULL, 'r'},
		{"check", no_argument, NULL, 'c'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	static struct replay r;
	struct udump_reader *rd = NULL;
	struct udump_rec rec;
	bool check = false, torn = false;
	unsigned int i;
	int c, rc;

	while ((c = getopt_or_usage(argc, argv, "r:cqh", opts, usage)) != -1) {
		switch (c) {
		case 'r':
			r.root = optarg;
			break;
		case 'c':
			check = true;
			break;
		case 'q':
			r.quiet = true;
			break;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (elfid__init() < 0) {
		fprintf(stderr, "cpa-unwind-replay: libelf version mismatch\n");
		return 2;
	}
	rc = udump_reader__open(argv[optind], &rd);
	if (rc < 0) {
		fprintf(stderr, "cpa-unwind-replay: %s: %s\n", argv[optind],
			rc == -EBADMSG		 ? "not a cpa unwind dump"
			: rc == -EPROTONOSUPPORT ? "dump of a newer major version"
						 : strerror(-rc));
		return 2;
	}
	r.vdso.path = (char *)"[vdso]";
	r.vdso.kind = CPA_MOD_VDSO;
	printf("dump %s: version %u.%u pid %u every %u. sample\n", argv[optind],
	       udump_reader__hdr(rd)->version_major, udump_reader__hdr(rd)->version_minor,
	       udump_reader__hdr(rd)->pid, udump_reader__hdr(rd)->freq);

	while ((rc = udump_reader__next(rd, &rec)) > 0) {
		switch (rec.type) {
		case UDUMP_MAPS:
			if (rec.len >= sizeof(struct udump_maps))
				maps_set(&r, (const char *)rec.data + sizeof(struct udump_maps),
					 rec.len - sizeof(struct udump_maps));
			break;
		case UDUMP_MODULE: {
			struct udump_module m;
			struct rbin *b;

			if (rec.len < sizeof(m))
				break;
			memcpy(&m, rec.data, sizeof(m));
			if (sizeof(m) + (uint64_t)m.path_len > rec.len ||
			    m.build_id_len > CPA_BUILD_ID_MAX)
				break;
			r.live = realloc(r.live, (r.n_live + 1) * sizeof(*r.live));
			if (!r.live)
				return 2;
			r.live[r.n_live++] = (struct live_mod){m.id, m.dev, m.ino, m.kind};
			if (m.kind != CPA_MOD_FILE)
				break;
			b = bin_get(&r, m.dev, m.ino, (const char *)rec.data + sizeof(m),
				    m.path_len);
			if (!b->loaded) {
				b->has_def = true;
				b->build_id_len = m.build_id_len;
				memcpy(b->build_id, m.build_id, sizeof(b->build_id));
			}
			break;
		}
		case UDUMP_SAMPLE:
			replay_sample(&r, rec.data, rec.len);
			break;
		case UDUMP_RESULT: {
			struct udump_result res;

			if (rec.len < sizeof(res))
				break;
			memcpy(&res, rec.data, sizeof(res));
			if (sizeof(res) + (uint64_t)res.n_uframes * sizeof(struct cpa_uframe) >
			    rec.len)
				break;
			if (r.pending && res.seq == r.ps.seq) {
				struct cpa_uframe live[CPA_MAX_UWALK + 1];
				unsigned int n = MIN(res.n_uframes, CPA_MAX_UWALK + 1u);

				memcpy(live, (const uint8_t *)rec.data + sizeof(res),
				       n * sizeof(*live));
				res.n_uframes = (uint16_t)n;
				flush_pending(&r, &res, live);
			}
			break;
		}
		case UDUMP_VDSO:
			vdso_load(&r, rec.data, rec.len);
			break;
		default:
			break; /* a newer minor version's record: skip it */
		}
	}
	flush_pending(&r, NULL, NULL);
	if (rc < 0) {
		torn = true;
		fprintf(stderr, "warning: %s: torn or corrupt record at the end, ignored\n",
			argv[optind]);
	}

	printf("summary: samples=%u complete=%u (%.1f%%) live_match=%u/%u", r.samples, r.complete,
	       r.samples ? 100.0 * r.complete / r.samples : 0.0, r.matched, r.compared);
	printf(" stop");
	for (i = 0; i < CPA_STOP_MAX; i++)
		if (r.stops[i])
			printf(" %s=%u", unw_stop_name(i), r.stops[i]);
	printf("%s\n", torn ? " (torn tail)" : "");
	if (r.no_maps)
		fprintf(stderr, "warning: %u samples came before any maps record\n", r.no_maps);

	for (i = 0; i < r.n_bins; i++) {
		cfi_table__free(r.bins[i]->table);
		free(r.bins[i]->syms);
		free(r.bins[i]->strs);
		free(r.bins[i]->path);
		free(r.bins[i]);
	}
	cfi_table__free(r.vdso.table);
	free(r.vdso.syms);
	free(r.vdso.strs);
	free(r.bins);
	free(r.maps);
	free(r.live);
	udump_reader__free(rd);
	return check && r.matched != r.compared ? 1 : 0;
}
