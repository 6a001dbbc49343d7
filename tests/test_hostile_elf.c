/* SPDX-License-Identifier: MIT */
/*
 * Hostile binaries (issue 14, docs/reliability.md "Fuzzing and hostile
 * input"): a corpus built at test time from a real shared library (the symd
 * fixture) and a library whose CFI is hostile on purpose
 * (fixtures/hostile/cfi_hostile.c), fed to symd's and unwindd's ELF code
 * through their public functions: symbin__load()/symbin__load_mem() and the
 * binary cache, cfi_table__build() and the walker, elfid__from_fd().
 *
 * Each variant runs in a child process, which reports its peak RSS growth:
 * nothing may crash, and memory stays under HOSTILE_RSS_CAP however much the
 * file claims (a 2 GiB .symtab, compressed sections inflating to hundreds of
 * MiB, a 46 KB-class .gnu_debugdata xz bomb that used to cost symd 349 MB).
 */
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "test_proc.h"
#include "common/macro.h"
#include "shm/records.h"
#include "symd/bincache.h"
#include "symd/elfsym.h"
#include "test_util.h"
#include "unwindd/cfi.h"
#include "unwindd/elfid.h"
#include "unwindd/walk.h"

#define BOMB_BYTES (320ull << 20) /* what the bombs expand to */
/* Peak RSS growth allowed per variant, over the child's start. ASan's shadow
 * and quarantine (freed buffers are kept) need more, still far below what an
 * uncapped bomb takes. */
#ifdef __SANITIZE_ADDRESS__
#define HOSTILE_RSS_CAP (160ull << 20)
#else
#define HOSTILE_RSS_CAP (64ull << 20)
#endif

static char tmpdir[256];

static void tmp_setup(void)
{
	test_scratch_in(tmpdir, sizeof(tmpdir), "hostile");
}

static void tmp_teardown(void)
{
	test_rm_rf(tmpdir);
}

static uint8_t *slurp(const char *path, size_t *ret_len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*ret_len = (size_t)st.st_size;
	return buf;
}

static void spew(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
}

static uint64_t maxrss_bytes(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss << 10;
}

/* ---------------------------------------------------------------- one variant */

/* What a child found; written to the parent through a pipe. */
struct outcome {
	int sym_path;	   /* symbin__load() */
	int sym_mem;	   /* symbin__load_mem() */
	int cfi;	   /* cfi_table__build() */
	int elfid;	   /* elfid__from_fd() */
	uint32_t src;	   /* symbin src bits (path load) */
	bool refused;	   /* symbin: a part refused */
	uint64_t rejected; /* bincache rejections */
	uint64_t rss;	   /* peak RSS growth */
	uint32_t walks;	   /* walks done over the CFI table */
};

static int find_same(void *ctx, uint64_t pc, struct unw_loc *ret)
{
	*ret = (struct unw_loc){.table = ctx, .file_off = pc, .module_id = 1};
	return 0;
}

static void probe(const char *path, struct outcome *o)
{
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref = {.path = path};
	struct bincache_stats bs;
	struct bincache *c = NULL;
	struct symbin *b = NULL;
	struct cfi_table *t = NULL;
	uint8_t id[ELFID_MAX], idlen;
	size_t len;
	uint8_t *img = slurp(path, &len);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	o->sym_path = symbin__load(&paths, &ref, &b);
	if (o->sym_path == 0) {
		const char *name;
		uint64_t start;

		o->src = b->src;
		o->refused = b->refused;
		for (uint64_t off = 0; off < len; off += 97)
			symbin__lookup(b, off, false, &name, &start);
		symbin__free(b);
	}
	o->sym_mem = symbin__load_mem(img, len, &b);
	if (o->sym_mem == 0)
		symbin__free(b);
	if (bincache__new(64ull << 20, &paths, &c) == 0) {
		bincache__get(c, &ref, 0, 0, 1);
		bincache__stats(c, &bs);
		o->rejected = bs.rejected;
		bincache__free(c);
	}
	o->cfi = cfi_table__build(fd, -1, &t);
	if (o->cfi == 0) {
		static uint64_t stk[1024];
		size_t rows = cfi_table__rows(t);
		struct cpa_uframe out[128];

		/* Return addresses that land back in the table's own rows: loops. */
		for (size_t i = 0; i < 1024; i++) {
			uint64_t s = 0, e = 0;

			if (rows > 1 && cfi_table__row(t, i % (rows - 1), &s, &e, NULL) == 0)
				stk[i] = s + 1;
		}
		for (size_t i = 0; i + 1 < rows; i++) {
			struct unw_stack st = {(const uint8_t *)stk, 0x7ff000000000ull,
					       sizeof(stk)};
			uint64_t s = 0, e = 0;
			unsigned int n = 0;

			cfi_table__row(t, i, &s, &e, NULL);
			for (uint64_t pc = s; pc < e && pc < s + 64; pc++) {
				struct unw_regs rg = {
					.ip = pc, .sp = st.base + 256, .bp = st.base + 512};
				int stop = unw_walk(&rg, &st, find_same, t, out, 128, &n);

				(void)stop;
				ck_assert_uint_le(n, 128);
				o->walks++;
			}
		}
		cfi_table__free(t);
	}
	elfid__init();
	o->elfid = elfid__from_fd(fd, id, &idlen);
	close(fd);
	free(img);
}

