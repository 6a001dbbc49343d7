// SPDX-License-Identifier: MIT
#include "probespec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "inputfile.h"
#include "log.h"
#include "macro.h"

static const struct {
	const char *prefix;
	enum probe_type type;
} probe_types[] = {
	{"tracepoint:", PROBE_TRACEPOINT}, {"uprobe:", PROBE_UPROBE},
	{"uretprobe:", PROBE_URETPROBE},   {"usdt:", PROBE_USDT},
	{"kprobe:", PROBE_KPROBE},	   {"kretprobe:", PROBE_KRETPROBE},
	{"fentry:", PROBE_FENTRY},	   {"fexit:", PROBE_FEXIT},
};

static int part_copy(char *dst, const char *src, size_t n)
{
	if (n == 0 || n >= PROBE_PART_MAX)
		return -EINVAL;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

/* "SYMBOL[+OFF]" into p->a and p->off. */
static int sym_off(struct probe_spec *p, const char *s, bool off_ok)
{
	const char *plus = strchr(s, '+');
	char *end;

	if (!plus)
		return part_copy(p->a, s, strlen(s));
	/* digits only: strtoull() would take "-5" (2^64 - 5, a probe before the
	 * symbol) and " 5" */
	if (!off_ok || !isdigit((unsigned char)plus[1]))
		return -EINVAL;
	errno = 0;
	p->off = strtoull(plus + 1, &end, 0);
	if (errno || *end)
		return -EINVAL;
	return part_copy(p->a, s, (size_t)(plus - s));
}

int probe_spec__parse(const char *spec, struct probe_spec *p)
{
	const char *rest = NULL, *c;
	unsigned int k;

	memset(p, 0, sizeof(*p));
	for (k = 0; k < ARRAY_SIZE(probe_types); k++)
		if (!strncmp(spec, probe_types[k].prefix, strlen(probe_types[k].prefix))) {
			rest = spec + strlen(probe_types[k].prefix);
			p->type = probe_types[k].type;
			break;
		}
	if (!rest || !*rest)
		return -EINVAL;
	switch (p->type) {
	case PROBE_TRACEPOINT:
		c = strchr(rest, ':');
		if (!c || strchr(c + 1, ':') || strchr(rest, '/'))
			return -EINVAL;
		if (part_copy(p->a, rest, (size_t)(c - rest)) < 0)
			return -EINVAL;
		return part_copy(p->b, c + 1, strlen(c + 1));
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
		c = strrchr(rest, ':');
		if (rest[0] != '/' || !c)
			return -EINVAL;
		if (part_copy(p->path, rest, (size_t)(c - rest)) < 0)
			return -EINVAL;
		/* A return probe takes the return address at the stack's top: only
		 * true at the entry; inside the function (after a push) it would
		 * overwrite a saved register and crash the probed program. */
		return sym_off(p, c + 1, p->type == PROBE_UPROBE);
	case PROBE_USDT: {
		const char *c2;

		c2 = strrchr(rest, ':');
		if (rest[0] != '/' || !c2 || c2 == rest)
			return -EINVAL;
		for (c = c2 - 1; c > rest && *c != ':'; c--)
			;
		if (c == rest)
			return -EINVAL;
		if (part_copy(p->path, rest, (size_t)(c - rest)) < 0 ||
		    part_copy(p->a, c + 1, (size_t)(c2 - c - 1)) < 0)
			return -EINVAL;
		return part_copy(p->b, c2 + 1, strlen(c2 + 1));
	}
	case PROBE_KPROBE:
	case PROBE_KRETPROBE:
	case PROBE_FENTRY:
	case PROBE_FEXIT:
		if (strchr(rest, ':'))
			return -EINVAL;
		return sym_off(p, rest, p->type == PROBE_KPROBE);
	}
	return -EINVAL;
}

int probe_tracefs_dir(char *buf, unsigned long len)
{
	static const char *const dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
	struct stat st;

	for (unsigned int i = 0; i < ARRAY_SIZE(dirs); i++) {
		char ev[64];

		snprintf(ev, sizeof(ev), "%s/events", dirs[i]);
		if (stat(ev, &st) == 0) {
			snprintf(buf, len, "%s", dirs[i]);
			return 0;
		}
	}
	/* Not mounted (a minimal VM, a container): mount it, as perf would ask. */
	if (mount("tracefs", dirs[0], "tracefs", 0, NULL) == 0) {
		snprintf(buf, len, "%s", dirs[0]);
		return 0;
	}
	return -errno;
}

static int tracepoint_check(const char *spec, const struct probe_spec *p)
{
	char dir[64], path[PROBE_PART_MAX * 2 + 96];
	int r = probe_tracefs_dir(dir, sizeof(dir));

	if (r < 0)
		return log_error_errno(r,
				       "probe '%s': tracefs not mounted and mounting it at "
				       "/sys/kernel/tracing failed: %m",
				       spec);
	snprintf(path, sizeof(path), "%s/events/%s/%s/id", dir, p->a, p->b);
	if (access(path, R_OK) < 0)
		return log_error_errno(-errno, "probe '%s': no tracepoint %s:%s (%s: %m)", spec,
				       p->a, p->b, path);
	return 0;
}

static int kprobe_check(const char *spec)
{
	/* The kprobe PMU exists exactly when the kernel has kprobes (and
	 * CONFIG_KPROBE_EVENTS); that is what libbpf attaches through. */
	if (access("/sys/bus/event_source/devices/kprobe/type", R_OK) < 0)
		return log_error_errno(-EOPNOTSUPP,
				       "probe '%s': this kernel has no kprobes (built without "
				       "CONFIG_KPROBES: no /sys/bus/event_source/devices/kprobe); "
				       "use fentry:/fexit: (BTF) or a tracepoint: probe instead",
				       spec);
	return 0;
}

/*
 * fentry/fexit attach through a BTF trampoline: the function must be in the
 * kernel's BTF (the verifier's target) and in ftrace's list of traceable
 * functions (not notrace, not inlined away).
 */
static int fentry_check(const char *spec, const struct probe_spec *p)
{
	char dir[64], path[128], line[512];
	struct btf *btf = btf__load_vmlinux_btf();
	size_t n = strlen(p->a);
	bool found = false;
	FILE *f;
	int r;

	if (!btf)
		return log_error_errno(-errno, "probe '%s': kernel BTF unreadable: %m", spec);
	r = btf__find_by_name_kind(btf, p->a, BTF_KIND_FUNC);
	btf__free(btf);
	if (r < 0)
		return log_error_errno(-ENOENT, "probe '%s': no function '%s' in the kernel's BTF",
				       spec, p->a);
	r = probe_tracefs_dir(dir, sizeof(dir));
	if (r < 0)
		return log_error_errno(
			r, "probe '%s': tracefs not mounted and mounting it failed: %m", spec);
	snprintf(path, sizeof(path), "%s/available_filter_functions", dir);
	f = fopen(path, "re");
	if (!f && (errno == EPERM || errno == EACCES))
		/* Seen on our test kernel, where fentry loads fail with EPERM too:
		 * function tracing is refused to root as a whole. */
		return log_error_errno(-EOPNOTSUPP,
				       "probe '%s': this kernel refuses function tracing (%s: %m), "
				       "so fentry/fexit cannot attach; use a tracepoint: probe",
				       spec, path);
	if (!f)
		return log_error_errno(-errno, "probe '%s': %s: %m", spec, path);
	/* "name" or "name [module]" per line. */
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, p->a, n) && (line[n] == '\n' || line[n] == ' ');
	fclose(f);
	if (!found)
		return log_error_errno(-ENOENT,
				       "probe '%s': '%s' is not traceable (not in %s: notrace or "
				       "inlined)",
				       spec, p->a, path);
	return 0;
}

