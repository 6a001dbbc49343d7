// SPDX-License-Identifier: MIT
/*
 * `cpa show`: the CLI half. Options were parsed and validated by
 * common/opts.c; the export itself is show_run() in export/show.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/log.h"

/* --use_cui: the terminal UI is its own program, cpa-view, next to cpa. */
static int exec_viewer(const struct show_cli *c)
{
	char self[PATH_MAX], view[PATH_MAX + 16];
	char *argv[8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int k = 0;

	if (n <= 0)
		return log_error_errno(-errno, "cpa show --use_cui: /proc/self/exe: %m"), 1;
	self[n] = '\0';
	snprintf(view, sizeof(view), "%.*s/cpa-view", (int)(strrchr(self, '/') - self), self);
	argv[k++] = view;
	if (c->starttime) {
		argv[k++] = "--begin";
		argv[k++] = (char *)c->starttime;
	}
	if (c->endtime) {
		argv[k++] = "--end";
		argv[k++] = (char *)c->endtime;
	}
	argv[k++] = (char *)c->read;
	argv[k] = NULL;
	execv(view, argv);
	execvp("cpa-view", argv); /* installed elsewhere on PATH */
	log_error_errno(-errno, "cpa show --use_cui: cannot run cpa-view: %m");
	return 1;
}

#include "export/show.h"
#include "storer/store.h"

/* p is d or below it. */
static bool path_under(const char *p, const char *d)
{
	size_t n = strlen(d);

	return !strncmp(p, d, n) && (!p[n] || p[n] == '/' || (n == 1 && d[0] == '/'));
}

/* The real path of path's directory into dir, its last name into *base. */
static bool real_parent(const char *path, char *dir, const char **base)
{
	char copy[PATH_MAX];
	size_t n = strlen(path);
	char *slash;

	if (n >= sizeof(copy))
		return false;
	memcpy(copy, path, n + 1);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = 0;
	slash = strrchr(copy, '/');
	*base = path + (slash ? slash + 1 - copy : 0);
	if (!slash)
		return realpath(".", dir) != NULL;
	if (slash == copy)
		slash[1] = 0;
	else
		*slash = 0;
	return realpath(copy, dir) != NULL;
}

/*
 * An output written into the store being read would overwrite it (-o on a
 * segment, --sched_csv on its conf) or, for --split_path, add a run of the same
 * day that the next read of that root counts twice: refused before anything
 * is read or written. read: --read or --diff_base_read, a store dir or a root.
 */
static int output_in_store(const char *opt, const char *path, bool split, const char *read)
{
	char r[PATH_MAX], root[PATH_MAX], p[PATH_MAX], first[PATH_MAX + 8];
	const char *base, *rest;
	bool day, bad;

	if (!path || !read || !realpath(read, r) || !real_parent(path, p, &base))
		return 0; /* show_run() names a path it cannot use */
	day = store_dir__is_store(r);
	snprintf(root, sizeof(root), "%s", r);
	if (day && strrchr(root, '/') != root)
		*strrchr(root, '/') = 0;
	if (split)
		snprintf(first, sizeof(first), "%s/%s", p, base); /* the split's own dir */
	if (split && (day || !strcmp(first, r))) {
		/* in the store dir read or its root, or the root read itself; in a
		 * root read, a folder of the user's is fine (below): the root's
		 * runs are its cpa_* dirs */
		bad = path_under(first, r) || (day && !strcmp(first, root));
	} else if (day) {
		bad = path_under(p, r);
	} else if (path_under(p, r)) {
		/* in one of the root's store dirs (not a folder of the user's), or
		 * one of its own files (.storer-dict-*, .cpa-lock) or run names */
		rest = p + strlen(r);
		if (*rest) {
			snprintf(first, sizeof(first), "%s/%.*s", r, (int)strcspn(rest + 1, "/"),
				 rest + 1);
			bad = store_dir__is_store(first);
		} else {
			bad = base[0] == '.' || !strncmp(base, "cpa_", 4);
		}
	} else {
		bad = false;
	}
	if (!bad)
		return 0;
	log_error("%s '%s' is %s the store '%s' being read: %s; write it elsewhere", opt, path,
		  split && day && !path_under(first, r) ? "the root of" : "inside", r,
		  split ? "the split would be one of its runs, its samples counted twice"
			: "show never writes into a store");
	return -EINVAL;
}

static bool opt_given(const void *ctx, const char *name)
{
	return cpa_opts__given(ctx, name);
}

int cmd_show(struct cpa_opts *o)
{
	const struct show_cli *c = &o->show;
	struct show_opts so;

	so = (struct show_opts){
		.read = c->read,
		.starttime = c->starttime,
		.endtime = c->endtime,
		.output_num = c->output_num,
		.output_prof = c->output_prof,
		.show_range = c->show_range,
		.show_thread_name = c->show_thread_name,
		.no_pid = c->no_pid,
		.no_env = c->no_env,
		.show_raw = c->show_raw,
		.use_cache = c->use_cache,
		.split_path = c->split_path,
		.target_pid = c->target_pid,
		.target_comm = c->target_comm,
		.target_env = c->target_env,
		.target_cpu = c->target_cpu,
		.target_cgroup_id = c->target_cgroup_id,
		.kind = !c->kind		  ? SHOW_KIND_AUTO
			: !strcmp(c->kind, "on")  ? SHOW_KIND_ON
			: !strcmp(c->kind, "off") ? SHOW_KIND_OFF
						  : SHOW_KIND_ALL,
		.probe_id = c->probe_id,
		.verbose = o->verbose,
		.use_cui = c->use_cui,
		.format = c->format,
		.diff_base_read = c->diff_base_read,
		.diff_base_start = c->diff_base_start,
		.diff_base_end = c->diff_base_end,
		.sched = c->sched,
		.sched_csv = c->sched_csv,
		.sched_json = c->sched_json,
		.triggers = c->triggers,
		.given = opt_given,
		.given_ctx = o,
	};
	for (int i = 0; i < 2; i++) {
		const char *rd = i ? c->diff_base_read : c->read;

		if (output_in_store("-o", c->output_prof, false, rd) < 0 ||
		    output_in_store("--sched_csv", c->sched_csv, false, rd) < 0 ||
		    output_in_store("--sched_json", c->sched_json, false, rd) < 0 ||
		    output_in_store("--split_path", c->split_path, true, rd) < 0)
			return 2;
	}
	if (c->use_cui) {
		show_warn_unused(&so); /* what cpa-view does not take */
		return exec_viewer(c);
	}
	return show_run(&so) < 0 ? 1 : 0;
}