/* Load path in a child; its outcome, and the child must exit 0 (no crash). */
static struct outcome probe_child(const char *path)
{
	struct outcome o = {0};
	int p[2], st = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint64_t before = maxrss_bytes();

		close(p[0]);
		probe(path, &o);
		o.rss = maxrss_bytes() - before;
		_exit(write(p[1], &o, sizeof(o)) == sizeof(o) ? 0 : 3);
	}
	close(p[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child died (status 0x%x)", path,
		      st);
	ck_assert_int_eq(read(p[0], &o, sizeof(o)), sizeof(o));
	close(p[0]);
	ck_assert_msg(o.rss < HOSTILE_RSS_CAP, "%s: peak RSS grew %llu MiB", path,
		      (unsigned long long)(o.rss >> 20));
	return o;
}

/* ---------------------------------------------------------------- ELF surgery */

static Elf64_Ehdr *ehdr(uint8_t *img)
{
	return (Elf64_Ehdr *)img;
}

static Elf64_Shdr *shdrs(uint8_t *img)
{
	return (Elf64_Shdr *)(img + ehdr(img)->e_shoff);
}

static Elf64_Shdr *section(uint8_t *img, const char *name)
{
	Elf64_Ehdr *eh = ehdr(img);
	Elf64_Shdr *sh = shdrs(img);
	const char *strs = (const char *)img + sh[eh->e_shstrndx].sh_offset;

	for (unsigned int i = 0; i < eh->e_shnum; i++)
		if (!strcmp(strs + sh[i].sh_name, name))
			return &sh[i];
	ck_abort_msg("no section %s", name);
	return NULL;
}

/* A zlib stream of n zero bytes (deflate, level 1, in 1 MiB pieces). */
static uint8_t *zlib_bomb(uint64_t n, size_t *ret_len)
{
	static uint8_t zeros[1 << 20];
	size_t cap = 4 << 20;
	uint8_t *out = malloc(cap);
	z_stream z = {0};

	ck_assert_int_eq(deflateInit(&z, 1), Z_OK);
	z.next_out = out;
	z.avail_out = (uInt)cap;
	while (n) {
		uInt k = n > sizeof(zeros) ? sizeof(zeros) : (uInt)n;

		z.next_in = zeros;
		z.avail_in = k;
		n -= k;
		ck_assert_int_eq(deflate(&z, n ? Z_NO_FLUSH : Z_FINISH), n ? Z_OK : Z_STREAM_END);
		ck_assert_uint_gt(z.avail_out, 0);
	}
	*ret_len = z.total_out;
	deflateEnd(&z);
	return out;
}