/* File offset of virtual address v: the segment that holds it. */
static int vaddr_to_off(Elf *e, uint64_t v, uint64_t *ret)
{
	size_t n;

	if (elf_getphdrnum(e, &n) < 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (v >= ph.p_vaddr && v < ph.p_vaddr + ph.p_filesz) {
			*ret = v - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* A defined function named name in .symtab, then .dynsym: its address. */
/* The address of function name, and its size (0 when the symbol has none). */
static int elf_func(Elf *e, const char *name, uint64_t *ret, uint64_t *ret_size)
{
	static const uint32_t kinds[] = {SHT_SYMTAB, SHT_DYNSYM};

	for (unsigned int k = 0; k < ARRAY_SIZE(kinds); k++) {
		Elf_Scn *scn = NULL;

		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || sh.sh_type != kinds[k] || !sh.sh_entsize)
				continue;
			d = elf_getdata(scn, NULL);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Sym s;
				const char *n;

				if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
				    (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
				     GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
					continue;
				n = elf_strptr(e, sh.sh_link, s.st_name);
				if (n && !strcmp(n, name)) {
					*ret = s.st_value;
					*ret_size = s.st_size;
					return 0;
				}
			}
		}
	}
	return -ENOENT;
}

/* The stapsdt note for provider:name, as sys/sdt.h writes it. */
static bool elf_has_usdt(Elf *e, const char *prov, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return false;
	while ((scn = elf_nextscn(e, scn))) {
		size_t off = 0, noff, doff;
		GElf_Shdr sh;
		GElf_Nhdr nh;
		Elf_Data *d;
		const char *sn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		sn = elf_strptr(e, shstrndx, sh.sh_name);
		if (!sn || strcmp(sn, ".note.stapsdt"))
			continue;
		d = elf_getdata(scn, NULL);
		while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			const char *desc = (const char *)d->d_buf + doff, *pn, *nn;
			size_t left;

			if (nh.n_type != 3 || nh.n_descsz < 3 * 8 + 2)
				continue;
			pn = desc + 3 * 8;
			nn = memchr(pn, '\0', nh.n_descsz - 3 * 8);
			if (!nn++)
				continue;
			left = nh.n_descsz - (size_t)(nn - desc);
			if (!strcmp(pn, prov) && strnlen(nn, left) < left && !strcmp(nn, name))
				return true;
		}
	}
	return false;
}

