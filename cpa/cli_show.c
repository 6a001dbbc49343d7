// SPDX-License-Identifier: MIT
/*
 * `cpa show`: the CLI half. Options were parsed and validated by
 * common/opts.c; the export itself is show_run() in export/show.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
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
	};
	if (c->use_cui) {
		show_warn_unused(&so); /* what cpa-view does not take */
		return exec_viewer(c);
	}
	return show_run(&so) < 0 ? 1 : 0;
}