/* An xz stream of n zero bytes (preset 0, in 1 MiB pieces). */
static uint8_t *xz_bomb(uint64_t n, size_t *ret_len)
{
	static uint8_t zeros[1 << 20];
	size_t cap = 4 << 20;
	uint8_t *out = malloc(cap);
	lzma_stream x = LZMA_STREAM_INIT;

	ck_assert_int_eq(lzma_easy_encoder(&x, 0, LZMA_CHECK_CRC64), LZMA_OK);
	x.next_out = out;
	x.avail_out = cap;
	for (;;) {
		lzma_ret r;

		if (x.avail_in == 0 && n) {
			size_t k = n > sizeof(zeros) ? sizeof(zeros) : n;

			x.next_in = zeros;
			x.avail_in = k;
			n -= k;
		}
		r = lzma_code(&x, n || x.avail_in ? LZMA_RUN : LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		ck_assert_int_eq(r, LZMA_OK);
		ck_assert_uint_gt(x.avail_out, 0);
	}
	*ret_len = x.total_out;
	lzma_end(&x);
	return out;
}

enum keep { ALL, BYTES, THIRD, HALF, ALL_BUT_ONE };

struct variant {
	const char *name;
	enum keep keep; /* how much of the file is kept */
	size_t bytes;	/* for BYTES */
	void (*patch)(uint8_t *img, size_t *len);
};

static void p_shoff_past_end(uint8_t *img, size_t *len)
{
	ehdr(img)->e_shoff = *len + 4096;
}

static void p_shoff_wraps(uint8_t *img, size_t *len)
{
	(void)len;
	ehdr(img)->e_shoff = UINT64_MAX - 64;
}

static void p_shnum_huge(uint8_t *img, size_t *len)
{
	(void)len;
	ehdr(img)->e_shnum = 0xffff;
}

static void p_shstrndx_bad(uint8_t *img, size_t *len)
{
	(void)len;
	ehdr(img)->e_shstrndx = 0xfff0;
}

static void p_phoff_past_end(uint8_t *img, size_t *len)
{
	ehdr(img)->e_phoff = *len - 8;
	ehdr(img)->e_phnum = 0xffff;
}

static void p_sh_past_end(uint8_t *img, size_t *len)
{
	/* every section starts past the end of the file */
	for (unsigned int i = 1; i < ehdr(img)->e_shnum; i++)
		if (i != ehdr(img)->e_shstrndx)
			shdrs(img)[i].sh_offset = *len + i * 4096;
}

static void p_overlap_symtab_strtab(uint8_t *img, size_t *len)
{
	(void)len;
	section(img, ".symtab")->sh_offset = section(img, ".strtab")->sh_offset;
	section(img, ".dynsym")->sh_offset = section(img, ".dynstr")->sh_offset;
}

static void p_overlap_headers(uint8_t *img, size_t *len)
{
	/* .symtab, .eh_frame and .eh_frame_hdr all over the ELF and section headers */
	(void)len;
	section(img, ".symtab")->sh_offset = 0;
	section(img, ".eh_frame")->sh_offset = ehdr(img)->e_shoff;
	section(img, ".eh_frame_hdr")->sh_offset = 0;
}

static void p_entsize_zero(uint8_t *img, size_t *len)
{
	(void)len;
	section(img, ".symtab")->sh_entsize = 0;
	section(img, ".dynsym")->sh_entsize = 0;
}

static void p_entsize_huge(uint8_t *img, size_t *len)
{
	(void)len;
	section(img, ".symtab")->sh_entsize = 1ull << 40;
	section(img, ".dynsym")->sh_entsize = UINT64_MAX;
}

static void p_symtab_2g(uint8_t *img, size_t *len)
{
	(void)len;
	section(img, ".symtab")->sh_size = 2ull << 30;
	section(img, ".strtab")->sh_size = 2ull << 30;
}

static void p_dynsym_2g(uint8_t *img, size_t *len)
{
	(void)len;
	section(img, ".dynsym")->sh_size = (2ull << 30) - 24;
	section(img, ".symtab")->sh_type = SHT_NULL; /* no .symtab: .dynsym is the one read */
}

static void p_link_loop(uint8_t *img, size_t *len)
{
	Elf64_Shdr *s = section(img, ".symtab");

	(void)len;
	s->sh_link = (uint32_t)(s - shdrs(img)); /* its own string table */
	section(img, ".dynsym")->sh_link = 0xffff;
}

static void p_compressed_claim(uint8_t *img, size_t *len)
{
	/* .eh_frame and .symtab flagged compressed, headers claiming 4 GiB */
	static const char *const names[] = {".eh_frame", ".symtab"};

	(void)len;
	for (unsigned int i = 0; i < 2; i++) {
		Elf64_Shdr *s = section(img, names[i]);
		Elf64_Chdr ch = {
			.ch_type = ELFCOMPRESS_ZLIB, .ch_size = 4ull << 30, .ch_addralign = 8};

		s->sh_flags |= SHF_COMPRESSED;
		ck_assert_uint_ge(s->sh_size, sizeof(ch));
		memcpy(img + s->sh_offset, &ch, sizeof(ch));
	}
}

static void p_eh_frame_hdr_count(uint8_t *img, size_t *len)
{
	/* .eh_frame_hdr: fde_count 2^31 */
	Elf64_Shdr *s = section(img, ".eh_frame_hdr");
	uint32_t n = 1u << 31;

	(void)len;
	memcpy(img + s->sh_offset + 8, &n, 4);
}

static void p_eh_frame_garbage(uint8_t *img, size_t *len)
{
	Elf64_Shdr *s = section(img, ".eh_frame");

	(void)len;
	/* CIE/FDE lengths of 0xffffffff (64-bit DWARF) claiming 2^60 bytes */
	memset(img + s->sh_offset, 0xff, s->sh_size > 64 ? 64 : s->sh_size);
}

static void p_class32(uint8_t *img, size_t *len)
{
	(void)len;
	img[EI_CLASS] = ELFCLASS32;
}

static const struct variant variants[] = {
	{"empty", BYTES, 0, NULL},
	{"magic only", BYTES, 4, NULL},
	{"half ELF header", BYTES, 32, NULL},
	{"ELF header only", BYTES, sizeof(Elf64_Ehdr), NULL},
	{"header + phdr", BYTES, sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), NULL},
	{"a third", THIRD, 0, NULL},
	{"half", HALF, 0, NULL},
	{"all but one byte", ALL_BUT_ONE, 0, NULL},
	{"section headers past the end", ALL, 0, p_shoff_past_end},
	{"section header offset wraps", ALL, 0, p_shoff_wraps},
	{"65535 section headers", ALL, 0, p_shnum_huge},
	{"shstrndx out of range", ALL, 0, p_shstrndx_bad},
	{"program headers past the end", ALL, 0, p_phoff_past_end},
	{"sections past the end", ALL, 0, p_sh_past_end},
	{"overlapping symtab and strtab", ALL, 0, p_overlap_symtab_strtab},
	{"sections over the headers", ALL, 0, p_overlap_headers},
	{"sh_entsize 0", ALL, 0, p_entsize_zero},
	{"sh_entsize huge", ALL, 0, p_entsize_huge},
	{"2 GiB .symtab", ALL, 0, p_symtab_2g},
	{"2 GiB .dynsym", ALL, 0, p_dynsym_2g},
	{"sh_link loops", ALL, 0, p_link_loop},
	{"compressed sections claiming 4 GiB", ALL, 0, p_compressed_claim},
	{".eh_frame_hdr with 2^31 FDEs", ALL, 0, p_eh_frame_hdr_count},
	{".eh_frame lengths of 2^60", ALL, 0, p_eh_frame_garbage},
	{"32-bit class", ALL, 0, p_class32},
};