int probe_spec__open_binary(const char *spec, const struct probe_spec *p, int *ret_fd, char *err,
			    size_t errlen)
{
	char what[1024];

	snprintf(what, sizeof(what), "probe '%s': %s", spec, p->path);
	return input_file__open(what, p->path, 0, ret_fd, err, errlen);
}

/* What x86_insn_len() saw of an instruction, for uprobe_refuses(). */
struct x86_insn {
	uint8_t op;	  /* the opcode byte: after 0f, 0f 38, 0f 3a or VEX's */
	uint8_t map;	  /* 0 one-byte, 1 0f, 2 0f 38, 3 0f 3a */
	uint8_t modrm;	  /* when it has one */
	uint8_t seg_lock; /* its first es, cs, ss, ds or lock prefix; 0 if none */
	bool vex, o16;
};

/*
 * The length of the x86-64 instruction at b (at most len bytes), or 0 when it
 * is not one this decoder knows for sure (EVEX, XOP, 3DNow!, opcodes invalid
 * in 64-bit mode, a 66 prefix on a branch): the caller then takes the
 * offset as it is. Enough of the encoding to walk compiled code: prefixes,
 * REX, the one-, two- and three-byte maps, VEX, ModRM/SIB/displacements and
 * the immediates. What it saw in *in.
 */