START_TEST(test_corpus)
{
	size_t len, n = 0, refused_sym = 0, refused_cfi = 0;
	uint8_t *orig = slurp(SYMD_FIXTURE_SO, &len);
	struct outcome base;
	char path[512];

	tmp_setup();
	snprintf(path, sizeof(path), "%s/base.so", tmpdir);
	spew(path, orig, len);
	/* the unmodified library loads everywhere: the corpus starts from a good file */
	base = probe_child(path);
	ck_assert_int_eq(base.sym_path, 0);
	ck_assert_int_eq(base.sym_mem, 0);
	ck_assert_int_eq(base.cfi, 0);
	ck_assert_int_eq(base.elfid, 0);
	ck_assert(base.src & SYMBIN_SRC_SYMTAB);
	ck_assert_uint_gt(base.walks, 0);

	for (size_t i = 0; i < ARRAY_SIZE(variants); i++) {
		const struct variant *v = &variants[i];
		uint8_t *img = malloc(len + 64);
		size_t keep = v->keep == BYTES	       ? v->bytes
			      : v->keep == THIRD       ? len / 3
			      : v->keep == HALF	       ? len / 2
			      : v->keep == ALL_BUT_ONE ? len - 1
						       : len;
		struct outcome o;

		memcpy(img, orig, len);
		if (v->patch)
			v->patch(img, &keep);
		snprintf(path, sizeof(path), "%s/variant_%02zu.so", tmpdir, i);
		spew(path, img, keep);
		o = probe_child(path);
		/* A refusal is an error code, never a half-read table. */
		refused_sym += o.sym_path < 0;
		refused_cfi += o.cfi < 0;
		/* symd's refusals of a hostile file are counted (bin_rejected) */
		if (o.sym_path == -EBADMSG || o.sym_path == -E2BIG || o.sym_path == -EFBIG ||
		    o.sym_path == -EOPNOTSUPP)
			ck_assert_uint_eq(o.rejected, 1);
		printf("hostile ELF %-36s symd %-4d mem %-4d cfi %-4d elfid %-4d rss +%llu KiB\n",
		       v->name, o.sym_path, o.sym_mem, o.cfi, o.elfid,
		       (unsigned long long)(o.rss >> 10));
		free(img);
		n++;
	}
	ck_assert_uint_eq(n, ARRAY_SIZE(variants));
	/* the truncations and broken headers are refused by both readers */
	ck_assert_uint_ge(refused_sym, 10);
	ck_assert_uint_ge(refused_cfi, 10);
	free(orig);
	tmp_teardown();
}
END_TEST

/* A .gnu_debugdata (MiniDebugInfo) xz bomb: 320 MiB of zeros in ~50 KB. symd
 * stops decompressing at its cap, loads the binary from .dynsym, and counts
 * the refusal. A real MiniDebugInfo next to it still loads. */
START_TEST(test_xz_bomb)
{
	char so[512], real[512], xz[512];
	size_t zlen;
	uint8_t *z = xz_bomb(BOMB_BYTES, &zlen);
	struct outcome o;

	tmp_setup();
	snprintf(so, sizeof(so), "%s/bomb.so", tmpdir);
	snprintf(real, sizeof(real), "%s/real.so", tmpdir);
	snprintf(xz, sizeof(xz), "%s/bomb.xz", tmpdir);
	spew(xz, z, zlen);
	free(z);
	printf("xz bomb: %zu bytes expanding to %llu MiB\n", zlen,
	       (unsigned long long)(BOMB_BYTES >> 20));
	ck_assert_uint_lt(zlen, 128 << 10);
	run_sh("cd '%s' && cp '%s' bomb.so && objcopy --strip-all --add-section .gnu_debugdata=bomb.xz "
	       "bomb.so",
	       tmpdir, SYMD_FIXTURE_SO);
	/* the control: the Fedora recipe, reduced (as test_symd's test_minidebuginfo) */
	run_sh("cd '%s' && cp '%s' real.so && objcopy --only-keep-debug real.so mini && "
	       "objcopy --strip-debug mini && xz mini && "
	       "objcopy --strip-all --add-section .gnu_debugdata=mini.xz real.so",
	       tmpdir, SYMD_FIXTURE_SO);

	o = probe_child(so);
	printf("xz bomb: symd %d, src 0x%x, refused %d, rejected %llu, rss +%llu MiB\n", o.sym_path,
	       o.src, o.refused, (unsigned long long)o.rejected, (unsigned long long)(o.rss >> 20));
	ck_assert_int_eq(o.sym_path, 0); /* .dynsym still names the exports */
	ck_assert(!(o.src & SYMBIN_SRC_MINIDEBUG));
	ck_assert(o.refused);
	ck_assert_uint_eq(o.rejected, 1);

	o = probe_child(real);
	ck_assert_int_eq(o.sym_path, 0);
	ck_assert(o.src & SYMBIN_SRC_MINIDEBUG);
	ck_assert(!o.refused);
	ck_assert_uint_eq(o.rejected, 0);
	tmp_teardown();
}
END_TEST

/* A compressed .debug_frame whose zlib stream really inflates to 320 MiB
 * (libelf allocates ch_size and fills it): unwindd refuses it from its
 * compression header and builds its table from .eh_frame alone; symd does
 * not inflate sections at all. Neither grows past the cap. */