static size_t x86_insn_len(const uint8_t *b, size_t len, struct x86_insn *in)
{
	/* one-byte map: bit 0 ModRM; bits 1-3 the immediate: 1 imm8, 2 imm16,
	 * 3 imm16/32 (66), 4 imm8 for /0 and /1 (F6), 5 imm16/32 for /0 and /1
	 * (F7), 6 imm16 + imm8 (ENTER), 7 moffs; 0xff not known */
#define M     1
#define I8    (1 << 1)
#define I16   (2 << 1)
#define IZ    (3 << 1)
#define F6    (4 << 1)
#define F7    (5 << 1)
#define ENT   (6 << 1)
#define MOFFS (7 << 1)
#define BAD   0xff
	/* 00-3f: the eight ALU ops, each E,G / G,E (ModRM) and AL/eAX,imm; the
	 * rest there are prefixes, 0f or invalid in 64-bit mode */
#define ALU M, M, M, M, I8, IZ, BAD, BAD
	/* clang-format off */
	static const uint8_t one[256] = {
		/* 00 */ ALU, ALU, ALU, ALU, ALU, ALU, ALU, ALU,
		/* 40 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		/* 50 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		/* 60 */ BAD, BAD, BAD, M, BAD, BAD, BAD, BAD, IZ, M | IZ, I8, M | I8, 0, 0, 0, 0,
		/* 70 */ I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8, I8,
		/* 80 */ M | I8, M | IZ, BAD, M | I8, M, M, M, M, M, M, M, M, M, M, M, M,
		/* 90 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, BAD, 0, 0, 0, 0, 0,
		/* a0 */ MOFFS, MOFFS, MOFFS, MOFFS, 0, 0, 0, 0, I8, IZ, 0, 0, 0, 0, 0, 0,
		/* b0 */ I8, I8, I8, I8, I8, I8, I8, I8, IZ, IZ, IZ, IZ, IZ, IZ, IZ, IZ,
		/* c0 */ M | I8, M | I8, I16, 0, BAD, BAD, M | I8, M | IZ,
		         ENT, 0, I16, 0, 0, I8, BAD, 0,
		/* d0 */ M, M, M, M, BAD, BAD, BAD, 0, M, M, M, M, M, M, M, M,
		/* e0 */ I8, I8, I8, I8, I8, I8, I8, I8, IZ, IZ, BAD, I8, 0, 0, 0, 0,
		/* f0 */ BAD, 0, BAD, BAD, 0, 0, M | F6, M | F7, 0, 0, 0, 0, 0, 0, M, M,
	};
	/* clang-format on */
	size_t i = 0, imm = 0;
	bool o16 = false, a32 = false, w = false, modrm = false;
	unsigned int op, map = 0, t = 0;

	memset(in, 0, sizeof(*in));
	for (; i < len && i < 14; i++) { /* legacy prefixes */
		if (b[i] == 0x66)
			o16 = true;
		else if (b[i] == 0x67)
			a32 = true;
		else if (b[i] == 0xf0 || b[i] == 0x26 || b[i] == 0x2e || b[i] == 0x36 ||
			 b[i] == 0x3e)
			in->seg_lock = in->seg_lock ? in->seg_lock : b[i];
		else if (b[i] != 0xf2 && b[i] != 0xf3 && b[i] != 0x64 && b[i] != 0x65)
			break;
	}
	in->o16 = o16;
	if (i < len && (b[i] & 0xf0) == 0x40) /* REX */
		w = b[i++] & 8;
	if (i >= len)
		return 0;
	op = b[i++];
	if (op == 0xc4 || op == 0xc5) { /* VEX: ModRM always, but vzeroupper/all */
		if (i + (op == 0xc4 ? 2 : 1) >= len)
			return 0;
		map = op == 0xc5 ? 1 : b[i] & 0x1f;
		i += op == 0xc4 ? 2 : 1;
		op = b[i++];
		if (map < 1 || map > 3)
			return 0;
		in->vex = true;
		in->map = (uint8_t)map;
		in->op = (uint8_t)op;
		if (map == 1 && op == 0x77)
			return i;
		modrm = true;
		imm = map == 3 || (map == 1 && ((op >= 0x70 && op <= 0x73) || op == 0xc2 ||
						(op >= 0xc4 && op <= 0xc6)));
	} else if (op == 0x0f) {
		if (i >= len)
			return 0;
		op = b[i++];
		in->map = 1;
		in->op = (uint8_t)op;
		if (op == 0x38 || op == 0x3a) {
			if (i >= len)
				return 0;
			in->map = op == 0x38 ? 2 : 3;
			in->op = b[i++];
			modrm = true;
			imm = op == 0x3a;
		} else if (op == 0x04 || op == 0x0a || op == 0x0c || op == 0x0f ||
			   (op >= 0x24 && op <= 0x27) || op == 0x39 || (op >= 0x3b && op <= 0x3f) ||
			   op == 0x7a || op == 0x7b || op == 0xa6 || op == 0xa7) {
			return 0;
		} else if (op >= 0x80 && op <= 0x8f) { /* jcc rel32 */
			if (o16)
				return 0;
			imm = 4;
		} else {
			modrm = !((op >= 0x05 && op <= 0x0b) || op == 0x0e ||
				  (op >= 0x30 && op <= 0x37) || op == 0x77 || op == 0xa0 ||
				  op == 0xa1 || op == 0xa2 || op == 0xa8 || op == 0xa9 ||
				  op == 0xaa || (op >= 0xc8 && op <= 0xcf));
			imm = (op >= 0x70 && op <= 0x73) || op == 0xa4 || op == 0xac ||
			      op == 0xba || op == 0xc2 || (op >= 0xc4 && op <= 0xc6);
		}
	} else {
		in->op = (uint8_t)op;
		t = one[op];
		if (t == BAD || ((op == 0xe8 || op == 0xe9) && o16))
			return 0;
		modrm = t & M;
		switch (t & ~M) {
		case I8:
		case F6:
			imm = 1;
			break;
		case I16:
			imm = 2;
			break;
		case IZ:
		case F7:
			imm = o16 && !w ? 2 : 4;
			if (op >= 0xb8 && op <= 0xbf && w)
				imm = 8;
			break;
		case ENT:
			imm = 3;
			break;
		case MOFFS:
			imm = a32 ? 4 : 8;
			break;
		}
	}
	if (modrm) {
		unsigned int mr, mod, rm;

		if (i >= len)
			return 0;
		mr = b[i++];
		in->modrm = (uint8_t)mr;
		mod = mr >> 6;
		rm = mr & 7;
		if ((t & ~M) == F6 || (t & ~M) == F7) /* test /0 /1 only take one */
			imm = (mr >> 3 & 7) <= 1 ? imm : 0;
		if (mod != 3 && rm == 4) {
			if (i >= len)
				return 0;
			if (mod == 0 && (b[i] & 7) == 5)
				i += 4;
			i++;
		}
		if (mod == 1)
			i += 1;
		else if (mod == 2 || (mod == 0 && rm == 5))
			i += 4;
	}
	i += imm;
	return i <= len && i <= 15 ? i : 0;
#undef ALU
#undef M
#undef I8
#undef I16
#undef IZ
#undef F6
#undef F7
#undef ENT
#undef MOFFS
#undef BAD
}