START_TEST(test_zlib_bomb)
{
	size_t len, zlen;
	uint8_t *z = zlib_bomb(BOMB_BYTES, &zlen), *img;
	uint8_t *blob = malloc(sizeof(Elf64_Chdr) + zlen);
	Elf64_Chdr ch = {.ch_type = ELFCOMPRESS_ZLIB, .ch_size = BOMB_BYTES, .ch_addralign = 8};
	struct outcome o;
	char path[512], bpath[512];

	printf("zlib bomb: %zu bytes expanding to %llu MiB\n", zlen,
	       (unsigned long long)(BOMB_BYTES >> 20));
	memcpy(blob, &ch, sizeof(ch));
	memcpy(blob + sizeof(ch), z, zlen);
	tmp_setup();
	snprintf(path, sizeof(path), "%s/zbomb.so", tmpdir);
	snprintf(bpath, sizeof(bpath), "%s/blob", tmpdir);
	spew(bpath, blob, sizeof(ch) + zlen);
	run_sh("cp '%s' '%s' && objcopy --add-section .debug_frame='%s' '%s'", SYMD_FIXTURE_SO,
	       path, bpath, path);
	img = slurp(path, &len);
	section(img, ".debug_frame")->sh_flags |= SHF_COMPRESSED;
	spew(path, img, len);
	o = probe_child(path);
	printf("zlib bomb: cfi %d, symd %d, rss +%llu MiB\n", o.cfi, o.sym_path,
	       (unsigned long long)(o.rss >> 20));
	ck_assert_int_eq(o.cfi, 0); /* from .eh_frame; the bomb section is skipped */
	ck_assert_int_eq(o.sym_path, 0);
	free(img);
	free(blob);
	free(z);
	tmp_teardown();
}
END_TEST

/* .gnu_debuglink naming "../x.debug" or "/abs/x.debug": never followed, even
 * with a matching debug file (right build-id and CRC) waiting there. The same
 * link as a plain name next to the binary is followed (the control). */
START_TEST(test_debuglink_paths)
{
	static const char *const links[] = {"../lib.debug", "/TMP/lib.debug", "lib.debug"};
	char so[512], dbg[512], sec[512];

	tmp_setup();
	run_sh("mkdir -p '%s/sub' && cp '%s' '%s/sub/lib.so' && objcopy --only-keep-debug "
	       "'%s/sub/lib.so' '%s/lib.debug'",
	       tmpdir, SYMD_FIXTURE_SO, tmpdir, tmpdir, tmpdir);
	snprintf(dbg, sizeof(dbg), "%s/lib.debug", tmpdir);
	snprintf(so, sizeof(so), "%s/sub/lib.so", tmpdir);
	snprintf(sec, sizeof(sec), "%s/link", tmpdir);
	for (unsigned int i = 0; i < ARRAY_SIZE(links); i++) {
		size_t dlen, n;
		uint8_t *d = slurp(dbg, &dlen), buf[600] = {0};
		uint32_t crc = (uint32_t)crc32(0, d, (uInt)dlen);
		char name[400];
		struct outcome o;

		if (links[i][0] == '/')
			snprintf(name, sizeof(name), "%s/lib.debug", tmpdir); /* absolute */
		else
			snprintf(name, sizeof(name), "%s", links[i]);
		if (i == 2)
			run_sh("cp '%s' '%s/sub/lib.debug'", dbg, tmpdir);
		n = strlen(name) + 1;
		memcpy(buf, name, n);
		n = (n + 3) & ~(size_t)3;
		memcpy(buf + n, &crc, 4);
		spew(sec, buf, n + 4);
		run_sh("cp '%s' '%s' && objcopy --strip-all --add-section .gnu_debuglink='%s' '%s'",
		       SYMD_FIXTURE_SO, so, sec, so);
		o = probe_child(so);
		printf("debuglink '%s': symd %d src 0x%x\n", name, o.sym_path, o.src);
		ck_assert_int_eq(o.sym_path, 0);
		if (i < 2)
			ck_assert_msg(!(o.src & SYMBIN_SRC_DEBUGLINK), "followed '%s'", name);
		else
			ck_assert(o.src & SYMBIN_SRC_DEBUGLINK);
		free(d);
	}
	tmp_teardown();
}
END_TEST

/* ---------------------------------------------------------------- hostile CFI */

static int sym_off(const char *path, const char *name, uint64_t *ret_off)
{
	size_t len;
	uint8_t *img = slurp(path, &len);
	Elf64_Shdr *sym = section(img, ".symtab"), *str = &shdrs(img)[sym->sh_link];
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + ehdr(img)->e_phoff);
	int r = -ENOENT;

	for (uint64_t i = 0; i < sym->sh_size / sizeof(Elf64_Sym) && r < 0; i++) {
		Elf64_Sym *s = (Elf64_Sym *)(img + sym->sh_offset) + i;

		if (strcmp((const char *)img + str->sh_offset + s->st_name, name))
			continue;
		for (unsigned int k = 0; k < ehdr(img)->e_phnum; k++)
			if (ph[k].p_type == PT_LOAD && s->st_value >= ph[k].p_vaddr &&
			    s->st_value < ph[k].p_vaddr + ph[k].p_memsz) {
				*ret_off = s->st_value - ph[k].p_vaddr + ph[k].p_offset;
				r = 0;
			}
	}
	free(img);
	return r;
}

/* DWARF expressions that loop, divide by zero or overflow the stack, CFA
 * rules outside any stack, a frame that never moves the stack pointer: the
 * table builds (or refuses), and every step and walk ends with a stop reason. */
START_TEST(test_hostile_cfi)
{
	/*
	 * step: its second instruction's rule cannot give a caller (unw_step
	 * fails); walk: a walk from there ends at once, although every stack
	 * word "returns" into the same function (a real recursion would go on
	 * to the depth limit, as the plain rules here do).
	 */
	static const struct {
		const char *fn;
		bool step, walk;
	} fns[] = {
		{"hostile_skip_loop", true, true},
		{"hostile_bra_loop", true, true},
		{"hostile_div0", true, true},
		{"hostile_pick", true, true},
		{"hostile_deep", true, true},
		{"hostile_deref_chain", true, true},
		{"hostile_cfa_huge", true, true},
		{"hostile_cfa_rip", true, true},
		/* a caller with our own sp, or below it: the walk's progress check */
		{"hostile_no_progress", false, true},
		{"hostile_cfa_below", false, true},
		/* a rule for rsp is ignored (rsp is the CFA): a plain frame */
		{"hostile_sp_down", false, false},
		{"hostile_remember", false, false},
		{"hostile_advance_huge", false, false},
	};
	static uint64_t stk[512];
	struct unw_stack st = {(const uint8_t *)stk, 0x7ff000000000ull, sizeof(stk)};
	struct cfi_table *t = NULL;
	struct outcome o;
	int fd = open(HOSTILE_CFI_SO, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cfi_table__build(fd, -1, &t), 0);
	close(fd);
	for (unsigned int i = 0; i < ARRAY_SIZE(fns); i++) {
		struct cpa_uframe out[64];
		uint64_t off;
		unsigned int n = 0;
		int stop;
		bool sig;

		ck_assert_int_eq(sym_off(HOSTILE_CFI_SO, fns[i].fn, &off), 0);
		/* every stack word returns into this same function: loops if followed */
		for (unsigned int k = 0; k < ARRAY_SIZE(stk); k++)
			stk[k] = off + 1;
		for (uint64_t pc = off; pc < off + 4; pc++) {
			struct unw_regs r = {.ip = pc, .sp = st.base + 1024, .bp = st.base + 2048};

			stop = unw_step(t, pc, &r, &st, &sig);
			if (fns[i].step && pc == off + 1)
				ck_assert_msg(stop != 0, "%s+1: stepped to sp 0x%llx ip 0x%llx",
					      fns[i].fn, (unsigned long long)r.sp,
					      (unsigned long long)r.ip);
			r = (struct unw_regs){.ip = pc, .sp = st.base + 1024, .bp = st.base + 2048};
			stop = unw_walk(&r, &st, find_same, t, out, ARRAY_SIZE(out), &n);
			ck_assert_uint_le(n, ARRAY_SIZE(out));
			ck_assert_int_ne(stop, CPA_STOP_NONE);
			if (fns[i].walk && pc == off + 1)
				ck_assert_msg(stop != CPA_STOP_DEPTH && n <= 2,
					      "%s: a walk of %u frames (stop %d)", fns[i].fn, n,
					      stop);
		}
	}
	cfi_table__free(t);
	/* the whole library through every reader, under the memory cap */
	o = probe_child(HOSTILE_CFI_SO);
	ck_assert_int_eq(o.cfi, 0);
	ck_assert_uint_gt(o.walks, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_elf");
	TCase *tc = TEST_TCASE(s, "hostile", test_corpus, test_xz_bomb, test_zlib_bomb,
			       test_debuglink_paths, test_hostile_cfi);
	tcase_set_timeout(tc, 120);
	return test_run_suite(s);
}