/*
 * Does the kernel's x86-64 uprobe refuse the instruction at b (ENOTSUPP at
 * attach, arch/x86/kernel/uprobes.c: good_insns_64, is_prefix_bad(),
 * insn_masking_exception(), branch_setup_xol_ops())? Its name in what when
 * it does. Each class was seen refused by a real attach on Linux 6.18; an
 * instruction the decoder does not know is taken (capture leaves such a
 * probe out if the kernel refuses it).
 */
static bool uprobe_refuses(const uint8_t *b, size_t len, char *what, size_t n)
{
	/* good_insns_64's zeros: for a VEX instruction the kernel looks its
	 * opcode byte up there too, whatever the map */
	static const uint8_t refused64[] = {
		0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x62,
		0x6c, 0x6d, 0x6e, 0x6f, 0x82, 0x9a, 0xcc, 0xcd, 0xce, 0xcf, 0xd4, 0xd5, 0xd6, 0xe4,
		0xe5, 0xe6, 0xe7, 0xea, 0xec, 0xed, 0xee, 0xef, 0xf1, 0xf4, 0xfa, 0xfb,
	};
	/* those of them this decoder knows as one-byte instructions */
	static const char *const names[256] = {
		[0x6c] = "insb", [0x6d] = "insl", [0x6e] = "outsb", [0x6f] = "outsl",
		[0xcc] = "int3", [0xcd] = "int",  [0xcf] = "iret",  [0xe4] = "in",
		[0xe5] = "in",	 [0xe6] = "out",  [0xe7] = "out",   [0xec] = "in",
		[0xed] = "in",	 [0xee] = "out",  [0xef] = "out",   [0xf1] = "int1",
		[0xf4] = "hlt",	 [0xfa] = "cli",  [0xfb] = "sti",
	};
	struct x86_insn in;
	size_t l = x86_insn_len(b, len, &in);

	if (!l)
		return false;
	/* This cs-prefixed nop Linux 6.18 refuses and newer kernels take (and
	 * optimize): left to the attach, which leaves it out where refused. */
	if (in.seg_lock && !(l == 10 && !memcmp(b, "\x66\x2e\x0f\x1f\x84", 5))) {
		snprintf(what, n, "`%s`-prefixed instruction%s",
			 in.seg_lock == 0xf0   ? "lock"
			 : in.seg_lock == 0x3e ? "ds"
			 : in.seg_lock == 0x2e ? "cs"
			 : in.seg_lock == 0x26 ? "es"
					       : "ss",
			 in.seg_lock == 0x3e ? " (`notrack`)" : "");
		return true;
	}
	if (in.vex && memchr(refused64, in.op, sizeof(refused64))) {
		snprintf(what, n, "AVX (VEX-encoded) instruction with opcode byte %#x", in.op);
		return true;
	}
	if (in.vex || in.map)
		return false;
	if (names[in.op] && in.op == 0xcd)
		snprintf(what, n, "`int $%#x`", b[l - 1]);
	else if (names[in.op])
		snprintf(what, n, "`%s`", names[in.op]);
	else if (in.op == 0x8e && (in.modrm >> 3 & 7) == 2) /* masks the next exception */
		snprintf(what, n, "`mov` to %%ss");
	else if (in.o16 && (in.op == 0xeb || (in.op >= 0x70 && in.op <= 0x7f)))
		snprintf(what, n, "`%s` with a 16-bit operand prefix (0x66)",
			 in.op == 0xeb ? "jmp" : "jcc");
	else
		return false;
	return true;
}

/*
 * An x86-64 uprobe at SYMBOL+OFF must start an instruction the kernel's
 * uprobes take: the kernel writes its breakpoint there whatever it finds, and
 * one inside an instruction changed that instruction (the probed program
 * crashed, or computed something else); one on an instruction the kernel
 * refuses is refused at attach. The function is decoded from its start up to
 * OFF; 0 when OFF starts an instruction the kernel takes or the decoder
 * cannot tell, -ERANGE (with the boundaries around it in *before and *after)
 * when OFF does not start one, -EOPNOTSUPP (its name in what) when OFF starts
 * one the kernel refuses.
 */
static int insn_check(int fd, Elf *e, uint64_t v, uint64_t off, uint64_t *before, uint64_t *after,
		      char *what, size_t whatlen)
{
	GElf_Ehdr eh;
	uint64_t foff, pos = 0;
	_cleanup_free_ uint8_t *buf = NULL;
	struct x86_insn in;
	ssize_t n;

	if (off > 65536 || !gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64 ||
	    vaddr_to_off(e, v, &foff) < 0)
		return 0;
	buf = malloc(off + 16);
	if (!buf)
		return 0;
	n = pread(fd, buf, off + 16, (off_t)foff);
	if (n <= 0 || (uint64_t)n <= off)
		return 0;
	while (pos < off) {
		size_t l = x86_insn_len(buf + pos, (size_t)n - pos, &in);

		if (!l)
			return 0;
		if (pos + l > off) {
			*before = pos;
			*after = pos + l;
			return -ERANGE;
		}
		pos += l;
	}
	return uprobe_refuses(buf + off, (size_t)n - off, what, whatlen) ? -EOPNOTSUPP : 0;
}

static int elf_check(const char *spec, struct probe_spec *p)
{
	_cleanup_close_ int fd = -1;
	char err[1300], what[96] = "";
	uint64_t v, size = 0, before = 0, after = 0;
	Elf *e;
	int r = 0, insn = 0;

	r = probe_spec__open_binary(spec, p, &fd, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		return log_error_errno(-ENOEXEC, "probe '%s': %s is not an ELF file", spec,
				       p->path);
	}
	if (p->type == PROBE_USDT) {
		if (!elf_has_usdt(e, p->a, p->b))
			r = log_error_errno(-ENOENT, "probe '%s': %s has no USDT note %s:%s", spec,
					    p->path, p->a, p->b);
	} else if (elf_func(e, p->a, &v, &size) < 0) {
		r = log_error_errno(-ENOENT,
				    "probe '%s': no function '%s' in %s (.symtab or "
				    ".dynsym)",
				    spec, p->a, p->path);
	} else if (size && p->off >= size) {
		/* it would trap in whatever follows the function */
		r = log_error_errno(-ERANGE,
				    "probe '%s': offset %#llx is past the end of %s (%llu bytes) "
				    "in %s",
				    spec, (unsigned long long)p->off, p->a,
				    (unsigned long long)size, p->path);
	} else if ((insn = insn_check(fd, e, v, p->off, &before, &after, what, sizeof(what))) ==
		   -ERANGE) {
		r = log_error_errno(-ERANGE,
				    "probe '%s': offset %#llx is inside an instruction of %s (one "
				    "spans %#llx..%#llx): a breakpoint there would corrupt it",
				    spec, (unsigned long long)p->off, p->a,
				    (unsigned long long)before, (unsigned long long)after);
	} else if (vaddr_to_off(e, v + p->off, &p->file_off) < 0) {
		r = log_error_errno(-ENOENT, "probe '%s': %s+%#llx is in no loadable segment", spec,
				    p->a, (unsigned long long)p->off);
	} else if (insn == -EOPNOTSUPP) {
		r = log_error_errno(
			-EOPNOTSUPP,
			"probe '%s': %s at %s+%#llx (%s+%#llx): the kernel's uprobes "
			"cannot probe this instruction; %s",
			spec, what, p->path, (unsigned long long)p->file_off, p->a,
			(unsigned long long)p->off,
			p->type == PROBE_URETPROBE
				? "a uretprobe's breakpoint is at the function's entry: "
				  "probe its callers or a uprobe inside it instead"
				: "pick another offset");
	}
	elf_end(e);
	return r;
}

int probe_spec__resolve(const char *spec, struct probe_spec *p)
{
	if (probe_spec__parse(spec, p) < 0)
		return log_error_errno(-EINVAL,
				       "probe '%s': invalid spec (expected " PROBE_SPEC_GRAMMAR ")",
				       spec);
	switch (p->type) {
	case PROBE_TRACEPOINT:
		return tracepoint_check(spec, p);
	case PROBE_KPROBE:
	case PROBE_KRETPROBE:
		return kprobe_check(spec);
	case PROBE_FENTRY:
	case PROBE_FEXIT:
		return fentry_check(spec, p);
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
	case PROBE_USDT:
		return elf_check(spec, p);
	}
	return -EINVAL;
}
